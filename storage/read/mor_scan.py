"""Merge-on-read snapshot scans in Spark: slices without log files go through Spark's own parquet reader;
slices with log files are merged inside Spark tasks.

The driver only plans: it turns each slice to merge into a one-row descriptor (partition, file id, base
instant, base file, log files), spreads the descriptors over tasks, and `mapInArrow` calls
`FileSliceMerge` on each and streams its pieces out, so a task holds at most one file slice's records, and no
more of them than the merge memory budget allows (hoodie.memory.compaction.max.size; beyond it the merge spills
to disk, storage.merge.spillable_map).
"""
from __future__ import annotations

import logging
from typing import Iterator, Sequence

import pyarrow as pa
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import types as T
from pyspark.sql.pandas.types import to_arrow_schema

from storage.read.file_slice_reader import FileSliceMerge, FileSliceReadContext
from storage.read.partition_values import PathPartitionValues
from storage.table.file_slice import FileSlice, HoodieBaseFile, HoodieFileGroupId, HoodieLogFile

log = logging.getLogger(__name__)

_BATCH_ROWS = 8192
DESCRIPTOR_SCHEMA = T.StructType([
    T.StructField("partition_path", T.StringType(), False),
    T.StructField("file_id", T.StringType(), False),
    T.StructField("base_instant", T.StringType(), False),
    T.StructField("base_file", T.StringType(), True),
    T.StructField("base_file_size", T.LongType(), True),
    T.StructField("log_files", T.ArrayType(T.StringType(), False), False),
    T.StructField("log_file_sizes", T.ArrayType(T.LongType(), False), False),
])


def slice_descriptor(s: FileSlice) -> tuple:
    logs = s.sorted_log_files()
    return (s.partition_path, s.file_id, s.base_instant,
            s.base_file.path if s.base_file else None, s.base_file.size if s.base_file else None,
            [lf.path for lf in logs], [lf.size for lf in logs])


def file_slice_of(row: dict) -> FileSlice:
    base = HoodieBaseFile.of(row["base_file"], row["base_file_size"] or 0) if row["base_file"] else None
    logs = [HoodieLogFile.of(p, n) for p, n in zip(row["log_files"], row["log_file_sizes"])]
    return FileSlice(HoodieFileGroupId(row["partition_path"], row["file_id"]), row["base_instant"], base, logs)


def merged_slices_frame(spark: SparkSession, slices: list[FileSlice], arrow_schema: pa.Schema,
                        spark_schema: T.StructType, ctx: FileSliceReadContext,
                        columns: Sequence[str] | None = None,
                        path_values: PathPartitionValues | None = None) -> DataFrame:
    """One DataFrame of the merged rows of `slices` (each merged by one Spark task); with `columns`, only
    those columns of `arrow_schema` (whose order they keep) are read, merged and returned; with
    `path_values`, the partition columns hold the values of each slice's partition path."""
    if columns is not None:
        wanted = set(columns)
        spark_schema = T.StructType([f for f in spark_schema.fields if f.name in wanted])
    rows = [slice_descriptor(s) for s in slices]
    parallelism = max(1, min(len(rows), spark.sparkContext.defaultParallelism * 4))
    descriptors = spark.createDataFrame(spark.sparkContext.parallelize(rows, parallelism), DESCRIPTOR_SCHEMA)
    out_schema = to_arrow_schema(spark_schema, timezone="UTC")
    merge = _merge_function(arrow_schema, out_schema, ctx, columns, path_values)
    return descriptors.mapInArrow(merge, spark_schema)


def _merge_function(arrow_schema: pa.Schema, out_schema: pa.Schema, ctx: FileSliceReadContext,
                    columns: Sequence[str] | None, path_values: PathPartitionValues | None):
    def merge(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        for batch in batches:
            for row in batch.to_pylist():  # one row per file slice, never per record
                for table in FileSliceMerge(file_slice_of(row), arrow_schema, ctx, columns):
                    if path_values is not None:
                        table = path_values.fill_arrow(table, row["partition_path"], out_schema.names)
                    table = _to_spark_arrow(table, out_schema)
                    yield from table.to_batches(max_chunksize=_BATCH_ROWS)

    return merge


def _to_spark_arrow(table: pa.Table, out_schema: pa.Schema) -> pa.Table:
    """The Arrow layout Spark expects for the declared schema (e.g. UTC timestamps, its map/list naming)."""
    table = table.rename_columns(out_schema.names)
    if table.schema.equals(out_schema, check_metadata=False):
        return table
    return table.cast(out_schema)
