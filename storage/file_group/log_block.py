"""Typed model of the blocks of a Hudi log file (spec §6): block and header types, the header/footer metadata map,
and the content codecs of data, delete, command and parquet blocks.

Framing (magic, lengths, reverse pointer) lives in `log_format`; this module only knows what is *inside* a block.
Every decoder here turns malformed bytes into `HoodieCorruptedLogError` — never an IndexError, struct.error or
UnicodeDecodeError — because log content may be damaged by a writer that died mid-write.
"""
from __future__ import annotations

import dataclasses
import datetime as dt
import decimal
import functools
import io
import json
import logging
import struct
from dataclasses import dataclass, field
from enum import IntEnum
from typing import Any, Callable, Iterable, Iterator, Mapping

import fastavro
import numpy as np
import pyarrow as pa

from storage.avro.columnar import HoodieAvroDecodeError, decode_flat, flat_fields
from storage.avro.encoding import encode_bytes, encode_long
from storage.avro.schema_converter import (
    add_meta_fields,
    arrow_to_avro_schema,
    avro_schema_to_json,
    avro_to_arrow_schema,
)
from storage.io.parquet import parquet_from_bytes, parquet_to_bytes
from storage.exception import HoodieCorruptedLogError

logger = logging.getLogger(__name__)


# ----------------------------------------------------------------------------------------------- enums


class HoodieLogBlockType(IntEnum):
    """Block type ordinals as written on disk (int32 after the format version)."""

    COMMAND_BLOCK = 0
    DELETE_BLOCK = 1
    CORRUPT_BLOCK = 2
    AVRO_DATA_BLOCK = 3
    HFILE_DATA_BLOCK = 4
    PARQUET_DATA_BLOCK = 5
    CDC_DATA_BLOCK = 6


class HeaderMetadataType(IntEnum):
    """Key ordinals of the block header map."""

    INSTANT_TIME = 0
    TARGET_INSTANT_TIME = 1
    SCHEMA = 2
    COMMAND_BLOCK_TYPE = 3
    COMPACTED_BLOCK_TIMES = 4
    RECORD_POSITIONS = 5
    BLOCK_IDENTIFIER = 6
    IS_PARTIAL = 7
    BASE_FILE_INSTANT_TIME_OF_RECORD_POSITIONS = 8


class CommandBlockType(IntEnum):
    """Value (as decimal text) of the COMMAND_BLOCK_TYPE header."""

    ROLLBACK_BLOCK = 0


# Header keys Hudi does not define (yet) are kept as plain ints so a block still round-trips byte for byte.
HeaderKey = HeaderMetadataType | int
Header = dict[HeaderKey, str]
Footer = dict[int, str]  # footer keys are a different enum in Hudi; no sample has any entry

CONTENT_VERSION = 3  # version prefix of AVRO_DATA_BLOCK and DELETE_BLOCK content
_INT32 = struct.Struct(">i")
_INT64 = struct.Struct(">q")


# ----------------------------------------------------------------------------------------------- bounded reads


class BoundedReader:
    """Big-endian reads through `read_at(pos, n)` between `pos` and `end`; reading past `end` is corruption.

    The bound is the enclosing block (or content), so a damaged length can never make a decoder wander
    into the next block or allocate more than the block holds.
    """

    def __init__(self, read_at: Callable[[int, int], bytes], pos: int, end: int) -> None:
        self._read_at, self.pos, self.end = read_at, pos, end

    @classmethod
    def over(cls, data: bytes | bytearray | memoryview) -> "BoundedReader":
        view = memoryview(data)
        return cls(lambda pos, n: bytes(view[pos : pos + n]), 0, len(view))

    def remaining(self) -> int:
        return self.end - self.pos

    def take(self, n: int, what: str) -> bytes:
        if n < 0 or n > self.remaining():
            raise HoodieCorruptedLogError(f"{what}: {n} bytes needed at offset {self.pos}, {self.remaining()} left")
        data = self._read_at(self.pos, n)
        if len(data) != n:
            raise HoodieCorruptedLogError(f"{what}: file ends at offset {self.pos + len(data)}")
        self.pos += n
        return data

    def skip(self, n: int, what: str) -> None:
        if n < 0 or n > self.remaining():
            raise HoodieCorruptedLogError(f"{what}: cannot skip {n} bytes at offset {self.pos}")
        self.pos += n

    def int32(self, what: str) -> int:
        return _INT32.unpack(self.take(4, what))[0]

    def int64(self, what: str) -> int:
        return _INT64.unpack(self.take(8, what))[0]


# ----------------------------------------------------------------------------------------------- metadata map


def encode_metadata(entries: Mapping[int, str]) -> bytes:
    """Header/footer map: int32 count, then per entry int32 key ordinal, int32 byte length, UTF-8 bytes."""
    parts = [_INT32.pack(len(entries))]
    for key, value in entries.items():
        raw = value.encode("utf-8")
        parts.append(_INT32.pack(int(key)) + _INT32.pack(len(raw)) + raw)
    return b"".join(parts)


