"""Writing secondary indexes (storage/metadata/secondary_index_writer.py).

- Initialisation against Java: on the Java-written fixtures (v9 COW and MOR txns: merchant_idx on a string column,
  txn_date_idx on a DATE, version V2; v8 MOR trips: rider_idx, version V1, a slice with a log file), the entries
  built from the data table equal the live entries of Java's own index partitions, which proves the spelling of
  values and the escaping; and each entry goes to the shard Java put it in (V2: by value, V1: by whole key).
- Each commit's changes against an oracle: tables written here (COW and MOR), and around each write a Spark
  snapshot read of record key -> value before and after it; the changes of the commit (taken while it is still
  inflight, in a pre-complete hook) are what those two maps imply - insert for a new key, delete old + insert
  new for a changed value, delete for a key gone, nothing for an unchanged value.
"""
from __future__ import annotations

import datetime as dt
import math
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest

from storage.exception import HoodieIndexError
from storage.metadata.index_definitions import index_definitions
from storage.metadata.keys import file_group_index, secondary_index_key, secondary_index_prefix
from storage.metadata.record_index import shards
from storage.metadata.records import MetadataRecordType, SecondaryIndexInfo, decode_record
from storage.metadata.secondary_index_writer import (
    DELETED,
    ENTRY_SCHEMA,
    KEY,
    by_secondary_shard,
    commit_entries,
    entry_keys,
    initial_entries,
    reduce_entries,
    secondary_cells,
    secondary_values,
    value_prefixes,
)
from storage.metadata.table_metadata import HoodieTableMetadata
from storage.table.action_completion import register_pre_complete
from storage.table.fs_view import FileSystemView
from storage.table.meta_client import HoodieTableMetaClient
from storage.timeline.commit_metadata import HoodieCommitMetadata

COW, MOR, TRIPS = "sample_cow_v9_txns_simple_meta", "sample_mor_avro_v9_txns_simple_meta", \
    "trips_mor_avro_v8_trips_8i3u1d"


# ----------------------------------------------------------------------------------------------- Java fixtures


def _java_entries(metadata: HoodieTableMetadata, partition: str) -> dict[str, int]:
    """Live entry key -> shard, as Java's index partition holds them."""
    out = {}
    for shard, file_slice in enumerate(shards(metadata, partition)):
        for key, record in metadata.slice_records(file_slice).items():
            assert isinstance(record.payload, SecondaryIndexInfo)
            if not record.payload.is_deleted:
                out[key] = shard
    return out


def _secondary_definitions(meta: HoodieTableMetaClient):
    return {p: d for p, d in index_definitions(meta).items() if d.index_type == "secondary_index"}


@pytest.mark.parametrize("name", [COW, MOR, TRIPS])
def test_initial_entries_equal_javas_index(fixture_table, name):
    meta = HoodieTableMetaClient.load(str(fixture_table(name)))
    metadata = HoodieTableMetadata(meta)
    definitions = _secondary_definitions(meta)
    assert definitions
    for partition, definition in definitions.items():
        java = _java_entries(metadata, partition)
        mine = initial_entries(meta, FileSystemView(meta), definition.source_fields[0])
        assert sorted(mine.to_pylist()) == sorted(java), partition
        assert len(java) >= 6


def test_fixture_spellings_include_null_and_dates(fixture_table):
    """What the fixtures prove: a NULL string is the NUL character, a DATE its days since the epoch."""
    meta = HoodieTableMetaClient.load(str(fixture_table(COW)))
    merchants = initial_entries(meta, FileSystemView(meta), "merchant_name").to_pylist()
    dates = initial_entries(meta, FileSystemView(meta), "txn_date").to_pylist()
    assert "\x00$TXN-003" in merchants and "Amazon$TXN-001" in merchants
    assert "19737$TXN-001" in dates  # 2024-01-15


@pytest.mark.parametrize("name", [COW, MOR, TRIPS])
def test_entries_go_to_javas_shards(fixture_table, name):
    meta = HoodieTableMetaClient.load(str(fixture_table(name)))
    metadata = HoodieTableMetadata(meta)
    for partition, definition in _secondary_definitions(meta).items():
        java = _java_entries(metadata, partition)
        count = len(shards(metadata, partition))
        entries = pa.table({KEY: pa.array(sorted(java), pa.string()), DELETED: pa.array([False] * len(java))})
        placed = {}
        for shard, upserts, deletes in by_secondary_shard(entries, count, definition.version):
            assert len(deletes) == 0
            placed.update((k, shard) for k in upserts.to_pylist())
        assert placed == java, (partition, definition.version)


