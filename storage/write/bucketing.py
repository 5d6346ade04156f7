"""Phase 2 of a write, continued: the buckets (one output file each) planned from the workload profile, and
each record's bucket assigned in Spark. The sizing rules themselves are in `storage.write.partitioner`.
"""
from __future__ import annotations

from dataclasses import dataclass

from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F

from storage.arrow_util import local_frame
from storage.config import HoodieConfig
from storage.config import WriteConfigKeys as WK
from storage.engine.spark_columns import quote
from storage.index.bucket_index import BUCKET_NUMBER
from storage.index.simple_index import LOC_FILE_ID, LOC_PARTITION
from storage.meta_fields import PARTITION_PATH, RECORD_KEY
from storage.table.fs_view import FileSystemView
from storage.table.meta_client import HoodieTableMetaClient
from storage.timeline.instant import Action
from storage.write.partitioner import (
    BucketPlan,
    SizingConfig,
    SliceSize,
    SmallFile,
    WorkloadProfile,
    average_record_size,
    mor_small_files,
    plan_buckets,
    plan_bucket_layout,
    plan_new_file_groups,
    records_per_new_file,
)
from storage.write.task_context import BUCKET_COLUMN

_UNIFORM = "_hoodie_u"
# a plan of at most this many update file groups and insert shares is spelled as CASE expressions: no local
# table built on the driver and broadcast by a job of its own (two per upsert); a longer CASE costs every record
_INLINE_BRANCHES = 64
_SIZING_HISTORY = 20  # completed commits whose write stats estimate the average record size


def sizing_config(config: HoodieConfig) -> SizingConfig:
    return SizingConfig(config.get(WK.PARQUET_SMALL_FILE_LIMIT), config.get(WK.PARQUET_MAX_FILE_SIZE),
                        config.get(WK.COPY_ON_WRITE_RECORD_SIZE_ESTIMATE), config.get(WK.COPY_ON_WRITE_INSERT_SPLIT_SIZE),
                        config.get(WK.COPY_ON_WRITE_INSERT_AUTO_SPLIT))


def _average_record_size(meta: HoodieTableMetaClient, config: HoodieConfig, sizing: SizingConfig) -> int:
    totals = []
    timeline = meta.timeline.completed().of_actions([Action.COMMIT, Action.REPLACE_COMMIT])
    for instant in reversed(timeline.instants[-_SIZING_HISTORY:]):
        md = meta.active_timeline.commit_metadata_if_active(instant)  # None: archived meanwhile, not counted
        stats = md.write_stats() if md is not None else []
        totals.append((sum(s.totalWriteBytes for s in stats), sum(s.numWrites for s in stats)))
    return average_record_size(totals, sizing, config.get(WK.RECORD_SIZE_ESTIMATION_THRESHOLD))


@dataclass(frozen=True)
class FileSizing:
    """A write's file sizing rules and the table's average record size (read from recent commits once per write)."""

    config: SizingConfig
    avg_record_size: int

    @property
    def records_per_new_file(self) -> int:
        """Where a new file group ends: the planner's share, and where a bulk insert without a plan rolls over."""
        return records_per_new_file(self.config, self.avg_record_size)


def file_sizing(meta: HoodieTableMetaClient, config: HoodieConfig) -> FileSizing:
    sizing = sizing_config(config)
    return FileSizing(sizing, _average_record_size(meta, config, sizing))


def plan_write(meta: HoodieTableMetaClient, config: HoodieConfig, is_mor: bool, profile: WorkloadProfile | None,
               fs_view: FileSystemView, counts: dict[str, int], file_sizes: FileSizing) -> BucketPlan:
    """Buckets of the write. Without a workload profile (bulk insert, overwrite) every record is new, so the
    per-partition counts of the input say everything."""
    sizing, avg = file_sizes.config, file_sizes.avg_record_size
    if profile is None:
        return plan_new_file_groups(counts, sizing, avg)
    if profile.bucketed:
        return plan_bucket_layout(profile)
    from storage.table.pending_plans import pending_clustering_file_groups

    small: dict[str, list[SmallFile]] = {}
    # file groups a pending clustering rewrites take no inserts (they would be lost or conflict)
    clustering = pending_clustering_file_groups(meta) if profile.inserts else {}
    if not profile.inserts:
        pass
    elif not is_mor:
        for bf in fs_view.latest_base_files(sorted(profile.inserts)):
            partition = _partition_of(meta.base_path, bf.path)
            if bf.size < sizing.small_file_limit and (partition, bf.file_id) not in clustering:
                small.setdefault(partition, []).append(SmallFile(partition, bf.file_id, bf.size))
    else:
        small = _mor_small_files(meta, config, fs_view, sorted(profile.inserts), sizing, clustering)
    return plan_buckets(profile, small, sizing, avg)


