"""Metadata-table key encodings and file-group placement, recomputed for every record of the fixtures."""
from __future__ import annotations

import collections

from storage.metadata.keys import (
    ALL_PARTITIONS_KEY,
    bloom_filter_key,
    column_stats_key,
    column_stats_prefix,
    escape_secondary,
    file_group_id,
    file_group_index,
    hash_id,
    partition_stats_key,
    secondary_index_key,
    secondary_index_prefix,
    xxh64,
)
from storage.metadata.records import MetadataRecordType, decode_record


def _records(mdt_hfiles):
    for f in mdt_hfiles:
        r = f.reader()
        for cell in r.cells():
            yield f, decode_record(cell.key, cell.value, r.schema, f.label)


def _partitions(mdt_hfiles) -> dict[str, set[str]]:
    out = collections.defaultdict(set)
    for f, rec in _records(mdt_hfiles):
        if rec.type is MetadataRecordType.PARTITION_LIST:
            out[f.fixture] |= set(rec.payload.entries)
    return out


def test_xxh64_vectors():
    assert xxh64(b"", 0) == 0xEF46DB3751D8E999
    assert xxh64(b"abc", 0) == 0x44BC2CF5AD770999
    assert xxh64(b"Nobody inspects the spammish repetition", 0) == 0xFBCEA83C8A378BF1  # > 32 bytes: stripes
    assert xxh64(b"currency") == 0xFE6EA5C6EE03879C and xxh64(b"region=us") == 0xE37D531D34F03B94


def test_key_shapes():
    assert column_stats_prefix("currency") == hash_id("currency") == "/m6lxu4Dh5w="
    assert column_stats_prefix("currency", "region=us") == "/m6lxu4Dh5w=431THTTwO5Q="
    assert len(column_stats_key("c", "p", "f.parquet")) == 48 and len(partition_stats_key("c", "p")) == 24
    assert column_stats_key("c", "", "f") == column_stats_key("c", ".", "f")  # non-partitioned table: "."
    assert bloom_filter_key("p", "f")[:12] == hash_id("p") and len(bloom_filter_key("p", "f")) == 36
    assert escape_secondary("a$b\\c\x00") == "a\\$b\\\\c\\\x00"
    assert secondary_index_key(None, "TXN-003") == "\x00$TXN-003"
    assert secondary_index_key("Amazon", "TXN-001") == "Amazon$TXN-001" and secondary_index_prefix("x$") == "x\\$$"
    assert file_group_id("col-stats-", 1) == "col-stats-0001-0"


def test_column_and_partition_stats_keys_recomputed(mdt_hfiles):
    partitions = _partitions(mdt_hfiles)
    checked = collections.Counter()
    for f, rec in _records(mdt_hfiles):
        stats = rec.payload
        if rec.type is MetadataRecordType.COLUMN_STATS:
            candidates = {column_stats_key(stats.column_name, p, stats.file_name) for p in partitions[f.fixture]}
            assert rec.key in candidates, (f.label, rec.key)
            checked["column_stats"] += 1
        elif rec.type is MetadataRecordType.PARTITION_STATS:
            assert rec.key == partition_stats_key(stats.column_name, stats.file_name), (f.label, rec.key)
            checked["partition_stats"] += 1
    assert checked == {"column_stats": 1021, "partition_stats": 798}


def test_file_group_placement(mdt_hfiles):
    """Each record sits in the file group its key hashes to (secondary index 1.1: the value prefix)."""
    groups = {}
    checked = collections.Counter()
    for f, rec in _records(mdt_hfiles):
        part_dir = f.path.parent
        if part_dir not in groups:
            groups[part_dir] = len({p.name.lstrip(".").split("_")[0] for p in part_dir.iterdir()
                                    if ".log." in p.name or p.name.endswith(".hfile")})
        count = groups[part_dir]
        hash_input = rec.key
        if rec.type is MetadataRecordType.SECONDARY_INDEX and not f.fixture.startswith("trips_mor_avro_v8"):
            hash_input = rec.key[:rec.key.index("$") + 1]  # index version V2 hashes `escaped value + $`
        expected = 0 if rec.type in (MetadataRecordType.PARTITION_LIST, MetadataRecordType.FILE_LIST) else \
            file_group_index(hash_input, count)
        assert int(f.file_group.rsplit("-", 2)[-2]) == expected, (f.label, rec.key)
        checked[f.mdt_partition.split("_index_")[0]] += 1
    assert set(checked) == {"files", "column_stats", "partition_stats", "record_index", "secondary"}


def test_files_partition_keys(mdt_hfiles):
    partitions = _partitions(mdt_hfiles)
    assert partitions["sample_cow_v9_txns_simple_meta"] == {"region=eu", "region=us", "region=apac"}
    for f, rec in _records(mdt_hfiles):
        if rec.type is MetadataRecordType.FILE_LIST:
            assert rec.key in partitions[f.fixture]
        if rec.type is MetadataRecordType.PARTITION_LIST:
            assert rec.key == ALL_PARTITIONS_KEY
