"""HFile reader against every HFile of the Java-written fixtures' metadata tables (1.0.x and 1.1 forms), and
against truncated or corrupted input."""
from __future__ import annotations

import collections
import struct

import pytest

from storage.bloom.bloom_filter import deserialize_bloom_filter
from storage.io.hfile.format import (
    TRAILER_SIZE,
    BlockType,
    ChecksumType,
    FileInfoKey,
    HoodieHFileError,
    decode_trailer,
    decode_vlong,
    encode_vlong,
    row_of_key,
)
from storage.io.hfile.reader import HFileReader
from storage.io.hfile.writer import HFileWriteOptions, write_hfile

# (HFiles, cells, empty HFiles) per fixture, base files and log-block HFiles, as parsed from the fixtures.
EXPECTED_INVENTORY = {
    ("sample_cow_v9_txns_simple_meta", "base"): (29, 211, 4),
    ("sample_cow_v9_txns_simple_meta", "log"): (74, 601, 0),
    ("sample_mor_avro_v9_txns_simple_meta", "base"): (29, 211, 4),
    ("sample_mor_avro_v9_txns_simple_meta", "log"): (78, 668, 0),
    ("trips_mor_avro_v8_trips_8i3u1d", "base"): (24, 142, 2),
    ("trips_mor_avro_v8_trips_8i3u1d", "log"): (35, 224, 0),
}


def test_fixture_hfiles_read_completely(mdt_hfiles):
    inventory = collections.defaultdict(lambda: [0, 0, 0])
    for f in mdt_hfiles:
        cells = f.reader().read_all()
        slot = inventory[(f.fixture, "base" if f.is_base else "log")]
        slot[0] += 1
        slot[1] += len(cells)
        slot[2] += not cells
    assert {k: tuple(v) for k, v in inventory.items()} == EXPECTED_INVENTORY


def test_fixture_hfile_structure(mdt_hfiles):
    for f in mdt_hfiles:
        r = f.reader()
        cells = r.read_all()
        keys = [c.key for c in cells]
        assert keys == sorted(keys) and len(set(keys)) == len(keys), f.label
        assert len(cells) == r.entry_count
        legacy = f.fixture.startswith("trips_mor_avro_v8")
        assert r.version == ((3, 3) if legacy else (3, 0)), f.label
        assert r.trailer.compression_codec == 1  # GZ in every fixture file
        assert r.schema and '"HoodieMetadataRecord"' in r.schema
        layout = r.block_layout()
        assert layout[0].offset == 0
        assert all(b.header.checksum_type == (ChecksumType.CRC32C if legacy else ChecksumType.NULL) for b in layout)
        assert [b.header.block_type for b in layout][-3:] == [BlockType.ROOT_INDEX, BlockType.ROOT_INDEX,
                                                              BlockType.FILE_INFO]
        if f.is_base:
            assert [e.key for e in r.meta_index] == [b"bloomFilter"]
            assert r.file_info[FileInfoKey.BLOOM_FILTER_TYPE_CODE] == b"DYNAMIC_V0"
            assert r.file_info[FileInfoKey.MIN_RECORD_KEY] == (keys[0] if keys else b"")
            assert r.file_info[FileInfoKey.MAX_RECORD_KEY] == (keys[-1] if keys else b"")
        else:
            assert r.meta_index == [] and FileInfoKey.MIN_RECORD_KEY not in r.file_info
            assert r.schema == f.header_schema  # the log block header carries the same writer schema
        if keys:
            assert row_of_key(r.file_info[FileInfoKey.LAST_KEY], f.label) == keys[-1]
            assert [row_of_key(e.key, f.label) for e in r.data_index] == [keys[0]]


def test_point_lookups(mdt_hfiles):
    for f in mdt_hfiles:
        r = f.reader()
        cells = r.read_all()
        for c in cells:
            assert r.get(c.key) == c.value
            assert r.get(c.key_str) == c.value
            assert r.get(c.key + b"\x00") is None and r.get(c.key[:-1] + b"\x00") is None
        assert r.get(b"") is None and r.get("\xff") is None
        wanted = [c.key for c in cells[::2]] + [b"no such key"]
        assert r.get_many(wanted) == {c.key: c.value for c in cells[::2]}


def test_prefix_scans(mdt_hfiles):
    scanned = 0
    for f in mdt_hfiles:
        if f.mdt_partition not in ("column_stats", "partition_stats"):
            continue
        r = f.reader()
        cells = r.read_all()
        for width in (12, 24):  # column id; column id + partition id
            for prefix in {c.key[:width] for c in cells}:
                assert list(r.scan_prefix(prefix)) == [c for c in cells if c.key.startswith(prefix)]
                scanned += 1
        assert list(r.scan_prefix(b"\x00")) == [] and list(r.scan_prefix(b"~")) == []
        assert list(r.scan_prefix(b"")) == cells
        if cells:
            prefixes = [cells[0].key[:12], cells[-1].key[:12], cells[0].key[:24]]
            assert list(r.scan_prefixes(prefixes)) == [c for c in cells if c.key.startswith(tuple(prefixes))]
    assert scanned > 300


def test_secondary_index_prefix_scan(mdt_hfiles):
    for f in mdt_hfiles:
        if f.mdt_partition.startswith("secondary_index_") and not f.fixture.startswith("trips"):
            r = f.reader()
            for c in r.read_all():
                value = c.key.split(b"$")[0]
                assert c in list(r.scan_prefix(value + b"$"))


