"""Spark DataFrames over a table: the driver picks the file slices, Spark's parquet reader scans them.

Query types use Apache Hudi's option names: `hoodie.datasource.query.type` = snapshot | read_optimized |
incremental, `as.of.instant` for time travel, `hoodie.datasource.read.begin.instanttime` /
`...end.instanttime` for incremental reads (begin exclusive, end inclusive).

Partition columns come from the data files, typed as the table schema says (storage/read/partition_values.py:
`hoodie.datasource.read.extract.partition.values.from.path` takes them from the partition paths instead).
"""
from __future__ import annotations

import logging
from dataclasses import replace
from typing import Callable, Sequence

import pyarrow as pa

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.pandas.types import from_arrow_schema

from storage.config import HoodieConfig, MetadataConfigKeys as MK, ReadConfigKeys as RK, validate_options
from storage.engine.spark_columns import select_names
from storage.meta_fields import COMMIT_TIME, with_meta_columns
from storage.keygen.key_generator import partition_values_from_path
from storage.read.base_file_scan import scan_base_files
from storage.read.data_skipping import skip_file_slices
from storage.read.file_slice_reader import FileSliceReadContext
from storage.read.mor_scan import merged_slices_frame
from storage.read.parquet_scan import scan_parquet
from storage.io.request_metrics import RequestTally
from storage.read.partition_values import PathPartitionValues
from storage.read.predicates import Predicate
from storage.table.file_slice import FileSlice
from storage.table.fs_view import FileSystemView
from storage.table.meta_client import HoodieTableMetaClient
from storage.table.schema_resolver import table_data_schema
from storage.table.retention import check_files_retained
from storage.timeline.instant_time import normalize_instant_time
from storage.exception import HoodieReadError

log = logging.getLogger(__name__)

PartitionFilter = Callable[[dict[str, str]], bool]


def read_table(spark: SparkSession, base_path: str, config: HoodieConfig = HoodieConfig(),
               partition_filter: PartitionFilter | None = None, columns: Sequence[str] | None = None,
               data_filter: Predicate | None = None, meta: HoodieTableMetaClient | None = None) -> DataFrame:
    """The table as a DataFrame, read with the options of `config`. `columns` (names, any case): only these
    columns, in the table's order — what a caller that knows its query needs passes, so a merge-on-read scan
    reads and merges only those (Spark cannot push a projection into the merging tasks). `data_filter`: a
    superset of the query's row filter; slices whose stats prove it false are not read (data_skipping.py) — the
    caller still filters the rows. `meta`: the table's meta client when the caller loaded it for this read (its
    timeline and schema are then read once)."""
    tally = RequestTally(spark)
    df = _read(spark, base_path, config, partition_filter, columns, data_filter, meta)
    tally.report(f"planning the read of {base_path}")  # the tasks' reads happen when the DataFrame runs
    if columns is None:
        return df
    wanted = {c.lower() for c in columns}
    return select_names(df, [c for c in df.columns if c.lower() in wanted])


def _query_type(config: HoodieConfig) -> str:
    query_type = (config.get(RK.QUERY_TYPE) or "snapshot").lower()
    if query_type not in ("snapshot", "read_optimized", "incremental"):
        raise HoodieReadError(f"unknown query type {query_type!r} ({RK.QUERY_TYPE.key}): "
                              "expected snapshot, read_optimized or incremental")
    return query_type


def file_slices_to_read(meta: HoodieTableMetaClient, config: HoodieConfig,
                        partition_filter: PartitionFilter | None = None,
                        data_filter: Predicate | None = None) -> list[FileSlice]:
    """The file slices a snapshot or read-optimized read of `config` (as of `as.of.instant` when set) opens,
    after partition pruning and data skipping: the scan's file list."""
    as_of = _as_of(config)
    if as_of:
        _check_retained(meta, as_of, "time travel")
    view = FileSystemView(meta, as_of=as_of, use_metadata_table=config.get(MK.READER_ENABLE))
    partitions = _pruned_partitions(meta, view, partition_filter)
    if not meta.table_config.is_mor:
        slices = view.latest_file_slices(partitions)
    elif _query_type(config) == "read_optimized":
        # base files only: their own stats decide
        slices = [replace(s, log_files=[]) for s in view.latest_merged_file_slices(partitions) if s.base_file]
    else:
        slices = view.latest_merged_file_slices(partitions)
    return skip_file_slices(view.metadata, slices, data_filter, config, latest=as_of is None)


