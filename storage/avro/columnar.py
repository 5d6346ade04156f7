"""Columnar decoding of flat Avro records: all records of a block advance field by field together, each
field decoded for every record with a few numpy operations, straight into Arrow arrays.

Merge-on-read reads spend most of their time turning log-block records into rows; a Python-level decoder
builds one dict per record (~10 us each). Records whose fields are all primitives (boolean, int, long, float,
double, string, bytes — optionally in a union with null), which is what Hudi writes for flat tables, are
decoded here instead; any other schema returns None and the caller uses the general decoder.
"""
from __future__ import annotations

import json

import numpy as np
import pyarrow as pa
from storage.exception import HoodieAvroDecodeError

_ARROW = {"boolean": pa.bool_(), "int": pa.int32(), "long": pa.int64(), "float": pa.float32(),
          "double": pa.float64(), "string": pa.string(), "bytes": pa.binary()}
_FIXED = {"boolean": (1, np.uint8), "float": (4, np.dtype("<f4")), "double": (8, np.dtype("<f8"))}
_MAX_VARINT = 10


def flat_fields(schema_json: str | dict) -> list[tuple[str, str, int | None]] | None:
    """(name, primitive type, index of the value branch in a null union or None) per field, or None when a
    field is not a primitive or a [null, primitive] union."""
    schema = json.loads(schema_json) if isinstance(schema_json, str) else schema_json
    if not isinstance(schema, dict) or schema.get("type") != "record":
        return None
    out = []
    for field in schema.get("fields", []):
        kind, branch = _primitive(field.get("type"))
        if kind is None:
            return None
        out.append((field["name"], kind, branch))
    return out


def _primitive(t) -> tuple[str | None, int | None]:
    if isinstance(t, dict) and "logicalType" not in t:
        t = t.get("type")
    if isinstance(t, str):
        return (t, None) if t in _ARROW else (None, None)
    if isinstance(t, list) and len(t) == 2 and "null" in t:
        branch = 1 - t.index("null")
        kind, inner = _primitive(t[branch])
        return (kind, branch) if kind is not None and inner is None else (None, None)
    return None, None


def decode_flat(content: bytes, starts: np.ndarray, ends: np.ndarray,
                fields: list[tuple[str, str, int | None]]) -> pa.Table:
    """The records at [starts[i], ends[i]) of `content` as an Arrow table (`fields` from `flat_fields`)."""
    buf = np.frombuffer(content + b"\0" * _MAX_VARINT, dtype=np.uint8)
    pos = starts.astype(np.int64, copy=True)
    arrays, names = [], []
    for name, kind, branch in fields:
        valid = None
        if branch is not None:
            index, pos = _varint(buf, pos)
            index = _zigzag(index)
            if np.any((index != 0) & (index != 1)):
                raise HoodieAvroDecodeError(f"field {name!r}: union branch out of range")
            valid = index == branch
        arrays.append(_column(buf, pos, kind, valid, name))
        names.append(name)
    if not np.array_equal(pos, ends):
        raise HoodieAvroDecodeError("records do not end where their lengths say")
    return pa.Table.from_arrays(arrays, names=names)


def _column(buf: np.ndarray, pos: np.ndarray, kind: str, valid: np.ndarray | None, name: str) -> pa.Array:
    """Decode one field of every record whose value is present (`valid`), advancing `pos` in place."""
    take = slice(None) if valid is None else valid
    at = pos[take]
    mask = None if valid is None else pa.array(valid).buffers()[1]
    nulls = 0 if valid is None else int(len(valid) - np.count_nonzero(valid))
    n = len(pos)
    if kind in ("int", "long"):
        raw, after = _varint(buf, at)
        values = np.zeros(n, np.int64)
        values[take] = _zigzag(raw)
        pos[take] = after
        if kind == "int":
            values = values.astype(np.int32)
        return pa.Array.from_buffers(_ARROW[kind], n, [mask, pa.py_buffer(values)], null_count=nulls)
    if kind in _FIXED:
        width, dtype = _FIXED[kind]
        values = np.zeros(n * width, np.uint8).reshape(n, width)
        values[take] = buf[at[:, None] + np.arange(width)]
        pos[take] = at + width
        if kind == "boolean":
            if np.any(values > 1):
                raise HoodieAvroDecodeError(f"field {name!r}: boolean byte out of range")
            return pa.array(values[:, 0].astype(bool), mask=None if valid is None else ~valid)
        return pa.Array.from_buffers(_ARROW[kind], n, [mask, pa.py_buffer(values.view(dtype).ravel())],
                                     null_count=nulls)
    # string / bytes: a long length, then the bytes
    raw, data_start = _varint(buf, at)
    lengths = np.zeros(n, np.int64)
    lengths[take] = _zigzag(raw)
    if np.any(lengths < 0):
        raise HoodieAvroDecodeError(f"field {name!r}: negative length")
    present = lengths[take]
    ends = data_start + present
    if len(ends) and ends.max(initial=0) > len(buf) - _MAX_VARINT:
        raise HoodieAvroDecodeError(f"field {name!r}: value runs past the block")
    pos[take] = ends
    offsets = np.zeros(n + 1, np.int64)
    np.cumsum(lengths, out=offsets[1:])
    total = int(offsets[-1])
    # gather every value's bytes: the start of its value, repeated per byte, plus the byte's offset in it
    starts = np.repeat(data_start - offsets[:-1][take], present) + np.arange(total)
    data = buf[starts] if total else np.zeros(0, np.uint8)
    arrow_type = pa.large_string() if kind == "string" else pa.large_binary()
    array = pa.Array.from_buffers(arrow_type, n, [mask, pa.py_buffer(offsets), pa.py_buffer(data)], null_count=nulls)
    if kind == "string":
        array.validate(full=True)  # invalid UTF-8 is corrupt data, as the general decoder says
    return array.cast(_ARROW[kind])


def _varint(buf: np.ndarray, pos: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(unsigned value, position after it) of the varint at each position."""
    value = np.zeros(len(pos), np.uint64)
    length = np.zeros(len(pos), np.int64)
    active = np.ones(len(pos), bool)
    for k in range(_MAX_VARINT):
        if not active.any():
            break
        byte = buf[pos[active] + k].astype(np.uint64)
        value[active] |= (byte & np.uint64(0x7F)) << np.uint64(7 * k)
        length[active] = k + 1
        still = (byte & np.uint64(0x80)) != 0
        idx = np.flatnonzero(active)
        active[idx[~still]] = False
    if active.any():
        raise HoodieAvroDecodeError("varint longer than 10 bytes")
    return value, pos + length


def _zigzag(value: np.ndarray) -> np.ndarray:
    return (value >> np.uint64(1)).astype(np.int64) ^ -(value & np.uint64(1)).astype(np.int64)
