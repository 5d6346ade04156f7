"""SIMPLE and GLOBAL_SIMPLE indexes: a Spark join of incoming keys with stored keys."""
from __future__ import annotations

from dataclasses import dataclass

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import StructType

from storage.io.storage_options import StorageOptions, default_storage_options
from storage.meta_fields import PARTITION_PATH, RECORD_KEY
from storage.read.parquet_scan import scan_parquet
from storage.table.file_slice import HoodieBaseFile

LOC_FILE_ID = "_hoodie_loc_file_id"
LOC_PARTITION = "_hoodie_loc_partition"
_FILE_ID_FROM_NAME = r"^(.+?)_\d+-\d+-\d+_\d+\.parquet$"
_FILE_NAME = "_hoodie_src_file_name"


@dataclass
class HoodieIndex:
    """Base: tag records with their current location (`LOC_FILE_ID`, `LOC_PARTITION`, null when new)."""

    is_global: bool = False
    update_partition_path: bool = True

    def stored_keys(self, spark: SparkSession, base_files: list[HoodieBaseFile], key_columns,
                    read_schema: StructType | None = None, storage_options: StorageOptions | None = None) -> DataFrame:
        """(record key, partition path, file id) of every record in `base_files`. With `read_schema` (the columns
        the keys come from) Spark reads no footers up front to infer a schema."""
        paths = [bf.path for bf in base_files]
        df = scan_parquet(spark, paths, read_schema, storage_options or default_storage_options(), _FILE_NAME)
        record_key, partition = key_columns(df)
        return df.select(
            record_key.alias(RECORD_KEY),
            partition.alias(LOC_PARTITION),
            F.regexp_extract(F.col(_FILE_NAME), _FILE_ID_FROM_NAME, 1).alias(LOC_FILE_ID),
        )

    def tag_location(self, spark: SparkSession, records: DataFrame, base_files: list[HoodieBaseFile],
                     key_columns, broadcast_incoming: bool = False, read_schema: StructType | None = None,
                     storage_options: StorageOptions | None = None) -> DataFrame:
        """`records` with their stored location. With `broadcast_incoming` (a batch small enough to broadcast),
        the stored keys are filtered by a broadcast semi-join against the incoming keys and the few matches are
        broadcast back: the table's keys are scanned but never shuffled. Otherwise a plain shuffle join."""
        if not base_files:
            return records.withColumn(LOC_FILE_ID, F.lit(None).cast("string")).withColumn(
                LOC_PARTITION, F.lit(None).cast("string"))
        stored = self.stored_keys(spark, base_files, key_columns, read_schema, storage_options)
        on = [RECORD_KEY]
        if not self.is_global:
            stored = stored.withColumn(PARTITION_PATH, F.col(LOC_PARTITION))
            on.append(PARTITION_PATH)
        if broadcast_incoming:
            matches = stored.join(F.broadcast(records.select(*on)), on=on, how="left_semi")
            return records.join(F.broadcast(matches), on=on, how="left")
        return records.join(stored, on=on, how="left")


INDEXES = {
    "SIMPLE": lambda update_pp: HoodieIndex(is_global=False, update_partition_path=update_pp),
    "GLOBAL_SIMPLE": lambda update_pp: HoodieIndex(is_global=True, update_partition_path=update_pp),
}


def create_index(index_type: str, update_partition_path: bool) -> HoodieIndex:
    key = index_type.upper()
    if key in ("BLOOM", "GLOBAL_BLOOM"):
        # Bloom lookups give the same tags as the simple join; use it until the bloom index lands.
        key = "GLOBAL_SIMPLE" if key.startswith("GLOBAL") else "SIMPLE"
    if key not in INDEXES:
        raise ValueError(f"unsupported index type {index_type!r} (hoodie.index.type); supported: {sorted(INDEXES)}")
    return INDEXES[key](update_partition_path)
