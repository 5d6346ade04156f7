"""Phase 2 of a write: where each record goes (Hudi's tagLocation) and the workload profile that counts it.

The index tags each record with the file group holding its key (`LOC_FILE_ID`, `LOC_PARTITION`; null for a
new key). Deletes keep only keys that exist; under a global index a record whose partition changed is moved
(a delete in its old file group plus an insert in the new partition) or stays where it is, as
`hoodie.simple.index.update.partition.path` says.
"""
from __future__ import annotations

from collections import Counter
from collections.abc import Iterable

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import StringType, StructField, StructType

from storage.config import HoodieConfig
from storage.config import WriteConfigKeys as WK
from storage.index import create_index
from storage.index.index_factory import is_global_index
from storage.index.bucket_index import BUCKET_NUMBER, with_table_index
from storage.index.hoodie_index import (LOCATION_COLUMNS, LOOKUP_COUNT, LOOKUP_NULLS, BatchCounting, FrameCache,
                                        attach_locations, file_id_of_file_name)
from storage.index.simple_index import LOC_FILE_ID, LOC_PARTITION
from storage.meta_fields import FILE_NAME, PARTITION_PATH, RECORD_KEY
from storage.table.fs_view import FileSystemView
from storage.write.operation import WriteOperationType
from storage.write.partitioner import WorkloadProfile
from storage.write.prepare import KEY_COUNT, BatchChecks, check_aggregates, plain_error, verify_batch
from storage.write.table_settings import TableSettings
from storage.write.task_context import OP_COLUMN, OP_DELETE, OP_WRITE

_BROADCAST_MAX_RECORDS = 1_000_000  # incoming keys broadcast to the index lookup up to this batch size
_BROADCAST_MAX_BYTES = 256 * 1024 * 1024  # ... or, not counted, up to this estimated size
_DELETE_COPY, _MOVED = "_hoodie_delete_copy", "_hoodie_moved"


def lookup_needs_partitions(config: HoodieConfig, settings: TableSettings, meta) -> bool:
    """Whether the index lookup of the table (a HoodieTableMetaClient) reads stored keys partition by partition:
    SIMPLE, or BLOOM on a table without meta fields (no footers: SIMPLE's join). Then the batch's partitions are
    counted before the lookup, so that only those are read. The other indexes search every partition's files
    by their footers or listings (key ranges cached from one write to the next), so the counting is folded
    into the workload profile and the batch is grouped once."""
    kind = with_table_index(config, meta.table_config, meta.base_path).get(WK.INDEX_TYPE).strip().upper()
    return kind == "SIMPLE" or (kind == "BLOOM" and not settings.populate_meta_fields)


def tag_location(spark: SparkSession, config: HoodieConfig, records: DataFrame, settings: TableSettings,
                 op: WriteOperationType, fs_view: FileSystemView, partitions: list[str] | None,
                 num_records: int | None, cache: FrameCache | None = None,
                 counting: BatchCounting | None = None, known_locations: bool = False) -> DataFrame:
    """`records` with the location of their key. Inserts skip the lookup where the index allows (as Hudi does;
    they may still fill small files); the table's recorded index settings (a bucket table's) apply.
    `partitions` None: the batch's partitions are not known yet (`lookup_needs_partitions` said so), every
    partition is searched; `num_records` None: not counted, the broadcast is decided on Spark's size estimate.
    `cache`: where a broadcast lookup caches its matches for the rest of the write (`attach_locations`);
    `counting`: what the lookup may count for the workload profile on the way (`lookup_counts`).
    `known_locations`: the records carry `LOCATION_COLUMNS` already, read by the caller from the stored rows' meta
    columns in the same statement (SQL UPDATE, DELETE, MERGE: `file_id_of_file_name`; null for a new record): an
    index that looks stored keys up then reads nothing, the table was read once. A bucket index places records
    by their key's hash (no read) and ignores them."""
    meta = fs_view.meta_client
    config = with_table_index(config, meta.table_config, meta.base_path)
    index = create_index(config.get(WK.INDEX_TYPE), config=config, base_path=meta.base_path,
                         storage_options=meta.storage_options, record_key_fields=settings.record_keys)
    index.cache, index.counting = cache, counting
    if known_locations:
        if index.looks_up_stored_keys and index.requires_tagging(op):
            return _placed(records, op, index)
        records = records.drop(*LOCATION_COLUMNS)
    if not index.requires_tagging(op):
        return index.untagged(records)
    broadcast = _can_broadcast(spark, num_records, records)
    if index.is_global and settings.is_mor and settings.populate_meta_fields and _has_logs(fs_view) and \
            not index.sees_log_changes(fs_view):
        tagged = attach_locations(records, _live_keys(spark, meta.base_path, records, broadcast), True, broadcast,
                                  cache)
    else:
        key_columns, read_schema = _stored_key_columns(settings)
        tagged = index.tag_location_in_view(spark, records, fs_view, partitions, key_columns,
                                            broadcast_incoming=broadcast, read_schema=read_schema)
    return _placed(tagged, op, index)


