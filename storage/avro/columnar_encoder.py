"""Columnar encoding of flat Avro records: the counterpart of `columnar`'s decoder, from an Arrow table to the
Avro binary datum of every row, field by field with numpy and Arrow kernels instead of one Python call per row.

A merge-on-read write encodes every upserted row into a log block; the per-record encoder costs ~10 us a row.
Each field here becomes one or two binary "parts" per row (the union branch and the value's bytes, or for
strings and bytes their length varint and then their data straight from the Arrow buffer); Arrow's element-wise
binary join then concatenates every row's parts into its datum, so no Python loop runs over rows.

Only records whose fields are all primitives, optionally in a [null, primitive] union (what `flat_fields`
accepts), plus the logical types Hudi writes on them (date on int, timestamps on long), are encoded here, and
only from columns of the matching Arrow type; anything else returns None and the caller uses the per-record
encoder. A null in a non-nullable field, or an int column value out of the Avro int (or long) range, raises
`HoodieAvroEncodeError` naming the field.
"""
from __future__ import annotations

import json
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from storage.avro.columnar import flat_fields
from storage.exception import HoodieAvroEncodeError

# logical type -> (the Arrow type id group its column must be, the timestamp unit, whether a zone is allowed)
_LOGICAL = {
    "date": ("date32", None, False),
    "timestamp-millis": ("timestamp", "ms", True),
    "timestamp-micros": ("timestamp", "us", True),
    "local-timestamp-millis": ("timestamp", "ms", False),
    "local-timestamp-micros": ("timestamp", "us", False),
}
_LOGICAL_BASE = {"date": "int", "timestamp-millis": "long", "timestamp-micros": "long",
                 "local-timestamp-millis": "long", "local-timestamp-micros": "long"}
_RANGE = {"int": (-(2**31), 2**31 - 1), "long": (-(2**63), 2**63 - 1)}
_FLOAT = {"float": np.dtype("<f4"), "double": np.dtype("<f8")}
_EMPTY = pa.scalar(b"", pa.large_binary())
_VARINT_BYTES = 10

Field = tuple[str, str, "int | None", "str | None"]  # name, primitive type, value branch of a null union, logical type


def encode_flat_datums(table: pa.Table, schema_json: str | dict) -> pa.LargeBinaryArray | None:
    """The Avro binary datum of each row of `table` under record schema `schema_json` (one value per row, no
    nulls; its offsets and data buffers are the datums' bounds and bytes), or None when the schema is not flat
    or a column's Arrow type does not match its field."""
    fields = encodable_fields(schema_json)
    if fields is None:
        return None
    parts = []
    for field in fields:
        column = _column(table, field)
        if column is None:
            return None
        parts.extend(_field_parts(column, field))
    if not parts:  # a record without fields: every datum is empty
        return pa.array([b""] * table.num_rows, pa.large_binary())
    return pc.binary_join_element_wise(*parts, _EMPTY)


def encodable_fields(schema_json: str | dict) -> list[Field] | None:
    """`flat_fields` with the logical type of each field, or None when a field is not a primitive (with one of
    the logical types above) or a [null, primitive] union."""
    schema = json.loads(schema_json) if isinstance(schema_json, str) else schema_json
    if not isinstance(schema, dict) or not isinstance(schema.get("fields"), list):
        return None
    # logical types are peeled off into a side list, so that flat_fields judges the base types
    logicals = [_logical(field.get("type")) if isinstance(field, dict) else None for field in schema["fields"]]
    peeled = [dict(field, type=_peel(field["type"])) if logical else field
              for field, logical in zip(schema["fields"], logicals)]
    fields = flat_fields(dict(schema, fields=peeled))
    if fields is None:
        return None
    return [(name, kind, branch, logical) for (name, kind, branch), logical in zip(fields, logicals)]


def _logical(t: Any) -> str | None:
    """The logical type encoded here that `t` (or a branch of it) carries on its right base type, or None."""
    if isinstance(t, list):
        return next((name for name in map(_logical, t) if name), None)
    if isinstance(t, dict) and t.get("type") == _LOGICAL_BASE.get(t.get("logicalType")):
        return t["logicalType"]
    return None


def _peel(t: Any) -> Any:
    """`t` with the logical types `_logical` finds replaced by their base type."""
    if isinstance(t, list):
        return [_peel(branch) for branch in t]
    return t["type"] if _logical(t) else t


# ----------------------------------------------------------------------------------------------- columns


def _column(table: pa.Table, field: Field) -> pa.Array | None:
    """The field's column as one Arrow array in the type its encoding reads (int64 for ints, float, bool,
    large_binary for strings and bytes), or None when the table has no such column or its type does not fit."""
    name, kind, branch, logical = field
    if table.schema.get_field_index(name) < 0:  # missing or duplicated
        return None
    column = table.column(name).combine_chunks()
    if pa.types.is_dictionary(column.type):
        column = column.dictionary_decode()
    if branch is None and column.null_count:
        raise HoodieAvroEncodeError(f"field {name!r}: null in a non-nullable {kind} field")
    target = _fits(column.type, kind, logical)
    if target is None:
        return None
    if logical is None and pa.types.is_integer(column.type):
        _check_range(column, name, kind)
    return column.cast(target)


