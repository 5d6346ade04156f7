"""Base files through Spark's own parquet reader, in the read schema's types.

Spark's parquet reader cannot read a column stored with another type than the one requested (INT64 as a
string, a string as BIGINT). Java Hudi 1.x writes exactly that for a timestamp key generator's partition
column: its SQL UPDATE / DELETE store the column as a string in the files they rewrite, while the files of
earlier inserts hold the BIGINT. For such columns the files are grouped by the type their writer stored
(the writer schema in the commit metadata of the instant that wrote the file; the footer of one of its files
when that commit has none), each group is scanned with its stored types and cast to the read schema's, and
the groups are unioned. Other tables are scanned in one go, without reading any commit metadata.
"""
from __future__ import annotations

import functools
import json
import logging
from typing import Sequence

import pyarrow as pa
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.pandas.types import from_arrow_schema

from storage.engine.spark_columns import quote, select_names
from storage.fs_utils import parse_base_file_name
from storage.io.parquet import read_parquet_schema
from storage.keygen.key_generator import resolve_keygen_type, timestamp_partition_fields
from storage.read.parquet_scan import scan_parquet
from storage.read.partition_values import FILE_KEY, PathPartitionValues
from storage.table.meta_client import HoodieTableMetaClient

log = logging.getLogger(__name__)


def scan_base_files(spark: SparkSession, meta: HoodieTableMetaClient, files: Sequence[str], schema: pa.Schema,
                    path_values: PathPartitionValues | None = None) -> DataFrame:
    """The rows of `files` with the columns of `schema` (meta columns included), partition columns from the
    paths when `path_values` says so (then typed as `path_values.read_schema(schema)`)."""
    from_path = set(path_values.names) if path_values else set()
    file_schema = pa.schema([f for f in schema if f.name not in from_path])
    groups = _stored_schema_groups(meta, files, file_schema)
    frames = [_scan(spark, meta, group_files, stored, file_schema, path_values is not None)
              for stored, group_files in groups]
    df = functools.reduce(DataFrame.unionByName, frames)
    if path_values is None:
        return df
    return path_values.fill_frame(spark, df, files, path_values.read_schema(schema).names)


def _scan(spark: SparkSession, meta: HoodieTableMetaClient, files: Sequence[str], stored: pa.Schema,
          schema: pa.Schema, with_file_key: bool) -> DataFrame:
    df = scan_parquet(spark, files, from_arrow_schema(stored, prefer_timestamp_ntz=False), meta.storage_options,
                      file_name_column=FILE_KEY if with_file_key else None)
    names = schema.names + ([FILE_KEY] if with_file_key else [])
    if stored == schema:
        return select_names(df, names)
    wanted = from_arrow_schema(schema, prefer_timestamp_ntz=False)
    columns = [F.col(quote(f.name)) if stored.field(f.name).type == schema.field(f.name).type
               else F.col(quote(f.name)).cast(wanted[f.name].dataType).alias(f.name) for f in schema]
    if with_file_key:
        columns.append(F.col(quote(FILE_KEY)))
    return df.select(*columns)


def _stored_schema_groups(meta: HoodieTableMetaClient, files: Sequence[str],
                          schema: pa.Schema) -> list[tuple[pa.Schema, list[str]]]:
    """`files` grouped by the schema their writers stored (`schema` with the stored types of the columns
    whose writers may have disagreed with the table)."""
    checked = [n for n in _timestamp_partition_columns(meta) if n in schema.names]
    if not checked:
        return [(schema, list(files))]
    by_instant: dict[str, list[str]] = {}
    for path in files:
        parsed = parse_base_file_name(path.rsplit("/", 1)[-1])
        by_instant.setdefault(parsed.instant_time if parsed else "", []).append(path)
    groups: dict[tuple[str, ...], tuple[pa.Schema, list[str]]] = {}
    for instant, paths in by_instant.items():
        stored = _writer_types(meta, instant, paths[0], checked)
        variant = schema
        for name, dtype in stored.items():
            variant = variant.set(variant.get_field_index(name), pa.field(name, dtype))
        key = tuple(str(variant.field(n).type) for n in checked)
        groups.setdefault(key, (variant, []))[1].extend(paths)
    if len(groups) > 1:
        log.info("%s: columns %s are stored with different types in different files (%s); scanning each kind",
                 meta.base_path, checked, sorted(groups))
    return list(groups.values())


def _timestamp_partition_columns(meta: HoodieTableMetaClient) -> list[str]:
    config = meta.table_config
    keygen = resolve_keygen_type(config.keygen_class, config.record_key_fields, config.partition_fields)
    return timestamp_partition_fields(keygen, config.partition_fields)


def _writer_types(meta: HoodieTableMetaClient, instant_time: str, sample: str,
                  columns: Sequence[str]) -> dict[str, pa.DataType]:
    """The types the writer of `instant_time` stored `columns` with (those it stored at all)."""
    written = _writer_schema(meta, instant_time) or read_parquet_schema(meta.storage, sample)
    return {n: written.field(n).type for n in columns if n in written.names}


def _writer_schema(meta: HoodieTableMetaClient, instant_time: str) -> pa.Schema | None:
    from storage.avro.schema_converter import avro_to_arrow_schema

    instant = meta.timeline.completed().find(instant_time)
    avro = meta.active_timeline.commit_schema(instant) if instant is not None else None
    return avro_to_arrow_schema(json.loads(avro)) if avro else None