def decode_header(reader: BoundedReader) -> Header:
    """Header map at the reader's position; known key ordinals become `HeaderMetadataType` (order kept)."""
    return {_header_key(k): v for k, v in _decode_entries(reader, "header")}


def decode_footer(reader: BoundedReader) -> Footer:
    return dict(_decode_entries(reader, "footer"))


def _header_key(ordinal: int) -> HeaderKey:
    try:
        return HeaderMetadataType(ordinal)
    except ValueError:
        return ordinal


def _decode_entries(reader: BoundedReader, what: str) -> list[tuple[int, str]]:
    count = reader.int32(f"{what} entry count")
    if count < 0 or count * 8 > reader.remaining():  # each entry takes at least 8 bytes
        raise HoodieCorruptedLogError(f"{what}: impossible entry count {count}")
    entries = []
    for _ in range(count):
        key = reader.int32(f"{what} key")
        raw = reader.take(reader.int32(f"{what} value length"), f"{what} value")
        entries.append((key, _utf8(raw, f"{what} value")))
    return entries


def _utf8(raw: bytes, what: str) -> str:
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise HoodieCorruptedLogError(f"{what} is not UTF-8") from exc


# ----------------------------------------------------------------------------------------------- blocks


@dataclass(eq=False)
class HoodieLogBlock:
    """One block of a log file.

    `content` is None while a lazily read block has not been loaded; `read_content()` loads (once) and returns it.
    `offset` is the position of the block's magic in its file and `size` its total length in bytes (-1 for a
    block not read from or written to a file).
    """

    block_type: HoodieLogBlockType
    header: Header = field(default_factory=dict)
    footer: Footer = field(default_factory=dict)
    content: bytes | None = field(default=b"", repr=False)
    offset: int = -1
    size: int = -1
    content_loader: Callable[[], bytes] | None = field(default=None, repr=False, compare=False)

    def read_content(self) -> bytes:
        if self.content is None:
            if self.content_loader is None:
                raise HoodieCorruptedLogError("block content was neither read nor can be loaded")
            self.content = self.content_loader()
        return self.content

    @property
    def instant_time(self) -> str | None:
        return self.header.get(HeaderMetadataType.INSTANT_TIME)

    @property
    def schema_json(self) -> str | None:
        return self.header.get(HeaderMetadataType.SCHEMA)

    def is_corrupt(self) -> bool:
        return self.block_type == HoodieLogBlockType.CORRUPT_BLOCK


def _base_header(instant_time: str, schema_json: str | None, extra: Mapping[HeaderKey, str] | None) -> Header:
    """INSTANT_TIME then SCHEMA (the order most samples show; Java's order is arbitrary) then extra entries."""
    header: Header = {HeaderMetadataType.INSTANT_TIME: instant_time}
    if schema_json is not None:
        header[HeaderMetadataType.SCHEMA] = schema_json
    header.update(extra or {})
    return header


# ----------------------------------------------------------------------------------------------- avro data block


@dataclass(eq=False)
class AvroDataBlock(HoodieLogBlock):
    """AVRO_DATA_BLOCK: int32 version 3, int32 record count, then per record int32 length + Avro binary datum
    encoded with the header SCHEMA (which includes the five meta columns first)."""

    block_type: HoodieLogBlockType = HoodieLogBlockType.AVRO_DATA_BLOCK

    @classmethod
    def from_table(cls, table: pa.Table, schema_json: str, instant_time: str,
                   header: Mapping[HeaderKey, str] | None = None) -> "AvroDataBlock":
        # maps as dicts: fastavro wants dicts, arrow would give lists of pairs
        return cls.from_records(table.to_pylist(maps_as_pydicts="strict"), schema_json, instant_time, header)

    @classmethod
    def from_records(cls, records: Iterable[Mapping[str, Any]], schema_json: str, instant_time: str,
                     header: Mapping[HeaderKey, str] | None = None) -> "AvroDataBlock":
        content = encode_avro_records(records, schema_json)
        return cls(header=_base_header(instant_time, schema_json, header), content=content)

    def record_count(self) -> int:
        return _avro_content_prefix(self.read_content())[1]

    def to_table(self, reader_schema_json: str | None = None) -> pa.Table:
        """The records as an Arrow table, decoded with the header SCHEMA (optionally resolved to a reader schema)."""
        return decode_avro_records(self.read_content(), self._writer_schema(), reader_schema_json)

    def iter_records(self, reader_schema_json: str | None = None) -> Iterator[dict[str, Any]]:
        return iter(_decode_avro_dicts(self.read_content(), self._writer_schema(), reader_schema_json))

    def split(self, max_content_size: int) -> list["AvroDataBlock"]:
        """This block as several blocks whose content is at most `max_content_size` bytes (a single larger
        record still gets a block of its own); headers are copied, datums are reused without re-encoding."""
        content = self.read_content()
        if len(content) <= max_content_size:
            return [self]
        return [dataclasses.replace(self, header=dict(self.header), footer=dict(self.footer), content=piece,
                                    offset=-1, size=-1, content_loader=None)
                for piece in split_avro_content(content, max_content_size)]

    def _writer_schema(self) -> str:
        schema = self.schema_json
        if schema is None:
            raise HoodieCorruptedLogError("avro data block has no SCHEMA header")
        return schema