def _placed(tagged: DataFrame, op: WriteOperationType, index) -> DataFrame:
    """Tagged records where the operation puts them: a delete keeps the keys found, in their stored partition; a
    global index moves or keeps a record whose partition changed."""
    if op is WriteOperationType.DELETE:
        return tagged.where(F.col(LOC_FILE_ID).isNotNull()).withColumn(PARTITION_PATH, F.col(LOC_PARTITION))
    if index.is_global:
        return _global_partition_change(tagged, index.update_partition_path)
    return tagged


def stale_locations(profile: WorkloadProfile, fs_view: FileSystemView) -> list[tuple[str, str]]:
    """(partition, file id) of the batch's updates that name no live file group of `fs_view`: known locations
    read before a clustering or restore replaced their file group. The write then looks the records up again."""
    live = {(g.file_group_id.partition_path, g.file_group_id.file_id) for g in fs_view.file_groups()}
    return sorted(set(profile.updates) - live)


def _stored_key_columns(settings: TableSettings):
    """How the index reads the keys of stored records: from the meta columns, or (tables without meta fields,
    whose stored meta columns are null) from the data, as on write."""
    if settings.populate_meta_fields:
        schema = StructType([StructField(RECORD_KEY, StringType()), StructField(PARTITION_PATH, StringType())])
        return (lambda df: (F.col(RECORD_KEY), F.col(PARTITION_PATH))), schema
    return (lambda df: (settings.keygen.record_key(), settings.keygen.partition_path())), None


def _has_logs(fs_view: FileSystemView) -> bool:
    return any(s.log_files for s in fs_view.latest_file_slices())


def _live_keys(spark: SparkSession, base_path: str, records: DataFrame, broadcast: bool) -> DataFrame:
    """(record key, partition, file id) of every live record of the table, its file slices merged with their
    logs. A global index on merge-on-read cannot take keys from base files alone: a record moved to another
    partition stays in its old base file, deleted by a log block, and moving it back would then update both
    places (a duplicate). Records in logs carry their file id as file name; base rows the base file's name."""
    from storage.read.reader import read_table

    df = read_table(spark, base_path, columns=[RECORD_KEY, PARTITION_PATH, FILE_NAME])
    if broadcast:
        df = df.join(F.broadcast(records.select(RECORD_KEY)), on=RECORD_KEY, how="left_semi")
    return df.select(F.col(RECORD_KEY), F.col(PARTITION_PATH).alias(LOC_PARTITION),
                     file_id_of_file_name(F.col(FILE_NAME)).alias(LOC_FILE_ID))


def _can_broadcast(spark: SparkSession, num_records: int | None, records: DataFrame) -> bool:
    """Broadcast the batch's keys to the index lookup when the batch is small (and the session allows
    broadcast joins at all). Without a count, Spark's estimate of the batch's size decides."""
    threshold = spark.conf.get("spark.sql.autoBroadcastJoinThreshold", "10485760")
    if str(threshold).strip() == "-1":
        return False
    if num_records is None:
        estimate = records._jdf.queryExecution().optimizedPlan().stats().sizeInBytes()
        return int(str(estimate)) <= _BROADCAST_MAX_BYTES
    return num_records <= _BROADCAST_MAX_RECORDS


def _global_partition_change(tagged: DataFrame, update_partition_path: bool) -> DataFrame:
    moved = F.col(LOC_FILE_ID).isNotNull() & (F.col(LOC_PARTITION) != F.col(PARTITION_PATH))
    if not update_partition_path:
        return tagged.withColumn(PARTITION_PATH, F.when(moved, F.col(LOC_PARTITION)).otherwise(F.col(PARTITION_PATH)))
    # the record moves: delete it from its old file group, insert it into the new partition. Both rows come
    # from one pass (explode), so the index join is not evaluated twice as a union of two filters would be
    copy = F.explode(F.when(moved, F.array(F.lit(False), F.lit(True))).otherwise(F.array(F.lit(False))))
    rows = tagged.withColumn(_MOVED, moved).withColumn(_DELETE_COPY, copy)
    is_delete, moved_insert = F.col(_DELETE_COPY), F.col(_MOVED) & ~F.col(_DELETE_COPY)
    return rows.select(
        *[F.col(f"`{c}`") for c in tagged.columns if c not in (PARTITION_PATH, OP_COLUMN, LOC_FILE_ID, LOC_PARTITION)],
        F.when(is_delete, F.col(LOC_PARTITION)).otherwise(F.col(PARTITION_PATH)).alias(PARTITION_PATH),
        F.when(is_delete, F.lit(OP_DELETE)).otherwise(F.col(OP_COLUMN)).cast("tinyint").alias(OP_COLUMN),
        F.when(moved_insert, F.lit(None)).otherwise(F.col(LOC_FILE_ID)).alias(LOC_FILE_ID),
        F.when(moved_insert, F.lit(None)).otherwise(F.col(LOC_PARTITION)).alias(LOC_PARTITION),
    )


