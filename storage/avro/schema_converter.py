"""Conversion between pyarrow schemas and the Avro schemas Java Hudi writes for a Spark-written table.

Java Hudi derives the table's Avro schema from the Spark schema with spark-avro's `SchemaConverters.toAvroType`
and stores it in two flavours (both verified on every fixture table):

* commit style (`extraMetadata.schema` of commits, log-block SCHEMA headers, `parquet.avro.schema`):
  every field is the union ``["null", T]`` with ``"default": null``; array items and map values are
  ``["null", T]`` too;
* create style (`hoodie.table.create.schema` in hoodie.properties): the raw spark-avro output, i.e. the union
  ``[T, "null"]`` and no defaults.

Naming follows spark-avro: the top-level record is ``<table>_record`` in namespace ``hoodie.<table>``; a struct
field becomes a record named after the field, in the namespace ``<enclosing record full name>``; structs inside
arrays and maps take the name of the field holding the array/map; decimals become a ``fixed`` named ``fixed`` in
namespace ``<enclosing record full name>.<field>`` with the minimum byte size for the precision.
"""
from __future__ import annotations

import copy
import json
import logging
from dataclasses import dataclass
from typing import Any

import pyarrow as pa

logger = logging.getLogger(__name__)

AvroSchema = dict[str, Any] | list[Any] | str

META_FIELD_NAMES: tuple[str, ...] = (
    "_hoodie_commit_time",
    "_hoodie_commit_seqno",
    "_hoodie_record_key",
    "_hoodie_partition_path",
    "_hoodie_file_name",
)

# Java's HoodieAvroUtils adds the meta columns with an empty doc and a null default, before the data fields.
META_FIELDS: tuple[dict[str, Any], ...] = tuple(
    {"name": name, "type": ["null", "string"], "doc": "", "default": None} for name in META_FIELD_NAMES
)

_MAX_DECIMAL128_PRECISION = 38


@dataclass(frozen=True)
class _Style:
    """How nullable types are spelled: commit style (null first, default null) or create style (null last)."""

    null_first: bool
    with_defaults: bool


_COMMIT_STYLE = _Style(null_first=True, with_defaults=True)
_CREATE_STYLE = _Style(null_first=False, with_defaults=False)


# ----------------------------------------------------------------------------------------------- names


def record_name(table_name: str) -> str:
    """Name of the top-level record Java gives a table's schema."""
    return f"{table_name}_record"


_NAMESPACE_PREFIX = "hoodie."  # of the top-level record's namespace (no config key)


def record_namespace(table_name: str) -> str:
    """Namespace of the top-level record Java gives a table's schema."""
    return f"{_NAMESPACE_PREFIX}{table_name}"


def min_bytes_for_precision(precision: int) -> int:
    """Smallest fixed size that holds any unscaled decimal of `precision` digits (two's complement)."""
    size = 1
    while 2 ** (8 * size - 1) < 10**precision:
        size += 1
    return size


# ----------------------------------------------------------------------------------------------- arrow -> avro


def arrow_to_avro_schema(schema: pa.Schema, table_name: str, *, force_nullable: bool = True) -> dict[str, Any]:
    """Avro schema of `schema` as Java Hudi writes it in commit metadata (`extraMetadata.schema`).

    `force_nullable` (default) makes every field, array item and map value nullable, as Spark SQL tables are;
    with False, arrow's nullability is kept (a non-nullable field is a plain type without default).
    """
    return _record_schema(schema, table_name, _COMMIT_STYLE, force_nullable)


def arrow_to_create_schema(schema: pa.Schema, table_name: str, *, force_nullable: bool = True) -> dict[str, Any]:
    """Avro schema of `schema` as Java Hudi writes it in `hoodie.table.create.schema` (spark-avro raw form)."""
    return _record_schema(schema, table_name, _CREATE_STYLE, force_nullable)


def _record_schema(schema: pa.Schema, table_name: str, style: _Style, force_nullable: bool) -> dict[str, Any]:
    name, namespace = record_name(table_name), record_namespace(table_name)
    fields = _fields(list(schema), f"{namespace}.{name}", style, force_nullable)
    return {"type": "record", "name": name, "namespace": namespace, "fields": fields}


