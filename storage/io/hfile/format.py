"""HFile version 3 on-disk format as Hudi writes it (metadata table base files and HFILE_DATA_BLOCK log blocks):
block header, trailer, index entries, file info, cell keys, and the small codecs they use (protobuf varints and
fields, Hadoop VInt/VLong, CRC32C). See /work/shared/spec/metadata-table-notes.md §1.

Both writer generations are modelled: Hudi 1.0.x (HBase writer: minor version 3, CRC32C checksums, full KeyValue
keys in the index and `hfile.LASTKEY`) and Hudi 1.1 (its own writer: minor 0, NULL checksums with zeroed checksum
bytes, row-only index keys). Every parse error is a `HoodieHFileError` naming the file and what is wrong.
"""
from __future__ import annotations

import enum
import struct
import zlib
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, fields

from storage.exception import HoodieError

TRAILER_SIZE = 4096
HEADER_SIZE = 33
CHECKSUM_SIZE = 4
BYTES_PER_CHECKSUM = 16384
MAJOR_VERSION = 3
MINOR_VERSION_HUDI_1_1 = 0
MINOR_VERSION_HBASE = 3
TRAILER_MAGIC = b'TRABLK"$'
PBUF_MAGIC = b"PBUF"
COMPARATOR_CLASS = "org.apache.hudi.io.storage.HoodieHBaseKVComparator"
LATEST_TIMESTAMP = 0x7FFFFFFFFFFFFFFF
KEY_TYPE_PUT = 4
# Row + 2-byte row length + 1-byte family length + 8-byte timestamp + 1-byte type: the KeyValue key tail.
KEY_OVERHEAD = 12
# The unsigned 64-bit "no block" offset (the protobuf varint of -1 as u64).
NO_OFFSET = (1 << 64) - 1

_HEADER = struct.Struct(">8siiqBii")
KV_LENGTHS = struct.Struct(">ii")  # cell key length, value length
_INDEX_ENTRY = struct.Struct(">qi")


class HoodieHFileError(HoodieError, ValueError):
    """An HFile that cannot be read: truncated, corrupted, or of a form this reader does not support."""


class BlockType(bytes, enum.Enum):
    DATA = b"DATABLK*"
    ENCODED_DATA = b"DATABLKE"
    META = b"METABLKc"
    ROOT_INDEX = b"IDXROOT2"
    LEAF_INDEX = b"IDXLEAF2"
    INTERMEDIATE_INDEX = b"IDXINTE2"
    FILE_INFO = b"FILEINF2"
    GENERAL_BLOOM_META = b"BLMFMET2"
    DELETE_FAMILY_BLOOM_META = b"DFBLMET2"
    BLOOM_CHUNK = b"BLMFBLK2"
    INDEX_V1 = b"IDXBLK)+"


class Codec(enum.IntEnum):
    LZO = 0
    GZ = 1
    NONE = 2
    SNAPPY = 3
    LZ4 = 4
    BZIP2 = 5
    ZSTD = 6


class ChecksumType(enum.IntEnum):
    NULL = 0
    CRC32 = 1
    CRC32C = 2


class FileInfoKey:
    """File info keys Hudi and the HFile writers put (bytes, as stored)."""

    SCHEMA = b"schema"
    BLOOM_FILTER_TYPE_CODE = b"bloomFilterTypeCode"
    MIN_RECORD_KEY = b"minRecordKey"
    MAX_RECORD_KEY = b"maxRecordKey"
    LAST_KEY = b"hfile.LASTKEY"
    AVG_KEY_LEN = b"hfile.AVG_KEY_LEN"
    AVG_VALUE_LEN = b"hfile.AVG_VALUE_LEN"
    CREATE_TIME_TS = b"hfile.CREATE_TIME_TS"
    KEY_VALUE_VERSION = b"KEY_VALUE_VERSION"
    MAX_MEMSTORE_TS_KEY = b"MAX_MEMSTORE_TS_KEY"


BLOOM_FILTER_META_BLOCK = b"bloomFilter"


# ----------------------------------------------------------------------------------------------- block header


@dataclass(frozen=True, slots=True)
class BlockHeader:
    block_type: BlockType
    on_disk_size_without_header: int  # compressed payload + checksum bytes
    uncompressed_size_without_header: int
    prev_block_offset: int
    checksum_type: int
    bytes_per_checksum: int
    on_disk_data_size_with_header: int  # header + compressed payload

    @property
    def on_disk_size(self) -> int:
        return HEADER_SIZE + self.on_disk_size_without_header

    @property
    def compressed_payload_size(self) -> int:
        return self.on_disk_data_size_with_header - HEADER_SIZE

    def encode(self) -> bytes:
        return _HEADER.pack(self.block_type.value, self.on_disk_size_without_header,
                            self.uncompressed_size_without_header, self.prev_block_offset, self.checksum_type,
                            self.bytes_per_checksum, self.on_disk_data_size_with_header)


