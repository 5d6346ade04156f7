"""Avro binary encoding: `BinaryEncoder` appends the primitives of the specification's binary encoding to a
buffer, `DatumWriter` writes whole datums of a schema through it — the counterpart of `decoder`, with the same
Python values (see `decoder` and `logical_types`).

Arrays and maps are written as Java's encoder writes them: one block (the item count, the items) and the
terminating 0, or the 0 alone when empty. A record field that is missing takes the field's default (null when it
has none). A union takes the first branch that accepts the value, or the branch a `UnionValue` names. Anything
that does not fit — an unknown record field, a value of the wrong type, an int out of range, a decimal with
more fractional digits than its scale — raises `HoodieAvroEncodeError` naming the field.
"""
from __future__ import annotations

import numbers
import struct
from collections.abc import Mapping
from typing import Any, Callable, NamedTuple

from storage.avro.logical_types import logical_type
from storage.avro.schema_compiler import SchemaCompiler, UnionValue, parse_schema
from storage.exception import HoodieAvroEncodeError

_FLOAT = struct.Struct("<f")
_DOUBLE = struct.Struct("<d")
_INT_RANGE = (-(2**31), 2**31 - 1)
_LONG_RANGE = (-(2**63), 2**63 - 1)


class BinaryEncoder:
    """Avro binary primitives appended to `buf`."""

    __slots__ = ("buf",)

    def __init__(self) -> None:
        self.buf = bytearray()

    def getvalue(self) -> bytes:
        return bytes(self.buf)

    def tell(self) -> int:
        return len(self.buf)

    def write_long(self, value: int) -> None:
        """Zig-zag varint (ints too); the caller keeps `value` within 64 bits."""
        n = (value << 1) ^ (value >> 63)
        buf = self.buf
        while n > 0x7F:
            buf.append((n & 0x7F) | 0x80)
            n >>= 7
        buf.append(n)

    def write_boolean(self, value: bool) -> None:
        self.buf.append(1 if value else 0)

    def write_float(self, value: float) -> None:
        self.buf += _FLOAT.pack(value)

    def write_double(self, value: float) -> None:
        self.buf += _DOUBLE.pack(value)

    def write_fixed(self, raw: bytes) -> None:
        self.buf += raw

    def write_bytes(self, raw: bytes) -> None:
        self.write_long(len(raw))
        self.buf += raw

    def write_string(self, value: str) -> None:
        raw = value.encode("utf-8")
        self.write_long(len(raw))
        self.buf += raw


# ----------------------------------------------------------------------------------------------- datums


class _Step(NamedTuple):
    """How to write one schema node, and whether it takes a value (to choose a union branch)."""

    write: Callable[[BinaryEncoder, Any], None]
    accepts: Callable[[Any], bool]


class DatumWriter:
    """Writes datums of one Avro schema (a dict, list, type name or JSON text), compiled once."""

    def __init__(self, schema: Any) -> None:
        self.schema = parse_schema(schema)
        self._write = _WriterCompiler().compile(self.schema).write

    def write(self, encoder: BinaryEncoder, value: Any) -> None:
        self._write(encoder, value)


def encode_datum(schema: Any, value: Any) -> bytes:
    """The Avro binary encoding of `value` under `schema`."""
    encoder = BinaryEncoder()
    DatumWriter(schema).write(encoder, value)
    return encoder.getvalue()


def _is_integer(value: Any) -> bool:
    return type(value) is int or (isinstance(value, numbers.Integral) and not isinstance(value, bool))


def _is_real(value: Any) -> bool:
    return type(value) is float or (isinstance(value, numbers.Real) and not isinstance(value, bool))


def _mismatch(path: str, expected: str, value: Any) -> HoodieAvroEncodeError:
    shown = repr(value)
    shown = shown if len(shown) <= 80 else shown[:77] + "..."
    return HoodieAvroEncodeError(f"{path}: expected {expected}, got {type(value).__name__} {shown}")


