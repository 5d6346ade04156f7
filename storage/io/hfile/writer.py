"""Writing HFiles (version 3) the way Java Hudi 1.1 writes metadata-table base files and HFILE_DATA_BLOCK
contents (notes §1.11): sorted cells with full KeyValue keys and an mvcc byte, every block gzip-compressed (level 6,
as Java's Deflater default) with a NULL-checksum header and zeroed checksum bytes, meta blocks (`bloomFilter` for
base files), root data index with row-only keys, meta index, file info in Java `HashMap` order, and the 4096-byte
trailer with minor version 0.

`Flavor.HBASE_1_0` reproduces the HBase writer Hudi 1.0.x used (CRC32C, full-key index entries, sorted file info,
per-type previous-block offsets); it exists so that 1.0.x files can be re-written byte for byte, not for new files.
"""
from __future__ import annotations

import enum
import logging
import struct
import time
import zlib
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from storage.io.hfile.format import (
    BYTES_PER_CHECKSUM,
    COMPARATOR_CLASS,
    HEADER_SIZE,
    KEY_OVERHEAD,
    KEY_TYPE_PUT,
    KV_LENGTHS,
    LATEST_TIMESTAMP,
    MINOR_VERSION_HBASE,
    MINOR_VERSION_HUDI_1_1,
    NO_OFFSET,
    TRAILER_SIZE,
    BlockHeader,
    BlockType,
    ChecksumType,
    Codec,
    FileInfoKey,
    HoodieHFileError,
    IndexEntry,
    Trailer,
    block_checksums,
    checksum_size,
    encode_cell_key,
    encode_file_info,
    encode_row_key,
    java_string_hash,
)

log = logging.getLogger(__name__)

# hoodie.hfile.block.size default. Whether Java 1.1 passes it to its writer is unverified (notes §7): every
# fixture HFile has a single data block.
DEFAULT_BLOCK_SIZE = 1 << 20
GZIP_HEADER = b"\x1f\x8b\x08\x00\x00\x00\x00\x00\x00\x00"  # no name, mtime 0, XFL 0, OS 0 (Java's GZIPOutputStream)
DEFAULT_COMPRESSION_LEVEL = 6


class Flavor(enum.Enum):
    HUDI_1_1 = "hudi-1.1"
    HBASE_1_0 = "hbase-1.0"


@dataclass(frozen=True, slots=True)
class HFileWriteOptions:
    block_size: int = DEFAULT_BLOCK_SIZE
    compression_level: int = DEFAULT_COMPRESSION_LEVEL
    flavor: Flavor = Flavor.HUDI_1_1


DEFAULT_OPTIONS = HFileWriteOptions()


@dataclass(slots=True)
class _Output:
    """The file under construction and the per-block-type previous offsets HBase records."""

    flavor: Flavor
    level: int
    buf: bytearray = field(default_factory=bytearray)
    prev_by_type: dict[BlockType, int] = field(default_factory=dict)
    counted: list[tuple[BlockType, int]] = field(default_factory=list)  # (type, uncompressed payload size)

    def write_block(self, block_type: BlockType, payload: bytes) -> IndexEntry:
        offset = len(self.buf)
        compressed = gzip_member(payload, self.level)
        hbase = self.flavor is Flavor.HBASE_1_0
        ck_type = ChecksumType.CRC32C if hbase else ChecksumType.NULL
        prev = self.prev_by_type.get(block_type, -1) if hbase else -1
        data_with_header = HEADER_SIZE + len(compressed)
        ck_len = checksum_size(data_with_header)
        head = BlockHeader(block_type, len(compressed) + ck_len, len(payload), prev, ck_type, BYTES_PER_CHECKSUM,
                           data_with_header)
        chunked = head.encode() + compressed
        self.buf += chunked + block_checksums(chunked, ck_type, BYTES_PER_CHECKSUM)
        self.prev_by_type[block_type] = offset
        self.counted.append((block_type, len(payload)))
        return IndexEntry(offset, len(self.buf) - offset, b"")


def gzip_member(payload: bytes, level: int = DEFAULT_COMPRESSION_LEVEL) -> bytes:
    """One gzip member as Java's GZIPOutputStream writes it (its fixed header, raw deflate, CRC-32, size)."""
    deflater = zlib.compressobj(level, zlib.DEFLATED, -15)
    body = deflater.compress(payload) + deflater.flush()
    return GZIP_HEADER + body + struct.pack("<II", zlib.crc32(payload), len(payload) & 0xFFFFFFFF)


