"""What every index does (Hudi's HoodieIndex): tag incoming records with the file group holding their key.

`tag_location` adds `LOC_FILE_ID` / `LOC_PARTITION` (null for a key stored nowhere). A non-global index looks a
key up in its own partition only; a global one in every partition (the write client then moves or keeps records
whose partition changed, by `update_partition_path`).
"""
from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from typing import Callable, ClassVar

from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import StructType

from storage.io.storage_options import StorageOptions
from storage.meta_fields import PARTITION_PATH, RECORD_KEY
from storage.table.file_slice import HoodieBaseFile

LOC_FILE_ID = "_hoodie_loc_file_id"
LOC_PARTITION = "_hoodie_loc_partition"
LOCATION_COLUMNS = (LOC_FILE_ID, LOC_PARTITION)
# the file id in a stored record's `_hoodie_file_name`: a base file's name starts with it; a record written to a
# log carries the file id itself (Hudi's append handle), or, from some writers, the log file's name
BASE_FILE_ID_FROM_NAME = r"^(.+?)_\d+-\d+-\d+_\d+\.parquet$"
LOG_FILE_ID_FROM_NAME = r"^\.(.+?)_[^_]+\.log\.\d+"
# the counts a counting lookup (`BatchCounting`) adds to its matches, on rows without a record key
LOOKUP_COUNT = "_hoodie_lookup_count"
LOOKUP_NULLS = "_hoodie_lookup_nulls"

# (DataFrame of stored rows) -> (record key, partition path) columns of those rows
KeyColumns = Callable[[DataFrame], tuple[Column, Column]]


@dataclass(frozen=True)
class BatchCounting:
    """Asks an index whose lookup passes over every record of the batch anyway (the bloom index's pairing step) to
    count on the way what the write's workload profile needs, so that no job joins the matches back onto the batch:
    rows without a record key added to its matches, `LOOKUP_COUNT` being the batch's records of `LOC_PARTITION`
    (`LOC_FILE_ID` null; `LOOKUP_NULLS` their null values of `ordering`, when given) or the keys found in the file
    group `LOC_FILE_ID`. An index that cannot count ignores the request (`FrameCache.counted` says which).
    `records` False: only the keys found are counted (a delete writes those alone; its batch needs no tally)."""

    ordering: str | None = None
    records: bool = True


class FrameCache:
    """DataFrames persisted for the duration of one write and released together. An index caches its lookup's
    matches here (a few columns of the keys it found): the tagged records, a broadcast join of them onto the
    already cached batch, are then recomputed by each reader in the JVM instead of being cached whole again."""

    def __init__(self) -> None:
        self._frames: list[DataFrame] = []
        self.lookup: DataFrame | None = None  # the index lookup's matches, once cached here

    def persist(self, df: DataFrame) -> DataFrame:
        from pyspark import StorageLevel

        df = df.persist(StorageLevel.MEMORY_AND_DISK)
        self._frames.append(df)
        return df

    def persist_lookup(self, matches: DataFrame) -> DataFrame:
        self.lookup = self.persist(matches)
        return self.lookup

    @property
    def holds_lookup(self) -> bool:
        return self.lookup is not None

    @property
    def counted(self) -> bool:
        """Whether the cached lookup carries the batch's counts (`BatchCounting`)."""
        return self.lookup is not None and LOOKUP_COUNT in self.lookup.columns

    def release(self) -> None:
        for df in self._frames:
            df.unpersist()
        self._frames.clear()
        self.lookup = None

    def __enter__(self) -> "FrameCache":
        return self

    def __exit__(self, *exc) -> None:
        self.release()


