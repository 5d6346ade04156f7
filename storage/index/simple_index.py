"""SIMPLE and GLOBAL_SIMPLE indexes: a Spark join of incoming keys with every key stored in the base files."""
from __future__ import annotations

from dataclasses import dataclass

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import StructType

from storage.index.hoodie_index import (  # noqa: F401  (LOC_* are imported from here by the write client)
    BASE_FILE_ID_FROM_NAME,
    LOC_FILE_ID,
    LOC_PARTITION,
    HoodieIndex,
    KeyColumns,
    attach_locations,
    join_keys,
    untagged,
)
from storage.meta_fields import PARTITION_PATH, RECORD_KEY
from storage.read.parquet_scan import scan_parquet
from storage.table.file_slice import HoodieBaseFile

_FILE_NAME = "_hoodie_src_file_name"


@dataclass
class HoodieSimpleIndex(HoodieIndex):

    def stored_keys(self, spark: SparkSession, base_files: list[HoodieBaseFile], key_columns: KeyColumns,
                    read_schema: StructType | None = None) -> DataFrame:
        """(record key, partition path, file id) of every record in `base_files`. With `read_schema` (the columns
        the keys come from) Spark reads no footers up front to infer a schema."""
        paths = [bf.path for bf in base_files]
        df = scan_parquet(spark, paths, read_schema, self.storage_options, _FILE_NAME)
        record_key, partition = key_columns(df)
        return df.select(
            record_key.alias(RECORD_KEY),
            partition.alias(LOC_PARTITION),
            F.regexp_extract(F.col(_FILE_NAME), BASE_FILE_ID_FROM_NAME, 1).alias(LOC_FILE_ID),
        )

    def tag_location(self, spark: SparkSession, records: DataFrame, base_files: list[HoodieBaseFile],
                     key_columns: KeyColumns, broadcast_incoming: bool = False,
                     read_schema: StructType | None = None) -> DataFrame:
        """With `broadcast_incoming` the stored keys are filtered by a broadcast semi-join against the incoming
        keys and the few matches are broadcast back: the table's keys are scanned but never shuffled.
        Otherwise a plain shuffle join."""
        if not base_files:
            return untagged(records)
        stored = self.stored_keys(spark, base_files, key_columns, read_schema)
        if broadcast_incoming:
            on = join_keys(self.is_global)
            probe = stored if self.is_global else stored.withColumn(PARTITION_PATH, F.col(LOC_PARTITION))
            stored = probe.join(F.broadcast(records.select(*on)), on=on, how="left_semi").select(
                RECORD_KEY, LOC_PARTITION, LOC_FILE_ID)
        return attach_locations(records, stored, self.is_global, broadcast_incoming, self.cache)