def java_hashmap_order(keys: Sequence[str]) -> list[int]:
    """Positions of `keys` (distinct, in insertion order) in the iteration order of a java.util.HashMap they were
    put into: by bucket `(h ^ h >>> 16) & (capacity - 1)`, insertion order within a bucket (resizes keep it)."""
    capacity = 16
    while len(keys) > capacity * 3 // 4:
        capacity *= 2

    def bucket(i: int) -> int:
        h = java_string_hash(keys[i]) & 0xFFFFFFFF
        return (h ^ (h >> 16)) & (capacity - 1)

    return sorted(range(len(keys)), key=lambda i: (bucket(i), i))


def write_hfile(cells: Iterable[tuple[bytes | str, bytes]], *, file_info: Sequence[tuple[bytes, bytes]] = (),
                meta_blocks: Sequence[tuple[bytes, bytes]] = (), create_time_ms: int | None = None,
                options: HFileWriteOptions = DEFAULT_OPTIONS) -> bytes:
    """The bytes of an HFile holding `cells` (row key, value), which must be sorted by unsigned row bytes.

    `file_info` holds the caller's entries (Hudi's: `schema`, and for base files `bloomFilterTypeCode`,
    `minRecordKey`, `maxRecordKey`) in the order Hudi adds them; the writer adds `hfile.LASTKEY`, the average
    lengths, `KEY_VALUE_VERSION`, `MAX_MEMSTORE_TS_KEY` and `hfile.CREATE_TIME_TS` (now unless given)."""
    hbase = options.flavor is Flavor.HBASE_1_0
    out = _Output(options.flavor, options.compression_level)
    if isinstance(cells, CellArrays) and not hbase:
        blocks, rows, value_bytes = cells.blocks(options.block_size)
    else:
        rows, value_lengths = [], []
        blocks = _split_blocks(_sorted_cells(cells.pairs() if isinstance(cells, CellArrays) else cells, rows,
                                             value_lengths), options.block_size)
        rows, value_bytes = _RowSummary.of(rows), sum(value_lengths)
    data_index: list[IndexEntry] = []
    for first_row, payload in blocks:
        entry = out.write_block(BlockType.DATA, payload)
        index_key = encode_cell_key(first_row) if hbase else encode_row_key(first_row)
        data_index.append(IndexEntry(entry.offset, entry.on_disk_size, index_key))
    cell_bytes = sum(len(p) for _, p in blocks)  # Σ (8 + key + value + mvcc byte)
    meta_index = []
    for name, payload in meta_blocks:
        entry = out.write_block(BlockType.META, payload)
        meta_index.append(IndexEntry(entry.offset, entry.on_disk_size, name))
    load_on_open = len(out.buf)
    root_payload = b"".join(e.encode() for e in data_index)
    out.write_block(BlockType.ROOT_INDEX, root_payload)
    out.counted.pop()  # HBase leaves the root data index out of total_uncompressed_bytes
    out.write_block(BlockType.ROOT_INDEX, b"".join(e.encode() for e in meta_index))
    file_info_offset = len(out.buf)
    info_payload = encode_file_info(_file_info(list(file_info), rows, value_bytes, create_time_ms, hbase))
    out.write_block(BlockType.FILE_INFO, info_payload)
    first = data_index[0].offset if data_index else NO_OFFSET
    last = data_index[-1].offset if data_index else (NO_OFFSET if hbase else 0)
    trailer = Trailer(
        file_info_offset=file_info_offset,
        load_on_open_data_offset=load_on_open,
        # HBase records the root index payload size here; Hudi 1.1 the data blocks' uncompressed bytes
        uncompressed_data_index_size=len(root_payload) if hbase else cell_bytes,
        total_uncompressed_bytes=_hbase_total_uncompressed(out.counted) if hbase else None,
        data_index_count=len(data_index), meta_index_count=len(meta_index), entry_count=rows.count,
        num_data_index_levels=1, first_data_block_offset=first, last_data_block_offset=last,
        comparator_class_name=COMPARATOR_CLASS, compression_codec=int(Codec.GZ),
        minor_version=MINOR_VERSION_HBASE if hbase else MINOR_VERSION_HUDI_1_1)
    out.buf += trailer.encode()
    log.debug("wrote HFile: %d cells in %d data blocks, %d bytes", rows.count, len(data_index), len(out.buf))
    return bytes(out.buf)