def _as_of(config: HoodieConfig) -> str | None:
    as_of = config.get(RK.AS_OF_INSTANT)
    return normalize_instant_time(as_of) if as_of else None


def _read(spark: SparkSession, base_path: str, config: HoodieConfig, partition_filter: PartitionFilter | None,
          columns: Sequence[str] | None, data_filter: Predicate | None,
          meta: HoodieTableMetaClient | None = None) -> DataFrame:
    meta = meta or HoodieTableMetaClient.load_in_session(spark, base_path, config)
    validate_options(config.props, f"read of {meta.base_path}", meta.table_config.props)
    query_type = _query_type(config)
    if query_type == "incremental":
        return _incremental(spark, meta, config, partition_filter, data_filter)
    slices = file_slices_to_read(meta, config, partition_filter, data_filter)
    as_of = _as_of(config)
    if meta.table_config.is_mor and query_type == "snapshot":
        return _mor_snapshot(spark, meta, slices, as_of, config, columns)
    return _scan(spark, meta, [s.base_file.path for s in slices if s.base_file is not None], as_of, config)


def _mor_snapshot(spark: SparkSession, meta: HoodieTableMetaClient, slices: list[FileSlice], as_of: str | None,
                  config: HoodieConfig, columns: Sequence[str] | None = None) -> DataFrame:
    """Base-only slices through Spark's parquet reader, slices with logs merged in Spark tasks, unioned."""
    plain = [s.base_file.path for s in slices if not s.log_files and s.base_file is not None]
    merging = [s for s in slices if s.log_files]
    if not merging:
        return _scan(spark, meta, plain, as_of, config)
    arrow_schema = _arrow_schema(meta, as_of, plain[0] if plain else _any_base_file(merging))
    if arrow_schema is None:
        raise HoodieReadError(f"table {meta.base_path} has no schema (no completed commit carries one)")
    path_values = PathPartitionValues.for_read(meta, arrow_schema, config)
    read_schema = path_values.read_schema(arrow_schema) if path_values else arrow_schema
    spark_schema = from_arrow_schema(read_schema, prefer_timestamp_ntz=False)
    ctx = FileSliceReadContext.for_table(meta, as_of, config)
    log.info("MOR snapshot of %s: %d slices through the parquet reader, %d merged with their logs",
             meta.base_path, len(plain), len(merging))
    wanted = None if columns is None else {c.lower() for c in columns}
    names = None if wanted is None else [n for n in read_schema.names if n.lower() in wanted]
    merged = merged_slices_frame(spark, merging, arrow_schema, spark_schema, ctx, names, path_values)
    if not plain:
        return merged
    plain_df = scan_base_files(spark, meta, plain, arrow_schema, path_values)
    if names is not None:
        plain_df = select_names(plain_df, names)
    return plain_df.unionByName(merged)


def _slices_frame(spark: SparkSession, meta: HoodieTableMetaClient, slices: list[FileSlice], as_of: str | None,
                  config: HoodieConfig) -> DataFrame:
    """The rows of `slices` (merged with their logs on a merge-on-read table)."""
    if meta.table_config.is_mor:
        return _mor_snapshot(spark, meta, slices, as_of, config)
    return _scan(spark, meta, [s.base_file.path for s in slices if s.base_file is not None], as_of, config)


def _any_base_file(slices: list[FileSlice]) -> str | None:
    return next((s.base_file.path for s in slices if s.base_file is not None), None)


def _arrow_schema(meta: HoodieTableMetaClient, as_of: str | None, sample: str | None) -> pa.Schema | None:
    schema = table_data_schema(meta, as_of, sample)
    return with_meta_columns(schema) if schema is not None else None


def _pruned_partitions(meta: HoodieTableMetaClient, view: FileSystemView,
                       partition_filter: PartitionFilter | None) -> list[str] | None:
    if partition_filter is None or not meta.table_config.partition_fields:
        return None
    fields = meta.table_config.partition_fields
    hive = meta.table_config.hive_style_partitioning
    return [p for p in view.partitions() if partition_filter(partition_values_from_path(p, fields, hive))]


def _scan(spark: SparkSession, meta: HoodieTableMetaClient, files: list[str], as_of: str | None,
          config: HoodieConfig) -> DataFrame:
    try:
        schema = _arrow_schema(meta, as_of, files[0] if files else None)
    except Exception as exc:  # schema from metadata is an optimisation; the files can still tell
        log.debug("falling back to the parquet schema: %s", exc)
        schema = None
    if schema is None:
        if not files:
            raise HoodieReadError(f"table {meta.base_path} has no schema yet (no completed commit)")
        return scan_parquet(spark, files, None, meta.storage_options)
    path_values = PathPartitionValues.for_read(meta, schema, config)
    if not files:
        read_schema = path_values.read_schema(schema) if path_values else schema
        return spark.createDataFrame(spark.sparkContext.emptyRDD(),
                                     from_arrow_schema(read_schema, prefer_timestamp_ntz=False))
    return scan_base_files(spark, meta, files, schema, path_values)


