"""Avro binary decoding: `BinaryDecoder` reads the primitives of the specification's binary encoding from bytes,
`DatumReader` reads whole datums of a schema through it (records as dicts, arrays as lists, maps as dicts,
unions as their branch's value, enums as their symbol, logical types as `logical_types` says).

This is the one hand-written Avro decoder of the project: Avro container files, log-block delete records and the
timeline's Avro models go through it. Flat records in bulk take the columnar decoder (`columnar`); records of
other schemas in bulk may take fastavro's compiled reader. Every malformed input — truncated data, a varint of
more than ten bytes, a union branch or enum index that does not exist, invalid UTF-8, a logical value out of
range — raises `HoodieAvroDecodeError` naming what was being read and the offset.
"""
from __future__ import annotations

import operator
import struct
from typing import Any, Callable, Collection, NamedTuple

from storage.avro.logical_types import logical_type
from storage.avro.schema_compiler import SchemaCompiler, UnionValue, parse_schema, schema_label
from storage.exception import HoodieAvroDecodeError

_new_tuple = tuple.__new__
_FLOAT = struct.Struct("<f")
_DOUBLE = struct.Struct("<d")
_LONG_BITS = 64
MAX_EMPTY_ITEMS = 1 << 20


class BinaryDecoder:
    """Avro binary primitives from `data`, starting at `pos`. `what` names the value for error messages."""

    __slots__ = ("data", "pos")

    def __init__(self, data: bytes, pos: int = 0) -> None:
        self.data, self.pos = data, pos

    def remaining(self) -> int:
        return len(self.data) - self.pos

    def at_end(self) -> bool:
        return self.pos >= len(self.data)

    def expect_end(self, what: str) -> None:
        if self.pos != len(self.data):
            raise HoodieAvroDecodeError(f"{self.remaining()} stray bytes after {what} at offset {self.pos}")

    def read_fixed(self, size: int, what: str) -> bytes:
        pos = self.pos
        if size < 0 or pos + size > len(self.data):
            raise self._truncated(size, what)
        self.pos = pos + size
        return self.data[pos : pos + size]

    def read_long(self, what: str) -> int:
        """A zig-zag varint of at most ten bytes whose value fits 64 bits."""
        data, pos = self.data, self.pos
        try:
            byte = data[pos]
            if byte < 0x80:  # one byte: most counts, lengths, union indexes and small values
                self.pos = pos + 1
                return (byte >> 1) ^ -(byte & 1)
            value, shift = byte & 0x7F, 7
            while byte & 0x80:
                if shift >= 70:
                    raise HoodieAvroDecodeError(f"{what}: malformed Avro varint (over ten bytes) at offset {self.pos}")
                pos += 1
                byte = data[pos]
                value |= (byte & 0x7F) << shift
                shift += 7
        except IndexError:
            raise HoodieAvroDecodeError(f"{what}: truncated Avro data: the varint at offset {self.pos} runs past "
                                        f"the end ({len(data)} bytes)") from None
        if value >> _LONG_BITS:
            raise HoodieAvroDecodeError(f"{what}: malformed Avro varint (over 64 bits) at offset {self.pos}")
        self.pos = pos + 1
        return (value >> 1) ^ -(value & 1)

    def read_int(self, what: str) -> int:
        value = self.read_long(what)
        if not -(2**31) <= value < 2**31:
            raise HoodieAvroDecodeError(f"{what}: Avro int out of range: {value}")
        return value

    def read_boolean(self, what: str) -> bool:
        byte = self.read_fixed(1, what)[0]
        if byte > 1:
            raise HoodieAvroDecodeError(f"{what}: boolean byte {byte} out of range at offset {self.pos - 1}")
        return byte == 1

    def read_float(self, what: str) -> float:
        return _FLOAT.unpack(self.read_fixed(4, what))[0]

    def read_double(self, what: str) -> float:
        return _DOUBLE.unpack(self.read_fixed(8, what))[0]

    def read_bytes(self, what: str) -> bytes:
        size = self.read_long(what)
        pos = self.pos
        if size < 0:
            raise HoodieAvroDecodeError(f"{what}: negative length {size} at offset {pos}")
        if pos + size > len(self.data):
            raise self._truncated(size, what)
        self.pos = pos + size
        return self.data[pos : pos + size]

    def read_string(self, what: str) -> str:
        raw = self.read_bytes(what)
        try:
            return raw.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise HoodieAvroDecodeError(f"{what}: string is not UTF-8 ({exc.reason}) before offset {self.pos}") from None

    def read_index(self, count: int, what: str) -> int:
        """A union branch or enum symbol index below `count`."""
        data, pos = self.data, self.pos
        if pos < len(data) and data[pos] < 0x80:  # always, but for corrupt data
            self.pos = pos + 1
            index = (data[pos] >> 1) ^ -(data[pos] & 1)
        else:
            index = self.read_long(what)
        if not 0 <= index < count:
            raise HoodieAvroDecodeError(f"{what}: index {index} out of range (0..{count - 1}) before offset {self.pos}")
        return index

    def read_block_count(self, min_item_size: int, what: str) -> int:
        """The item count of the next array or map block (0 ends the collection). A negative count is followed
        by the block's byte size. A count the remaining bytes cannot hold is corruption, not a loop to run (items
        that take no bytes, such as nulls, are capped at `MAX_EMPTY_ITEMS`)."""
        count = self.read_long(what)
        if count < 0:
            count = -count
            self.read_long(what)
        if (count * min_item_size > self.remaining()) if min_item_size else count > MAX_EMPTY_ITEMS:
            raise HoodieAvroDecodeError(f"{what}: {count} items announced at offset {self.pos}, "
                                        f"{self.remaining()} bytes left")
        return count

    def _truncated(self, size: int, what: str) -> HoodieAvroDecodeError:
        return HoodieAvroDecodeError(f"{what}: truncated Avro data: {size} bytes needed at offset {self.pos}, "
                                     f"{self.remaining()} left")


