"""Hudi's `HiveSchemaUtil` and `SparkDataSourceTableUtils`: a table's schema as Hive columns and as the
Spark data source properties, and the difference between a metastore table and the Hudi table.

Columns come from the table's current schema (latest commit, else create schema) with the meta columns
first, as Java Hudi syncs them. Type changes are accepted only when they widen (Hive's readers then read
old files fine): int -> bigint, float -> double, decimal precision increase with the same scale, and the
small ints to bigger ones. Anything else raises `HiveSyncSchemaError` naming the column.
"""
from __future__ import annotations

import json
import re
from dataclasses import dataclass, field

import pyarrow as pa
from pyspark.sql.pandas.types import from_arrow_schema
from pyspark.sql.types import (
    ArrayType,
    DataType,
    MapType,
    StructType,
    TimestampNTZType,
    TimestampType,
)

from storage.meta_fields import META_COLUMNS, with_meta_columns
from storage.config import SparkSqlConfigKeys as SK
from storage.exception import HoodieError


class HiveSyncSchemaError(HoodieError, ValueError):
    """The table's schema cannot be synced (an incompatible type change)."""


@dataclass(frozen=True)
class HiveColumn:
    name: str
    type: str


def table_schema(meta) -> pa.Schema | None:
    """The data schema to publish for a table (storage.table.schema_resolver's current schema), without the
    `_hoodie_is_deleted` column the engine adds on its own when the table never declared it."""
    from storage.meta_fields import IS_DELETED
    from storage.table.schema_resolver import table_data_schema

    schema = table_data_schema(meta)
    if schema is None or IS_DELETED not in schema.names:
        return schema
    create = meta.table_config.create_schema or ""
    if f'"{IS_DELETED}"' in create:
        return schema
    return schema.remove(schema.get_field_index(IS_DELETED))


def spark_schema(data_schema: pa.Schema, partition_fields: list[str], *, omit_meta: bool = False) -> StructType:
    """The Spark schema Hudi records in `spark.sql.sources.schema.*`: meta columns, data columns, then the
    partition columns (moved last, as Spark expects of a partitioned data source table)."""
    full = data_schema if omit_meta else with_meta_columns(data_schema)
    struct = from_arrow_schema(full, prefer_timestamp_ntz=False)
    lower = [p.lower() for p in partition_fields]
    data = [f for f in struct.fields if f.name.lower() not in lower]
    parts = [next(f for f in struct.fields if f.name.lower() == p) for p in lower
             if any(f.name.lower() == p for f in struct.fields)]
    return StructType(data + parts)


def hive_type(dtype: DataType, support_timestamp: bool = True) -> str:
    """Hive's type string for a Spark type (`HiveSchemaUtil.convertField` for the Parquet Spark writes)."""
    if isinstance(dtype, (TimestampType, TimestampNTZType)):
        # timestamp-micros without hive_sync.support_timestamp is synced as its physical long
        return "timestamp" if support_timestamp else "bigint"
    if isinstance(dtype, StructType):
        inner = ",".join(f"{_quote(f.name)}:{hive_type(f.dataType, support_timestamp)}" for f in dtype.fields)
        return f"struct<{inner}>"
    if isinstance(dtype, ArrayType):
        return f"array<{hive_type(dtype.elementType, support_timestamp)}>"
    if isinstance(dtype, MapType):
        return f"map<{hive_type(dtype.keyType, support_timestamp)},{hive_type(dtype.valueType, support_timestamp)}>"
    return dtype.simpleString()


def _quote(name: str) -> str:
    return name if re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", name) else f"`{name}`"


def hive_columns(schema: StructType, partition_fields: list[str], support_timestamp: bool = True
                 ) -> tuple[list[HiveColumn], list[HiveColumn]]:
    """(data columns, partition columns) for the metastore; a partition field not in the schema is a string
    (as `HiveSchemaUtil.getPartitionKeyType` does)."""
    by_name = {f.name.lower(): f for f in schema.fields}
    lower = [p.lower() for p in partition_fields]
    data = [HiveColumn(f.name.lower(), hive_type(f.dataType, support_timestamp)) for f in schema.fields
            if f.name.lower() not in lower]
    parts = []
    for p in partition_fields:
        f = by_name.get(p.lower())
        parts.append(HiveColumn(p.lower(), hive_type(f.dataType, support_timestamp) if f else "string"))
    return data, parts


