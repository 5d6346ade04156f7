"""BUCKET index, SIMPLE engine (Hudi's HoodieSimpleBucketIndex and SparkBucketIndexPartitioner).

Every partition is split into `hoodie.bucket.index.num.buckets` buckets, one file group each at most; a record's
bucket is a hash of its record key (`bucket_identifier.py`), so locating it needs no lookup at all:
- each record's bucket number is computed in Spark (an Arrow UDF over the record key column only);
- the file groups of the batch's partitions come from one file-system listing, each one's bucket read from the
  first eight characters of its file id;
- a record whose bucket has a file group is tagged with it (an update, or an insert into the bucket: copy-on-
  write merges it into the base file, merge-on-read appends it to the group's logs, as Hudi's update buckets
  do); a record of a bucket without a file group is new, and all of them go to one new file group whose id
  starts with the bucket number (`plan_bucket_layout` in storage/write/partitioner.py).

Small-file sizing does not apply: the number of file groups per partition is fixed. So is the number of buckets
once a table has data: Hudi keeps it only in the writer's options (apache/hudi#13241: changing it silently
corrupts the table); this engine records the bucket settings in hoodie.properties when it creates a bucket table
and refuses a write whose settings differ, or a table whose file groups are not bucket file groups.
"""
from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import ClassVar

import pyarrow as pa
from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import StructType

from storage.arrow_util import local_frame
from storage.config import HoodieConfig
from storage.config import WriteConfigKeys as WK
from storage.exception import HoodieIndexError
from storage.fs_utils import relative_partition_path
from storage.index.bucket_identifier import bucket_id_of_file_id, bucket_ids
from storage.table.table_config import PROPERTIES_FILE, HoodieTableConfig
from storage.index.hoodie_index import (
    LOC_FILE_ID,
    LOC_PARTITION,
    HoodieIndex,
    KeyColumns,
    untagged,
)
from storage.meta_fields import PARTITION_PATH, RECORD_KEY
from storage.table.file_slice import HoodieBaseFile

log = logging.getLogger(__name__)

BUCKET_NUMBER = "_hoodie_bucket_number"  # the record's bucket within its partition
BUCKET = "BUCKET"
_ENGINES = ("SIMPLE", "CONSISTENT_HASHING")
_TABLE_KEYS = (WK.INDEX_TYPE, WK.INDEX_BUCKET_ENGINE, WK.BUCKET_INDEX_NUM_BUCKETS, WK.BUCKET_INDEX_HASH_FIELD)


@dataclass(frozen=True)
class BucketSpec:
    """How records map to buckets: `num_buckets` per partition, hashing `hash_fields` (record key fields, as
    spelled in the record key) of keys that `complex_keys` spell `field:value,...`."""

    num_buckets: int
    hash_fields: tuple[str, ...]

    @classmethod
    def of(cls, config: HoodieConfig, record_key_fields: list[str]) -> BucketSpec:
        engine = str(config.get(WK.INDEX_BUCKET_ENGINE) or "SIMPLE").strip().upper()
        if engine == "CONSISTENT_HASHING":
            raise HoodieIndexError(f"{WK.INDEX_BUCKET_ENGINE.key}=CONSISTENT_HASHING is not supported: this engine's "
                                   "bucket index has a fixed number of buckets (use SIMPLE)")
        if engine not in _ENGINES:
            raise HoodieIndexError(f"unknown bucket index engine {engine!r} ({WK.INDEX_BUCKET_ENGINE.key}); "
                                   "supported: SIMPLE")
        num = config.get(WK.BUCKET_INDEX_NUM_BUCKETS)
        if num is None or num <= 0:
            raise HoodieIndexError(f"{WK.BUCKET_INDEX_NUM_BUCKETS.key} must be a positive number, not {num}")
        spelled = {f.lower(): f for f in record_key_fields}
        given = config.get(WK.BUCKET_INDEX_HASH_FIELD) or list(record_key_fields)
        outside = [f for f in given if f.lower() not in spelled]
        if outside:
            raise HoodieIndexError(f"bucket index hash fields {', '.join(outside)} ({WK.BUCKET_INDEX_HASH_FIELD.key}) "
                                   f"are not record key fields ({', '.join(record_key_fields)}): they must be a "
                                   "subset of the record key")
        return cls(num, tuple(spelled[f.lower()] for f in given))


def is_bucket_index(config: HoodieConfig) -> bool:
    return str(config.get(WK.INDEX_TYPE) or "").strip().upper() == BUCKET


def bucket_table_properties(config: HoodieConfig, record_key_fields: list[str]) -> dict[str, str]:
    """What a new table created by a bucket-index write records in hoodie.properties (nothing otherwise)."""
    if not is_bucket_index(config):
        return {}
    spec = BucketSpec.of(config, record_key_fields)
    return {WK.INDEX_TYPE.key: BUCKET, WK.INDEX_BUCKET_ENGINE.key: "SIMPLE",
            WK.BUCKET_INDEX_NUM_BUCKETS.key: str(spec.num_buckets),
            WK.BUCKET_INDEX_HASH_FIELD.key: ",".join(spec.hash_fields)}