def decode_block_header(data: bytes, offset: int, source: str) -> BlockHeader:
    if offset < 0 or offset + HEADER_SIZE > len(data):
        raise HoodieHFileError(f"{source}: block header at offset {offset} runs past the end of the "
                               f"{len(data)}-byte file (truncated?)")
    magic, on_disk, uncompressed, prev, ck_type, per_ck, data_with_header = _HEADER.unpack_from(data, offset)
    try:
        block_type = BlockType(magic)
    except ValueError:
        raise HoodieHFileError(f"{source}: no HFile block magic at offset {offset} (found {magic!r})") from None
    header = BlockHeader(block_type, on_disk, uncompressed, prev, ck_type, per_ck, data_with_header)
    if on_disk < 0 or uncompressed < 0 or data_with_header < HEADER_SIZE or per_ck <= 0:
        raise HoodieHFileError(f"{source}: {block_type.name} block at offset {offset} has invalid sizes {header}")
    if offset + header.on_disk_size > len(data):
        raise HoodieHFileError(f"{source}: {block_type.name} block at offset {offset} needs {header.on_disk_size} "
                               f"bytes but the file ends after {len(data) - offset} (truncated?)")
    if header.checksum_type not in tuple(ChecksumType):
        raise HoodieHFileError(f"{source}: {block_type.name} block at offset {offset} has unknown checksum type "
                               f"{header.checksum_type}")
    if on_disk - header.compressed_payload_size != checksum_size(data_with_header, per_ck):
        raise HoodieHFileError(f"{source}: {block_type.name} block at offset {offset}: on-disk size {on_disk} does "
                               f"not fit payload {header.compressed_payload_size} plus its checksum bytes")
    return header


