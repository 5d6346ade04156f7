"""Phase 1 of a write: the input DataFrame checked against the table, shaped to the target schema, keyed
(record key, partition path, operation) and combined by the precombine field, in native Spark expressions.
"""
from __future__ import annotations

from dataclasses import dataclass

import pyarrow as pa
from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F
from pyspark.sql.pandas.types import from_arrow_schema, to_arrow_schema

from storage.config import HoodieConfig
from storage.config import WriteConfigKeys as WK
from storage.exception import HoodieDuplicateKeyError, HoodieKeyError, HoodieWriteError
from storage.keygen import KeyGenerator, arrow_keys
from storage.keygen.arrow_keys import partition_paths
from storage.keygen.key_generator import HIVE_DEFAULT_PARTITION
from storage.meta_fields import IS_DELETED, PARTITION_PATH, RECORD_KEY
from storage.table.meta_client import HoodieTableMetaClient
from storage.table.schema_resolver import table_data_schema
from storage.write.operation import WriteOperationType
from storage.write.schema import data_schema, reconcile
from storage.write.table_settings import TableSettings
from storage.write.task_context import OP_COLUMN, OP_DELETE, OP_WRITE

KEY_COUNT = "_hoodie_key_count"
INPUT_ORDER = "_hoodie_input_order"  # a record's position in the batch: of two records of a key, the later wins


def validate_input(names: list[str], settings: TableSettings, op: WriteOperationType) -> None:
    """Key, partition and precombine fields must be columns of the input (whose columns are `names`)."""
    columns = {c.lower() for c in names}
    for name in settings.keygen.required_fields():
        if name.split(".")[0].lower() not in columns:
            raise HoodieWriteError(f"record key or partition field '{name}' is missing from the data "
                                   f"(columns: {', '.join(names)})")
    if settings.precombine and op is not WriteOperationType.DELETE and settings.precombine.lower() not in columns:
        raise HoodieWriteError(f"precombine field '{settings.precombine}' is missing from the data "
                               f"({WK.PRECOMBINE_FIELD.key}; columns: {', '.join(names)})")


def check_missing_columns(names: list[str], table_schema: pa.Schema | None, config: HoodieConfig,
                          op: WriteOperationType, base_path: str) -> None:
    """A batch must carry every column of the table (as Hudi: no silent nulls) unless
    `hoodie.write.set.null.for.missing.columns` says otherwise (partial-update payloads, Hudi's other way, are not
    supported by this engine); deletes need keys only."""
    if table_schema is None or op is WriteOperationType.DELETE or config.get(WK.SET_NULL_FOR_MISSING_COLUMNS):
        return
    given = {c.lower() for c in names}
    missing = [f.name for f in data_schema(table_schema) if f.name.lower() not in given]
    if missing:
        raise HoodieWriteError(f"the batch written to {base_path} lacks the table's columns {', '.join(missing)}; "
                               f"add them, or set {WK.SET_NULL_FOR_MISSING_COLUMNS.key}=true to write nulls")


def target_schema(incoming: pa.Schema, meta_client: HoodieTableMetaClient | None,
                  op: WriteOperationType) -> pa.Schema:
    """The table's data schema after this write of data of schema `incoming` (a delete keeps the table's schema)."""
    table_schema = table_data_schema(meta_client) if meta_client else None
    if op is WriteOperationType.DELETE and table_schema is not None:
        return data_schema(table_schema)
    return reconcile(table_schema, incoming)


def combine_before_write(config: HoodieConfig, op: WriteOperationType) -> bool:
    """hoodie.combine.before.{upsert,insert,delete}: whether records sharing a key are combined first."""
    if op is WriteOperationType.UPSERT:
        return config.get(WK.COMBINE_BEFORE_UPSERT)
    if op is WriteOperationType.DELETE:
        return config.get(WK.COMBINE_BEFORE_DELETE)
    return config.get(WK.COMBINE_BEFORE_INSERT)


