"""The HFiles of the Java-written fixtures' metadata tables: base `.hfile` files and the HFiles embedded in
HFILE_DATA_BLOCK log blocks. The log walk here is a minimal one for tests (the engine's log reader lives in
storage/file_group); it checks only what it needs to find the blocks."""
from __future__ import annotations

import struct
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

from storage.io.hfile.reader import HFileReader, hfile_from_log_block

MDT_FIXTURES = ("sample_cow_v9_txns_simple_meta", "sample_mor_avro_v9_txns_simple_meta",
                "trips_mor_avro_v8_trips_8i3u1d")
HFILE_DATA_BLOCK = 4
SCHEMA_HEADER = 2


@dataclass(frozen=True)
class MdtHFile:
    fixture: str
    mdt_partition: str  # files, column_stats, ...
    file_group: str  # e.g. col-stats-0001-0
    path: Path
    block_offset: int  # -1 for a base file
    header_schema: str | None  # the log block's SCHEMA header
    data: bytes

    @property
    def is_base(self) -> bool:
        return self.block_offset < 0

    @property
    def label(self) -> str:
        where = "" if self.is_base else f"@{self.block_offset}"
        return f"{self.fixture}/{self.mdt_partition}/{self.path.name}{where}"

    def reader(self) -> HFileReader:
        return HFileReader(self.data, self.label) if self.is_base else hfile_from_log_block(self.data, self.label)


def iter_log_blocks(data: bytes) -> Iterator[tuple[int, int, dict[int, str], bytes]]:
    """(offset, block type, header, content) of each block of a log file."""
    pos = 0
    while pos < len(data):
        assert data[pos:pos + 6] == b"#HUDI#", f"no log block magic at {pos}"
        (block_len,) = struct.unpack_from(">q", data, pos + 6)
        (block_type,) = struct.unpack_from(">i", data, pos + 18)
        p = pos + 22
        (count,) = struct.unpack_from(">i", data, p)
        p += 4
        header = {}
        for _ in range(count):
            key, length = struct.unpack_from(">ii", data, p)
            header[key] = data[p + 8:p + 8 + length].decode("utf-8")
            p += 8 + length
        (content_len,) = struct.unpack_from(">q", data, p)
        yield pos, block_type, header, data[p + 8:p + 8 + content_len]
        pos += 14 + block_len


def _file_group(name: str) -> str:
    return name.lstrip(".").split("_")[0]


def mdt_hfiles(fixture_table: Callable[[str], Path]) -> list[MdtHFile]:
    out = []
    for fixture in MDT_FIXTURES:
        mdt = fixture_table(fixture) / ".hoodie" / "metadata"
        for part in sorted(p for p in mdt.iterdir() if p.is_dir() and not p.name.startswith(".")):
            for path in sorted(part.iterdir()):
                if path.name.endswith(".hfile"):
                    out.append(MdtHFile(fixture, part.name, _file_group(path.name), path, -1, None,
                                        path.read_bytes()))
                elif ".log." in path.name:
                    for offset, block_type, header, content in iter_log_blocks(path.read_bytes()):
                        if block_type == HFILE_DATA_BLOCK:
                            out.append(MdtHFile(fixture, part.name, _file_group(path.name), path, offset,
                                                header.get(SCHEMA_HEADER), content))
    return out