def encode_avro_records(records: Iterable[Mapping[str, Any]], schema_json: str) -> bytes:
    """AVRO_DATA_BLOCK content for `records` (dicts keyed by field name) under Avro schema `schema_json`."""
    parsed = fastavro.parse_schema(json.loads(schema_json))
    out = io.BytesIO()
    out.write(bytes(8))  # version and count, patched once the count is known
    count = 0
    for record in records:
        start = out.tell()
        out.write(bytes(4))
        fastavro.schemaless_writer(out, parsed, record)
        end = out.tell()
        out.seek(start)
        out.write(_INT32.pack(end - start - 4))
        out.seek(end)
        count += 1
    out.seek(0)
    out.write(_INT32.pack(CONTENT_VERSION) + _INT32.pack(count))
    return out.getvalue()


def _avro_content_prefix(content: bytes) -> tuple[int, int]:
    if len(content) < 8:
        raise HoodieCorruptedLogError(f"avro data block content of {len(content)} bytes has no version/count")
    version, count = struct.unpack_from(">ii", content)
    if version != CONTENT_VERSION:
        raise HoodieCorruptedLogError(f"unsupported avro data block content version {version}")
    if count < 0 or count * 4 > len(content) - 8:  # every record has a 4-byte length
        raise HoodieCorruptedLogError(f"impossible record count {count} in {len(content)} content bytes")
    return version, count


def avro_record_spans(content: bytes) -> list[tuple[int, int]]:
    """(start, end) of each record datum inside AVRO_DATA_BLOCK content, checked to tile the content exactly."""
    starts, ends = avro_record_bounds(content)
    return list(zip(starts.tolist(), ends.tolist()))


def avro_record_bounds(content: bytes) -> tuple[np.ndarray, np.ndarray]:
    """Start and end offsets of the record datums inside AVRO_DATA_BLOCK content, checked to tile it exactly.

    Each record is `<int32 length><datum>`, so finding the next one needs the length before it: the walk stays a
    loop, kept to one unpack per record; the checks run on the arrays afterwards."""
    _, count = _avro_content_prefix(content)
    size = len(content)
    unpack, starts, pos = _INT32.unpack_from, [0] * count, 8
    try:
        for i in range(count):
            pos += 4 + unpack(content, pos)[0]  # a negative length walks back: caught below
            starts[i] = pos
    except struct.error:
        raise HoodieCorruptedLogError(f"a record length runs past the content ({size} bytes)") from None
    ends = np.array(starts, dtype=np.int64)
    lengths = np.diff(ends, prepend=8) - 4  # the datum sizes, each starting 4 bytes after the previous end
    if np.any(lengths < 0) or (count and (ends.min() < 8 or ends.max() > size)):
        raise HoodieCorruptedLogError(f"a record length runs outside the content ({size} bytes)")
    if (ends[-1] if count else 8) != size:
        raise HoodieCorruptedLogError(f"{size - (ends[-1] if count else 8)} stray bytes after {count} records")
    return ends - lengths, ends


def split_avro_content(content: bytes, max_content_size: int) -> list[bytes]:
    """Cut AVRO_DATA_BLOCK content into consecutive pieces of at most `max_content_size` bytes each."""
    pieces, first, piece_size = [], 0, 8
    spans = avro_record_spans(content)
    for i, (start, end) in enumerate(spans):
        record_size = end - start + 4
        if i > first and piece_size + record_size > max_content_size:
            pieces.append(_avro_piece(content, spans[first:i]))
            first, piece_size = i, 8
        piece_size += record_size
    pieces.append(_avro_piece(content, spans[first:]))
    return pieces


def _avro_piece(content: bytes, spans: list[tuple[int, int]]) -> bytes:
    # consecutive records are contiguous in the content, length prefixes included
    body = content[spans[0][0] - 4 : spans[-1][1]] if spans else b""
    return _INT32.pack(CONTENT_VERSION) + _INT32.pack(len(spans)) + body