def _fields(arrow_fields: list[pa.Field], namespace: str, style: _Style, force_nullable: bool) -> list[dict]:
    return [_field(f, namespace, style, force_nullable) for f in arrow_fields]


def _field(field: pa.Field, namespace: str, style: _Style, force_nullable: bool) -> dict[str, Any]:
    nullable = force_nullable or field.nullable
    avro_type = _type(field.type, field.name, namespace, style, force_nullable)
    out: dict[str, Any] = {"name": field.name, "type": _maybe_nullable(avro_type, nullable, style)}
    if style.with_defaults and (nullable or avro_type == "null"):
        out["default"] = None
    return out


def _maybe_nullable(avro_type: AvroSchema, nullable: bool, style: _Style) -> AvroSchema:
    # spark-avro never wraps NullType in a union
    if not nullable or avro_type == "null":
        return avro_type
    return ["null", avro_type] if style.null_first else [avro_type, "null"]


def _type(dtype: pa.DataType, field_name: str, namespace: str, style: _Style, force_nullable: bool) -> AvroSchema:
    """Avro type of one arrow type; `field_name`/`namespace` name the records and fixeds it creates."""
    if pa.types.is_dictionary(dtype):
        return _type(dtype.value_type, field_name, namespace, style, force_nullable)
    primitive = _primitive(dtype)
    if primitive is not None:
        return primitive
    if pa.types.is_decimal(dtype):
        return _decimal(dtype, field_name, namespace)
    if pa.types.is_struct(dtype):
        children = _fields(list(dtype), f"{namespace}.{field_name}", style, force_nullable)
        return {"type": "record", "name": field_name, "namespace": namespace, "fields": children}
    if pa.types.is_list(dtype) or pa.types.is_large_list(dtype) or pa.types.is_fixed_size_list(dtype):
        return _array(dtype.value_field, field_name, namespace, style, force_nullable)
    if pa.types.is_map(dtype):
        return _map(dtype, field_name, namespace, style, force_nullable)
    raise ValueError(f"field {field_name!r}: arrow type {dtype} has no Spark/Avro equivalent")


def _primitive(dtype: pa.DataType) -> AvroSchema | None:
    """Avro spelling of arrow's scalar types as Spark has them; None for a nested or decimal type."""
    if pa.types.is_null(dtype):
        return "null"
    if pa.types.is_boolean(dtype):
        return "boolean"
    if pa.types.is_int8(dtype) or pa.types.is_int16(dtype) or pa.types.is_int32(dtype):
        return "int"  # Spark ByteType/ShortType are written as Avro int
    if pa.types.is_int64(dtype):
        return "long"
    if pa.types.is_float32(dtype):
        return "float"
    if pa.types.is_float64(dtype):
        return "double"
    if pa.types.is_string(dtype) or pa.types.is_large_string(dtype) or _is_string_view(dtype):
        return "string"
    if pa.types.is_binary(dtype) or pa.types.is_large_binary(dtype) or pa.types.is_fixed_size_binary(dtype):
        return "bytes"
    if pa.types.is_date(dtype):
        return {"type": "int", "logicalType": "date"}
    if pa.types.is_timestamp(dtype):
        return _timestamp(dtype)
    return None


def _is_string_view(dtype: pa.DataType) -> bool:
    is_view = getattr(pa.types, "is_string_view", None)
    return bool(is_view and is_view(dtype))


def _timestamp(dtype: pa.TimestampType) -> dict[str, str]:
    """Spark has microsecond timestamps only: TimestampType (with zone) and TimestampNTZType (without)."""
    if dtype.unit == "ms":
        logical = "timestamp-millis" if dtype.tz is not None else "local-timestamp-millis"
    else:
        if dtype.unit in ("s", "ns"):
            logger.debug("timestamp unit %s is written as microseconds (Spark's only precision)", dtype.unit)
        logical = "timestamp-micros" if dtype.tz is not None else "local-timestamp-micros"
    return {"type": "long", "logicalType": logical}


