"""Reading HFiles (version 3) written by Hudi 1.0.x or 1.1: trailer, load-on-open section (root data index, meta
index, file info), meta blocks, and the cells - all of them in key order, by exact key, or by key prefix (the
metadata table's lookups). A file is read whole into memory: metadata-table HFiles are small, and HFile log
blocks arrive as bytes anyway.

Cells are `(row key bytes, value bytes)`; the KeyValue key's family/qualifier/timestamp/type tail is fixed by Hudi
and not surfaced. Anything inconsistent (bad magic, sizes, checksum, gzip, unsorted cells, cell count not the
trailer's) raises `HoodieHFileError` naming the file and the problem, never a partial or wrong cell list.
"""
from __future__ import annotations

import bisect
import logging
import struct
import zlib
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

from storage.io.hfile.format import (
    HEADER_SIZE,
    KEY_OVERHEAD,
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
    decode_block_header,
    decode_file_info,
    decode_index_entries,
    decode_trailer,
    decode_vlong,
    row_of_key,
)

log = logging.getLogger(__name__)

@dataclass(frozen=True, slots=True)
class Cell:
    key: bytes  # row bytes (the metadata table's record key, UTF-8)
    value: bytes

    @property
    def key_str(self) -> str:
        return self.key.decode("utf-8")


@dataclass(frozen=True, slots=True)
class BlockInfo:
    """Where a block sits and its header as stored (for structure comparisons)."""

    offset: int
    header: BlockHeader


@dataclass(slots=True)
class _DataBlock:
    keys: list[bytes]
    values: list[bytes]


def _as_key(key: bytes | str) -> bytes:
    return key.encode("utf-8") if isinstance(key, str) else bytes(key)