def decode_avro_records(content: bytes, writer_schema_json: str, reader_schema_json: str | None = None) -> pa.Table:
    """AVRO_DATA_BLOCK content as an Arrow table with the (reader or writer) schema's columns."""
    arrow_schema = _arrow_schema(reader_schema_json or writer_schema_json)
    fields = _flat_fields(writer_schema_json) if reader_schema_json is None and arrow_schema is not None else None
    if fields is not None:  # flat records: decoded column by column, no dict per record
        starts, ends = avro_record_bounds(content)
        try:
            table = decode_flat(content, starts, ends, fields)
            return table.cast(arrow_schema)
        except (HoodieAvroDecodeError, pa.ArrowInvalid) as exc:
            raise HoodieCorruptedLogError(f"undecodable avro records: {exc}") from exc
    records = _decode_avro_dicts(content, writer_schema_json, reader_schema_json)
    try:
        # from_pylist converts the dicts in C++ (building each column from a Python list measured ~1.7x slower)
        return pa.Table.from_pylist(records, schema=arrow_schema)
    except Exception as exc:  # arrow raises several types for values that do not fit the column types
        raise HoodieCorruptedLogError(f"avro records do not fit their schema: {exc}") from exc


def _decode_avro_dicts(content: bytes, writer_schema_json: str, reader_schema_json: str | None) -> list[dict]:
    """Let fastavro's compiled reader iterate the datums by wrapping them in an in-memory container file
    (one data block), instead of one Python-level schemaless_reader call per record."""
    spans = avro_record_spans(content)
    view = memoryview(content)
    datums = b"".join(view[start:end] for start, end in spans)
    container = _avro_container(writer_schema_json, datums, len(spans))
    try:
        reader_schema = json.loads(reader_schema_json) if reader_schema_json else None
        records = list(fastavro.reader(io.BytesIO(container), reader_schema=reader_schema))
    except Exception as exc:  # fastavro raises many unrelated types on garbage input or a bad schema text
        raise HoodieCorruptedLogError(f"undecodable avro records: {type(exc).__name__}: {exc}") from exc
    if len(records) != len(spans) or not all(isinstance(r, dict) for r in records):
        raise HoodieCorruptedLogError(f"decoded {len(records)} records, the block announces {len(spans)}")
    return records


_CONTAINER_SYNC = b"hudi-log-block!!"  # any 16 bytes: the container only lives in memory


def _avro_container(schema_json: str, datums: bytes, count: int) -> bytes:
    meta = (encode_long(2) + encode_bytes(b"avro.schema") + encode_bytes(schema_json.encode("utf-8"))
            + encode_bytes(b"avro.codec") + encode_bytes(b"null") + encode_long(0))
    block = encode_long(count) + encode_long(len(datums)) + datums + _CONTAINER_SYNC if count else b""
    return b"Obj\x01" + meta + _CONTAINER_SYNC + block


@functools.lru_cache(maxsize=64)
def _flat_fields(schema_json: str):
    return flat_fields(schema_json)


def _arrow_schema(schema_json: str) -> pa.Schema | None:
    """Arrow schema of a record schema, or None when it has no Arrow equivalent (types are then inferred)."""
    try:
        return avro_to_arrow_schema(schema_json)
    except Exception as exc:  # noqa: BLE001 - any schema text the converter cannot handle means "infer"
        logger.debug("avro schema has no arrow equivalent (%s); inferring column types", exc)
        return None


# ----------------------------------------------------------------------------------------------- avro primitives




class _AvroDecoder:
    """Avro binary primitives from a bytes buffer, with every overrun reported as corruption."""

    def __init__(self, data: bytes) -> None:
        self.data, self.pos = data, 0

    def take(self, n: int) -> bytes:
        if n < 0 or self.pos + n > len(self.data):
            raise HoodieCorruptedLogError(f"avro value of {n} bytes at {self.pos} runs past the datum")
        out = self.data[self.pos : self.pos + n]
        self.pos += n
        return out

    def long(self) -> int:
        acc, shift = 0, 0
        for _ in range(10):  # a 64-bit varint has at most 10 bytes
            byte = self.take(1)[0]
            acc |= (byte & 0x7F) << shift
            if not byte & 0x80:
                value = (acc >> 1) ^ -(acc & 1)
                if not -(2**63) <= value < 2**63:
                    break
                return value
            shift += 7
        raise HoodieCorruptedLogError(f"malformed avro varint before offset {self.pos}")

    def int(self) -> int:
        value = self.long()
        if not -(2**31) <= value < 2**31:
            raise HoodieCorruptedLogError(f"avro int out of range: {value}")
        return value

    def bytes(self) -> bytes:
        return self.take(self.long())

    def string(self) -> str:
        return _utf8(self.bytes(), "avro string")


# ----------------------------------------------------------------------------------------------- delete block