def _incremental(spark: SparkSession, meta: HoodieTableMetaClient, config: HoodieConfig,
                 partition_filter: PartitionFilter | None, data_filter: Predicate | None) -> DataFrame:
    begin = config.get(RK.BEGIN_INSTANTTIME)
    if begin is None:
        raise HoodieReadError(f"incremental query needs {RK.BEGIN_INSTANTTIME.key}")
    begin = "0" * 17 if str(begin) in ("0", "000", "earliest") else normalize_instant_time(begin)
    end = config.get(RK.END_INSTANTTIME)
    end = normalize_instant_time(end) if end else None
    is_v8 = meta.table_config.timeline_layout_version >= 2
    commits = [(i, meta.active_timeline) for i in meta.timeline.completed().write_timeline()
               if (i.completion_time if is_v8 and i.completion_time else i.timestamp) > begin
               and (end is None or (i.completion_time if is_v8 and i.completion_time else i.timestamp) <= end)]
    if end:
        _check_retained(meta, end, "incremental query up to")
    if meta.timeline.is_before_timeline_starts(begin):
        if config.get(RK.INCR_FALLBACK_FULLSCAN) and not is_v8:
            # Hudi's fallback: the snapshot at the end, filtered on commit time (request times: layout 1 only)
            return _full_scan_between(spark, meta, config, partition_filter, data_filter, begin, end)
        commits = _archived_commits(meta, begin, end, is_v8) + commits
    view = FileSystemView(meta, as_of=end, use_metadata_table=config.get(MK.READER_ENABLE))
    touched = set()
    for instant, timeline in commits:
        for stat in timeline.commit_metadata(instant).write_stats():
            touched.add((stat.partitionPath, stat.fileId))
    partitions = _pruned_partitions(meta, view, partition_filter)
    slices = view.latest_merged_file_slices(partitions) if meta.table_config.is_mor else \
        view.latest_file_slices(partitions)
    slices = [s for s in slices if (s.partition_path, s.file_id) in touched]
    df = _slices_frame(spark, meta, skip_file_slices(view.metadata, slices, data_filter, config, latest=end is None),
                       end, config)
    return df.where(F.col(COMMIT_TIME).isin([i.timestamp for i, _ in commits]))


def _check_retained(meta: HoodieTableMetaClient, instant_time: str, what: str) -> None:
    """A read at `instant_time` whose file versions the cleaner removed fails, saying so."""
    check_files_retained(meta, instant_time, what)


def _archived_commits(meta: HoodieTableMetaClient, begin: str, end: str | None, by_completion: bool) -> list:
    """Completed write instants of the archived timeline in (begin, end], with the timeline that reads them;
    `by_completion` (layout 2): begin and end are completion times (an instant requested before `begin` may
    complete after it, so the archive is read from its start)."""
    from storage.timeline.archived_timeline import HoodieArchivedTimeline

    archived = HoodieArchivedTimeline(meta, start=None if by_completion else begin, end=end)
    point = (lambda i: i.completion_time or i.timestamp) if by_completion else (lambda i: i.timestamp)
    return [(i, archived) for i in archived.completed().write_timeline()
            if point(i) > begin and (end is None or point(i) <= end)]


def _full_scan_between(spark: SparkSession, meta: HoodieTableMetaClient, config: HoodieConfig,
                       partition_filter: PartitionFilter | None, data_filter: Predicate | None, begin: str,
                       end: str | None) -> DataFrame:
    view = FileSystemView(meta, as_of=end, use_metadata_table=config.get(MK.READER_ENABLE))
    partitions = _pruned_partitions(meta, view, partition_filter)
    slices = view.latest_merged_file_slices(partitions) if meta.table_config.is_mor else \
        view.latest_file_slices(partitions)
    df = _slices_frame(spark, meta, skip_file_slices(view.metadata, slices, data_filter, config, latest=end is None),
                       end, config)
    df = df.where(F.col(COMMIT_TIME) > F.lit(begin))
    return df if end is None else df.where(F.col(COMMIT_TIME) <= F.lit(end))