class _WriterCompiler(SchemaCompiler[_Step]):
    def primitive(self, kind: str, path: str) -> _Step:
        return _PRIMITIVES[kind](path)

    def record(self, name: str, fields: list[tuple[dict[str, Any], _Step]], path: str) -> _Step:
        known = frozenset(field["name"] for field, _ in fields)
        entries = [(field["name"], step.write, field.get("default")) for field, step in fields]

        def write(e: BinaryEncoder, value: Any) -> None:
            if type(value) is not dict and not isinstance(value, Mapping):
                raise _mismatch(path, f"a {name} record (a mapping)", value)
            if not known.issuperset(value):
                unknown = sorted(map(str, set(value) - known))
                raise HoodieAvroEncodeError(f"{path}: fields {unknown} are not in Avro record {name!r}")
            for field, write_field, default in entries:
                write_field(e, value[field] if field in value else default)

        return _Step(write, lambda v: isinstance(v, Mapping) and known.issuperset(v))

    def enum(self, name: str, symbols: list[str], path: str) -> _Step:
        index = {symbol: i for i, symbol in enumerate(symbols)}

        def write(e: BinaryEncoder, value: Any) -> None:
            if value not in index:
                raise _mismatch(path, f"a symbol of enum {name} {symbols}", value)
            e.write_long(index[value])

        return _Step(write, lambda v: isinstance(v, str) and v in index)

    def fixed(self, name: str, size: int, path: str) -> _Step:
        def accepts(value: Any) -> bool:
            return isinstance(value, (bytes, bytearray, memoryview)) and len(value) == size

        def write(e: BinaryEncoder, value: Any) -> None:
            if not accepts(value):
                raise _mismatch(path, f"{size} bytes (fixed {name})", value)
            e.write_fixed(value)

        return _Step(write, accepts)

    def array(self, items: _Step, path: str) -> _Step:
        write_item = items.write

        def write(e: BinaryEncoder, value: Any) -> None:
            if not isinstance(value, (list, tuple)):
                raise _mismatch(path, "an array (list)", value)
            if value:
                e.write_long(len(value))
                for item in value:
                    write_item(e, item)
            e.write_long(0)

        return _Step(write, lambda v: isinstance(v, (list, tuple)))

    def map(self, values: _Step, path: str) -> _Step:
        write_value = values.write

        def write(e: BinaryEncoder, value: Any) -> None:
            if not isinstance(value, Mapping):
                raise _mismatch(path, "a map (a mapping)", value)
            if value:
                e.write_long(len(value))
                for key, item in value.items():
                    if not isinstance(key, str):
                        raise _mismatch(f"{path} key", "a string", key)
                    e.write_string(key)
                    write_value(e, item)
            e.write_long(0)

        return _Step(write, lambda v: isinstance(v, Mapping))

    def union(self, branches: list[_Step], path: str) -> _Step:
        writes = [b.write for b in branches]
        choices = list(enumerate(b.accepts for b in branches))

        def branch(value: Any) -> int:
            for index, accepts in choices:
                if accepts(value):
                    return index
            index = _only_non_null(choices) if value is not None else -1
            if index < 0:
                raise _mismatch(path, f"a value of one of the {len(writes)} union branches", value)
            return index

        def write(e: BinaryEncoder, value: Any) -> None:
            if type(value) is UnionValue:
                index, value = value
                if not 0 <= index < len(writes):
                    raise HoodieAvroEncodeError(f"{path}: union branch {index} does not exist ({len(writes)} branches)")
            else:
                index = branch(value)
            e.write_long(index)
            writes[index](e, value)

        return _Step(write, lambda v: type(v) is UnionValue or any(accepts(v) for _, accepts in choices))

    def logical(self, schema: dict[str, Any], base: _Step, path: str) -> _Step:
        conversion = logical_type(schema)
        if conversion is None:
            return base
        write_raw, encode, name = base.write, conversion.encode, schema["logicalType"]

        def write(e: BinaryEncoder, value: Any) -> None:
            try:
                raw = encode(value)
            except (ValueError, TypeError, AttributeError, OverflowError, ArithmeticError) as exc:
                raise HoodieAvroEncodeError(f"{path}: {value!r} cannot be written as {name}: {exc}") from None
            write_raw(e, raw)

        return _Step(write, lambda v: conversion.accepts(v) or base.accepts(v))

    def forward(self, resolve: Callable[[], _Step], path: str) -> _Step:
        return _Step(lambda e, v: resolve().write(e, v), lambda v: resolve().accepts(v))