def checksum_size(data_size_with_header: int, bytes_per_checksum: int = BYTES_PER_CHECKSUM) -> int:
    """4 bytes per started chunk of header+payload (present even for NULL checksums, then zeros)."""
    return CHECKSUM_SIZE * -(-data_size_with_header // bytes_per_checksum)


def block_checksums(chunked: bytes, checksum_type: int, bytes_per_checksum: int) -> bytes:
    """The checksum bytes HBase/Hudi write after a block's header+payload."""
    count = checksum_size(len(chunked), bytes_per_checksum) // CHECKSUM_SIZE
    if checksum_type == ChecksumType.NULL:
        return bytes(CHECKSUM_SIZE * count)
    fn = crc32c if checksum_type == ChecksumType.CRC32C else zlib.crc32
    return b"".join(struct.pack(">I", fn(chunked[i * bytes_per_checksum:(i + 1) * bytes_per_checksum]))
                    for i in range(count))


def _crc32c_table() -> list[int]:
    table = []
    for n in range(256):
        c = n
        for _ in range(8):
            c = (c >> 1) ^ 0x82F63B78 if c & 1 else c >> 1
        table.append(c)
    return table


_CRC32C_TABLE = _crc32c_table()


def crc32c(data: bytes) -> int:
    """CRC-32C (Castagnoli). Pure Python: only 1.0.x blocks use it, and those are a few KB."""
    crc, table = 0xFFFFFFFF, _CRC32C_TABLE
    for b in data:
        crc = table[(crc ^ b) & 0xFF] ^ (crc >> 8)
    return crc ^ 0xFFFFFFFF


def java_string_hash(text: str) -> int:
    """Java's String.hashCode: `h = 31*h + c` over UTF-16 code units with int overflow (signed result)."""
    raw = text.encode("utf-16-be", "surrogatepass")
    h = 0
    for i in range(0, len(raw), 2):
        h = (31 * h + (raw[i] << 8 | raw[i + 1])) & 0xFFFFFFFF
    return h - (1 << 32) if h & 0x80000000 else h


# ----------------------------------------------------------------------------------------------- varints


def encode_uvarint(value: int) -> bytes:
    """Protobuf base-128 varint of an unsigned value (negative ints as their 64-bit two's complement)."""
    value &= (1 << 64) - 1
    out = bytearray()
    while value >= 0x80:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def decode_uvarint(data: bytes, pos: int, what: str) -> tuple[int, int]:
    result = shift = 0
    while True:
        if pos >= len(data):
            raise HoodieHFileError(f"{what}: truncated varint")
        b = data[pos]
        pos += 1
        result |= (b & 0x7F) << shift
        if not b & 0x80:
            return result, pos
        shift += 7
        if shift >= 70:
            raise HoodieHFileError(f"{what}: varint longer than 10 bytes")


def encode_vlong(value: int) -> bytes:
    """Hadoop WritableUtils VLong/VInt (not a protobuf varint)."""
    if -112 <= value <= 127:
        return struct.pack(">b", value)
    length = -112
    if value < 0:
        value ^= -1
        length = -120
    tmp = value
    while tmp:
        tmp >>= 8
        length -= 1
    size = -(length + 120) if length < -120 else -(length + 112)
    return struct.pack(">b", length) + value.to_bytes(size, "big")


def decode_vlong(data: bytes, pos: int, what: str) -> tuple[int, int]:
    if pos >= len(data):
        raise HoodieHFileError(f"{what}: truncated VLong")
    first = struct.unpack_from(">b", data, pos)[0]
    if first >= -112:
        return first, pos + 1
    negative = first < -120
    size = (-119 - first if negative else -111 - first) - 1
    if pos + 1 + size > len(data):
        raise HoodieHFileError(f"{what}: truncated VLong")
    value = int.from_bytes(data[pos + 1:pos + 1 + size], "big")
    return (~value if negative else value), pos + 1 + size


# ----------------------------------------------------------------------------------------------- protobuf fields


def iter_proto_fields(data: bytes, what: str) -> Iterator[tuple[int, int | bytes]]:
    """(field number, value) of a protobuf message with varint and length-delimited fields only."""
    pos = 0
    while pos < len(data):
        tag, pos = decode_uvarint(data, pos, what)
        number, wire = tag >> 3, tag & 7
        if wire == 0:
            value, pos = decode_uvarint(data, pos, what)
            yield number, value
        elif wire == 2:
            length, pos = decode_uvarint(data, pos, what)
            if pos + length > len(data):
                raise HoodieHFileError(f"{what}: field {number} runs past the end of the message")
            yield number, data[pos:pos + length]
            pos += length
        else:
            raise HoodieHFileError(f"{what}: unsupported protobuf wire type {wire} (field {number})")


def proto_varint_field(number: int, value: int) -> bytes:
    return encode_uvarint(number << 3) + encode_uvarint(value)


def proto_bytes_field(number: int, value: bytes) -> bytes:
    return encode_uvarint(number << 3 | 2) + encode_uvarint(len(value)) + value


# ----------------------------------------------------------------------------------------------- trailer


@dataclass(frozen=True, slots=True)
class Trailer:
    """TrailerProto fields (None = absent on disk) and the version from the last 4 bytes."""

    file_info_offset: int | None = None
    load_on_open_data_offset: int | None = None
    uncompressed_data_index_size: int | None = None
    total_uncompressed_bytes: int | None = None
    data_index_count: int | None = None
    meta_index_count: int | None = None
    entry_count: int | None = None
    num_data_index_levels: int | None = None
    first_data_block_offset: int | None = None
    last_data_block_offset: int | None = None
    comparator_class_name: str | None = None
    compression_codec: int | None = None
    encryption_key: bytes | None = None
    major_version: int = MAJOR_VERSION
    minor_version: int = MINOR_VERSION_HUDI_1_1

    def encode(self) -> bytes:
        message = bytearray()
        for number, field in enumerate(fields(self)[:13], start=1):
            value = getattr(self, field.name)
            if value is None:
                continue
            if isinstance(value, str):
                value = value.encode()
            message += proto_bytes_field(number, value) if isinstance(value, bytes) else proto_varint_field(number, value)
        body = TRAILER_MAGIC + encode_uvarint(len(message)) + bytes(message)
        if len(body) > TRAILER_SIZE - 4:
            raise HoodieHFileError(f"trailer of {len(body)} bytes does not fit {TRAILER_SIZE} bytes")
        version = (self.minor_version << 24) | self.major_version
        return body + bytes(TRAILER_SIZE - 4 - len(body)) + struct.pack(">I", version)


_TRAILER_FIELDS = [f.name for f in fields(Trailer)][:13]


def decode_trailer(data: bytes, source: str) -> Trailer:
    if len(data) < TRAILER_SIZE:
        raise HoodieHFileError(f"{source}: {len(data)} bytes is shorter than the {TRAILER_SIZE}-byte HFile trailer "
                               f"(truncated or not an HFile)")
    start = len(data) - TRAILER_SIZE
    if data[start:start + 8] != TRAILER_MAGIC:
        raise HoodieHFileError(f"{source}: no trailer magic {TRAILER_MAGIC!r} {TRAILER_SIZE} bytes before the end "
                               f"(truncated or not an HFile)")
    (version,) = struct.unpack_from(">I", data, len(data) - 4)
    major, minor = version & 0xFFFFFF, version >> 24
    if major != MAJOR_VERSION:
        raise HoodieHFileError(f"{source}: HFile major version {major} is not supported (only 3)")
    what = f"{source}: trailer"
    length, pos = decode_uvarint(data, start + 8, what)
    if pos + length > len(data) - 4:
        raise HoodieHFileError(f"{what}: protobuf length {length} runs past the trailer")
    values: dict[str, object] = {}
    for number, value in iter_proto_fields(bytes(data[pos:pos + length]), what):
        if 1 <= number <= 13:
            name = _TRAILER_FIELDS[number - 1]
            values[name] = value.decode() if name == "comparator_class_name" and isinstance(value, bytes) else value
    return Trailer(**values, major_version=major, minor_version=minor)


# ----------------------------------------------------------------------------------------------- index entries


@dataclass(frozen=True, slots=True)
class IndexEntry:
    """One root index entry: the block's offset, full on-disk size and its key as stored."""

    offset: int
    on_disk_size: int
    key: bytes

    def encode(self) -> bytes:
        return _INDEX_ENTRY.pack(self.offset, self.on_disk_size) + encode_vlong(len(self.key)) + self.key


def decode_index_entries(payload: bytes, count: int, what: str) -> list[IndexEntry]:
    entries, pos = [], 0
    for i in range(count):
        if pos + _INDEX_ENTRY.size > len(payload):
            raise HoodieHFileError(f"{what}: entry {i} of {count} runs past the end of the block")
        offset, size = _INDEX_ENTRY.unpack_from(payload, pos)
        key_len, pos = decode_vlong(payload, pos + _INDEX_ENTRY.size, what)
        if key_len < 0 or pos + key_len > len(payload):
            raise HoodieHFileError(f"{what}: entry {i} key of {key_len} bytes runs past the end of the block")
        entries.append(IndexEntry(offset, size, bytes(payload[pos:pos + key_len])))
        pos += key_len
    return entries


# ----------------------------------------------------------------------------------------------- file info


def encode_file_info(entries: Sequence[tuple[bytes, bytes]]) -> bytes:
    message = b"".join(proto_bytes_field(1, proto_bytes_field(1, k) + proto_bytes_field(2, v)) for k, v in entries)
    return PBUF_MAGIC + encode_uvarint(len(message)) + message


def decode_file_info(payload: bytes, what: str) -> list[tuple[bytes, bytes]]:
    if payload[:4] != PBUF_MAGIC:
        raise HoodieHFileError(f"{what}: file info does not start with {PBUF_MAGIC!r}")
    length, pos = decode_uvarint(payload, 4, what)
    if pos + length > len(payload):
        raise HoodieHFileError(f"{what}: file info of {length} bytes runs past its block")
    entries = []
    for number, pair in iter_proto_fields(bytes(payload[pos:pos + length]), what):
        if number != 1 or not isinstance(pair, bytes):
            continue
        parts = dict(iter_proto_fields(pair, what))
        entries.append((bytes(parts.get(1, b"")), bytes(parts.get(2, b""))))
    return entries


# ----------------------------------------------------------------------------------------------- cell keys


def encode_cell_key(row: bytes) -> bytes:
    """The full KeyValue key Hudi writes: row, empty family and qualifier, latest timestamp, Put."""
    return struct.pack(">h", len(row)) + row + b"\x00" + struct.pack(">qB", LATEST_TIMESTAMP, KEY_TYPE_PUT)


def encode_row_key(row: bytes) -> bytes:
    """The key form 1.1 uses in the root index and `hfile.LASTKEY`: int16 row length + row."""
    return struct.pack(">h", len(row)) + row


def row_of_key(key: bytes, what: str) -> bytes:
    """The row part of a KeyValue key or a row-only key (both start with int16 row length + row)."""
    if len(key) < 2:
        raise HoodieHFileError(f"{what}: key of {len(key)} bytes has no row length")
    (row_len,) = struct.unpack_from(">h", key, 0)
    if row_len < 0 or 2 + row_len > len(key):
        raise HoodieHFileError(f"{what}: row length {row_len} does not fit a key of {len(key)} bytes")
    return bytes(key[2:2 + row_len])