@dataclass
class HoodieIndex(ABC):
    # whether tagging reads the stored keys (bloom, simple) - not a bucket index, which hashes them
    looks_up_stored_keys: ClassVar[bool] = True
    is_global: bool = False
    update_partition_path: bool = True
    base_path: str = ""  # the table's: partition paths of base files are relative to it
    storage_options: StorageOptions = field(default_factory=StorageOptions)  # how tasks reach the base files
    cache: FrameCache | None = None  # where a broadcast lookup's matches are cached for the write (attach_locations)
    counting: BatchCounting | None = None  # what a cached lookup may count for the write on the way

    def requires_tagging(self, operation) -> bool:
        """Whether records of `operation` (a WriteOperationType) are looked up (Hudi's requiresTagging): upserts
        and deletes; inserts and bulk inserts skip the lookup."""
        return operation.uses_index

    def sees_log_changes(self, fs_view) -> bool:
        """Whether the lookup knows what log files did to stored records (a key deleted or moved away by a log
        block), so that a global lookup on merge-on-read needs no merged read of the table: only an index kept
        in step by every action (the record index) does."""
        return False

    def untagged(self, records: DataFrame) -> DataFrame:
        """`records` of an operation that is not looked up, every one new."""
        return untagged(records)

    def tag_location_in_view(self, spark: SparkSession, records: DataFrame, fs_view, partitions: list[str],
                             key_columns: KeyColumns, broadcast_incoming: bool = False,
                             read_schema: StructType | None = None) -> DataFrame:
        """`tag_location` against the latest base files of the batch's partitions (all, for a global index) of
        `fs_view` (a FileSystemView)."""
        base_files = fs_view.latest_base_files(None if self.is_global else partitions)
        return self.tag_location(spark, records, base_files, key_columns, broadcast_incoming, read_schema)

    @abstractmethod
    def tag_location(self, spark: SparkSession, records: DataFrame, base_files: list[HoodieBaseFile],
                     key_columns: KeyColumns, broadcast_incoming: bool = False,
                     read_schema: StructType | None = None) -> DataFrame:
        """`records` (with `RECORD_KEY`, `PARTITION_PATH`) plus their stored location. `base_files`: the latest
        base files to search (the batch's partitions, or all for a global index); `key_columns` / `read_schema`:
        how stored keys are read from them; `broadcast_incoming`: the batch is small enough to broadcast."""


def untagged(records: DataFrame) -> DataFrame:
    """Every record new: nothing stored to find it in."""
    return records.withColumn(LOC_FILE_ID, F.lit(None).cast("string")).withColumn(
        LOC_PARTITION, F.lit(None).cast("string"))


def file_id_of_file_name(file_name: Column) -> Column:
    """The file group of a stored record, from its `_hoodie_file_name` meta column."""
    from_base = F.regexp_extract(file_name, BASE_FILE_ID_FROM_NAME, 1)
    from_log = F.regexp_extract(file_name, LOG_FILE_ID_FROM_NAME, 1)
    return F.when(from_base != "", from_base).when(from_log != "", from_log).otherwise(file_name)


def join_keys(is_global: bool) -> list[str]:
    """A stored key matches a record by key alone (global) or by key and partition path."""
    return [RECORD_KEY] if is_global else [RECORD_KEY, PARTITION_PATH]


def attach_locations(records: DataFrame, matches: DataFrame, is_global: bool, broadcast: bool,
                     cache: FrameCache | None = None) -> DataFrame:
    """Left-join `matches` (`RECORD_KEY`, `LOC_PARTITION`, `LOC_FILE_ID`: the stored keys the batch may hit)
    onto `records`; broadcast them when the batch is small (then there are at most as many as records), and then
    cache them in `cache`, so that the lookup runs once however often the join is read."""
    if broadcast and cache is not None:
        matches = cache.persist_lookup(matches)
    if LOOKUP_COUNT in matches.columns:  # the counts are for the workload profile, not the join
        matches = matches.where(F.col(RECORD_KEY).isNotNull()).select(RECORD_KEY, LOC_PARTITION, LOC_FILE_ID)
    if not is_global:
        matches = matches.withColumn(PARTITION_PATH, F.col(LOC_PARTITION))
    return records.join(F.broadcast(matches) if broadcast else matches, on=join_keys(is_global), how="left")