def test_v1_shards_by_whole_key_v2_by_value():
    keys = ["Grab$TXN-008", "Grab$TXN-099", "a\\$b$k1", "\x00$k2", "x\\\\$k3"]
    entries = pa.table({KEY: pa.array(keys), DELETED: pa.array([False, True, False, False, True])})
    for version, hash_input in (("V2", {"Grab$TXN-008": "Grab$", "Grab$TXN-099": "Grab$", "a\\$b$k1": "a\\$b$",
                                        "\x00$k2": "\x00$", "x\\\\$k3": "x\\\\$"}),
                                ("V1", {k: k for k in keys})):
        placed = {}
        for shard, upserts, deletes in by_secondary_shard(entries, 7, version):
            placed.update((k, (shard, False)) for k in upserts.to_pylist())
            placed.update((k, (shard, True)) for k in deletes.to_pylist())
        assert placed == {k: (file_group_index(hash_input[k], 7), d)
                          for k, d in zip(keys, [False, True, False, False, True])}
    assert value_prefixes(pa.array(keys)).to_pylist() == ["Grab$", "Grab$", "a\\$b$", "\x00$", "x\\\\$"]


# ----------------------------------------------------------------------------------------------- spelling


def test_keys_are_escaped_as_hudi_escapes():
    values = ["a$b", "c\\d", "e\x00f", None, "plain", "$", "\x00"]
    record_keys = ["k$1", "k\\2", "k3", "k4", "k\x005", "k6", "k7"]
    assert entry_keys(pa.array(values), pa.array(record_keys)).to_pylist() == \
        [secondary_index_key(v, k) for v, k in zip(values, record_keys)]
    assert value_prefixes(entry_keys(pa.array(values), pa.array(record_keys))).to_pylist() == \
        [secondary_index_prefix(v) for v in values]


def test_values_are_spelt_as_hudi_spells_them():
    day = dt.date(2024, 1, 15)
    assert secondary_values(pa.array([day, None, dt.date(1969, 12, 31)])).to_pylist() == ["19737", None, "-1"]
    assert secondary_values(pa.chunked_array([pa.array(["x", None]), pa.array(["y"])])).to_pylist() == \
        ["x", None, "y"]
    for kind in (pa.int8(), pa.int16(), pa.int32(), pa.int64()):
        assert secondary_values(pa.array([-5, None, 7], kind)).to_pylist() == ["-5", None, "7"]
    moment = dt.datetime(2024, 1, 15, 16, 30, 0, 123456, tzinfo=dt.timezone.utc)
    micros = str(int(moment.timestamp()) * 1_000_000 + 123456)
    assert secondary_values(pa.array([moment], pa.timestamp("us", "UTC"))).to_pylist() == [micros]
    assert secondary_values(pa.array([moment.replace(microsecond=123000)], pa.timestamp("ms"))).to_pylist() == \
        [str(int(moment.timestamp()) * 1_000_000 + 123000)]
    assert secondary_values(pa.array(["a", None]).dictionary_encode()).to_pylist() == ["a", None]
    with pytest.raises(HoodieIndexError):
        secondary_values(pa.array([True]))


# Java's Double.toString / Float.toString of these values (JLS layout: plain for 1e-3 <= |x| < 1e7, else
# computerized scientific notation with at least one fraction digit)
_JAVA_DOUBLES = [(0.0, "0.0"), (-0.0, "-0.0"), (1.0, "1.0"), (100.5, "100.5"), (-2.25, "-2.25"), (0.1, "0.1"),
                 (0.001, "0.001"), (9.99e-4, "9.99E-4"), (1e-5, "1.0E-5"), (9999999.0, "9999999.0"),
                 (1e7, "1.0E7"), (12345678.9, "1.23456789E7"), (123456789.0, "1.23456789E8"), (1e20, "1.0E20"),
                 (1.7976931348623157e308, "1.7976931348623157E308"), (4.9e-324, "4.9E-324"), (1e-323, "9.9E-324"),
                 (math.nan, "NaN"), (math.inf, "Infinity"), (-math.inf, "-Infinity"), (None, None)]