def _only_non_null(choices: list[tuple[int, Callable[[Any], bool]]]) -> int:
    """The one branch that does not take null, or -1: a value no branch takes is written with it, so that its
    error says what inside the value is wrong (Hudi's unions are [null, T] or [T, null])."""
    non_null = [i for i, accepts in choices if not accepts(None)]
    return non_null[0] if len(non_null) == 1 else -1


# ----------------------------------------------------------------------------------------------- primitives


def _null(path: str) -> _Step:
    def write(e: BinaryEncoder, value: Any) -> None:
        if value is not None:
            raise _mismatch(path, "null", value)

    return _Step(write, lambda v: v is None)


def _boolean(path: str) -> _Step:
    def write(e: BinaryEncoder, value: Any) -> None:
        if not isinstance(value, bool):
            raise _mismatch(path, "a boolean", value)
        e.write_boolean(value)

    return _Step(write, lambda v: isinstance(v, bool))


def _integer(kind: str, bounds: tuple[int, int]) -> Callable[[str], _Step]:
    low, high = bounds

    def accepts(value: Any) -> bool:
        return _is_integer(value) and low <= value <= high

    def step(path: str) -> _Step:
        def write(e: BinaryEncoder, value: Any) -> None:
            if not accepts(value):
                raise _mismatch(path, f"an Avro {kind} ({low}..{high})", value)
            e.write_long(int(value))

        return _Step(write, accepts)

    return step


def _real(kind: str, pack: Callable[[BinaryEncoder, float], None]) -> Callable[[str], _Step]:
    def step(path: str) -> _Step:
        def write(e: BinaryEncoder, value: Any) -> None:
            if not _is_real(value):
                raise _mismatch(path, f"an Avro {kind}", value)
            try:
                pack(e, float(value))
            except (OverflowError, struct.error) as exc:
                raise HoodieAvroEncodeError(f"{path}: {value!r} does not fit an Avro {kind}: {exc}") from None

        return _Step(write, _is_real)

    return step


def _bytes(path: str) -> _Step:
    def write(e: BinaryEncoder, value: Any) -> None:
        if not isinstance(value, (bytes, bytearray, memoryview)):
            raise _mismatch(path, "bytes", value)
        e.write_bytes(bytes(value))

    return _Step(write, lambda v: isinstance(v, (bytes, bytearray, memoryview)))


def _string(path: str) -> _Step:
    def write(e: BinaryEncoder, value: Any) -> None:
        if not isinstance(value, str):
            raise _mismatch(path, "a string", value)
        try:
            e.write_string(value)
        except UnicodeEncodeError as exc:
            raise HoodieAvroEncodeError(f"{path}: string cannot be UTF-8 encoded: {exc.reason}") from None

    return _Step(write, lambda v: isinstance(v, str))


_PRIMITIVES: dict[str, Callable[[str], _Step]] = {
    "null": _null,
    "boolean": _boolean,
    "int": _integer("int", _INT_RANGE),
    "long": _integer("long", _LONG_RANGE),
    "float": _real("float", BinaryEncoder.write_float),
    "double": _real("double", BinaryEncoder.write_double),
    "bytes": _bytes,
    "string": _string,
}