def with_table_index(config: HoodieConfig, table: HoodieTableConfig, base_path: str = "") -> HoodieConfig:
    """The write's options with the bucket settings its table recorded: they apply when the write does not
    give them, and a write giving other values (another index type, another number of buckets or hash fields)
    is refused, since every stored record would then be in the wrong bucket."""
    index = HoodieTableConfig({p.key: table.props[p.key] for p in _TABLE_KEYS if p.key in table.props})
    recorded = index.with_options()
    if not is_bucket_index(recorded):
        return config
    for prop in _TABLE_KEYS:
        if not config.contains(prop) or prop.key not in recorded.props:
            continue
        if _normal(config.get(prop)) != _normal(recorded.get(prop)):
            raise HoodieIndexError(
                f"{prop.key}={config.raw(prop)} differs from the table's {recorded.raw(prop)} ({PROPERTIES_FILE} of "
                f"{base_path or 'the table'}): a bucket index table keeps its index type, number of buckets and "
                "hash fields")
    return index.with_options(config)


def _normal(value) -> str:
    if isinstance(value, list):
        return ",".join(v.lower() for v in value)
    return str(value).strip().upper()


def bucket_number_column(spec: BucketSpec) -> Column:
    """The bucket number of each record, from its record key (an Arrow UDF: only the key column goes to Python)."""
    from pyspark.sql.functions import arrow_udf

    fields, num = list(spec.hash_fields), spec.num_buckets

    @arrow_udf("int")
    def bucket_of(keys: pa.Array) -> pa.Array:
        return pa.array(bucket_ids(keys, fields, num), pa.int32())

    return bucket_of(F.col(RECORD_KEY))


@dataclass
class HoodieSimpleBucketIndex(HoodieIndex):
    looks_up_stored_keys: ClassVar[bool] = False
    spec: BucketSpec = BucketSpec(256, ())

    def requires_tagging(self, operation) -> bool:
        """Every write but an overwrite finds its buckets' file groups (inserts and bulk inserts too, as Hudi's
        bucket index: a record never starts a second file group in its bucket); an overwrite replaces them."""
        return not operation.is_overwrite

    def untagged(self, records: DataFrame) -> DataFrame:
        return untagged(records).withColumn(BUCKET_NUMBER, bucket_number_column(self.spec))

    def tag_location_in_view(self, spark: SparkSession, records: DataFrame, fs_view, partitions: list[str],
                             key_columns: KeyColumns, broadcast_incoming: bool = False,
                             read_schema: StructType | None = None) -> DataFrame:
        slices = fs_view.latest_file_slices(partitions)
        groups = self.bucket_file_groups([(s.partition_path, s.file_id) for s in slices])
        return self._tag(spark, records, groups)

    def tag_location(self, spark: SparkSession, records: DataFrame, base_files: list[HoodieBaseFile],
                     key_columns: KeyColumns, broadcast_incoming: bool = False,
                     read_schema: StructType | None = None) -> DataFrame:
        """From base files alone (no file-system view): their file groups are the buckets' file groups."""
        groups = self.bucket_file_groups([(relative_partition_path(self.base_path, bf.path.rsplit("/", 1)[0]),
                                           bf.file_id) for bf in base_files])
        return self._tag(spark, records, groups)

    def bucket_file_groups(self, file_groups: list[tuple[str, str]]) -> list[tuple[str, int, str]]:
        """(partition, bucket, file id) of each file group; a file group that is not a bucket's, a bucket beyond
        the number of buckets, or two file groups in one bucket mean the table was not written with this
        bucket layout: refused, naming the file group."""
        out, seen = [], {}
        for partition, file_id in sorted(set(file_groups)):
            bucket = bucket_id_of_file_id(file_id)
            if bucket >= self.spec.num_buckets:
                raise HoodieIndexError(
                    f"file group {file_id} of partition '{partition}' is bucket {bucket}, but "
                    f"{WK.BUCKET_INDEX_NUM_BUCKETS.key}={self.spec.num_buckets}: the number of buckets of a table "
                    "cannot change")
            if (partition, bucket) in seen:
                raise HoodieIndexError(f"partition '{partition}' has two file groups in bucket {bucket} "
                                       f"({seen[(partition, bucket)]}, {file_id}): roll back the write that made "
                                       "the second one")
            seen[(partition, bucket)] = file_id
            out.append((partition, bucket, file_id))
        return out

    def _tag(self, spark: SparkSession, records: DataFrame, groups: list[tuple[str, int, str]]) -> DataFrame:
        bucketed = records.withColumn(BUCKET_NUMBER, bucket_number_column(self.spec))
        if not groups:
            return untagged(bucketed)
        located = local_frame(
            spark, groups, f"{PARTITION_PATH} string, {BUCKET_NUMBER} int, {LOC_FILE_ID} string")
        return (bucketed.join(F.broadcast(located), [PARTITION_PATH, BUCKET_NUMBER], "left")
                .withColumn(LOC_PARTITION, F.when(F.col(LOC_FILE_ID).isNotNull(), F.col(PARTITION_PATH))))