def _decimal(dtype: pa.Decimal128Type, field_name: str, namespace: str) -> dict[str, Any]:
    return {
        "type": "fixed",
        "name": "fixed",
        "namespace": f"{namespace}.{field_name}",
        "size": min_bytes_for_precision(dtype.precision),
        "logicalType": "decimal",
        "precision": dtype.precision,
        "scale": dtype.scale,
    }


def _array(item: pa.Field, field_name: str, namespace: str, style: _Style, force_nullable: bool) -> dict[str, Any]:
    item_type = _type(item.type, field_name, namespace, style, force_nullable)
    return {"type": "array", "items": _maybe_nullable(item_type, force_nullable or item.nullable, style)}


def _map(dtype: pa.MapType, field_name: str, namespace: str, style: _Style, force_nullable: bool) -> dict[str, Any]:
    if _primitive(dtype.key_type) != "string":
        raise ValueError(f"field {field_name!r}: Avro maps need string keys, got {dtype.key_type}")
    item = dtype.item_field
    value_type = _type(item.type, field_name, namespace, style, force_nullable)
    return {"type": "map", "values": _maybe_nullable(value_type, force_nullable or item.nullable, style)}


# ----------------------------------------------------------------------------------------------- avro -> arrow


def avro_to_arrow_schema(avro: dict[str, Any] | str) -> pa.Schema:
    """Arrow schema of an Avro record schema (dict or JSON text); every field is nullable.

    Accepts both the commit and the create style; the meta columns, if present, are kept as string columns.
    """
    record = json.loads(avro) if isinstance(avro, str) else avro
    if not isinstance(record, dict) or record.get("type") != "record":
        raise ValueError("expected an Avro record schema")
    named: dict[str, dict[str, Any]] = {}
    _register_named(record, None, named)
    return pa.schema([_arrow_field(f, named, _record_ns(record, None)) for f in record["fields"]])


def _record_ns(schema: dict[str, Any], enclosing_ns: str | None) -> str | None:
    """The namespace a named Avro type lives in (explicit, from a dotted name, or inherited)."""
    name = schema.get("name", "")
    if "." in name:
        return name.rsplit(".", 1)[0]
    return schema.get("namespace", enclosing_ns)


def _full_name(schema: dict[str, Any], enclosing_ns: str | None) -> str:
    name = schema["name"]
    if "." in name:
        return name
    ns = _record_ns(schema, enclosing_ns)
    return f"{ns}.{name}" if ns else name


def _register_named(schema: AvroSchema, enclosing_ns: str | None, named: dict[str, dict[str, Any]]) -> None:
    """Index every named type by full and short name so references by name resolve."""
    if isinstance(schema, list):
        for branch in schema:
            _register_named(branch, enclosing_ns, named)
        return
    if not isinstance(schema, dict):
        return
    kind = schema.get("type")
    if kind in ("record", "error", "fixed", "enum"):
        full = _full_name(schema, enclosing_ns)
        named[full] = schema
        named.setdefault(full.rsplit(".", 1)[-1], schema)
        ns = _record_ns(schema, enclosing_ns)
        for field in schema.get("fields", []):
            _register_named(field["type"], ns, named)
    elif kind == "array":
        _register_named(schema["items"], enclosing_ns, named)
    elif kind == "map":
        _register_named(schema["values"], enclosing_ns, named)
    elif isinstance(kind, (dict, list)):
        _register_named(kind, enclosing_ns, named)


def _arrow_field(field: dict[str, Any], named: dict[str, dict[str, Any]], ns: str | None) -> pa.Field:
    return pa.field(field["name"], _arrow_type(field["type"], named, ns), nullable=True)


def _non_null(schema: AvroSchema) -> AvroSchema:
    """The one non-null branch of a nullable union (the schema itself if it is no union)."""
    if not isinstance(schema, list):
        return schema
    branches = [b for b in schema if b != "null"]
    if len(branches) != 1:
        raise ValueError(f"unions other than [null, T] have no arrow equivalent: {schema}")
    return branches[0]


