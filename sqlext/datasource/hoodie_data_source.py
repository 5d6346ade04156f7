"""Hudi as a PySpark Python data source (`spark.dataSource.register(HoodieDataSource)`): `format("hudi")` in
any SparkSession, no `sqlext.session()` needed.

Reads: the data source's planning (in a Python worker next to the driver) loads the timeline and picks the
file slices of the query (snapshot, read-optimized or `as.of.instant`); each Spark task reads its file slices
as Arrow batches through storage's file slice reader (base file merged with its logs). This path has no Spark
parquet scan: every byte goes through Arrow in Python workers. Sessions made by `sqlext.session()` (or after
`sqlext.datasource.register(spark)`) take the native path instead (storage.read.read_table: Spark's parquet
reader for base-only slices).

Writes: a Hudi write needs Spark jobs (dedup, index lookup, shuffle to file groups), which a Python data
source's writer cannot start: its tasks and its commit run in Python workers without a session. So the
DataFrame writer routes `save` / `saveAsTable` / `insertInto` / `writeTo` on the driver
(sqlext.datasource.routing, installed by `register`), and this writer only refuses, naming the fix.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Iterator

import pyarrow as pa
from pyspark.sql.datasource import DataSource, DataSourceReader, DataSourceWriter, InputPartition
from pyspark.sql.pandas.types import from_arrow_schema, to_arrow_schema
from pyspark.sql.types import StructType

from storage.exception import HoodieReadError, HoodieWriteError

# the fields of storage.read.mor_scan.slice_descriptor, in its order
_DESCRIPTOR_KEYS = ("partition_path", "file_id", "base_instant", "base_file", "base_file_size", "log_files",
                    "log_file_sizes")
_BATCH_ROWS = 64 * 1024


@dataclass(frozen=True)
class FileSlicePartition(InputPartition):
    """The file slices one task reads (as (partition_path, file_id, base file, log files) descriptors)."""

    slices: tuple


class HoodieDataSource(DataSource):
    @classmethod
    def name(cls) -> str:
        return "hudi"

    def _path(self) -> str:
        path = self.options.get("path")
        if not path:
            raise HoodieReadError("format('hudi') needs a path: load(path) / save(path)")
        return path

    def schema(self) -> StructType:
        from storage.config import validate_options

        # once per read (Spark asks the schema once; the reader plans again): unknown keys warn, strict fails.
        # This runs in a Python worker: its warnings go to the worker's log
        validate_options(dict(self.options), f"read of {self._path()}")
        plan = _ReadPlan.of(self._path(), dict(self.options))
        return from_arrow_schema(plan.arrow_schema, prefer_timestamp_ntz=False)

    def reader(self, schema: StructType) -> DataSourceReader:
        return HoodieDataSourceReader(self._path(), dict(self.options), schema)

    def writer(self, schema: StructType, overwrite: bool) -> DataSourceWriter:
        raise HoodieWriteError(
            "writing format('hudi') through Spark's Python data source path is not supported: a Hudi write runs "
            "Spark jobs from the driver. Call sqlext.datasource.register(spark) once in this session (or use "
            "sqlext.session()); then df.write.format('hudi')...save(path), saveAsTable, insertInto and writeTo "
            "run the Hudi write client")


class HoodieDataSourceReader(DataSourceReader):
    def __init__(self, path: str, options: dict[str, str], schema: StructType):
        self.path, self.options, self.schema = path, options, schema

    def partitions(self) -> list[FileSlicePartition]:
        from storage.read.mor_scan import slice_descriptor

        plan = _ReadPlan.of(self.path, self.options)
        return [FileSlicePartition((slice_descriptor(s),)) for s in plan.slices] or [FileSlicePartition(())]

    def read(self, partition: FileSlicePartition) -> Iterator[pa.RecordBatch]:
        from storage.read.file_slice_reader import read_file_slice
        from storage.read.mor_scan import file_slice_of

        plan = _ReadPlan.of(self.path, self.options, plan_slices=False)
        out_schema = to_arrow_schema(self.schema, timezone="UTC")
        for descriptor in partition.slices:
            table = read_file_slice(file_slice_of(dict(zip(_DESCRIPTOR_KEYS, descriptor))), plan.arrow_schema, plan.context)
            table = table.rename_columns(out_schema.names)
            if not table.schema.equals(out_schema, check_metadata=False):
                table = table.cast(out_schema)
            yield from table.to_batches(max_chunksize=_BATCH_ROWS)


@dataclass
class _ReadPlan:
    """What a read of `path` needs, computed without Spark: the table schema (meta columns first), the file
    slices of the query and the file slice read context."""

    arrow_schema: pa.Schema
    slices: list
    context: object

    @classmethod
    def of(cls, path: str, options: dict[str, str], plan_slices: bool = True) -> "_ReadPlan":
        from storage.config import HoodieConfig
        from storage.config import ReadConfigKeys as RK
        from storage.io.storage import HoodieStorage
        from storage.io.storage_location import normalize_base_path
        from storage.io.storage_options import session_storage_options
        from storage.meta_fields import with_meta_columns
        from storage.read.file_slice_reader import FileSliceReadContext
        from storage.read.reader import file_slices_to_read
        from storage.table.meta_client import HoodieTableMetaClient
        from storage.table.schema_resolver import table_data_schema
        from storage.timeline.instant_time import normalize_instant_time

        config = HoodieConfig.of(options)
        query_type = (config.get(RK.QUERY_TYPE) or "snapshot").lower()
        if query_type not in ("snapshot", "read_optimized"):
            raise HoodieReadError(f"query type {query_type!r} ({RK.QUERY_TYPE.key}) is not available "
                                  "through the Python data source; use sqlext.datasource.register(spark) or "
                                  "sqlext.session(), whose reader supports incremental queries")
        base = normalize_base_path(path)
        meta = HoodieTableMetaClient.load(base, HoodieStorage.for_path(base, session_storage_options(None, config)))
        as_of = config.get(RK.AS_OF_INSTANT)
        as_of = normalize_instant_time(as_of) if as_of else None
        schema = table_data_schema(meta, as_of, None)
        if schema is None:
            raise HoodieReadError(f"table {meta.base_path} has no schema (no completed commit carries one)")
        slices = file_slices_to_read(meta, config) if plan_slices else []
        return cls(with_meta_columns(schema), slices, FileSliceReadContext.for_table(meta, as_of, config))