# ----------------------------------------------------------------------------------------------- datums


class _Step(NamedTuple):
    """How to read one schema node, and the fewest bytes its value takes (to bound collection counts)."""

    read: Callable[[BinaryDecoder], Any]
    min_size: int


class DatumReader:
    """Reads datums of one Avro schema (a dict, list, type name or JSON text), compiled once.

    With `tag_unions`, union values come back as `UnionValue(branch index, value)` — those of every union (True)
    or of the fields named (`Record.field`): for callers that must know the branch, not only the value (a Python
    int could be an Avro int or long)."""

    def __init__(self, schema: Any, *, tag_unions: bool | Collection[str] = False) -> None:
        self.schema = parse_schema(schema)
        self._read = _ReaderCompiler(tag_unions).compile(self.schema).read

    def read(self, decoder: BinaryDecoder) -> Any:
        return self._read(decoder)


def decode_datum(schema: Any, data: bytes) -> Any:
    """The one datum of `schema` that `data` holds, with no stray bytes after it."""
    decoder = BinaryDecoder(data)
    value = DatumReader(schema).read(decoder)
    decoder.expect_end(f"the {schema_label(parse_schema(schema))} datum")
    return value


class _ReaderCompiler(SchemaCompiler[_Step]):
    def __init__(self, tag_unions: bool | Collection[str]) -> None:
        super().__init__()
        self._tag_unions = tag_unions

    def primitive(self, kind: str, path: str) -> _Step:
        if kind == "null":
            return _Step(lambda d: None, 0)
        method, size = _PRIMITIVE_READS[kind]
        return _Step(operator.methodcaller(method, path), size)  # no Python frame of its own

    def record(self, name: str, fields: list[tuple[dict[str, Any], _Step]], path: str) -> _Step:
        reads = [(field["name"], step.read) for field, step in fields]

        def read(d: BinaryDecoder) -> dict[str, Any]:
            return {field: read_field(d) for field, read_field in reads}

        return _Step(read, sum(step.min_size for _, step in fields))

    def enum(self, name: str, symbols: list[str], path: str) -> _Step:
        return _Step(lambda d: symbols[d.read_index(len(symbols), path)], 1)

    def fixed(self, name: str, size: int, path: str) -> _Step:
        return _Step(lambda d: d.read_fixed(size, path), size)

    def array(self, items: _Step, path: str) -> _Step:
        read_item, min_size = items

        def read(d: BinaryDecoder) -> list[Any]:
            out: list[Any] = []
            count = d.read_block_count(min_size, path)
            while count:
                for _ in range(count):
                    out.append(read_item(d))
                count = d.read_block_count(min_size, path)
            return out

        return _Step(read, 1)

    def map(self, values: _Step, path: str) -> _Step:
        read_value, min_size = values

        def read(d: BinaryDecoder) -> dict[str, Any]:
            out: dict[str, Any] = {}
            count = d.read_block_count(min_size + 1, path)
            while count:
                for _ in range(count):
                    key = d.read_string(path)
                    out[key] = read_value(d)
                count = d.read_block_count(min_size + 1, path)
            return out

        return _Step(read, 1)

    def union(self, branches: list[_Step], path: str) -> _Step:
        reads, count = [b.read for b in branches], len(branches)
        tagged = self._tag_unions if isinstance(self._tag_unions, bool) else path in self._tag_unions
        if not tagged:
            return _Step(lambda d: reads[d.read_index(count, path)](d), 1)

        def read_tagged(d: BinaryDecoder) -> UnionValue:
            index = d.read_index(count, path)
            return _new_tuple(UnionValue, (index, reads[index](d)))  # UnionValue(...) without its Python __new__

        return _Step(read_tagged, 1)

    def logical(self, schema: dict[str, Any], base: _Step, path: str) -> _Step:
        conversion = logical_type(schema)
        if conversion is None:
            return base
        read_raw, decode, name = base.read, conversion.decode, schema["logicalType"]

        def read(d: BinaryDecoder) -> Any:
            raw = read_raw(d)
            try:
                return decode(raw)
            except (ValueError, OverflowError, ArithmeticError) as exc:
                raise HoodieAvroDecodeError(f"{path}: {name} value {raw!r} is out of range ({exc})") from None

        return _Step(read, base.min_size)

    def forward(self, resolve: Callable[[], _Step], path: str) -> _Step:
        return _Step(lambda d: resolve().read(d), 0)


_PRIMITIVE_READS: dict[str, tuple[str, int]] = {  # BinaryDecoder method, fewest bytes
    "boolean": ("read_boolean", 1),
    "int": ("read_int", 1),
    "long": ("read_long", 1),
    "float": ("read_float", 4),
    "double": ("read_double", 8),
    "bytes": ("read_bytes", 1),
    "string": ("read_string", 1),
}