_PRIMITIVE_ARROW: dict[str, pa.DataType] = {
    "null": pa.null(),
    "boolean": pa.bool_(),
    "int": pa.int32(),
    "long": pa.int64(),
    "float": pa.float32(),
    "double": pa.float64(),
    "bytes": pa.binary(),
    "string": pa.string(),
}

_LOGICAL_ARROW: dict[str, pa.DataType] = {
    "date": pa.date32(),
    "timestamp-millis": pa.timestamp("ms", tz="UTC"),
    "timestamp-micros": pa.timestamp("us", tz="UTC"),
    "local-timestamp-millis": pa.timestamp("ms"),
    "local-timestamp-micros": pa.timestamp("us"),
    "time-millis": pa.time32("ms"),
    "time-micros": pa.time64("us"),
}


def _arrow_type(schema: AvroSchema, named: dict[str, dict[str, Any]], ns: str | None) -> pa.DataType:
    schema = _non_null(schema)
    if isinstance(schema, str):
        return _arrow_named_or_primitive(schema, named, ns)
    kind = schema["type"]
    if isinstance(kind, (dict, list)):
        return _arrow_type(kind, named, ns)
    logical = schema.get("logicalType")
    if logical == "decimal":
        return _arrow_decimal(schema)
    if logical in _LOGICAL_ARROW:
        return _LOGICAL_ARROW[logical]
    if kind in ("record", "error"):
        inner_ns = _record_ns(schema, ns)
        return pa.struct([_arrow_field(f, named, inner_ns) for f in schema["fields"]])
    if kind == "array":
        return pa.list_(pa.field("item", _arrow_type(schema["items"], named, ns), nullable=True))
    if kind == "map":
        return pa.map_(pa.string(), pa.field("value", _arrow_type(schema["values"], named, ns), nullable=True))
    if kind == "enum":
        return pa.string()
    if kind == "fixed":
        return pa.binary(schema["size"])
    return _arrow_named_or_primitive(kind, named, ns)


def _arrow_named_or_primitive(name: str, named: dict[str, dict[str, Any]], ns: str | None) -> pa.DataType:
    if name in _PRIMITIVE_ARROW:
        return _PRIMITIVE_ARROW[name]
    target = named.get(f"{ns}.{name}") if ns and "." not in name else None
    target = target or named.get(name)
    if target is None:
        raise ValueError(f"unknown Avro type {name!r}")
    return _arrow_type(target, named, _record_ns(target, ns))


def _arrow_decimal(schema: dict[str, Any]) -> pa.DataType:
    precision, scale = int(schema["precision"]), int(schema.get("scale", 0))
    if precision > _MAX_DECIMAL128_PRECISION:
        return pa.decimal256(precision, scale)
    return pa.decimal128(precision, scale)


# ----------------------------------------------------------------------------------------------- meta fields


def add_meta_fields(avro: dict[str, Any]) -> dict[str, Any]:
    """Copy of record schema `avro` with the five Hudi meta columns first (as in log headers and base files).

    Meta columns already present are left where they are, like Java does.
    """
    out = copy.deepcopy(avro)
    present = {f["name"] for f in out["fields"]}
    missing = [copy.deepcopy(f) for f in META_FIELDS if f["name"] not in present]
    out["fields"] = missing + out["fields"]
    return out


def remove_meta_fields(avro: dict[str, Any]) -> dict[str, Any]:
    """Copy of record schema `avro` without the Hudi meta columns (the form commit metadata stores)."""
    out = copy.deepcopy(avro)
    out["fields"] = [f for f in out["fields"] if f["name"] not in META_FIELD_NAMES]
    return out


# ----------------------------------------------------------------------------------------------- text form


def avro_schema_to_json(avro: AvroSchema) -> str:
    """Compact JSON text of a schema, as Java's `Schema.toString()` prints it (key order is the dict's)."""
    return json.dumps(avro, separators=(",", ":"), ensure_ascii=False)