def test_bloom_filter_meta_block_holds_the_keys(mdt_hfiles):
    for f in mdt_hfiles:
        if not f.is_base:
            continue
        r = f.reader()
        bloom = deserialize_bloom_filter(r.file_info[FileInfoKey.BLOOM_FILTER_TYPE_CODE], r.meta_block("bloomFilter"))
        assert all(bloom.might_contain(c.key_str) for c in r.cells()), f.label
        assert r.meta_block("noSuchBlock") is None


def test_multi_block_file_lookups():
    cells = [(f"key-{i:05d}".encode(), f"value-{i}".encode() * (i % 7)) for i in range(3000)]
    data = write_hfile(cells, file_info=[(FileInfoKey.SCHEMA, b"{}")], create_time_ms=1,
                       options=HFileWriteOptions(block_size=4096))
    r = HFileReader(data, "multi")
    assert len(r.data_index) > 10
    assert [(c.key, c.value) for c in r.cells()] == cells
    assert r.get(b"key-02999") == cells[-1][1] and r.get(b"key-03000") is None and r.get(b"a") is None
    for e in r.data_index:  # first key of every block, and the key just before it
        first = row_of_key(e.key, "multi")
        assert r.get(first) == dict(cells)[first]
    assert [c.key for c in r.scan_prefix(b"key-012")] == [k for k, _ in cells if k.startswith(b"key-012")]
    assert r.trailer.last_data_block_offset == r.data_index[-1].offset


def test_vlong_round_trip():
    for value in (0, 1, -1, 127, -112, 128, -113, 255, 256, 70000, -70000, 2**31 - 1, -(2**63), 2**63 - 1):
        encoded = encode_vlong(value)
        assert decode_vlong(encoded, 0, "t") == (value, len(encoded))
    assert encode_vlong(300) == b"\x8e\x01\x2c"  # Hadoop WritableUtils: length byte -114, then 0x012c


def test_long_keys_use_multi_byte_vint_in_the_index():
    cells = [(b"k" * 300, b"v"), (b"l" * 5000, b"w")]
    r = HFileReader(write_hfile(cells, create_time_ms=0, options=HFileWriteOptions(block_size=1)), "long")
    assert [row_of_key(e.key, "long") for e in r.data_index] == [b"k" * 300, b"l" * 5000]
    assert r.get(b"l" * 5000) == b"w"


# ----------------------------------------------------------------------------------------------- corruption


@pytest.fixture(scope="module")
def samples(mdt_hfiles):
    """A 1.1 and a 1.0.x base file with cells."""
    v11 = next(f for f in mdt_hfiles if f.is_base and f.fixture.startswith("sample_cow") and
               f.mdt_partition == "column_stats" and f.reader().entry_count > 10)
    v10 = next(f for f in mdt_hfiles if f.is_base and f.fixture.startswith("trips") and
               f.mdt_partition == "column_stats" and f.reader().entry_count > 10)
    return v11, v10


def _raises(data: bytes, *fragments: str) -> None:
    with pytest.raises(HoodieHFileError) as info:
        HFileReader(data, "broken.hfile").read_all()
    message = str(info.value)
    assert "broken.hfile" in message
    for fragment in fragments:
        assert fragment in message, message


def test_truncated_files(samples):
    for f in samples:
        data = f.data
        _raises(data[:100], "shorter than the 4096-byte HFile trailer")
        _raises(data[:-1], "trailer magic")
        _raises(data[len(data) - TRAILER_SIZE - 50:], "outside the file")  # blocks cut off at the front
        _raises(data[:40] + data[-TRAILER_SIZE:], "outside the file")
        _raises(b"", "shorter")


def test_corrupted_data_block(samples):
    v11, v10 = samples
    for f, fragment in ((v11, "gzip payload is corrupted"), (v10, "CRC32C checksum mismatch")):
        data = bytearray(f.data)
        data[200] ^= 0x55  # inside the first data block's compressed payload
        _raises(bytes(data), "DATA block at offset 0", fragment)


def test_corrupted_headers_and_trailer(samples):
    v11, _ = samples
    data = bytearray(v11.data)
    data[0:8] = b"XXXXXXXX"
    _raises(bytes(data), "no HFile block magic at offset 0")
    data = bytearray(v11.data)
    struct.pack_into(">i", data, 12, 999999)  # uncompressed size of the data block
    _raises(bytes(data), "uncompressed")
    data = bytearray(v11.data)
    data[-1] = 2  # major version 2
    _raises(bytes(data), "major version 2")


def test_wrong_entry_count_is_an_error(samples):
    v11, _ = samples
    trailer = decode_trailer(v11.data, "t")
    bad = trailer.__class__(**{**{k: getattr(trailer, k) for k in trailer.__dataclass_fields__},
                               "entry_count": trailer.entry_count + 1})
    _raises(v11.data[:-TRAILER_SIZE] + bad.encode(), "trailer says")


def test_unsupported_codec(samples):
    v11, _ = samples
    trailer = decode_trailer(v11.data, "t")
    bad = trailer.__class__(**{**{k: getattr(trailer, k) for k in trailer.__dataclass_fields__},
                               "compression_codec": 3})
    _raises(v11.data[:-TRAILER_SIZE] + bad.encode(), "codec 3 is not supported")
