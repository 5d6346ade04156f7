"""Typed model of the blocks of a Hudi log file (spec §6): block and header types, the header/footer metadata map,
and the blocks themselves — data (Avro, Parquet, HFile), delete, command and corrupt.

Framing (magic, lengths, reverse pointer) lives in `log_format`; this module only knows what is *inside* a block.
The content codecs of Avro data blocks and delete blocks live in `avro_block_content` and `delete_record`, on top
of the Avro codec of `storage.avro`. Every decoder turns malformed bytes into `HoodieCorruptedLogError` — never
an IndexError, struct.error or UnicodeDecodeError — because log content may be damaged by a writer that died
mid-write.
"""
from __future__ import annotations

import dataclasses
import logging
import struct
from dataclasses import dataclass, field
from enum import IntEnum
from typing import Any, Callable, Iterable, Iterator, Mapping

import pyarrow as pa

from storage.avro.schema_converter import add_meta_fields, arrow_to_avro_schema, avro_schema_to_json
from storage.io.hfile.format import HoodieHFileError
from storage.io.hfile.reader import Cell, HFileReader
from storage.io.parquet import parquet_from_bytes, parquet_to_bytes
from storage.exception import HoodieCorruptedLogError
from storage.file_group.avro_block_content import (
    avro_record_count,
    decode_avro_dicts,
    decode_avro_records,
    encode_avro_records,
    encode_avro_table,
    split_avro_content,
)
from storage.file_group.delete_record import (
    DeleteRecord,
    as_delete_record,
    decode_delete_records,
    encode_delete_columns,
    encode_delete_records,
)

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
        """The rows of `table` as a block; flat schemas are encoded column by column (see `encode_avro_table`)."""
        content = encode_avro_table(table, schema_json)
        return cls(header=_base_header(instant_time, schema_json, header), content=content)

    @classmethod
    def from_records(cls, records: Iterable[Mapping[str, Any]], schema_json: str, instant_time: str,
                     header: Mapping[HeaderKey, str] | None = None) -> "AvroDataBlock":
        content = encode_avro_records(records, schema_json)
        return cls(header=_base_header(instant_time, schema_json, header), content=content)

    def record_count(self) -> int:
        return avro_record_count(self.read_content())

    def to_table(self, reader_schema_json: str | None = None) -> pa.Table:
        """The records as an Arrow table, decoded with the header SCHEMA (optionally resolved to a reader schema)."""
        return decode_avro_records(self.read_content(), self._writer_schema(), reader_schema_json)

    def iter_records(self, reader_schema_json: str | None = None) -> Iterator[dict[str, Any]]:
        return iter(decode_avro_dicts(self.read_content(), self._writer_schema(), reader_schema_json))

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


# ----------------------------------------------------------------------------------------------- delete block


@dataclass(eq=False)
class DeleteBlock(HoodieLogBlock):
    """DELETE_BLOCK: int32 version 3, int32 datum length, Avro datum of HoodieDeleteRecordList."""

    block_type: HoodieLogBlockType = HoodieLogBlockType.DELETE_BLOCK

    @classmethod
    def from_records(cls, records: Iterable[DeleteRecord | tuple], instant_time: str,
                     schema_json: str | None = None, header: Mapping[HeaderKey, str] | None = None) -> "DeleteBlock":
        """Data-table delete blocks carry the table SCHEMA in their header; metadata-table ones do not."""
        content = encode_delete_records(as_delete_record(r) for r in records)
        return cls(header=_base_header(instant_time, schema_json, header), content=content)

    @classmethod
    def from_columns(cls, keys: pa.Array, partition_path: str, ordering: pa.Array | None, instant_time: str,
                     schema_json: str | None = None) -> "DeleteBlock":
        """The deletes of one partition's keys (with their ordering values, None: none), encoded column by column."""
        return cls(header=_base_header(instant_time, schema_json, None),
                   content=encode_delete_columns(keys, partition_path, ordering))

    def delete_records(self) -> list[DeleteRecord]:
        return decode_delete_records(self.read_content())

    def record_count(self) -> int:
        return len(self.delete_records())


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


# ----------------------------------------------------------------------------------------------- hfile block


@dataclass(eq=False)
class HFileDataBlock(HoodieLogBlock):
    """HFILE_DATA_BLOCK: the content is a complete HFile (version 3), no prefix; the metadata table's upserts.

    The block only opens the HFile: its cells are (row key, Avro value) pairs whose records the metadata layer
    (`storage.metadata`) decodes with the SCHEMA header, which this layer does not know about. A damaged HFile
    is reported as `HoodieCorruptedLogError` like every other undecodable block content."""

    block_type: HoodieLogBlockType = HoodieLogBlockType.HFILE_DATA_BLOCK

    @classmethod
    def from_hfile(cls, hfile: bytes, schema_json: str, instant_time: str,
                   header: Mapping[HeaderKey, str] | None = None) -> "HFileDataBlock":
        """A block carrying `hfile` (e.g. written by `storage.io.hfile.write_hfile`) under INSTANT_TIME + SCHEMA."""
        return cls(header=_base_header(instant_time, schema_json, header), content=bytes(hfile))

    def hfile(self, source: str = "") -> HFileReader:
        """The embedded HFile; `source` (e.g. the log file's path) names it in errors."""
        where = f"{source or 'log'}: HFILE_DATA_BLOCK at offset {self.offset}"
        try:
            return HFileReader(self.read_content(), where)
        except HoodieHFileError as exc:
            raise HoodieCorruptedLogError(f"undecodable HFile block content: {exc}") from exc

    def cells(self, source: str = "") -> list[Cell]:
        """Every cell of the embedded HFile in key order (checked against its trailer's entry count)."""
        reader = self.hfile(source)
        try:
            return reader.read_all()
        except HoodieHFileError as exc:
            raise HoodieCorruptedLogError(f"undecodable HFile block content: {exc}") from exc

    def record_count(self) -> int:
        return self.hfile().entry_count


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
    HoodieLogBlockType.HFILE_DATA_BLOCK: HFileDataBlock,
}


def make_block(block_type: HoodieLogBlockType, header: Header, footer: Footer, content: bytes | None, *,
               offset: int = -1, size: int = -1, content_loader: Callable[[], bytes] | None = None) -> HoodieLogBlock:
    """The typed block for `block_type` (a generic HoodieLogBlock for CDC blocks)."""
    cls = BLOCK_CLASSES.get(block_type, HoodieLogBlock)
    return cls(block_type=block_type, header=header, footer=footer, content=content, offset=offset, size=size,
               content_loader=content_loader)


def data_block_schema(arrow_schema: pa.Schema, table_name: str) -> str:
    """SCHEMA header text for records of `arrow_schema`: the commit-style Avro schema with meta columns first."""
    return avro_schema_to_json(add_meta_fields(arrow_to_avro_schema(arrow_schema, table_name)))


__all__ = [
    "AvroDataBlock", "BLOCK_CLASSES", "BoundedReader", "CommandBlock", "CommandBlockType", "CorruptBlock",
    "DeleteBlock", "HFileDataBlock", "HeaderMetadataType", "HoodieCorruptedLogError", "HoodieLogBlock", "HoodieLogBlockType",
    "ParquetDataBlock", "data_block_schema", "decode_footer", "decode_header", "encode_metadata", "make_block",
]
