"""Workload profile and bucketing (Hudi's UpsertPartitioner), planned on the driver from counts.

Updates go to the bucket of their file group. Inserts first fill small files (base files below
`hoodie.parquet.small.file.limit`) up to `hoodie.parquet.max.file.size`, using the average record size
of earlier commits, then go to new file groups of `max.file.size / avg record size` records each
(or `hoodie.copyonwrite.insert.split.size` when auto split is off). Each bucket becomes one file.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from enum import Enum

from storage.fs_utils import new_file_id
from storage.index.bucket_identifier import bucket_id_of_file_id, new_bucket_file_id


class BucketType(str, Enum):
    UPDATE = "UPDATE"  # rewrites (COW) or appends to (MOR) an existing file group
    INSERT = "INSERT"  # starts a new file group


@dataclass(frozen=True)
class SmallFile:
    partition_path: str
    file_id: str
    size: int
    rewrites_base: bool = False  # merge-on-read: inserts merge into a new base file (not appended to logs)


# Hudi's hoodie.logfile.to.parquet.compression.ratio default: a log file's bytes as the parquet bytes they become
LOG_TO_PARQUET_RATIO = 0.35


@dataclass(frozen=True)
class SliceSize:
    """What the merge-on-read small-file rule reads of a latest file slice."""

    partition_path: str
    file_id: str
    base_size: int | None  # None: the slice has no base file
    log_sizes: tuple[int, ...] = ()


def mor_small_files(slices: list[SliceSize], sizing: SizingConfig, can_index_logs: bool, candidates_limit: int,
                    log_to_parquet_ratio: float = LOG_TO_PARQUET_RATIO) -> list[SmallFile]:
    """The file slices of one partition that take inserts in a merge-on-read write (Hudi's
    SparkUpsertDeltaCommitPartitioner.getSmallFiles). An index that can index log files finds records appended
    to logs: every slice whose base file plus its logs (at their expected parquet size) stays below
    `hoodie.parquet.max.file.size` takes inserts, appended to its logs. Otherwise (bloom, simple) only slices
    without log files whose base file is below `hoodie.parquet.small.file.limit`, smallest first and at most
    `hoodie.merge.small.file.group.candidates.limit` of them: their inserts are merged into a new base file."""
    def size(s: SliceSize) -> int:
        logs = int(sum(x for x in s.log_sizes if x > 0) * log_to_parquet_ratio)
        return (s.base_size or 0) + logs

    if can_index_logs:
        return [SmallFile(s.partition_path, s.file_id, size(s)) for s in slices if size(s) < sizing.max_file_size]
    if sizing.small_file_limit <= 0:
        return []
    eligible = sorted((s for s in slices if not s.log_sizes and s.base_size is not None
                       and s.base_size < sizing.small_file_limit), key=lambda s: (s.base_size, s.file_id))
    return [SmallFile(s.partition_path, s.file_id, s.base_size, rewrites_base=True)
            for s in eligible[:max(0, candidates_limit)]]


@dataclass
class BucketInfo:
    bucket_id: int
    bucket_type: BucketType
    partition_path: str
    file_id: str
    # share of the partition's inserts routed here: [lo, hi) on a uniform hash of the record key
    insert_lo: float = 0.0
    insert_hi: float = 0.0
    expected_inserts: int = 0
    expected_updates: int = 0
    bucket_number: int | None = None  # bucket index: the bucket whose records this file group holds
    # merge-on-read: a small file slice (no log files) that takes inserts is merged into a new base file, as
    # Hudi's delta commit merges the small files its partitioner picked when the index cannot index log files
    rewrites_base: bool = False


@dataclass
class WorkloadProfile:
    updates: dict[tuple[str, str], int] = field(default_factory=dict)  # (partition, file id) -> count
    inserts: dict[str, int] = field(default_factory=dict)  # partition -> count
    written: int = 0  # records written (not deleted); more than the batch when a key was found twice
    bucketed: bool = False  # a bucket index placed every record in a bucket: one file group per bucket
    new_buckets: dict[tuple[str, int], int] = field(default_factory=dict)  # (partition, bucket) -> inserts

    @property
    def partitions(self) -> list[str]:
        return sorted({p for p, _ in self.updates} | set(self.inserts))

    @property
    def total_inserts(self) -> int:
        return sum(self.inserts.values())

    @property
    def total_updates(self) -> int:
        return sum(self.updates.values())


@dataclass(frozen=True)
class SizingConfig:
    small_file_limit: int = 104857600
    max_file_size: int = 125829120
    record_size_estimate: int = 1024
    insert_split_size: int = 500000
    auto_split: bool = True


@dataclass
class BucketPlan:
    buckets: list[BucketInfo]

    def update_bucket_of(self) -> dict[tuple[str, str], int]:
        return {(b.partition_path, b.file_id): b.bucket_id for b in self.buckets if b.bucket_type is BucketType.UPDATE}

    def insert_ranges(self) -> dict[str, list[tuple[float, float, int]]]:
        ranges: dict[str, list[tuple[float, float, int]]] = {}
        for b in self.buckets:
            if b.insert_hi > b.insert_lo:
                ranges.setdefault(b.partition_path, []).append((b.insert_lo, b.insert_hi, b.bucket_id))
        for lst in ranges.values():
            lst.sort()
        return ranges

    def bucket_number_of(self) -> dict[tuple[str, int], int]:
        """(partition, bucket number) -> bucket id, for a bucket index layout (empty otherwise)."""
        return {(b.partition_path, b.bucket_number): b.bucket_id for b in self.buckets if b.bucket_number is not None}

    def __len__(self) -> int:
        return len(self.buckets)


def average_record_size(commit_totals: list[tuple[int, int]], sizing: SizingConfig, threshold: float) -> int:
    """Bytes per record from the newest commit that wrote more than `threshold * small_file_limit` bytes.

    `commit_totals` is (total bytes written, records written) per completed commit, newest first."""
    floor = threshold * sizing.small_file_limit
    for total_bytes, records in commit_totals:
        if total_bytes > floor and records > 0:
            return max(1, math.ceil(total_bytes / records))
    return sizing.record_size_estimate


def plan_buckets(profile: WorkloadProfile, small_files: dict[str, list[SmallFile]], sizing: SizingConfig,
                 avg_record_size: int) -> BucketPlan:
    buckets: list[BucketInfo] = []
    by_group: dict[tuple[str, str], BucketInfo] = {}
    for (partition, file_id), count in sorted(profile.updates.items()):
        b = BucketInfo(len(buckets), BucketType.UPDATE, partition, file_id, expected_updates=count)
        buckets.append(b)
        by_group[(partition, file_id)] = b
    for partition in sorted(profile.inserts):
        _assign_inserts(partition, profile.inserts[partition], small_files.get(partition, []), sizing,
                        avg_record_size, buckets, by_group)
    for partition, files in small_files.items():  # a picked small file is merged, its updates with its inserts
        for sf in files:
            bucket = by_group.get((partition, sf.file_id))
            if sf.rewrites_base and bucket is not None:
                bucket.rewrites_base = True
    return BucketPlan(buckets)


def records_per_new_file(sizing: SizingConfig, avg_record_size: int) -> int:
    """Records of a new file group: `hoodie.parquet.max.file.size` over the average record size, or
    `hoodie.copyonwrite.insert.split.size` when auto split is off."""
    if sizing.auto_split:
        return max(1, sizing.max_file_size // avg_record_size)
    return max(1, sizing.insert_split_size)


def _assign_inserts(partition: str, total: int, small: list[SmallFile], sizing: SizingConfig, avg: int,
                    buckets: list[BucketInfo], by_group: dict[tuple[str, str], BucketInfo]) -> None:
    if total <= 0:
        return
    assigned: list[tuple[BucketInfo, int]] = []
    remaining = total
    for sf in sorted(small, key=lambda s: s.size):
        if remaining <= 0:
            break
        capacity = (sizing.max_file_size - sf.size) // avg
        take = min(max(capacity, 0), remaining)
        if take <= 0:
            continue
        bucket = by_group.get((partition, sf.file_id))
        if bucket is None:
            bucket = BucketInfo(len(buckets), BucketType.UPDATE, partition, sf.file_id)
            buckets.append(bucket)
            by_group[(partition, sf.file_id)] = bucket
        assigned.append((bucket, take))
        remaining -= take
    if remaining > 0:
        per_bucket = records_per_new_file(sizing, avg)
        n_new = math.ceil(remaining / per_bucket)
        base = remaining // n_new
        extra = remaining % n_new
        for i in range(n_new):
            bucket = BucketInfo(len(buckets), BucketType.INSERT, partition, new_file_id(0))
            buckets.append(bucket)
            assigned.append((bucket, base + (1 if i < extra else 0)))
    cursor = 0.0
    for idx, (bucket, count) in enumerate(assigned):
        share = count / total
        bucket.insert_lo = cursor
        bucket.insert_hi = 1.0 if idx == len(assigned) - 1 else cursor + share
        bucket.expected_inserts = count
        cursor = bucket.insert_hi


def plan_new_file_groups(inserts: dict[str, int], sizing: SizingConfig, avg_record_size: int) -> BucketPlan:
    """Buckets for operations that never touch existing files (bulk insert, insert overwrite)."""
    buckets: list[BucketInfo] = []
    for partition in sorted(inserts):
        _assign_inserts(partition, inserts[partition], [], sizing, avg_record_size, buckets, {})
    return BucketPlan(buckets)


def plan_bucket_layout(profile: WorkloadProfile) -> BucketPlan:
    """Buckets of a bucket index write (Hudi's SparkBucketIndexPartitioner): one per bucket the batch touches,
    its existing file group (updates, and merge-on-read appends) or a new file group named after the bucket."""
    buckets: list[BucketInfo] = []
    for (partition, file_id), count in sorted(profile.updates.items()):
        buckets.append(BucketInfo(len(buckets), BucketType.UPDATE, partition, file_id, expected_updates=count,
                                  bucket_number=bucket_id_of_file_id(file_id)))
    for (partition, number), count in sorted(profile.new_buckets.items()):
        buckets.append(BucketInfo(len(buckets), BucketType.INSERT, partition, new_bucket_file_id(number),
                                  expected_inserts=count, bucket_number=number))
    return BucketPlan(buckets)