# HoodieDeleteRecordList as Java Hudi defines it (spec §6.2); kept as data to document and cross-check the
# hand-written codec below, which exists because the orderingVal union branch must be chosen explicitly.
_DECIMAL_PRECISION, _DECIMAL_SCALE = 30, 15
ORDERING_VALUE_BRANCHES: tuple[Any, ...] = (
    "null", "int", "long", "float", "double", "bytes", "string",
    {"type": "bytes", "logicalType": "decimal", "precision": _DECIMAL_PRECISION, "scale": _DECIMAL_SCALE},
    {"type": "int", "logicalType": "date"},
    {"type": "int", "logicalType": "time-millis"},
    {"type": "long", "logicalType": "time-micros"},
    {"type": "long", "logicalType": "timestamp-millis"},
    {"type": "long", "logicalType": "timestamp-micros"},
)
DELETE_RECORD_LIST_SCHEMA: dict[str, Any] = {
    "type": "record", "name": "HoodieDeleteRecordList", "namespace": "org.apache.hudi.avro.model",
    "fields": [{"name": "deleteRecordList", "type": {"type": "array", "items": {
        "type": "record", "name": "HoodieDeleteRecord", "fields": [
            {"name": "recordKey", "type": ["null", "string"], "default": None},
            {"name": "partitionPath", "type": ["null", "string"], "default": None},
            {"name": "orderingVal", "type": list(ORDERING_VALUE_BRANCHES), "default": None},
        ]}}}],
}


class _Branch(IntEnum):
    """Index of each orderingVal union branch."""

    NULL = 0
    INT = 1
    LONG = 2
    FLOAT = 3
    DOUBLE = 4
    BYTES = 5
    STRING = 6
    DECIMAL = 7
    DATE = 8
    TIME_MILLIS = 9
    TIME_MICROS = 10
    TIMESTAMP_MILLIS = 11
    TIMESTAMP_MICROS = 12


# The Arrow type a decoded orderingVal carries, so re-encoding picks the same branch.
_BRANCH_ARROW_TYPE: dict[_Branch, pa.DataType] = {
    _Branch.NULL: pa.null(), _Branch.INT: pa.int32(), _Branch.LONG: pa.int64(), _Branch.FLOAT: pa.float32(),
    _Branch.DOUBLE: pa.float64(), _Branch.BYTES: pa.binary(), _Branch.STRING: pa.string(),
    _Branch.DECIMAL: pa.decimal128(_DECIMAL_PRECISION, _DECIMAL_SCALE), _Branch.DATE: pa.date32(),
    _Branch.TIME_MILLIS: pa.time32("ms"), _Branch.TIME_MICROS: pa.time64("us"),
    _Branch.TIMESTAMP_MILLIS: pa.timestamp("ms", tz="UTC"), _Branch.TIMESTAMP_MICROS: pa.timestamp("us", tz="UTC"),
}

_EPOCH = dt.datetime(1970, 1, 1, tzinfo=dt.timezone.utc)
_EPOCH_DATE = dt.date(1970, 1, 1)
_DECIMAL_CONTEXT = decimal.Context(prec=80)


@dataclass(frozen=True)
class DeleteRecord:
    """One deleted key. `ordering_type` (an Arrow type) names the Avro union branch of `ordering_value`;
    when None it is inferred from the value (Python int -> long, float -> double, str -> string, ...)."""

    record_key: str | None
    partition_path: str | None
    ordering_value: Any = None
    ordering_type: pa.DataType | None = None


@dataclass(eq=False)
class DeleteBlock(HoodieLogBlock):
    """DELETE_BLOCK: int32 version 3, int32 datum length, Avro datum of HoodieDeleteRecordList."""

    block_type: HoodieLogBlockType = HoodieLogBlockType.DELETE_BLOCK

    @classmethod
    def from_records(cls, records: Iterable[DeleteRecord | tuple], instant_time: str,
                     schema_json: str | None = None, header: Mapping[HeaderKey, str] | None = None) -> "DeleteBlock":
        """Data-table delete blocks carry the table SCHEMA in their header; metadata-table ones do not."""
        content = encode_delete_records(_as_delete_record(r) for r in records)
        return cls(header=_base_header(instant_time, schema_json, header), content=content)

    def delete_records(self) -> list[DeleteRecord]:
        return decode_delete_records(self.read_content())

    def record_count(self) -> int:
        return len(self.delete_records())


def _as_delete_record(record: DeleteRecord | tuple) -> DeleteRecord:
    return record if isinstance(record, DeleteRecord) else DeleteRecord(*record)


def encode_delete_records(records: Iterable[DeleteRecord]) -> bytes:
    items = [_encode_delete_record(r) for r in records]
    # Java's encoder writes the whole array as one block: count, items, then the 0 terminator
    datum = (encode_long(len(items)) + b"".join(items) if items else b"") + encode_long(0)
    return _INT32.pack(CONTENT_VERSION) + _INT32.pack(len(datum)) + datum


def _encode_delete_record(record: DeleteRecord) -> bytes:
    return (_encode_nullable_string(record.record_key) + _encode_nullable_string(record.partition_path)
            + _encode_ordering_value(record.ordering_value, record.ordering_type))


def _encode_nullable_string(value: str | None) -> bytes:
    return encode_long(0) if value is None else encode_long(1) + encode_bytes(str(value).encode("utf-8"))