_JAVA_FLOATS = [(0.1, "0.1"), (1.5, "1.5"), (100.0, "100.0"), (12345678.9, "1.2345679E7"),
                (123456.789, "123456.79"), (3.4028235e38, "3.4028235E38"), (1e-4, "1.0E-4"), (1.4e-45, "1.4E-45"),
                (-0.0, "-0.0")]


def test_doubles_and_floats_are_spelt_as_java_prints_them():
    values, expected = zip(*_JAVA_DOUBLES)
    assert secondary_values(pa.array(values, pa.float64())).to_pylist() == list(expected)
    values, expected = zip(*_JAVA_FLOATS)
    assert secondary_values(pa.array(np.array(values, np.float32))).to_pylist() == list(expected)


# ----------------------------------------------------------------------------------------------- shards, cells



def _mdt_schema() -> str:
    from storage.metadata.metadata_writer import record_schema

    return record_schema(9)


def test_cells_share_one_value_and_are_sorted():
    schema = _mdt_schema()
    keys = pa.array(["b$2", "a$1", "\x00$3", "b$2", "é$4"])
    cells = list(secondary_cells(keys, schema, "f.hfile").pairs())
    assert [k for k, _ in cells] == sorted({k.encode("utf-8") for k in keys.to_pylist()})
    assert len({v for _, v in cells}) == 1
    record = decode_record(cells[0][0], cells[0][1], schema)
    assert record.type == MetadataRecordType.SECONDARY_INDEX and record.payload == SecondaryIndexInfo(False)
    assert record.meta.file_name == "f.hfile"
    assert len(secondary_cells(pa.array([], pa.string()), schema)) == 0


def test_reduce_keeps_an_insert_over_a_delete():
    entries = pa.table({KEY: ["v$1", "v$1", "w$2", "x$3", "x$3"], DELETED: [True, False, True, False, False]},
                       schema=ENTRY_SCHEMA)
    assert reduce_entries(entries).to_pylist() == [{KEY: "v$1", DELETED: False}, {KEY: "w$2", DELETED: True},
                                                   {KEY: "x$3", DELETED: False}]


# ----------------------------------------------------------------------------------------------- commits


SCHEMA = "id int, name string, fare double, ts long, day date, dt string"
INDEXED = ("name", "day")


def _spell(column: str, value) -> str | None:
    if value is None:
        return None
    if column == "day":
        return str((value - dt.date(1970, 1, 1)).days)
    return str(value)


def _options(name: str, table_type: str, metadata: bool = False) -> dict[str, str]:
    return {"hoodie.table.name": name, "hoodie.datasource.write.recordkey.field": "id",
            "hoodie.datasource.write.precombine.field": "ts", "hoodie.datasource.write.partitionpath.field": "dt",
            "hoodie.datasource.write.table.type": table_type, "hoodie.write.table.version": "9",
            "hoodie.upsert.shuffle.parallelism": "2", "hoodie.insert.shuffle.parallelism": "2",
            "hoodie.clean.automatic": "false", "hoodie.metadata.enable": str(metadata).lower()}


def _snapshot(spark, base: Path) -> dict[str, dict[str, str | None]]:
    """column -> {record key: spelt value} of a snapshot read (empty before the first write)."""
    if not (base / ".hoodie").exists():
        return {c: {} for c in INDEXED}
    rows = spark.read.format("hudi").load(str(base)).select("_hoodie_record_key", *INDEXED).collect()
    return {c: {r[0]: _spell(c, r[i + 1]) for r in rows} for i, c in enumerate(INDEXED)}


def _expected(before: dict[str, str | None], after: dict[str, str | None]) -> list[dict]:
    """The entry changes a move from `before` to `after` (record key -> value) implies."""
    out = {}
    for key, value in before.items():
        if key not in after or after[key] != value:
            out[secondary_index_key(value, key)] = True
    for key, value in after.items():
        if key not in before or before[key] != value:
            out[secondary_index_key(value, key)] = False
    return [{KEY: k, DELETED: d} for k, d in sorted(out.items())]


@pytest.fixture
def commits():
    """Per commit the pre-complete hook saw (while inflight): (instant, operation, {column: entries or error})."""
    seen: list[tuple[str, str, dict]] = []

    def hook(completion) -> None:
        md = completion.metadata
        if not isinstance(md, HoodieCommitMetadata):
            return
        out = {}
        for column in INDEXED:
            try:
                out[column] = commit_entries(completion.meta, md, completion.instant_time, column)
            except HoodieIndexError as exc:
                out[column] = exc
        seen.append((completion.instant_time, (md.operationType or "").lower(), out))

    remove = register_pre_complete(hook)
    yield seen
    remove()


