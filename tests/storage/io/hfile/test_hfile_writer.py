"""HFile writer: re-writing the cells of every fixture HFile (same file info, meta blocks and create time)
gives Java's bytes exactly - 1.1 files with the default flavor, 1.0.x files with the HBase flavor."""
from __future__ import annotations

import struct

import pytest

from storage.io.hfile.format import (
    NO_OFFSET,
    BlockType,
    FileInfoKey,
    HoodieHFileError,
    java_string_hash,
    row_of_key,
)
from storage.io.hfile.reader import HFileReader
from storage.io.hfile.writer import (
    Flavor,
    HFileWriteOptions,
    java_hashmap_order,
    write_hfile,
)

# Entries Hudi hands the writer; the writer adds the hfile.* and KEY_VALUE_VERSION/MAX_MEMSTORE_TS_KEY entries.
HUDI_FILE_INFO = (FileInfoKey.SCHEMA, FileInfoKey.BLOOM_FILTER_TYPE_CODE, FileInfoKey.MIN_RECORD_KEY,
                  FileInfoKey.MAX_RECORD_KEY)


def rewrite(r: HFileReader) -> bytes:
    flavor = Flavor.HUDI_1_1 if r.version == (3, 0) else Flavor.HBASE_1_0
    (create_time,) = struct.unpack(">q", r.file_info[FileInfoKey.CREATE_TIME_TS])
    return write_hfile([(c.key, c.value) for c in r.cells()],
                       file_info=[(k, r.file_info[k]) for k in HUDI_FILE_INFO if k in r.file_info],
                       meta_blocks=[(e.key, r.meta_block(e.key)) for e in r.meta_index],
                       create_time_ms=create_time, options=HFileWriteOptions(flavor=flavor))


def test_rewrite_gives_java_bytes(mdt_hfiles):
    counts = {Flavor.HUDI_1_1: 0, Flavor.HBASE_1_0: 0}
    for f in mdt_hfiles:
        r = f.reader()
        assert rewrite(r) == f.data, f.label
        counts[Flavor.HUDI_1_1 if r.version == (3, 0) else Flavor.HBASE_1_0] += 1
    assert counts == {Flavor.HUDI_1_1: 210, Flavor.HBASE_1_0: 59}


def test_new_file_has_the_1_1_form():
    cells = [(b"a", b"1"), (b"bb", b"22"), ("ccc", b"333")]
    data = write_hfile(cells, file_info=[(FileInfoKey.SCHEMA, b"{}")], create_time_ms=1234)
    r = HFileReader(data, "new")
    assert r.version == (3, 0)
    t = r.trailer
    assert (t.data_index_count, t.meta_index_count, t.entry_count, t.num_data_index_levels) == (1, 0, 3, 1)
    assert t.uncompressed_data_index_size == sum(8 + len(k) + 12 + len(v) + 1 for k, v in
                                                 [(b"a", b"1"), (b"bb", b"22"), (b"ccc", b"333")])
    assert t.total_uncompressed_bytes is None and t.comparator_class_name.endswith("HoodieHBaseKVComparator")
    assert r.file_info[FileInfoKey.LAST_KEY] == b"\x00\x03ccc"
    assert struct.unpack(">i", r.file_info[FileInfoKey.AVG_KEY_LEN]) == (2,)  # floor(6 / 3), row bytes only
    assert struct.unpack(">i", r.file_info[FileInfoKey.AVG_VALUE_LEN]) == (2,)
    assert struct.unpack(">q", r.file_info[FileInfoKey.CREATE_TIME_TS]) == (1234,)
    assert all(b.header.prev_block_offset == -1 and b.header.checksum_type == 0 for b in r.block_layout())
    assert data[-4:] == b"\x00\x00\x00\x03"


def test_empty_file():
    r = HFileReader(write_hfile([], create_time_ms=0), "empty")
    assert r.read_all() == [] and r.data_index == []
    assert r.trailer.first_data_block_offset == NO_OFFSET and r.trailer.last_data_block_offset == 0
    assert r.file_info[FileInfoKey.LAST_KEY] == b""
    assert r.get("x") is None and list(r.scan_prefix("x")) == []


def test_block_splitting_policy():
    cells = [(f"k{i:04d}".encode(), bytes(100)) for i in range(100)]
    data = write_hfile(cells, create_time_ms=0, options=HFileWriteOptions(block_size=1000))
    r = HFileReader(data, "split")
    layout = [b for b in r.block_layout() if b.header.block_type is BlockType.DATA]
    assert len(layout) == len(r.data_index) > 1
    assert all(b.header.uncompressed_size_without_header <= 1000 for b in layout)
    assert [e.offset for e in r.data_index] == [b.offset for b in layout]
    assert r.trailer.last_data_block_offset == layout[-1].offset
    assert r.trailer.load_on_open_data_offset == layout[-1].offset + layout[-1].header.on_disk_size
    assert [(c.key, c.value) for c in r.cells()] == cells
    # a cell bigger than the block size gets a block of its own
    big = write_hfile([(b"a", bytes(5000)), (b"b", b"")], create_time_ms=0, options=HFileWriteOptions(block_size=100))
    assert [row_of_key(e.key, "big") for e in HFileReader(big, "big").data_index] == [b"a", b"b"]


def test_cells_must_be_sorted():
    with pytest.raises(HoodieHFileError, match="sorted"):
        write_hfile([(b"b", b""), (b"a", b"")], create_time_ms=0)


def test_java_hashmap_order_matches_the_fixture_order(mdt_hfiles):
    for f in mdt_hfiles:
        r = f.reader()
        if r.version == (3, 0):
            names = [k.decode() for k, _ in r.file_info_entries]
            assert java_hashmap_order(names) == list(range(len(names)))


def test_java_string_hash():
    assert java_string_hash("") == 0
    assert java_string_hash("hello") == 99162322
    assert java_string_hash("polygenelubricants") == -(2**31)  # the classic Integer.MIN_VALUE hash


@pytest.mark.parametrize("count", [0, 1, 7, 3000])
@pytest.mark.parametrize("block_size", [64 * 1024, 100])
def test_cell_arrays_give_the_bytes_of_cell_pairs(count, block_size):
    """The numpy layout of an index's sorted unique keys writes exactly what the cell-by-cell writer writes."""
    import random

    import pyarrow as pa

    from storage.io.hfile.writer import CellArrays

    rng = random.Random(count)
    keys = sorted({"".join(rng.choice("abcé$\\xyz0123") for _ in range(rng.randint(1, 30))).encode()
                   for _ in range(count)})
    values = [bytes(rng.randrange(256) for _ in range(rng.randint(0, 80))) for _ in keys]
    options = HFileWriteOptions(block_size=block_size)
    pairs = write_hfile(list(zip(keys, values)), create_time_ms=5, options=options)
    arrays = write_hfile(CellArrays(pa.array(keys, pa.binary()), pa.array(values, pa.binary())), create_time_ms=5,
                         options=options)
    assert arrays == pairs
    if len(keys) > 1:
        with pytest.raises(HoodieHFileError, match="sorted by key, each key once"):
            write_hfile(CellArrays(pa.array(keys[::-1], pa.binary()), pa.array(values, pa.binary())))