def _encode_ordering_value(value: Any, arrow_type: pa.DataType | None) -> bytes:
    if isinstance(value, pa.Scalar):
        arrow_type = arrow_type or value.type
        value = value.as_py()
    if value is None:
        return encode_long(_Branch.NULL)
    branch = _branch_for(arrow_type if arrow_type is not None else _infer_arrow_type(value))
    return encode_long(branch) + _BRANCH_ENCODERS[branch](value)


def _infer_arrow_type(value: Any) -> pa.DataType:
    if isinstance(value, bool):  # pa.scalar would say bool, which has no branch; be explicit
        raise ValueError("boolean ordering values have no HoodieDeleteRecord orderingVal branch")
    try:
        return pa.scalar(value).type
    except (pa.ArrowException, TypeError, ValueError) as exc:
        raise ValueError(f"cannot tell the Avro type of ordering value {value!r}") from exc


def _branch_for(arrow_type: pa.DataType) -> _Branch:
    """The orderingVal union branch of an Arrow type (Spark's byte/short/int -> int, bigint -> long, ...)."""
    t = pa.types
    checks: tuple[tuple[Callable[[pa.DataType], bool], _Branch], ...] = (
        (t.is_null, _Branch.NULL),
        (lambda x: x in (pa.int8(), pa.int16(), pa.int32(), pa.uint8(), pa.uint16()), _Branch.INT),
        (lambda x: x in (pa.int64(), pa.uint32(), pa.uint64()), _Branch.LONG),
        (lambda x: x in (pa.float16(), pa.float32()), _Branch.FLOAT),
        (t.is_float64, _Branch.DOUBLE),
        (lambda x: t.is_binary(x) or t.is_large_binary(x) or t.is_fixed_size_binary(x), _Branch.BYTES),
        (lambda x: t.is_string(x) or t.is_large_string(x), _Branch.STRING),
        (t.is_decimal, _Branch.DECIMAL),
        (t.is_date, _Branch.DATE),
        (t.is_time32, _Branch.TIME_MILLIS),
        (t.is_time64, _Branch.TIME_MICROS),
        (lambda x: t.is_timestamp(x) and x.unit in ("s", "ms"), _Branch.TIMESTAMP_MILLIS),
        (t.is_timestamp, _Branch.TIMESTAMP_MICROS),
    )
    for check, branch in checks:
        if check(arrow_type):
            return branch
    raise ValueError(f"ordering values of type {arrow_type} have no HoodieDeleteRecord orderingVal branch")


def _encode_int(value: Any) -> bytes:
    value = int(value)
    if not -(2**31) <= value < 2**31:
        raise ValueError(f"ordering value {value} does not fit an Avro int")
    return encode_long(value)


def _encode_long(value: Any) -> bytes:
    value = int(value)
    if not -(2**63) <= value < 2**63:
        raise ValueError(f"ordering value {value} does not fit an Avro long")
    return encode_long(value)


def _encode_decimal(value: Any) -> bytes:
    with decimal.localcontext(_DECIMAL_CONTEXT):
        unscaled = int(decimal.Decimal(value).scaleb(_DECIMAL_SCALE).to_integral_value(decimal.ROUND_HALF_UP))
    if abs(unscaled) >= 10**_DECIMAL_PRECISION:
        raise ValueError(f"ordering value {value} does not fit decimal({_DECIMAL_PRECISION},{_DECIMAL_SCALE})")
    # minimal two's complement, as Java's BigInteger.toByteArray
    size = ((unscaled if unscaled >= 0 else ~unscaled).bit_length() + 8) // 8
    return encode_bytes(unscaled.to_bytes(size, "big", signed=True))


def _days(value: Any) -> int:
    return value if isinstance(value, int) else (value - _EPOCH_DATE).days


def _time_micros(value: Any) -> int:
    if isinstance(value, int):
        return value
    return ((value.hour * 60 + value.minute) * 60 + value.second) * 1_000_000 + value.microsecond


def _epoch_micros(value: Any) -> int:
    if isinstance(value, int):
        return value
    if value.tzinfo is None:  # naive datetimes are taken as UTC, like Spark's timestamps
        value = value.replace(tzinfo=dt.timezone.utc)
    return (value - _EPOCH) // dt.timedelta(microseconds=1)


