"""Which engine runs a write (`hoodie.sqlext.engine`): the in-process one for a small input that it supports, Spark
otherwise. Decided before any Spark job, from the input's size (storage.write.local.input.estimated_bytes) and
what the write needs: the in-process engine runs upserts, inserts, deletes, bulk inserts and insert overwrites
with the BLOOM, SIMPLE, BUCKET, GLOBAL_BLOOM and GLOBAL_SIMPLE indexes, on tables with meta fields, keyed by
generators Arrow spells (storage.keygen.arrow_keys). A forced LOCAL write it cannot run, or whose input exceeds
`hoodie.sqlext.engine.local.max.bytes`, is refused before anything is written."""
from __future__ import annotations

import logging

import pyarrow as pa

from storage.config import EngineConfigKeys as EK
from storage.config import HoodieConfig
from storage.config import WriteConfigKeys as WK
from storage.engine.engine_context import AUTO, LOCAL, SPARK
from storage.exception import HoodieWriteError
from storage.index.bucket_index import with_table_index
from storage.keygen import arrow_keys
from storage.table.meta_client import HoodieTableMetaClient
from storage.write.bulk_insert_sort import BulkInsertSortMode, sort_mode
from storage.write.local.input import arrow_schema, estimated_bytes
from storage.write.operation import WriteOperationType
from storage.write.table_settings import TableSettings

log = logging.getLogger(__name__)

_OPERATIONS = (WriteOperationType.UPSERT, WriteOperationType.INSERT, WriteOperationType.DELETE,
               WriteOperationType.BULK_INSERT, WriteOperationType.INSERT_OVERWRITE,
               WriteOperationType.INSERT_OVERWRITE_TABLE)
_INDEXES = ("BLOOM", "SIMPLE", "BUCKET", "GLOBAL_BLOOM", "GLOBAL_SIMPLE")


def unsupported(op: WriteOperationType, config: HoodieConfig, settings: TableSettings, schema: pa.Schema,
                meta: HoodieTableMetaClient | None) -> str | None:
    """Why the in-process engine cannot run this write, or None."""
    if op not in _OPERATIONS:
        return f"the {op.value} operation"
    index_config = with_table_index(config, meta.table_config, meta.base_path) if meta is not None else config
    index = (index_config.get(WK.INDEX_TYPE) or "").strip().upper()
    if index not in _INDEXES:
        return f"{WK.INDEX_TYPE.key}={index}"
    if not settings.populate_meta_fields:
        return f"{WK.POPULATE_META_FIELDS.key}=false"
    if not arrow_keys.supports(settings.keygen, schema):
        return "a key generator or key field type that Arrow does not spell as Spark does"
    if sort_mode(config, op) is BulkInsertSortMode.GLOBAL_SORT:
        return f"{WK.BULKINSERT_SORT_MODE.key}=GLOBAL_SORT"
    return None


def holds_in_process(data, config: HoodieConfig) -> bool:
    """Whether `data` (a DataFrame) may be taken into this process at all: the engine is not forced to Spark and
    Spark's estimate of it is within `hoodie.sqlext.engine.local.max.bytes` (what AUTO would take)."""
    return config.get(EK.ENGINE) != SPARK and estimated_bytes(data) <= int(config.get(EK.LOCAL_MAX_BYTES))


def runs_in_process(spark, data, op: WriteOperationType, config: HoodieConfig, settings: TableSettings,
                    meta: HoodieTableMetaClient | None, what: str) -> bool:
    """Whether the write of `data` (a DataFrame or an Arrow table) runs on the in-process engine."""
    choice = config.get(EK.ENGINE)
    if choice == SPARK and spark is not None:
        return False
    reason = unsupported(op, config, settings, arrow_schema(data), meta)
    size = estimated_bytes(data)
    limit = int(config.get(EK.LOCAL_MAX_BYTES))
    if choice == LOCAL or spark is None:
        if reason:
            raise HoodieWriteError(f"{what}: {EK.ENGINE.key}=LOCAL does not run writes with {reason}: use "
                                   f"{AUTO} or {SPARK}")
        if size > limit and spark is not None:
            raise HoodieWriteError(f"{what}: the input (about {size} bytes) exceeds {EK.LOCAL_MAX_BYTES.key}={limit} "
                                   f"for {EK.ENGINE.key}=LOCAL, which holds it in memory: raise the limit, or use "
                                   f"{AUTO} or {SPARK}")
        return True
    local = reason is None and size <= limit
    log.debug("%s: input of about %d bytes runs on %s (%s=%s, local up to %d bytes%s)", what, size,
              LOCAL if local else SPARK, EK.ENGINE.key, choice, limit, f"; not local: {reason}" if reason else "")
    return local