# Hudi's indexes that find records in log files (HoodieIndex.canIndexLogFiles): the bucket index (whose layout
# never takes small files) and the in-memory and HBase indexes (not offered by this engine). Bloom and simple
# indexes read base files only, and so does the record-level index (SparkMetadataTableRecordIndex: it learns a
# key's location from the base file it is inserted into; inserts never go to log files).
_INDEXES_LOG_FILES = frozenset({"BUCKET", "INMEMORY", "HBASE"})


def can_index_log_files(config: HoodieConfig) -> bool:
    return (config.get(WK.INDEX_TYPE) or "").strip().upper() in _INDEXES_LOG_FILES


def _mor_small_files(meta: HoodieTableMetaClient, config: HoodieConfig, fs_view: FileSystemView,
                     partitions: list[str], sizing: SizingConfig,
                     clustering: dict[tuple[str, str], str]) -> dict[str, list[SmallFile]]:
    """Merge-on-read small files per partition (`mor_small_files`): latest slices of completed writes, not under a
    pending compaction or clustering; none before the table's first completed commit."""
    if not len(meta.timeline.completed().write_timeline()):
        return {}
    from storage.table.pending_plans import pending_compaction_instants

    compacting = pending_compaction_instants(meta)
    by_partition: dict[str, list[SliceSize]] = {}
    for s in fs_view.latest_file_slices(partitions):
        key = (s.partition_path, s.file_id)
        if key in compacting or key in clustering:
            continue
        by_partition.setdefault(s.partition_path, []).append(SliceSize(
            s.partition_path, s.file_id, s.base_file.size if s.base_file else None,
            tuple(lf.size for lf in s.log_files)))
    can_index = can_index_log_files(config)
    limit = config.get(WK.MERGE_SMALL_FILE_GROUP_CANDIDATES_LIMIT)
    out = {}
    for partition, slices in by_partition.items():
        picked = mor_small_files(slices, sizing, can_index, limit)
        if picked:
            out[partition] = picked
    return out


def _partition_of(base_path: str, file_path: str) -> str:
    directory = file_path.rsplit("/", 1)[0]
    return "" if directory == base_path else directory[len(base_path) + 1:]


def assign_buckets(spark: SparkSession, tagged: DataFrame, plan: BucketPlan,
                   placement_of_bucket: dict[int, int], insert_position: Column | None = None) -> DataFrame:
    """`tagged` with each record's bucket placement key, computed in Spark (no Python round trip of the data):
    updates by their file group, inserts by the record key's uniform hash within their partition's insert shares
    (the last share of a partition is open-ended): CASE expressions for a small plan, broadcast joins with the
    update buckets and the shares' ranges for a large one. `insert_position`: another position in [0, 1] than the
    key's hash (GLOBAL_SORT: its rank by key). A bucket index layout maps each record by its bucket number."""
    by_number = plan.bucket_number_of()
    if by_number:
        return _assign_by_bucket_number(spark, tagged, by_number, placement_of_bucket)
    u = insert_position if insert_position is not None else \
        (F.xxhash64(F.col(RECORD_KEY)).bitwiseAND(F.lit(0x7FFFFFFFFFFFFFFF)) / F.lit(float(2 ** 63)))
    updates = [(p, f, placement_of_bucket[b]) for (p, f), b in plan.update_bucket_of().items()]
    shares = [(partition, lo, hi, placement_of_bucket[b])
              for partition, ranges in plan.insert_ranges().items() for lo, hi, b in contiguous_shares(ranges)]
    out = tagged.withColumn(_UNIFORM, u) if shares else tagged
    if len(updates) + len(shares) <= _INLINE_BRANCHES:
        bucket = F.expr(f"CASE WHEN {quote(LOC_FILE_ID)} IS NOT NULL THEN {_update_case(updates)} "
                        f"ELSE {_insert_case(shares)} END")
    else:
        out = _join_updates(spark, out, updates)
        out = _join_shares(spark, out, shares)
        bucket = F.when(F.col(LOC_FILE_ID).isNotNull(), F.col("_upd_bucket")).otherwise(F.col("_ins_bucket"))
    return (out.withColumn(BUCKET_COLUMN, bucket.cast("int"))
            .drop("_upd_bucket", "_ins_bucket", "_ins_partition", "_lo", "_hi", _UNIFORM, LOC_FILE_ID, LOC_PARTITION))