def _fits(arrow_type: pa.DataType, kind: str, logical: str | None) -> pa.DataType | None:
    """The type to cast a column of `arrow_type` to before encoding it as `kind`, or None when it does not fit
    (columns of other types are left to the per-record encoder, which says what is wrong)."""
    if logical is not None:
        group, unit, zoned = _LOGICAL[logical]
        if group == "date32":
            return pa.int32() if pa.types.is_date32(arrow_type) else None
        ok = pa.types.is_timestamp(arrow_type) and arrow_type.unit == unit and (zoned or arrow_type.tz is None)
        return pa.int64() if ok else None
    if kind in ("int", "long"):
        return pa.int64() if pa.types.is_integer(arrow_type) else None
    if kind == "boolean":
        return pa.bool_() if pa.types.is_boolean(arrow_type) else None
    if kind == "float":  # a double column would need rounding the per-record encoder does differently
        return pa.float32() if pa.types.is_float32(arrow_type) else None
    if kind == "double":
        return pa.float64() if pa.types.is_float32(arrow_type) or pa.types.is_float64(arrow_type) else None
    strings = (pa.types.is_string(arrow_type) or pa.types.is_large_string(arrow_type)
               or pa.types.is_string_view(arrow_type))
    binaries = (pa.types.is_binary(arrow_type) or pa.types.is_large_binary(arrow_type)
                or pa.types.is_fixed_size_binary(arrow_type) or pa.types.is_binary_view(arrow_type))
    return pa.large_binary() if (strings if kind == "string" else binaries) else None


def _check_range(column: pa.Array, name: str, kind: str) -> None:
    low, high = _RANGE[kind]
    bounds = pc.min_max(column)
    smallest, largest = bounds["min"].as_py(), bounds["max"].as_py()
    if smallest is not None and (smallest < low or largest > high):
        bad = smallest if smallest < low else largest
        raise HoodieAvroEncodeError(f"field {name!r}: {bad} is out of the Avro {kind} range ({low}..{high})")


# ----------------------------------------------------------------------------------------------- parts


def _field_parts(column: pa.Array, field: Field) -> list[pa.Array]:
    """The field's bytes of every row as binary arrays (no nulls) whose per-row concatenation is the encoding:
    the union branch and the value's fixed bytes or varint, then for strings and bytes the data itself."""
    _, kind, branch, _ = field
    n = len(column)
    tail = None
    if kind in ("int", "long"):
        matrix, lengths = _varints(_zigzag(_values(column, 0)))
    elif kind == "boolean":
        matrix, lengths = _values(column, False).astype(np.uint8).reshape(n, 1), np.ones(n, np.int64)
    elif kind in _FLOAT:
        dtype = _FLOAT[kind]
        matrix = _values(column, 0.0).astype(dtype).view(np.uint8).reshape(n, dtype.itemsize)
        lengths = np.full(n, dtype.itemsize, np.int64)
    else:  # string / bytes: the length as a long, then the data (a null's data is empty)
        tail = pc.fill_null(column, b"") if column.null_count else column
        matrix, lengths = _varints(_zigzag(pc.binary_length(tail).to_numpy().astype(np.int64)))
    if branch is not None:
        valid = np.ones(n, bool) if column.null_count == 0 else column.is_valid().to_numpy(zero_copy_only=False)
        matrix, lengths = _with_branch(matrix, lengths, valid, branch)
    parts = [_ragged(matrix, lengths)]
    return parts if tail is None else parts + [tail]


def _values(column: pa.Array, fill: Any) -> np.ndarray:
    # nulls take a placeholder value; their bytes are cut off by the lengths
    return (pc.fill_null(column, fill) if column.null_count else column).to_numpy(zero_copy_only=False)


def _with_branch(matrix: np.ndarray, lengths: np.ndarray, valid: np.ndarray, branch: int):
    """The union branch index (one zig-zag byte: 0 or 2) before each value; a null row keeps only it."""
    index = np.where(valid, branch, 1 - branch).astype(np.uint8) * 2
    return np.concatenate([index[:, None], matrix], axis=1), np.where(valid, lengths + 1, 1)


def _zigzag(values: np.ndarray) -> np.ndarray:
    values = values.astype(np.int64, copy=False)
    return (values.astype(np.uint64) << np.uint64(1)) ^ (values >> 63).astype(np.uint64)


def _varints(unsigned: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(n x 10 byte matrix, byte count) of each value's varint: 7 bits a byte, low first, high bit = more."""
    n = len(unsigned)
    matrix = np.zeros((n, _VARINT_BYTES), np.uint8)
    lengths = np.ones(n, np.int64)
    rest = unsigned.astype(np.uint64, copy=True)
    for k in range(_VARINT_BYTES):
        low = (rest & np.uint64(0x7F)).astype(np.uint8)
        rest >>= np.uint64(7)
        more = rest != 0
        matrix[:, k] = low | (more.astype(np.uint8) << 7)
        if not more.any():
            break
        lengths += more
    return matrix, lengths


def _ragged(matrix: np.ndarray, lengths: np.ndarray) -> pa.Array:
    """Row i's first lengths[i] bytes of `matrix` as one large_binary value per row."""
    keep = np.arange(matrix.shape[1]) < lengths[:, None]
    data = np.ascontiguousarray(matrix)[keep]  # row-major: the kept bytes of row 0, then row 1, ...
    offsets = np.zeros(len(lengths) + 1, np.int64)
    np.cumsum(lengths, out=offsets[1:])
    return pa.Array.from_buffers(pa.large_binary(), len(lengths), [None, pa.py_buffer(offsets), pa.py_buffer(data)])