def spark_table_properties(schema: StructType, partition_fields: list[str], threshold: int,
                           spark_version: str | None = None) -> dict[str, str]:
    """`SparkDataSourceTableUtils.getSparkTableProperties`: provider and the schema JSON split in parts."""
    props = {"spark.sql.sources.provider": "hudi"}
    if spark_version:
        props["spark.sql.create.version"] = spark_version
    text = json.dumps(schema.jsonValue(), separators=(",", ":"))
    threshold = max(1, threshold)
    parts = [text[i:i + threshold] for i in range(0, len(text), threshold)] or [""]
    props["spark.sql.sources.schema.numParts"] = str(len(parts))
    for i, part in enumerate(parts):
        props[f"spark.sql.sources.schema.part.{i}"] = part
    if partition_fields:
        props["spark.sql.sources.schema.numPartCols"] = str(len(partition_fields))
        for i, name in enumerate(partition_fields):
            props[f"spark.sql.sources.schema.partCol.{i}"] = name
    return props


def spark_serde_properties(read_as_optimized: bool, base_path: str) -> dict[str, str]:
    """`SparkDataSourceTableUtils.getSparkSerdeProperties`."""
    return {"path": base_path, SK.QUERY_AS_RO_TABLE.key: str(read_as_optimized).lower()}


def spark_schema_from_properties(params: dict[str, str]) -> StructType | None:
    parts = params.get("spark.sql.sources.schema.numParts")
    if not parts:
        return None
    text = "".join(params.get(f"spark.sql.sources.schema.part.{i}", "") for i in range(int(parts)))
    return StructType.fromJson(json.loads(text))


# -- schema difference -------------------------------------------------------------------------------
@dataclass
class SchemaDifference:
    """`SchemaDifference`: what separates the metastore columns from the table's."""

    added: list[HiveColumn] = field(default_factory=list)
    updated: list[tuple[HiveColumn, str]] = field(default_factory=list)  # (new column, old type)
    deleted: list[str] = field(default_factory=list)

    def is_empty(self) -> bool:
        return not (self.added or self.updated or self.deleted)


def schema_difference(table_name: str, expected: list[HiveColumn], current: list[HiveColumn]) -> SchemaDifference:
    """Compare data columns (partition columns excluded); raise on a type change Hive cannot read."""
    have = {c.name.lower(): c.type.lower() for c in current}
    diff = SchemaDifference()
    for col in expected:
        old = have.get(col.name.lower())
        if old is None:
            diff.added.append(col)
        elif _normalize(old) != _normalize(col.type):
            if not is_widening(old, col.type):
                raise HiveSyncSchemaError(
                    f"cannot sync column '{col.name}' of {table_name}: type {old} -> {col.type} is not an allowed "
                    "change (allowed: int -> bigint, float -> double, decimal precision increase, added columns)")
            diff.updated.append((col, old))
    wanted = {c.name.lower() for c in expected}
    diff.deleted = [c.name for c in current if c.name.lower() not in wanted]
    return diff


_INT_RANK = {"tinyint": 1, "smallint": 2, "int": 3, "bigint": 4}
_DECIMAL = re.compile(r"decimal\((\d+),\s*(\d+)\)")


def _normalize(t: str) -> str:
    return re.sub(r"\s+", "", t.lower()).replace("integer", "int")


def is_widening(old: str, new: str) -> bool:
    """Whether `old` -> `new` is a type change Hive readers accept for existing files."""
    old, new = _normalize(old), _normalize(new)
    if old in _INT_RANK and new in _INT_RANK:
        return _INT_RANK[new] > _INT_RANK[old]
    if old == "float" and new == "double":
        return True
    if old in _INT_RANK and new == "double":
        return True
    a, b = _DECIMAL.fullmatch(old), _DECIMAL.fullmatch(new)
    if a and b:
        (p1, s1), (p2, s2) = map(int, a.groups()), map(int, b.groups())
        return s2 >= s1 and (p2 - s2) >= (p1 - s1) and (p2, s2) != (p1, s1)
    return False


def is_meta_column(name: str) -> bool:
    return name in META_COLUMNS