def is_bucketed(tagged) -> bool:
    """Did the index put every record in a bucket of a fixed layout (the bucket index)? Then the write plans one
    file group per bucket from the workload profile, whatever the operation."""
    return BUCKET_NUMBER in (tagged.columns if isinstance(tagged, DataFrame) else tagged.column_names)


def workload_profile(tagged: DataFrame, checks: BatchChecks | None = None) -> WorkloadProfile:
    """Updates per file group and inserts per partition (and per bucket, for a bucket index), counted in one
    Spark job over the tagged records. `checks`: the batch was not counted before the lookup; the same job
    checks it (`storage.write.prepare.check_aggregates`)."""
    bucketed = is_bucketed(tagged)
    keys = [PARTITION_PATH, LOC_FILE_ID, OP_COLUMN] + ([BUCKET_NUMBER] if bucketed else [])
    extra = check_aggregates(tagged.columns, checks.precombine) if checks else []
    try:
        rows = tagged.groupBy(*keys).agg(F.count(F.lit(1)), *extra).collect()
    except Exception as exc:  # a key expression failed inside Spark: report it plainly
        raise plain_error(exc) from None
    if checks:
        verify_batch(sorted({r[0] for r in rows}), [tuple(r[len(keys) + 1:]) for r in rows], checks.precombine,
                     KEY_COUNT in tagged.columns)
    return profile_of_groups(((r[0], r[1], r[2], r[3] if bucketed else None, r[len(keys)]) for r in rows), bucketed)


def profile_of_groups(groups: Iterable[tuple[str, str | None, int, int | None, int]],
                      bucketed: bool) -> WorkloadProfile:
    """The workload profile from the tagged records' counts per (partition, file id, operation, bucket number)."""
    profile = WorkloadProfile(bucketed=bucketed)
    for partition, file_id, op, bucket, count in groups:
        if file_id is None:
            profile.inserts[partition] = profile.inserts.get(partition, 0) + count
            if bucketed:
                key = (partition, bucket)
                profile.new_buckets[key] = profile.new_buckets.get(key, 0) + count
        else:
            profile.updates[(partition, file_id)] = profile.updates.get((partition, file_id), 0) + count
        if op == OP_WRITE:
            profile.written += count
    return profile


def deletes_by_matches(op: WriteOperationType, bucketed: bool) -> bool:
    """A delete writes only the stored keys the lookup found, each in its file group: its profile is the
    lookup's matches counted per file group (`matches_profile`), without joining them back onto the batch. A
    delete's batch has nothing to check (no ordering values; its keys are computed by the lookup)."""
    return op is WriteOperationType.DELETE and not bucketed


def lookup_counts(op: WriteOperationType, config: HoodieConfig, checks: BatchChecks | None) -> BatchCounting | None:
    """What the index lookup is asked to count for the workload profile (`BatchCounting`), or None: a delete
    (the keys it finds), or an upsert whose batch was not counted before (its records per partition and their
    null ordering values, `checks`) under a partition-scoped index (a global one moves records between
    partitions, which the counts do not follow)."""
    if op is WriteOperationType.DELETE:
        return BatchCounting(records=False)
    if op is WriteOperationType.UPSERT and checks is not None and not is_global_index(config):
        return BatchCounting(checks.precombine)
    return None


def matches_profile(lookup: DataFrame, checks: BatchChecks | None = None) -> WorkloadProfile:
    """The workload profile from the index lookup's cached matches (`LOC_PARTITION`, `LOC_FILE_ID` per key
    found), without joining them back onto the batch: an update of each file group per key found in it. A lookup
    that counted the batch (`BatchCounting`: rows without a key) gives each partition's inserts too, its records
    less the keys found there, and the batch's `checks` are verified on its counts; that read is a filter of the
    cached frame, no aggregation. A partition's inserts are never counted below one: a key stored in two of its
    files is found twice, and inserts hidden by that would otherwise find no bucket (a planned bucket that
    receives no record writes nothing)."""
    counted = LOOKUP_COUNT in lookup.columns
    try:
        if counted:
            rows = lookup.where(F.col(RECORD_KEY).isNull()).select(
                LOC_PARTITION, LOC_FILE_ID, LOOKUP_COUNT, LOOKUP_NULLS).collect()
        else:
            rows = [(*r, None) for r in lookup.groupBy(LOC_PARTITION, LOC_FILE_ID).count().collect()]
    except Exception as exc:  # a key expression failed inside Spark: report it plainly
        raise plain_error(exc) from None
    profile = WorkloadProfile(bucketed=False)
    records: dict[str, int] = {}
    nulls = 0
    for partition, file_id, count, null_count in rows:
        if file_id is not None:
            profile.updates[(partition, file_id)] = profile.updates.get((partition, file_id), 0) + count
        else:
            records[partition] = records.get(partition, 0) + count
            nulls += null_count or 0
    if counted and checks is not None:
        verify_batch(sorted(records), [(nulls,) if checks.precombine else ()], checks.precombine, False)
        found: Counter[str] = Counter()
        for (partition, _), count in profile.updates.items():
            found[partition] += count
        profile.inserts = {p: max(n - found[p], 1) for p, n in records.items()}
    return profile
