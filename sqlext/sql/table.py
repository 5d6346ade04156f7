"""A resolved Hudi table as the planners see it: keys, partition fields, visible columns, snapshot reads and
the write options every SQL write starts from."""
from __future__ import annotations

import json
import logging
from dataclasses import dataclass, field
from typing import Callable

from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.pandas.types import from_arrow_schema
from pyspark.sql.types import StructField, StructType

from storage.config import KEY_PREFIX, HoodieConfig, WriteConfigKeys as WK
from storage.index.index_factory import create_index, is_global_index
from storage.keygen import KeyGenerator, create_key_generator
from storage.meta_fields import IS_DELETED, META_COLUMNS, PARTITION_PATH, RECORD_KEY
from storage.read import read_table
from storage.read.predicates import Predicate
from storage.table.meta_client import HoodieTableMetaClient
from storage.table.schema_resolver import table_data_schema
from sqlext.sql.resolver import HudiTableRef

log = logging.getLogger(__name__)

PartitionFilter = Callable[[dict[str, str]], bool]


@dataclass
class HudiTable:
    ref: HudiTableRef
    meta: HoodieTableMetaClient
    schema: StructType                      # visible data columns, table order (no meta columns)
    hidden: list[str] = field(default_factory=list)

    @classmethod
    def load(cls, ref: HudiTableRef) -> "HudiTable":
        meta = HoodieTableMetaClient.load(ref.path)
        arrow = table_data_schema(meta)
        if arrow is None:
            raise ValueError(f"table {ref.qualified_name} has no schema (no create schema and no commit)")
        full = from_arrow_schema(arrow, prefer_timestamp_ntz=False)
        hidden = hidden_columns(meta, full.names)
        visible = StructType([f for f in full.fields if f.name not in hidden])
        return cls(ref, meta, visible, hidden)

    # -- shape -----------------------------------------------------------------------------------
    @property
    def name(self) -> str:
        return self.ref.qualified_name

    @property
    def columns(self) -> list[str]:
        return self.schema.names

    def field(self, name: str) -> StructField | None:
        lower = name.lower()
        return next((f for f in self.schema.fields if f.name.lower() == lower), None)

    @property
    def record_keys(self) -> list[str]:
        return self.meta.table_config.record_key_fields

    @property
    def partition_fields(self) -> list[str]:
        return [p.partition(":")[0] for p in self.meta.table_config.partition_fields]

    @property
    def precombine(self) -> str | None:
        return self.meta.table_config.precombine_field

    # -- reads -----------------------------------------------------------------------------------
    @property
    def snapshot_columns(self) -> list[str]:
        """What a snapshot shows: the meta columns, then the visible data columns."""
        return list(META_COLUMNS) + self.columns

    def snapshot(self, spark: SparkSession, options: dict[str, str] | None = None,
                 partition_filter: PartitionFilter | None = None, columns: list[str] | None = None,
                 data_filter: Predicate | None = None) -> DataFrame:
        """Meta columns, then the visible data columns (hidden engine columns dropped); only `columns` (of
        `snapshot_columns`) when given; files `data_filter` cannot match skipped (the caller filters rows)."""
        df = read_table(spark, self.ref.path, HoodieConfig.of(options), partition_filter, columns, data_filter,
                        self.meta)
        return df.drop(*self.hidden) if self.hidden else df

    # -- writes ----------------------------------------------------------------------------------
    def write_options(self, spark: SparkSession, extra: dict[str, str] | None = None) -> dict[str, str]:
        """Table properties, then `SET hoodie.*` session values, then the statement's own options (each winning
        over the ones before, as `HoodieTableConfig.with_options` layers them)."""
        return dict(self.meta.table_config.with_options(HoodieConfig.of(session_hoodie_conf(spark), extra)).props)

    def keygen(self, options: dict[str, str]) -> KeyGenerator:
        cfg = self.meta.table_config
        return create_key_generator(HoodieConfig.of(options), cfg.record_key_fields, cfg.partition_fields,
                                    cfg.keygen_class, cfg.hive_style_partitioning, cfg.url_encode_partitioning)

    def key_is_identity(self, options: dict[str, str]) -> bool:
        """Whether a record is identified by its key alone (as the write client's dedup decides): under a global
        index, or in an unpartitioned table."""
        return is_global_index(HoodieConfig.of(options)) or not self.partition_fields

    def moves_partitions(self, options: dict[str, str]) -> bool:
        """Whether a write may give a stored record another partition: its index finds the record in any partition
        and moves it there (a global index with its `hoodie.<bloom|simple>.index.update.partition.path` on, as
        Hudi's MERGE INTO decides), instead of keeping it in its old partition."""
        config = HoodieConfig.of(options)
        index = create_index(config.get(WK.INDEX_TYPE), config=config, record_key_fields=self.record_keys)
        return index.is_global and index.update_partition_path

    def identity(self, options: dict[str, str]) -> Column:
        """A record's identity for new data (columns by name): record key [+ partition path]."""
        kg = self.keygen(options)
        if self.key_is_identity(options):
            return kg.record_key()
        return F.concat_ws("\u0001", kg.record_key(), kg.partition_path())

    def stored_identity(self, options: dict[str, str], qualifier: str | None = None) -> Column:
        """The same identity for stored rows, from their meta columns."""
        q = f"`{qualifier}`." if qualifier else ""
        key = F.col(f"{q}`{RECORD_KEY}`")
        if self.key_is_identity(options):
            return key
        return F.concat_ws("\u0001", key, F.col(f"{q}`{PARTITION_PATH}`"))


def session_hoodie_conf(spark: SparkSession) -> dict[str, str]:
    from storage.io.spark_conf import runtime_conf

    try:
        return runtime_conf(spark, (KEY_PREFIX,))
    except Exception:  # older/connect sessions: no getAll
        return {}


def hidden_columns(meta: HoodieTableMetaClient, data_columns: list[str]) -> list[str]:
    """Columns the engine added to the data schema that the user never declared.

    Tables written before `_hoodie_is_deleted` became a side column may carry it in their schema; SQL shows it
    only when the create schema declares it.
    """
    if IS_DELETED not in data_columns:
        return []
    create = meta.table_config.create_schema
    declared = set()
    if create:
        try:
            declared = {f.get("name") for f in json.loads(create).get("fields", [])}
        except (ValueError, AttributeError):
            return []
    return [] if IS_DELETED in declared else [IS_DELETED]