def _sorted_cells(cells: Iterable[tuple[bytes | str, bytes]], rows: list[bytes],
                  value_lengths: list[int]) -> Iterable[tuple[bytes, bytes]]:
    """The cells as bytes, checked to be sorted; their rows and value lengths are collected for the file info."""
    previous: bytes | None = None
    for key, value in cells:
        row = key.encode("utf-8") if isinstance(key, str) else bytes(key)
        if previous is not None and row < previous:
            raise HoodieHFileError(f"HFile cells must be sorted by key: {row!r} comes after {previous!r}")
        if len(row) > 0x7FFF:
            raise HoodieHFileError(f"HFile row key of {len(row)} bytes exceeds the 32767-byte limit")
        previous = row
        rows.append(row)
        value_lengths.append(len(value))
        yield row, bytes(value)


def _split_blocks(cells: Iterable[tuple[bytes, bytes]], block_size: int) -> list[tuple[bytes, bytes]]:
    """Data block payloads with their first rows: a block is closed when the next cell would take it past
    `block_size`, but never between cells of the same key (a key's cells stay in one block)."""
    blocks: list[tuple[bytes, bytes]] = []
    current = bytearray()
    first: bytes | None = None
    last: bytes | None = None
    for row, value in cells:
        key = encode_cell_key(row)
        cell = KV_LENGTHS.pack(len(key), len(value)) + key + value + b"\x00"  # mvcc 0
        if current and len(current) + len(cell) > block_size and row != last:
            blocks.append((first, bytes(current)))
            current = bytearray()
        if not current:
            first = row
        current += cell
        last = row
    if current:
        blocks.append((first, bytes(current)))
    return blocks


@dataclass(frozen=True, slots=True)
class _RowSummary:
    """What the file info needs of the rows: their count, total length and the last one."""

    count: int
    total_length: int
    last: bytes | None

    @classmethod
    def of(cls, rows: list[bytes]) -> "_RowSummary":
        return cls(len(rows), sum(map(len, rows)), rows[-1] if rows else None)


@dataclass(frozen=True)
class CellArrays:
    """Cells as two Arrow arrays, rows sorted by unsigned bytes and unique (an index partition's keys), values
    beside them: their data blocks are laid out by numpy over the whole buffers instead of cell by cell."""

    rows: pa.Array
    values: pa.Array

    def __len__(self) -> int:
        return len(self.rows)

    def pairs(self) -> Iterable[tuple[bytes, bytes]]:
        return zip(self.rows.to_pylist(), self.values.to_pylist())

    def blocks(self, block_size: int) -> tuple[list[tuple[bytes, bytes]], _RowSummary, int]:
        """(data blocks as (first row, payload), the rows' summary, total value bytes) - the bytes
        `_split_blocks` gives for the same cells."""
        rows, values = _binary(self.rows), _binary(self.values)
        n = len(rows)
        if n == 0:
            return [], _RowSummary(0, 0, None), 0
        row_off, row_data = _offsets_and_data(rows)
        val_off, val_data = _offsets_and_data(values)
        row_len, val_len = np.diff(row_off), np.diff(val_off)
        if int(row_len.max()) > 0x7FFF:
            raise HoodieHFileError(f"HFile row key of {int(row_len.max())} bytes exceeds the 32767-byte limit")
        if n > 1 and pc.any(pc.less_equal(rows.slice(1), rows.slice(0, n - 1))).as_py():
            raise HoodieHFileError("HFile cells must be sorted by key, each key once")
        key_len = row_len + KEY_OVERHEAD
        size = 8 + key_len + val_len + 1
        start = np.concatenate([[0], np.cumsum(size)])
        buf = np.zeros(int(start[-1]), np.uint8)
        at = start[:-1]
        _put_be(buf, at, key_len, ">i4")
        _put_be(buf, at + 4, val_len, ">i4")
        _put_be(buf, at + 8, row_len, ">i2")
        _scatter(buf, at + 10, row_len, row_data[row_off[0]:row_off[-1]])
        tail = at + 10 + row_len + 1  # after the empty family's length byte
        _put_be(buf, tail, np.full(n, LATEST_TIMESTAMP, np.int64), ">i8")
        buf[tail + 8] = KEY_TYPE_PUT
        _scatter(buf, tail + 9, val_len, val_data[val_off[0]:val_off[-1]])  # the mvcc byte after it stays 0
        blocks, s = [], 0
        while s < n:  # as _split_blocks: close a block before the cell that would take it past block_size
            e = max(s + 1, int(np.searchsorted(start, start[s] + block_size, side="right")) - 1)
            e = min(e, n)
            blocks.append((rows[s].as_py(), buf[start[s]:start[e]].tobytes()))
            s = e
        return blocks, _RowSummary(n, int(row_len.sum()), rows[n - 1].as_py()), int(val_len.sum())