_BRANCH_ENCODERS: dict[_Branch, Callable[[Any], bytes]] = {
    _Branch.INT: _encode_int,
    _Branch.LONG: _encode_long,
    _Branch.FLOAT: lambda v: struct.pack("<f", float(v)),
    _Branch.DOUBLE: lambda v: struct.pack("<d", float(v)),
    _Branch.BYTES: lambda v: encode_bytes(bytes(v)),
    _Branch.STRING: lambda v: encode_bytes(str(v).encode("utf-8")),
    _Branch.DECIMAL: _encode_decimal,
    _Branch.DATE: lambda v: _encode_int(_days(v)),
    _Branch.TIME_MILLIS: lambda v: _encode_int(v if isinstance(v, int) else _time_micros(v) // 1000),
    _Branch.TIME_MICROS: lambda v: _encode_long(_time_micros(v)),
    _Branch.TIMESTAMP_MILLIS: lambda v: _encode_long(v if isinstance(v, int) else _epoch_micros(v) // 1000),
    _Branch.TIMESTAMP_MICROS: lambda v: _encode_long(_epoch_micros(v)),
}


def decode_delete_records(content: bytes) -> list[DeleteRecord]:
    """DELETE_BLOCK content as DeleteRecords (orderingVal typed by the union branch it was written with)."""
    if len(content) < 8:
        raise HoodieCorruptedLogError(f"delete block content of {len(content)} bytes has no version/length")
    version, length = struct.unpack_from(">ii", content)
    if version != CONTENT_VERSION:
        raise HoodieCorruptedLogError(f"unsupported delete block content version {version}")
    if length != len(content) - 8:
        raise HoodieCorruptedLogError(f"delete list of {length} bytes in {len(content) - 8} content bytes")
    decoder = _AvroDecoder(content[8:])
    try:
        records = _decode_delete_array(decoder)
    except (ValueError, OverflowError) as exc:  # impossible dates/times from damaged bytes
        raise HoodieCorruptedLogError(f"undecodable delete record: {exc}") from exc
    if decoder.pos != len(decoder.data):
        raise HoodieCorruptedLogError(f"{len(decoder.data) - decoder.pos} stray bytes after the delete list")
    return records


def _decode_delete_array(decoder: _AvroDecoder) -> list[DeleteRecord]:
    records: list[DeleteRecord] = []
    while True:
        count = decoder.long()
        if count == 0:
            return records
        if count < 0:  # a negative block count is followed by the block's byte size
            count = -count
            decoder.long()
        if count * 3 > len(decoder.data) - decoder.pos:  # an item takes at least 3 bytes
            raise HoodieCorruptedLogError(f"delete list announces {count} items in too few bytes")
        records.extend(_decode_delete_record(decoder) for _ in range(count))


def _decode_delete_record(decoder: _AvroDecoder) -> DeleteRecord:
    key = _decode_nullable_string(decoder)
    partition = _decode_nullable_string(decoder)
    index = decoder.long()
    if not 0 <= index < len(_Branch):
        raise HoodieCorruptedLogError(f"orderingVal union branch {index} does not exist")
    branch = _Branch(index)
    value = None if branch == _Branch.NULL else _BRANCH_DECODERS[branch](decoder)
    return DeleteRecord(key, partition, value, _BRANCH_ARROW_TYPE[branch])


def _decode_nullable_string(decoder: _AvroDecoder) -> str | None:
    index = decoder.long()
    if index == 0:
        return None
    if index != 1:
        raise HoodieCorruptedLogError(f"[null, string] union branch {index} does not exist")
    return decoder.string()


def _decode_decimal(decoder: _AvroDecoder) -> decimal.Decimal:
    unscaled = int.from_bytes(decoder.bytes(), "big", signed=True)
    with decimal.localcontext(_DECIMAL_CONTEXT):
        return decimal.Decimal(unscaled).scaleb(-_DECIMAL_SCALE)


def _time_of_micros(micros: int) -> dt.time:
    if not 0 <= micros < 86_400_000_000:
        raise ValueError(f"time of day {micros} µs out of range")
    seconds, micro = divmod(micros, 1_000_000)
    minutes, second = divmod(seconds, 60)
    hour, minute = divmod(minutes, 60)
    return dt.time(hour, minute, second, micro)


_BRANCH_DECODERS: dict[_Branch, Callable[[_AvroDecoder], Any]] = {
    _Branch.INT: lambda d: d.int(),
    _Branch.LONG: lambda d: d.long(),
    _Branch.FLOAT: lambda d: struct.unpack("<f", d.take(4))[0],
    _Branch.DOUBLE: lambda d: struct.unpack("<d", d.take(8))[0],
    _Branch.BYTES: lambda d: d.bytes(),
    _Branch.STRING: lambda d: d.string(),
    _Branch.DECIMAL: _decode_decimal,
    _Branch.DATE: lambda d: _EPOCH_DATE + dt.timedelta(days=d.int()),
    _Branch.TIME_MILLIS: lambda d: _time_of_micros(d.int() * 1000),
    _Branch.TIME_MICROS: lambda d: _time_of_micros(d.long()),
    _Branch.TIMESTAMP_MILLIS: lambda d: _EPOCH + dt.timedelta(milliseconds=d.long()),
    _Branch.TIMESTAMP_MICROS: lambda d: _EPOCH + dt.timedelta(microseconds=d.long()),
}


# ----------------------------------------------------------------------------------------------- command block


@dataclass(eq=False)
class CommandBlock(HoodieLogBlock):
    """COMMAND_BLOCK: empty content; the header says what to do (only rollback exists)."""

    block_type: HoodieLogBlockType = HoodieLogBlockType.COMMAND_BLOCK

    @classmethod
    def rollback(cls, instant_time: str, target_instant_time: str) -> "CommandBlock":
        """Rollback of `target_instant_time` by rollback instant `instant_time` (header order as in the samples)."""
        header: Header = {
            HeaderMetadataType.INSTANT_TIME: instant_time,
            HeaderMetadataType.COMMAND_BLOCK_TYPE: str(int(CommandBlockType.ROLLBACK_BLOCK)),
            HeaderMetadataType.TARGET_INSTANT_TIME: target_instant_time,
        }
        return cls(header=header, content=b"")

    @property
    def command_type(self) -> CommandBlockType:
        raw = self.header.get(HeaderMetadataType.COMMAND_BLOCK_TYPE)
        try:
            return CommandBlockType(int(raw))  # type: ignore[arg-type]
        except (TypeError, ValueError) as exc:
            raise HoodieCorruptedLogError(f"unknown command block type {raw!r}") from exc

    @property
    def target_instant_time(self) -> str | None:
        return self.header.get(HeaderMetadataType.TARGET_INSTANT_TIME)


# ----------------------------------------------------------------------------------------------- parquet block


@dataclass(eq=False)
class ParquetDataBlock(HoodieLogBlock):
    """PARQUET_DATA_BLOCK: the content is a complete Parquet file, no version prefix."""

    block_type: HoodieLogBlockType = HoodieLogBlockType.PARQUET_DATA_BLOCK

    @classmethod
    def from_table(cls, table: pa.Table, schema_json: str, instant_time: str, *, compression: str = "gzip",
                   header: Mapping[HeaderKey, str] | None = None) -> "ParquetDataBlock":
        return cls(header=_base_header(instant_time, schema_json, header),
                   content=parquet_to_bytes(table, compression))

    def to_table(self) -> pa.Table:
        try:
            return parquet_from_bytes(self.read_content()).read()
        except Exception as exc:  # arrow's parquet reader raises many types on damaged files
            raise HoodieCorruptedLogError(f"undecodable parquet block content: {exc}") from exc

    def record_count(self) -> int:
        try:
            return parquet_from_bytes(self.read_content()).metadata.num_rows
        except Exception as exc:  # arrow's parquet reader raises many types on damaged files
            raise HoodieCorruptedLogError(f"undecodable parquet block footer: {exc}") from exc


# ----------------------------------------------------------------------------------------------- corrupt block


@dataclass(eq=False)
class CorruptBlock(HoodieLogBlock):
    """A damaged region of a log file: from `offset`, `size` bytes up to the next magic (or the end of the
    file), or one well-framed block whose inside does not parse. `content` holds the region's bytes."""

    block_type: HoodieLogBlockType = HoodieLogBlockType.CORRUPT_BLOCK
    reason: str = ""


# ----------------------------------------------------------------------------------------------- factory

BLOCK_CLASSES: dict[HoodieLogBlockType, type[HoodieLogBlock]] = {
    HoodieLogBlockType.COMMAND_BLOCK: CommandBlock,
    HoodieLogBlockType.DELETE_BLOCK: DeleteBlock,
    HoodieLogBlockType.CORRUPT_BLOCK: CorruptBlock,
    HoodieLogBlockType.AVRO_DATA_BLOCK: AvroDataBlock,
    HoodieLogBlockType.PARQUET_DATA_BLOCK: ParquetDataBlock,
}


def make_block(block_type: HoodieLogBlockType, header: Header, footer: Footer, content: bytes | None, *,
               offset: int = -1, size: int = -1, content_loader: Callable[[], bytes] | None = None) -> HoodieLogBlock:
    """The typed block for `block_type` (a generic HoodieLogBlock for HFILE and CDC blocks)."""
    cls = BLOCK_CLASSES.get(block_type, HoodieLogBlock)
    return cls(block_type=block_type, header=header, footer=footer, content=content, offset=offset, size=size,
               content_loader=content_loader)


def data_block_schema(arrow_schema: pa.Schema, table_name: str) -> str:
    """SCHEMA header text for records of `arrow_schema`: the commit-style Avro schema with meta columns first."""
    return avro_schema_to_json(add_meta_fields(arrow_to_avro_schema(arrow_schema, table_name)))


__all__ = [
    "AvroDataBlock", "BLOCK_CLASSES", "BoundedReader", "CommandBlock", "CommandBlockType", "CorruptBlock",
    "DELETE_RECORD_LIST_SCHEMA", "DeleteBlock", "DeleteRecord", "HeaderMetadataType", "HoodieCorruptedLogError",
    "HoodieLogBlock", "HoodieLogBlockType", "ParquetDataBlock", "avro_record_spans", "data_block_schema",
    "decode_avro_records", "decode_delete_records", "decode_footer", "decode_header", "encode_avro_records",
    "encode_delete_records", "encode_metadata", "make_block", "split_avro_content",
]