def contiguous_shares(ranges: list[tuple[float, float, int]]) -> list[tuple[float, float, int]]:
    """A partition's insert shares as [lo, hi) ranges covering every position: the first open below, the last
    open above (a hash of exactly 1.0, or a rank past the planned ones, still finds a share)."""
    his = [float(hi) for _, hi, _ in ranges[:-1]] + [float("inf")]
    los = [float("-inf")] + his[:-1]
    return [(lo, hi, b) for lo, hi, (_, _, b) in zip(los, his, ranges)]


# The CASE expressions are spelled in SQL: one parse in the JVM, where building them as Columns took a py4j call
# per literal and operator (~2,400 calls, 0.1-0.2 s, for 20 updated file groups and 10 insert shares). Values are
# spelled in hex and as plain number strings, constant-folded by the optimizer: no escaping, whatever the session's
# string-literal settings (spark.sql.parser.escapedStringLiterals).
def _string(value: str) -> str:
    return f"CAST(unhex('{value.encode('utf-8').hex()}') AS STRING)"


def _double(value: float) -> str:
    return f"CAST('{value!r}' AS DOUBLE)"


def _case(branches: list[tuple[str, int]]) -> str:
    """CASE WHEN over `branches` (SQL condition, bucket); null when none holds."""
    if not branches:
        return "CAST(NULL AS INT)"
    return "CASE " + " ".join(f"WHEN {condition} THEN {value}" for condition, value in branches) + " END"


def _update_case(updates: list[tuple[str, str, int]]) -> str:
    return _case([(f"{quote(PARTITION_PATH)} = {_string(p)} AND {quote(LOC_FILE_ID)} = {_string(f)}", b)
                  for p, f, b in updates])


def _insert_case(shares: list[tuple[str, float, float, int]]) -> str:
    # a partition's shares are contiguous and ascending: the first whose upper end lies above the position (the
    # last one is open above)
    return _case([(f"{quote(PARTITION_PATH)} = {_string(p)}"
                   + (f" AND {quote(_UNIFORM)} < {_double(hi)}" if hi != float("inf") else ""), b)
                  for p, _, hi, b in shares])


def _join_updates(spark: SparkSession, out: DataFrame, updates: list[tuple[str, str, int]]) -> DataFrame:
    if not updates:
        return out.withColumn("_upd_bucket", F.lit(None).cast("int"))
    upd = local_frame(spark, updates, f"{PARTITION_PATH} string, {LOC_FILE_ID} string, _upd_bucket int")
    return out.join(F.broadcast(upd), [PARTITION_PATH, LOC_FILE_ID], "left")


def _join_shares(spark: SparkSession, out: DataFrame, shares: list[tuple[str, float, float, int]]) -> DataFrame:
    if not shares:
        return out.withColumn("_ins_bucket", F.lit(None).cast("int"))
    ins = local_frame(spark, shares, "_ins_partition string, _lo double, _hi double, _ins_bucket int")
    cond = ((F.col(PARTITION_PATH) == F.col("_ins_partition")) & F.col(LOC_FILE_ID).isNull()
            & (F.col(_UNIFORM) >= F.col("_lo")) & (F.col(_UNIFORM) < F.col("_hi")))
    return out.join(F.broadcast(ins), cond, "left")


def _assign_by_bucket_number(spark: SparkSession, tagged: DataFrame, by_number: dict[tuple[str, int], int],
                             placement_of_bucket: dict[int, int]) -> DataFrame:
    rows = [(p, n, placement_of_bucket[b]) for (p, n), b in by_number.items()]
    placed = local_frame(spark, rows, f"{PARTITION_PATH} string, {BUCKET_NUMBER} int, {BUCKET_COLUMN} int")
    return (tagged.join(F.broadcast(placed), [PARTITION_PATH, BUCKET_NUMBER], "inner")
            .drop(BUCKET_NUMBER, LOC_FILE_ID, LOC_PARTITION))