def _binary(array: pa.Array | pa.ChunkedArray) -> pa.Array:
    if isinstance(array, pa.ChunkedArray):
        array = array.combine_chunks()
    return array.cast(pa.binary()) if not pa.types.is_binary(array.type) else array


def _offsets_and_data(array: pa.Array) -> tuple[np.ndarray, np.ndarray]:
    offsets = np.frombuffer(array.buffers()[1], np.int32)[array.offset:array.offset + len(array) + 1].astype(np.int64)
    data = array.buffers()[2]
    return offsets, (np.frombuffer(data, np.uint8) if data is not None else np.zeros(0, np.uint8))


def _put_be(buf: np.ndarray, at: np.ndarray, values: np.ndarray, dtype: str) -> None:
    """Write `values` big-endian (`dtype`) at byte positions `at` of `buf`."""
    raw = np.asarray(values).astype(dtype).view(np.uint8).reshape(len(at), -1)
    buf[at[:, None] + np.arange(raw.shape[1])] = raw


def _scatter(buf: np.ndarray, at: np.ndarray, lengths: np.ndarray, data: np.ndarray) -> None:
    """Copy the concatenated byte strings `data` (of `lengths`) to positions `at` of `buf`."""
    total = int(lengths.sum())
    if total:
        firsts = np.concatenate([[0], np.cumsum(lengths)[:-1]])
        buf[np.repeat(at - firsts, lengths) + np.arange(total)] = data


def _file_info(user: list[tuple[bytes, bytes]], rows: _RowSummary, value_lens: int, create_time_ms: int | None,
               hbase: bool) -> list[tuple[bytes, bytes]]:
    """The caller's entries plus the writer's, in the order the Java writer serializes them."""
    count = rows.count
    key_lens = rows.total_length + (KEY_OVERHEAD * count if hbase else 0)  # 1.0.x averages full KeyValue keys
    if create_time_ms is None:
        create_time_ms = 0 if hbase else int(time.time() * 1000)
    computed: list[tuple[bytes, bytes]] = []
    if count:
        last = encode_cell_key(rows.last) if hbase else encode_row_key(rows.last)
        computed.append((FileInfoKey.LAST_KEY, last))
    elif not hbase:
        computed.append((FileInfoKey.LAST_KEY, b""))
    computed += [
        (FileInfoKey.AVG_KEY_LEN, struct.pack(">i", key_lens // count if count else 0)),
        (FileInfoKey.AVG_VALUE_LEN, struct.pack(">i", value_lens // count if count else 0)),
        (FileInfoKey.KEY_VALUE_VERSION, struct.pack(">i", 1)),
        (FileInfoKey.MAX_MEMSTORE_TS_KEY, struct.pack(">q", 0)),
        (FileInfoKey.CREATE_TIME_TS, struct.pack(">q", create_time_ms)),
    ]
    own = {k for k, _ in computed}
    # Insertion order decides only between keys sharing a HashMap bucket: in Java's files bloomFilterTypeCode
    # (the caller's) precedes hfile.LASTKEY, which precedes hfile.AVG_VALUE_LEN - all three share bucket 1.
    entries = [(k, v) for k, v in user if k not in own] + computed
    if hbase:
        return sorted(entries)  # HBase keeps file info in a byte-ordered map
    order = java_hashmap_order([k.decode("utf-8") for k, _ in entries])
    return [entries[i] for i in order]


def _hbase_total_uncompressed(blocks: list[tuple[BlockType, int]]) -> int:
    """HBase's total_uncompressed_bytes: header + uncompressed payload of every block except the root data index
    (HBase does not add that one), plus the trailer's 4096 bytes. Matches every 1.0.x fixture file."""
    return sum(HEADER_SIZE + size for _, size in blocks) + TRAILER_SIZE
