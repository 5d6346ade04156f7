"""Spark DataFrames over a list of parquet files: Spark's own parquet reader where the JVM can reach them (local
paths, HDFS, or an object store whose Hadoop connector is on the classpath), else the files read with Arrow
through `HoodieStorage` inside Spark tasks (pyspark ships no Hadoop S3A/GCS connector).

Both give the same columns and types; the Arrow path reads only the columns asked for and spreads the files over
tasks, so the driver never touches the data.
"""
from __future__ import annotations

import logging
from typing import Iterator, Sequence

import pyarrow as pa
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql import types as T
from pyspark.sql.pandas.types import from_arrow_schema, to_arrow_schema

from storage.io.parquet import read_parquet, read_parquet_schema
from storage.io.storage import HoodieStorage
from storage.io.storage_location import LOCAL_SCHEMES, scheme_of
from storage.io.storage_options import StorageOptions
from storage.merge.schema_conform import conform_table

log = logging.getLogger(__name__)

_BATCH_ROWS = 65536


def jvm_can_read(spark: SparkSession, path: str) -> bool:
    """Whether Spark's Hadoop layer has a file system for `path`'s scheme."""
    scheme = scheme_of(path)
    return scheme in LOCAL_SCHEMES or _jvm_has_scheme(spark, scheme)


_JVM_SCHEMES: dict[tuple[str, str], bool] = {}


def _jvm_has_scheme(spark: SparkSession, scheme: str) -> bool:
    key = (spark.sparkContext.applicationId, scheme)
    if key not in _JVM_SCHEMES:
        try:
            conf = spark.sparkContext._jsc.hadoopConfiguration()
            spark.sparkContext._jvm.org.apache.hadoop.fs.FileSystem.getFileSystemClass(scheme, conf)
            _JVM_SCHEMES[key] = True
        except Exception:  # noqa: BLE001 - py4j wraps Hadoop's UnsupportedFileSystemException
            _JVM_SCHEMES[key] = False
    return _JVM_SCHEMES[key]


def scan_parquet(spark: SparkSession, files: Sequence[str], schema: T.StructType | None,
                 storage_options: StorageOptions, file_name_column: str | None = None) -> DataFrame:
    """The rows of `files` with `schema` (None: the first file's). `file_name_column` adds each row's file name
    (as Spark's `_metadata.file_name`)."""
    if jvm_can_read(spark, files[0]):
        reader = spark.read.schema(schema) if schema is not None else spark.read
        df = reader.parquet(*files)
        if file_name_column:
            df = df.withColumn(file_name_column, F.col("_metadata.file_name"))
        return df
    return _arrow_scan(spark, list(files), schema, storage_options, file_name_column)


def _arrow_scan(spark: SparkSession, files: list[str], schema: T.StructType | None, options: StorageOptions,
                file_name_column: str | None) -> DataFrame:
    if schema is None:
        schema = from_arrow_schema(read_parquet_schema(HoodieStorage.for_path(files[0], options), files[0]),
                                   prefer_timestamp_ntz=False)
    out = T.StructType(schema.fields + ([T.StructField(file_name_column, T.StringType())] if file_name_column else []))
    arrow_out = to_arrow_schema(out, timezone="UTC")
    parallelism = max(1, min(len(files), spark.sparkContext.defaultParallelism * 4))
    paths = spark.createDataFrame(spark.sparkContext.parallelize([(f,) for f in files], parallelism), "path string")
    log.debug("arrow scan of %d files (%s)", len(files), scheme_of(files[0]))
    return paths.mapInArrow(_reader(arrow_out, options, file_name_column), out)


def _reader(arrow_out: pa.Schema, options: StorageOptions, file_name_column: str | None):
    data_schema = pa.schema([f for f in arrow_out if f.name != file_name_column])

    def read(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        for batch in batches:
            for path in batch.column(0).to_pylist():  # one row per file
                table = conform_table(read_parquet(HoodieStorage.for_path(path, options), path, data_schema.names),
                                      data_schema, path)
                if file_name_column:
                    table = table.append_column(file_name_column,
                                                pa.array([path.rsplit("/", 1)[-1]] * table.num_rows, pa.string()))
                yield from table.cast(arrow_out).to_batches(max_chunksize=_BATCH_ROWS)

    return read