def key_records(df: DataFrame, settings: TableSettings, op: WriteOperationType, schema: pa.Schema,
                carried: tuple[str, ...] = ()) -> DataFrame:
    """The input in the target schema's columns and types (missing columns null), with record key, partition
    path and operation columns; the soft-delete marker `_hoodie_is_deleted` rides along as a side column, and so do
    the `carried` columns (the locations of a batch that brings its own, `storage.write.locate`)."""
    spark_schema = from_arrow_schema(schema, prefer_timestamp_ntz=False)
    given = {f.name.lower(): f for f in df.schema.fields}
    lower = {name: f.name for name, f in given.items()}
    cols = []
    for field in spark_schema.fields:
        src = given.get(field.name.lower())
        if src is not None and src.name == field.name and src.dataType == field.dataType:
            cols.append(F.col(f"`{src.name}`"))  # as it is: no cast nor alias, two py4j calls fewer a column
            continue
        value = F.col(f"`{src.name}`").cast(field.dataType) if src else F.lit(None).cast(field.dataType)
        cols.append(value.alias(field.name))
    is_delete = F.lit(OP_DELETE if op is WriteOperationType.DELETE else OP_WRITE).cast("tinyint")
    if IS_DELETED.lower() in lower:
        cols.append(F.col(f"`{lower[IS_DELETED.lower()]}`").cast("boolean").alias(IS_DELETED))
    return df.select(
        *cols,
        settings.keygen.record_key().alias(RECORD_KEY),
        settings.keygen.partition_path().alias(PARTITION_PATH),
        is_delete.alias(OP_COLUMN),
        *[F.col(f"`{c}`") for c in carried],
    )


def combines_in_tasks(op: WriteOperationType, is_global: bool, count_keys: bool, parallelism: int) -> bool:
    """Whether the write tasks combine the records of a key instead of a Spark aggregation before the lookup (one
    shuffle of the batch fewer): when every record of a key reaches the same write task, which a non-global index
    ensures for the operations written by bucket (the records of a key share its partition, its file group or its
    key's hash share of the partition's inserts). Not when the batch must be checked for repeated keys first, nor
    when `hoodie.<op>.shuffle.parallelism` asks for the dedup shuffle's width."""
    return op in _COMBINED_IN_TASKS and not is_global and not count_keys and parallelism <= 0


_COMBINED_IN_TASKS = (WriteOperationType.UPSERT, WriteOperationType.INSERT, WriteOperationType.DELETE)


def with_input_order(keyed: DataFrame) -> DataFrame:
    """`keyed` with each record's position in the batch (`INPUT_ORDER`), the tie-break of the records of a key."""
    return keyed.withColumn(INPUT_ORDER, F.monotonically_increasing_id())


def combine_ordering(settings: TableSettings, schema: pa.Schema | None = None) -> tuple[str, ...]:
    """The columns that choose a key's record among the batch's (the greatest wins): the precombine field (named
    as in the target `schema`: Arrow's names are case-sensitive), then the input order."""
    if not settings.precombine:
        return (INPUT_ORDER,)
    names = {name.lower(): name for name in (schema.names if schema is not None else [])}
    return names.get(settings.precombine.lower(), settings.precombine), INPUT_ORDER


def dedup(keyed: DataFrame, settings: TableSettings, is_global: bool, count_keys: bool,
          parallelism: int = 0) -> DataFrame:
    """One record per key (per key and partition unless the index is global): the highest precombine value,
    ties to the later input row. `count_keys` adds how many input rows shared the key (`KEY_COUNT`), computed
    in the same aggregation, so that a write requiring unique keys can reject the batch. `parallelism` > 0: the
    tasks of the shuffle (`hoodie.*.shuffle.parallelism`; the aggregation reuses its hash partitioning)."""
    group = [RECORD_KEY] if is_global or not settings.partition_fields else [RECORD_KEY, PARTITION_PATH]
    keyed = with_input_order(keyed)
    if parallelism > 0:
        keyed = keyed.repartition(parallelism, *group)
    order = [F.col(f"`{c}`") for c in combine_ordering(settings)]
    row = F.struct(*[F.col(f"`{c}`") for c in keyed.columns if c != INPUT_ORDER])
    aggs = [F.max_by(row, F.struct(*order)).alias("_r")]
    if count_keys:
        aggs.append(F.count(F.lit(1)).alias(KEY_COUNT))
    return keyed.groupBy(*group).agg(*aggs).select("_r.*", *([KEY_COUNT] if count_keys else []))


@dataclass(frozen=True)
class BatchChecks:
    """Checks of a prepared batch left to the workload profile's job (the batch is not counted on its own):
    `precombine`, the ordering field whose nulls are refused (None: not checked)."""

    precombine: str | None


def check_aggregates(columns: list[str], precombine: str | None) -> list[Column]:
    """The aggregations that check a prepared batch, computed by the first Spark job that groups it (the
    partition counts, or the workload profile when the counting is left to it): null `precombine` values
    (records without an ordering value cannot be combined) and, when the batch carries `KEY_COUNT`, its most
    repeated key. `verify_batch` reads their results."""
    aggs = []
    if precombine:
        aggs.append(F.sum(F.col(f"`{precombine}`").isNull().cast("long")))
    if KEY_COUNT in columns:
        aggs += [F.max(KEY_COUNT), F.max_by(RECORD_KEY, KEY_COUNT)]
    return aggs