class HFileReader:
    """An HFile held in memory. `source` names it in errors (a path, or a log file and block offset)."""

    def __init__(self, data: bytes, source: str = "<hfile bytes>") -> None:
        self.data = bytes(data)
        self.source = source
        self.trailer: Trailer = decode_trailer(self.data, source)
        self.codec = self._codec()
        self._check_trailer_offsets()
        root = self.read_block(self.trailer.load_on_open_data_offset, BlockType.ROOT_INDEX)
        self.data_index: list[IndexEntry] = decode_index_entries(
            root[1], self.trailer.data_index_count or 0, f"{source}: root data index")
        meta_offset = self.trailer.load_on_open_data_offset + root[0].on_disk_size
        meta = self.read_block(meta_offset, BlockType.ROOT_INDEX)
        self.meta_index: list[IndexEntry] = decode_index_entries(
            meta[1], self.trailer.meta_index_count or 0, f"{source}: meta index")
        info = self.read_block(self.trailer.file_info_offset, BlockType.FILE_INFO)
        self.file_info_entries: list[tuple[bytes, bytes]] = decode_file_info(info[1], f"{source}: file info")
        self.file_info: dict[bytes, bytes] = dict(self.file_info_entries)
        self._index_rows = [row_of_key(e.key, f"{source}: root data index") for e in self.data_index]
        self._blocks: dict[int, _DataBlock] = {}

    @classmethod
    def open(cls, path: str | Path) -> HFileReader:
        with open(path, "rb") as f:
            return cls(f.read(), str(path))

    # ------------------------------------------------------------------------------------------- metadata

    @property
    def version(self) -> tuple[int, int]:
        return self.trailer.major_version, self.trailer.minor_version

    @property
    def entry_count(self) -> int:
        return self.trailer.entry_count or 0

    @property
    def schema(self) -> str | None:
        raw = self.file_info.get(FileInfoKey.SCHEMA)
        return raw.decode("utf-8") if raw is not None else None

    def meta_block(self, name: bytes | str) -> bytes | None:
        """The uncompressed payload of meta block `name` (Hudi writes only `bloomFilter`), or None."""
        name = _as_key(name)
        for entry in self.meta_index:
            if entry.key == name:
                header, payload = self.read_block(entry.offset, BlockType.META)
                self._check_entry_size(entry, header, "meta")
                return payload
        return None

    def block_layout(self) -> list[BlockInfo]:
        """Every block from offset 0 to the trailer, in file order (they are contiguous in Hudi's files)."""
        out, offset, end = [], 0, len(self.data) - TRAILER_SIZE
        while offset < end:
            header = decode_block_header(self.data, offset, self.source)
            out.append(BlockInfo(offset, header))
            offset += header.on_disk_size
        return out

    # ------------------------------------------------------------------------------------------- blocks

    def read_block(self, offset: int, expected: BlockType) -> tuple[BlockHeader, bytes]:
        """The header and uncompressed payload of the block at `offset`, checked against its checksums."""
        header = decode_block_header(self.data, offset, self.source)
        where = f"{self.source}: {expected.name} block at offset {offset}"
        if header.block_type is not expected:
            raise HoodieHFileError(f"{where}: found a {header.block_type.name} block instead")
        data_end = offset + header.on_disk_data_size_with_header
        if header.checksum_type != ChecksumType.NULL:
            stored = self.data[data_end:offset + header.on_disk_size]
            if stored != block_checksums(self.data[offset:data_end], header.checksum_type, header.bytes_per_checksum):
                raise HoodieHFileError(f"{where}: {ChecksumType(header.checksum_type).name} checksum mismatch "
                                       f"(corrupted)")
        payload = self._decompress(self.data[offset + HEADER_SIZE:data_end], where)
        if len(payload) != header.uncompressed_size_without_header:
            raise HoodieHFileError(f"{where}: payload is {len(payload)} bytes uncompressed, header says "
                                   f"{header.uncompressed_size_without_header}")
        return header, payload

    def _decompress(self, raw: bytes, where: str) -> bytes:
        if self.codec is Codec.NONE:
            return raw
        try:
            # wbits 31: exactly one gzip member with its CRC-32 and length checked
            inflater = zlib.decompressobj(31)
            out = inflater.decompress(raw)
        except zlib.error as exc:
            raise HoodieHFileError(f"{where}: gzip payload is corrupted ({exc})") from None
        if not inflater.eof or inflater.unused_data:
            raise HoodieHFileError(f"{where}: gzip payload is truncated or has trailing bytes (corrupted)")
        return out

    def _codec(self) -> Codec:
        raw = self.trailer.compression_codec
        codec = Codec.NONE if raw is None else Codec(raw) if raw in tuple(Codec) else None
        if codec not in (Codec.NONE, Codec.GZ):
            raise HoodieHFileError(f"{self.source}: compression codec {raw} is not supported (GZ and NONE are)")
        return codec

    def _check_trailer_offsets(self) -> None:
        t, trailer_start = self.trailer, len(self.data) - TRAILER_SIZE
        if (t.num_data_index_levels or 1) != 1:
            raise HoodieHFileError(f"{self.source}: {t.num_data_index_levels}-level data index is not supported "
                                   f"(Hudi writes single-level indexes)")
        for name in ("load_on_open_data_offset", "file_info_offset"):
            value = getattr(t, name)
            if value is None or not 0 <= value < trailer_start:
                raise HoodieHFileError(f"{self.source}: trailer {name} {value} is outside the file's "
                                       f"{trailer_start} block bytes (truncated or corrupted)")

    def _check_entry_size(self, entry: IndexEntry, header: BlockHeader, kind: str) -> None:
        if entry.on_disk_size != header.on_disk_size:
            raise HoodieHFileError(f"{self.source}: {kind} index says the block at {entry.offset} takes "
                                   f"{entry.on_disk_size} bytes, its header says {header.on_disk_size}")

    def _data_block(self, i: int) -> _DataBlock:
        block = self._blocks.get(i)
        if block is None:
            entry = self.data_index[i]
            header, payload = self.read_block(entry.offset, BlockType.DATA)
            self._check_entry_size(entry, header, "data")
            block = _decode_cells(payload, f"{self.source}: data block {i} at offset {entry.offset}")
            if block.keys and block.keys[0] < self._index_rows[i]:
                raise HoodieHFileError(f"{self.source}: data block {i} starts with a key below its index key")
            self._blocks[i] = block
        return block

    # ------------------------------------------------------------------------------------------- cells

    def cells(self) -> Iterator[Cell]:
        """All cells in key order; the count is checked against the trailer's entry count at the end."""
        count, previous = 0, None
        for i in range(len(self.data_index)):
            block = self._data_block(i)
            if block.keys and previous is not None and block.keys[0] < previous:
                raise HoodieHFileError(f"{self.source}: data block {i} starts below the previous block's last key")
            for key, value in zip(block.keys, block.values):
                yield Cell(key, value)
            count += len(block.keys)
            previous = block.keys[-1] if block.keys else previous
        if count != self.entry_count:
            raise HoodieHFileError(f"{self.source}: {count} cells in the data blocks, trailer says {self.entry_count}")

    def read_all(self) -> list[Cell]:
        return list(self.cells())

    def _block_for(self, key: bytes) -> int:
        """Index of the last block whose index key is <= key (-1: key sorts before every block)."""
        return bisect.bisect_right(self._index_rows, key) - 1

    def get(self, key: bytes | str) -> bytes | None:
        """The value stored under exactly `key`, or None."""
        key = _as_key(key)
        i = self._block_for(key)
        if i < 0:
            return None
        block = self._data_block(i)
        j = bisect.bisect_left(block.keys, key)
        return block.values[j] if j < len(block.keys) and block.keys[j] == key else None

    def get_many(self, keys: Iterable[bytes | str]) -> dict[bytes, bytes]:
        """The cells found among `keys` (absent keys are left out), looked up in sorted order."""
        out = {}
        for key in sorted({_as_key(k) for k in keys}):
            value = self.get(key)
            if value is not None:
                out[key] = value
        return out

    def scan_prefix(self, prefix: bytes | str) -> Iterator[Cell]:
        """Cells whose key starts with `prefix`, in key order (seek to the first key >= prefix, then forward)."""
        prefix = _as_key(prefix)
        i = max(self._block_for(prefix), 0)
        for b in range(i, len(self.data_index)):
            block = self._data_block(b)
            j = bisect.bisect_left(block.keys, prefix) if b == i else 0
            for k in range(j, len(block.keys)):
                if not block.keys[k].startswith(prefix):
                    return
                yield Cell(block.keys[k], block.values[k])

    def scan_prefixes(self, prefixes: Iterable[bytes | str]) -> Iterator[Cell]:
        """Cells matching any of `prefixes`, each cell once, in key order."""
        seen_until: bytes | None = None
        for prefix in sorted({_as_key(p) for p in prefixes}):
            for cell in self.scan_prefix(prefix):
                if seen_until is None or cell.key > seen_until:
                    seen_until = cell.key
                    yield cell