def _write(spark, base: Path, opts: dict, rows: list[tuple], operation: str) -> None:
    spark.createDataFrame(rows, SCHEMA).write.format("hudi").options(**opts) \
        .option("hoodie.datasource.write.operation", operation).mode("append").save(str(base))


D1, D2, D3 = dt.date(2024, 1, 15), dt.date(2024, 2, 1), dt.date(2024, 3, 9)


@pytest.mark.parametrize("table_type, metadata", [("COPY_ON_WRITE", True), ("MERGE_ON_READ", False)])
def test_commit_entries_follow_the_table(spark, tmp_path, commits, table_type, metadata):
    """`metadata`: the table keeps a metadata table, so the view lists the files through it (as it does when the
    writer keeps secondary indexes), while the hook runs beside the metadata table's own update."""
    base = tmp_path / f"si_{table_type[:3].lower()}"
    opts = _options(base.name, table_type, metadata)
    steps = [
        ("insert", [(1, "Amazon", 1.5, 1, D1, "x"), (2, "Grab", 2.5, 1, D1, "y"), (3, "a$b\\c", 3.5, 1, D2, "x"),
                    (4, None, 4.5, 1, D2, "y"), (5, "Uber", 5.5, 1, D3, "x")]),
        # 1: name changes; 2: only the fare changes; 3: a late update (lower ts) loses; 6: a new key
        ("upsert", [(1, "Apple", 1.5, 2, D1, "x"), (2, "Grab", 9.5, 2, D1, "y"), (3, "zzz", 3.5, 0, D3, "x"),
                    (6, "Grab", 6.5, 2, D3, "y")]),
        ("delete", [(5, "Uber", 5.5, 3, D3, "x")]),
        # 4: a null name gets a value; 1: name back to null and the date changes (the MOR slice now has logs)
        ("upsert", [(4, "Best Buy", 4.5, 4, D2, "y"), (1, None, 1.5, 4, D2, "x")]),
        ("upsert", [(2, "Grab", 2.5, 5, D1, "y")]),  # nothing indexed changes
    ]
    seen_any_change = {c: False for c in INDEXED}
    for step, (operation, rows) in enumerate(steps):
        if table_type == "MERGE_ON_READ" and step >= 2:  # previous slices with log files are merged
            meta = HoodieTableMetaClient.load(str(base))
            assert any(s.log_files for s in FileSystemView(meta).latest_file_slices())
        before = _snapshot(spark, base)
        count = len(commits)
        _write(spark, base, opts, rows, operation)
        after = _snapshot(spark, base)
        mine = [c for c in commits[count:] if c[1] not in ("compact", "cluster")]
        assert len(mine) == 1, commits[count:]
        for column in INDEXED:
            got = mine[0][2][column]
            assert not isinstance(got, Exception), got
            expected = _expected(before[column], after[column])
            assert got.to_pylist() == expected, (operation, column)
            seen_any_change[column] |= bool(expected)
        if operation == "upsert" and rows[0][0] == 2:
            assert all(mine[0][2][c].num_rows == 0 for c in INDEXED)
    assert all(seen_any_change.values())
    count = len(commits)
    _write(spark, base, opts, [(7, "Zara", 7.5, 6, D1, "x")], "insert_overwrite")
    refused = [c for c in commits[count:] if c[1] == "insert_overwrite"]
    assert refused and all(isinstance(refused[0][2][c], HoodieIndexError) for c in INDEXED)
    assert "Can not perform operation INSERT_OVERWRITE on secondary index" in str(refused[0][2]["name"])


def test_compaction_and_clustering_change_nothing(tmp_path):
    meta = type("Meta", (), {})()
    for operation in ("compact", "cluster", "log_compact"):
        md = HoodieCommitMetadata(operationType=operation.upper())
        assert commit_entries(meta, md, "20240101000000000", "name").num_rows == 0
    with pytest.raises(HoodieIndexError, match="Can not perform operation DELETE_PARTITION on secondary index"):
        commit_entries(meta, HoodieCommitMetadata(operationType="DELETE_PARTITION"), "20240101000000000", "name")