def verify_batch(partitions: list[str], checks: list[tuple], precombine: str | None, unique: bool) -> None:
    """Rejects the batch on the results of `check_aggregates` (one tuple per group of the job that computed
    them) and on hidden partition paths (a segment starting with `.` or `_`: readers and listings skip them)."""
    if precombine:
        nulls = sum(c[0] or 0 for c in checks)
        if nulls:
            raise HoodieWriteError(f"{nulls} records have a null precombine field '{precombine}' "
                                   f"({WK.PRECOMBINE_FIELD.key}): give every record an ordering value")
    if unique and checks:
        *_, most, key = max(checks, key=lambda c: c[-2] or 0)
        if (most or 0) > 1:
            raise HoodieDuplicateKeyError(f"record key '{key}' occurs {most} times in the batch", key, most)
    _check_partition_paths(partitions)


def partition_counts(records: DataFrame, precombine: str | None = None,
                     keygen: KeyGenerator | None = None) -> dict[str, int]:
    """Records per partition path: the first Spark job over the prepared batch, checking it in the same job
    (`check_aggregates`). With a `keygen` whose paths Arrow computes (storage.keygen.arrow_keys), the job groups
    by the partition fields' values and their paths are computed here from the distinct values: cheaper than
    building a path string for every record in Spark."""
    aggs = check_aggregates(records.columns, precombine)
    fields = _partition_fields(records, keygen)
    group = fields.names if fields is not None else [PARTITION_PATH]
    try:
        rows = records.groupBy(*[F.col(f"`{c}`") for c in group]).agg(F.count(F.lit(1)), *aggs).collect()
    except Exception as exc:  # a key expression failed inside Spark: report it plainly
        raise plain_error(exc) from None
    width = len(group)
    paths = [r[0] for r in rows] if fields is None else _paths_of_values(fields, rows, keygen)
    verify_batch(sorted(set(paths)), [tuple(r[width + 1:]) for r in rows], precombine, KEY_COUNT in records.columns)
    counts: dict[str, int] = {}
    for path, row in zip(paths, rows):  # values spelled apart may share a path (null and '' go to the default)
        counts[path] = counts.get(path, 0) + row[width]
    return counts


def _partition_fields(records: DataFrame, keygen: KeyGenerator | None) -> pa.Schema | None:
    """The columns of `records` holding the partition fields (names and Arrow types), when Arrow computes their
    paths; else None (also for an unpartitioned table: its one path is a constant already)."""
    if keygen is None or keygen.keygen_type == "NON_PARTITION" or not keygen.partition_fields:
        return None
    by_lower = {c.lower(): c for c in records.columns}
    needed = [by_lower.get(name.lower()) for name in keygen.required_fields()]
    if None in needed:
        return None
    schema = to_arrow_schema(records.select(*[F.col(f"`{c}`") for c in needed]).schema, timezone="UTC")
    if not arrow_keys.supports(keygen, schema):
        return None
    return pa.schema([schema.field(by_lower[name.lower()]) for name in keygen.partition_fields])


def _paths_of_values(fields: pa.Schema, rows: list, keygen: KeyGenerator) -> list[str]:
    """The partition path of each grouped row's field values (the row's first columns, in `fields` order)."""
    values = pa.table([pa.array([r[i] for r in rows], f.type) for i, f in enumerate(fields)], schema=fields)
    try:
        return partition_paths(keygen, values).to_pylist()
    except HoodieKeyError as exc:
        raise HoodieWriteError(f"HoodieKeyError: {exc}") from None


def _check_partition_paths(paths: list[str]) -> None:
    def is_hidden(segment: str) -> bool:  # Hudi's own partition for null values is not user input
        return segment[:1] in (".", "_") and segment != HIVE_DEFAULT_PARTITION

    hidden = sorted(p for p in paths if p and any(is_hidden(seg) for seg in p.split("/")))
    if hidden:
        raise HoodieWriteError(f"partition paths {', '.join(hidden[:5])} start a directory with '.' or '_', which "
                               "readers treat as hidden: change the partition values")


def plain_error(exc: Exception) -> Exception:
    """A key generator's error raised inside a Spark task, as the project's error without the JVM trace."""
    text = str(exc)
    marker = "HoodieKeyError:"
    if marker in text:
        return HoodieWriteError(text[text.index(marker):].splitlines()[0].rstrip(". "))
    return exc