def _decode_cells(payload: bytes, what: str) -> _DataBlock:
    keys: list[bytes] = []
    values: list[bytes] = []
    pos, end, unpack = 0, len(payload), _CELL_HEAD.unpack_from
    previous = b""
    while pos < end:
        if pos + 10 > end:
            raise HoodieHFileError(f"{what}: cell at {pos} has a truncated length prefix")
        key_len, value_len, row_len = unpack(payload, pos)
        key_at = pos + 8
        value_at = key_at + key_len
        if key_len < KEY_OVERHEAD or value_len < 0 or value_at + value_len > end:
            raise HoodieHFileError(f"{what}: cell at {pos} has key length {key_len} / value length {value_len} "
                                   f"that do not fit the block")
        if row_len < 0 or row_len + KEY_OVERHEAD > key_len:
            raise HoodieHFileError(f"{what}: cell at {pos} has row length {row_len} in a {key_len}-byte key")
        row = payload[key_at + 2:key_at + 2 + row_len]
        if row < previous:
            raise HoodieHFileError(f"{what}: cell at {pos} is out of key order")
        keys.append(row)
        previous = row
        mvcc_at = value_at + value_len
        values.append(payload[value_at:mvcc_at])
        if mvcc_at < end and payload[mvcc_at] == 0:  # the memstore timestamp writers leave: VLong 0, one byte
            pos = mvcc_at + 1
        else:
            _, pos = decode_vlong(payload, mvcc_at, f"{what}: mvcc of cell at {pos}")
    return _DataBlock(keys, values)


_CELL_HEAD = struct.Struct(">iih")  # key length, value length, then the key's row length


def read_hfile(path: str | Path) -> HFileReader:
    return HFileReader.open(path)


def hfile_from_log_block(content: bytes, source: str = "<HFILE_DATA_BLOCK>") -> HFileReader:
    """The HFile carried by an HFILE_DATA_BLOCK log block: its content is a complete HFile, no prefix."""
    return HFileReader(content, source)
