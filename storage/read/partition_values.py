"""Partition column values taken from partition paths instead of the data files (Hudi's partition schema).

Every data file stores the partition columns, so a read takes them from the files, typed as the table schema
says (a timestamp key generator's BIGINT source column stays BIGINT). The values come from the partition path
instead when `hoodie.datasource.read.extract.partition.values.from.path=true` or when the files do not store
them (`hoodie.datasource.write.drop.partition.columns=true`), as in Java Hudi's Spark reader:

- a field a timestamp key generator formats (TIMESTAMP, CUSTOM `f:timestamp`) reads as a string: the path
  value, e.g. `2024/01/15/10` (the source column's value is not in the path);
- any other field keeps the table schema's type, parsed from its path segment;
- `__HIVE_DEFAULT_PARTITION__` is null, and url-encoded paths are decoded.

The driver computes each partition's typed values once; Spark scans get them through a broadcast join on the
file name, merged file slices set them as constant columns.
"""
from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any, Sequence
from urllib.parse import unquote

import pyarrow as pa
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.pandas.types import from_arrow_schema

from storage.arrow_util import constant_array
from storage.engine.spark_columns import select_names
from storage.config import HoodieConfig, ReadConfigKeys as RK, TableConfigKeys as TK
from storage.exception import HoodieReadError
from storage.fs_utils import relative_partition_path
from storage.keygen.key_generator import (
    HIVE_DEFAULT_PARTITION,
    partition_values_from_path,
    resolve_keygen_type,
    timestamp_partition_fields,
)
from storage.table.meta_client import HoodieTableMetaClient

log = logging.getLogger(__name__)

FILE_KEY = "_hoodie_read_file_name"  # the join key of Spark scans: the base file's name


@dataclass(frozen=True)
class PathPartitionValues:
    """The partition columns a read takes from partition paths, with the types they are read as."""

    base_path: str
    table_fields: tuple[str, ...]  # every partition field, in path order (`f:type` specs as configured)
    hive_style: bool
    url_encoded: bool
    fields: tuple[pa.Field, ...]

    @classmethod
    def for_read(cls, meta: HoodieTableMetaClient, schema: pa.Schema,
                 config: HoodieConfig) -> "PathPartitionValues | None":
        """None when the partition columns come from the data files (the default)."""
        table = meta.table_config
        partition_fields = table.partition_fields
        dropped = table.get(TK.DROP_PARTITION_COLUMNS)
        if not partition_fields or not (config.get(RK.EXTRACT_PARTITION_VALUES_FROM_PATH) or dropped):
            return None
        keygen = resolve_keygen_type(table.keygen_class, table.record_key_fields, partition_fields)
        formatted = set(timestamp_partition_fields(keygen, partition_fields))
        fields = []
        for name in (f.partition(":")[0] for f in partition_fields):
            stored = schema.field(name).type if name in schema.names else None
            fields.append(pa.field(name, pa.string() if name in formatted or stored is None else stored))
        log.info("partition columns %s of %s come from the partition paths", [f.name for f in fields], meta.base_path)
        return cls(meta.base_path, tuple(partition_fields), table.hive_style_partitioning,
                   table.url_encode_partitioning, tuple(fields))

    @property
    def names(self) -> list[str]:
        return [f.name for f in self.fields]

    def read_schema(self, schema: pa.Schema) -> pa.Schema:
        """`schema` with the path columns' types (columns the schema lacks come last, as Hudi appends them)."""
        for f in self.fields:
            schema = schema.set(schema.get_field_index(f.name), f) if f.name in schema.names else schema.append(f)
        return schema

    # -- values ----------------------------------------------------------------------------------
    def values(self, partition_path: str) -> list[Any]:
        """The typed values of the path columns for one partition path."""
        texts = partition_values_from_path(partition_path, list(self.table_fields), self.hive_style)
        if not texts and partition_path:
            raise HoodieReadError(
                f"partition path {partition_path!r} of {self.base_path} does not map onto the partition fields "
                f"{list(self.table_fields)}, so {RK.EXTRACT_PARTITION_VALUES_FROM_PATH.key} cannot be used")
        return [self._typed(f, texts.get(f.name), partition_path) for f in self.fields]

    def _typed(self, field: pa.Field, text: str | None, partition_path: str) -> Any:
        if text is None or text == HIVE_DEFAULT_PARTITION:
            return None
        if self.url_encoded:
            text = unquote(text)
        try:
            return pa.array([text], pa.string()).cast(field.type)[0].as_py()
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as exc:
            raise HoodieReadError(f"partition column {field.name!r}: value {text!r} of partition path "
                                  f"{partition_path!r} in {self.base_path} is not a {field.type}: {exc}") from None

    def fill_arrow(self, table: pa.Table, partition_path: str, columns: Sequence[str]) -> pa.Table:
        """`columns` of `table` (rows of one partition), the path columns among them holding the partition's
        values."""
        for f, value in zip(self.fields, self.values(partition_path)):
            if f.name not in columns:
                continue
            column = pa.nulls(table.num_rows, f.type) if value is None else constant_array(value, table.num_rows, f.type)
            if f.name in table.column_names:
                table = table.set_column(table.column_names.index(f.name), f, column)
            else:
                table = table.append_column(f, column)
        return table.select(list(columns))

    def fill_frame(self, spark: SparkSession, df: DataFrame, files: Sequence[str],
                   columns: Sequence[str]) -> DataFrame:
        """`df` (a scan of `files` carrying FILE_KEY) with the path columns joined in; `columns` in order."""
        rows, by_partition = [], {}
        for path in files:
            directory, name = path.rsplit("/", 1)
            partition = relative_partition_path(self.base_path, directory)
            if partition not in by_partition:
                by_partition[partition] = self.values(partition)
            rows.append((name, *by_partition[partition]))
        schema = from_arrow_schema(pa.schema([pa.field(FILE_KEY, pa.string()), *self.fields]),
                                   prefer_timestamp_ntz=False)
        lookup = spark.createDataFrame(rows, schema)
        joined = df.drop(*[n for n in self.names if n in df.columns]).join(F.broadcast(lookup), FILE_KEY, "left")
        return select_names(joined, columns)
