"""Reading Java's record-level index and secondary indexes (storage/metadata/record_index.py) and pruning file
slices by them (storage/read/data_skipping.py), on the fixtures that carry them: the v9 (Hudi 1.1) COW and MOR
txns tables (record_index + secondary indexes merchant_idx, txn_date_idx, version V2) and the v8 (1.0.x) MOR trips
table (record_index + secondary index rider_idx, version V1).

The oracle is a Spark snapshot read of the data table (its live rows, with `_hoodie_record_key` and the file
group of `_hoodie_file_name`), never the metadata table itself."""
from __future__ import annotations

import datetime as dt
import logging
import shutil
from pathlib import Path
from types import SimpleNamespace

import pyarrow as pa
import pytest

from storage.config import HoodieConfig
from storage.exception import HoodieCorruptedMetadataError
from storage.io.hfile.reader import HFileReader
from storage.metadata.keys import file_group_index, secondary_index_key, secondary_index_prefix
from storage.metadata.record_index import (
    RecordLocation,
    decode_file_id,
    record_locations,
    secondary_index_record_keys,
    unescape_secondary,
)
from storage.metadata.records import RecordIndexInfo
from storage.metadata.table_metadata import HoodieTableMetadata
from storage.read import data_skipping, record_index_skipping
from storage.read.record_index_skipping import _keys_from_fields, _pinned_values, skip_by_record_index
from storage.read.predicates import And, Comparison, In, Or
from storage.read.reader import file_slices_to_read
from storage.table.meta_client import HoodieTableMetaClient

COW, MOR, TRIPS = "sample_cow_v9_txns_simple_meta", "sample_mor_avro_v9_txns_simple_meta", \
    "trips_mor_avro_v8_trips_8i3u1d"
FIXTURES = (COW, MOR, TRIPS)
KEY = {COW: "txn_id", MOR: "txn_id", TRIPS: "uuid"}
# index partition -> its column, per fixture
INDEXES = {COW: {"secondary_index_merchant_idx": "merchant_name", "secondary_index_txn_date_idx": "txn_date"},
           MOR: {"secondary_index_merchant_idx": "merchant_name", "secondary_index_txn_date_idx": "txn_date"},
           TRIPS: {"secondary_index_rider_idx": "rider"}}
# keys the scripts deleted (DELETE) or replaced (INSERT OVERWRITE of region=eu): absent from the index
GONE = {COW: ["TXN-002", "TXN-005", "TXN-004", "TXN-006", "TXN-009", "TXN-010"],
        MOR: ["TXN-002", "TXN-005", "TXN-004", "TXN-006", "TXN-009", "TXN-010"],
        TRIPS: ["e3cf430c-889d-4015-bc98-59bdce1e530c", "c8abbe79-8d89-47ea-b4ce-4d224bae5bfa"]}
SKIPPING_OFF = HoodieConfig.of({"hoodie.enable.data.skipping": "false"})


def _file_id(name: str) -> str:
    return name.lstrip(".").split("_")[0]


def _hudi_value(value) -> str | None:
    """A column value as Hudi's secondary index spells it (DATE as days since the epoch)."""
    if isinstance(value, dt.date):
        return str((value - dt.date(1970, 1, 1)).days)
    return None if value is None else str(value)


@pytest.fixture(scope="module")
def scans(spark, fixture_table) -> dict[str, dict]:
    """Per fixture: base path, and its snapshot rows as key -> (partition, file id, {column: value})."""
    out = {}
    for name in FIXTURES:
        base = str(fixture_table(name))
        columns = sorted(set(INDEXES[name].values()))
        frame = spark.read.format("hudi").load(base) \
            .select("_hoodie_record_key", "_hoodie_partition_path", "_hoodie_file_name", *columns)
        rows = {r[0]: (r[1], _file_id(r[2]), dict(zip(columns, r[3:]))) for r in frame.collect()}
        out[name] = {"base": base, "rows": rows}
    return out


def _metadata(base: str) -> HoodieTableMetadata:
    return HoodieTableMetadata(HoodieTableMetaClient.load(base))


# -- pure logic ----------------------------------------------------------------------------------------------------


def test_file_ids_decode_by_their_encoding():
    # notes Appendix A: TXN-008 of the v9 COW table
    info = RecordIndexInfo("region=apac", 541420586697966898, -6206175399855160771, 0, "", 1772922274124, 0)
    assert decode_file_id(info) == "07838327-b037-4532-a9df-3c5b05dd823d-0"
    bare = RecordIndexInfo("p", 541420586697966898, -6206175399855160771, -1, "", 0, 0)
    assert decode_file_id(bare) == "07838327-b037-4532-a9df-3c5b05dd823d"
    raw = RecordIndexInfo("p", -1, -1, -1, "00000003-some-bucket-file-0", 0, 1)
    assert decode_file_id(raw) == "00000003-some-bucket-file-0"
    for bad in (RecordIndexInfo("p", -1, -1, -1, "x", 0, 2), RecordIndexInfo("p", -1, -1, -1, "", 0, 1)):
        with pytest.raises(HoodieCorruptedMetadataError):
            decode_file_id(bad)


def test_shards_follow_the_java_hash():
    assert file_group_index("TXN-001", 10) == 8 and file_group_index("TXN-009", 10) == 0  # notes Appendix A
    # V2 secondary keys hash `escape(value) + "$"`: "Grab$TXN-008" lands where "Grab$" does, not the full key
    assert file_group_index("Grab$", 10) == 6 != file_group_index("Grab$TXN-008", 10)
    for value, key in (("a$b", "k\\1"), (None, "TXN-003"), ("\x00", "$\x00")):
        prefix = secondary_index_prefix(value)
        assert secondary_index_key(value, key).startswith(prefix)
        assert unescape_secondary(secondary_index_key(value, key)[len(prefix):]) == key


def test_pinned_values_and_or():
    spell = lambda v: v if isinstance(v, str) else None  # noqa: E731
    assert _pinned_values(Comparison("K", "=", "a"), "k", spell) == {"a"}
    assert _pinned_values(In("k", ("a", "b", None)), "k", spell) == {"a", "b"}
    assert _pinned_values(And((In("k", ("a", "b")), Comparison("x", ">", 1), Comparison("k", "=", "b"))),
                          "k", spell) == {"b"}
    assert _pinned_values(Or((Comparison("k", "=", "a"), In("k", ("c",)))), "k", spell) == {"a", "c"}
    assert _pinned_values(Or((Comparison("k", "=", "a"), Comparison("x", "=", "c"))), "k", spell) is None
    assert _pinned_values(Comparison("k", ">=", "a"), "k", spell) is None
    assert _pinned_values(In("k", ("a", 5)), "k", spell) is None  # a literal without a known spelling


# -- record index --------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("name", FIXTURES)
def test_record_locations_equal_a_full_scan(scans, name):
    base, rows = scans[name]["base"], scans[name]["rows"]
    assert rows
    metadata = _metadata(base)
    asked = list(rows) + GONE[name] + ["no-such-key"]
    found = record_locations(metadata, asked)
    assert {k: (loc.partition_path, loc.file_id) for k, loc in found.items()} == \
        {k: (partition, file_id) for k, (partition, file_id, _) in rows.items()}
    assert all(isinstance(loc, RecordLocation) and loc.instant_time > 0 for loc in found.values())
    assert record_locations(metadata, []) == {}


@pytest.mark.parametrize("name", [COW, MOR])
def test_deleted_keys_are_removed_by_delete_entries(scans, name, monkeypatch):
    """INSERT OVERWRITE of region=eu replaced TXN-004: its record-index entry is removed by a DELETE-block entry
    in the latest MDT log of its shard (on top of the base HFile holding it); the lookup reads that entry and
    leaves the key out."""
    seen = []
    original = HoodieTableMetadata._block_records

    def spy(self, ref, query):
        records = original(self, ref, query)
        seen.extend(records)
        return records

    monkeypatch.setattr(HoodieTableMetadata, "_block_records", spy)
    assert record_locations(_metadata(scans[name]["base"]), ["TXN-004", "TXN-001"]).keys() == {"TXN-001"}
    assert ("TXN-004", None) in seen


@pytest.mark.parametrize("name", [COW, TRIPS])
def test_only_the_shards_of_the_keys_are_opened(scans, name, monkeypatch):
    base, rows = scans[name]["base"], scans[name]["rows"]
    shards, files = [], []
    read_slice, hfile_init = HoodieTableMetadata._read_slice, HFileReader.__init__

    def spy_slice(self, file_slice, query):
        shards.append((file_slice.partition_path, file_slice.file_id))
        return read_slice(self, file_slice, query)

    def spy_hfile(self, data, source="<hfile bytes>"):
        files.append(source)
        hfile_init(self, data, source)

    monkeypatch.setattr(HoodieTableMetadata, "_read_slice", spy_slice)
    monkeypatch.setattr(HFileReader, "__init__", spy_hfile)
    metadata = _metadata(base)
    keys = sorted(rows)[:2]
    record_locations(metadata, keys)
    expected = {("record_index", f"record-index-{file_group_index(k, 10):04d}-0") for k in keys}
    assert set(shards) == expected and len(shards) == len(expected)
    # the HFiles opened (base files, and the HFiles inside log blocks) are those of these shards only
    assert files and all("/record_index/" in f and any(fid in f for _, fid in expected) for f in files)


def test_v2_secondary_lookup_opens_one_shard_v1_every_shard(scans, monkeypatch):
    shards = []
    read_slice = HoodieTableMetadata._read_slice

    def spy_slice(self, file_slice, query):
        shards.append(file_slice.file_id)
        return read_slice(self, file_slice, query)

    monkeypatch.setattr(HoodieTableMetadata, "_read_slice", spy_slice)
    assert secondary_index_record_keys(_metadata(scans[COW]["base"]), "merchant_idx", ["Grab"]) == {"TXN-008"}
    assert shards == [f"secondary-index-merchant-idx-{file_group_index('Grab$', 10):04d}-0"]
    shards.clear()
    keys = secondary_index_record_keys(_metadata(scans[TRIPS]["base"]), "secondary_index_rider_idx", ["rider-A"])
    assert keys == {"334e26e9-8355-45cc-97c6-c31daf0df330"} and len(shards) == 10


@pytest.mark.parametrize("name", FIXTURES)
def test_secondary_index_lookups_equal_a_scan(scans, name):
    base, rows = scans[name]["base"], scans[name]["rows"]
    metadata = _metadata(base)
    for partition, column in INDEXES[name].items():
        by_value: dict[str | None, set[str]] = {}
        for key, (_, _, values) in rows.items():
            by_value.setdefault(_hudi_value(values[column]), set()).add(key)
        for value, keys in by_value.items():
            assert secondary_index_record_keys(metadata, partition, [value]) == keys, (partition, value)
        assert secondary_index_record_keys(metadata, partition, list(by_value)) == set(rows)
        assert secondary_index_record_keys(metadata, partition, ["no such value", "rider-F"]) == set()
    if name != TRIPS:
        assert None in {_hudi_value(v[2]["merchant_name"]) for v in rows.values()}  # TXN-003's NULL is looked up


# -- data skipping -------------------------------------------------------------------------------------------------


def _holding(rows: dict, accept) -> set[str]:
    return {file_id for key, (_, file_id, values) in rows.items() if accept(key, values)}


def _kept(base: str, predicate, config: HoodieConfig = HoodieConfig()) -> set[str]:
    return {s.file_id for s in file_slices_to_read(HoodieTableMetaClient.load(base), config, data_filter=predicate)}


@pytest.mark.parametrize("name", FIXTURES)
def test_kept_slices_are_the_file_groups_holding_the_rows(scans, name):
    base, rows = scans[name]["base"], scans[name]["rows"]
    key, every = KEY[name], _kept(base, None)
    assert len(every) >= 3
    some = sorted(rows)[::2]
    cases = [(Comparison(key, "=", some[0]), lambda k, v: k == some[0]),
             (In(key, tuple(some) + ("no-such-key",)), lambda k, v: k in some),
             (Comparison("_hoodie_record_key", "=", some[-1]), lambda k, v: k == some[-1]),
             (In(key, tuple(GONE[name])), lambda k, v: False)]
    for column in INDEXES[name].values():
        value = rows[some[0]][2][column]
        literal = value if not isinstance(value, dt.date) else value.isoformat()
        cases.append((Comparison(column, "=", value), lambda k, v, c=column, x=value: v[c] == x))
        cases.append((And((In(column, (literal,)), Comparison(key, "=", some[0]))),
                      lambda k, v, c=column, x=value: v[c] == x and k == some[0]))
    for predicate, accept in cases:
        assert _kept(base, predicate) == _holding(rows, accept), predicate
        assert _kept(base, predicate, SKIPPING_OFF) == every


def test_index_is_used_for_latest_snapshots_only(scans, monkeypatch):
    """Read-optimized, incremental and time-travel views may see a row in a file group it has since left (the
    index describes the latest state): the index is not consulted for them, as in Hudi."""
    base = scans[MOR]["base"]
    meta = HoodieTableMetaClient.load(base)
    calls = []
    monkeypatch.setattr(record_index_skipping, "record_locations",
                        lambda metadata, keys: calls.append(set(keys)) or record_locations(metadata, keys))
    pinned = Comparison("txn_id", "=", "TXN-001")
    first = meta.timeline.completed().write_timeline().timestamps()[0]
    file_slices_to_read(meta, HoodieConfig.of({"hoodie.datasource.query.type": "read_optimized"}), data_filter=pinned)
    file_slices_to_read(meta, HoodieConfig.of({"as.of.instant": first}), data_filter=pinned)
    metadata, slices = HoodieTableMetadata(meta), file_slices_to_read(meta, HoodieConfig())
    incremental = HoodieConfig.of({"hoodie.datasource.query.type": "incremental",
                                   "hoodie.datasource.read.begin.instanttime": first})
    data_skipping.skip_file_slices(metadata, slices, pinned, incremental, latest=True)
    assert calls == []
    file_slices_to_read(meta, HoodieConfig(), data_filter=pinned)
    assert calls == [{"TXN-001"}]


def test_predicates_pin_keys_only_where_the_spelling_is_exact(scans):
    """An OR with an unpinned side, or a literal Spark would cast, pins no key: every slice the stats keep."""
    base, rows = scans[MOR]["base"], scans[MOR]["rows"]
    every, spotify = _kept(base, None), Comparison("merchant_name", "=", "Spotify")
    assert _kept(base, spotify) == _holding(rows, lambda k, v: v["merchant_name"] == "Spotify")
    assert _kept(base, Comparison("txn_id", "=", 1)) == every
    # "Spotify" is within the stats range of the us file group holding Amazon .. Uber: kept without the index
    widened = _kept(base, Or((spotify, Comparison("txn_type", "=", "no-such-type"))))
    assert _kept(base, spotify) < widened < every


def _meta(fields: list[str], keygen: str, partitions: list[str] = ()) -> SimpleNamespace:
    config = SimpleNamespace(record_key_fields=fields, keygen_class=keygen, partition_fields=list(partitions))
    return SimpleNamespace(table_config=config)


def test_record_keys_are_spelt_per_key_generator():
    types = {"a": pa.string(), "b": pa.int64(), "d": pa.date32()}
    both = And((Comparison("a", "=", "x"), In("b", (1, 2)), Comparison("c", ">", 0)))
    assert _keys_from_fields(_meta(["a", "b"], "COMPLEX"), both, types) == {"a:x,b:1", "a:x,b:2"}
    assert _keys_from_fields(_meta(["a", "b"], "COMPLEX"), Comparison("a", "=", "x"), types) is None
    assert _keys_from_fields(_meta(["a", "b"], "COMPLEX"), And((Comparison("a", "=", ""), Comparison("b", "=", 3))),
                             types) == {"a:__empty__,b:3"}
    assert _keys_from_fields(_meta(["a"], "COMPLEX"), both, types) == {"a:x", "x"}
    assert _keys_from_fields(_meta(["b"], "SIMPLE", ["p"]), both, types) == {"1", "2"}
    assert _keys_from_fields(_meta(["b"], "SIMPLE"), Comparison("b", "=", "1"), types) is None  # Spark casts '1'
    assert _keys_from_fields(_meta(["d"], "SIMPLE"), Comparison("d", "=", dt.date(2024, 1, 1)), types) is None
    assert _keys_from_fields(_meta([], "SIMPLE"), both, types) is None


@pytest.mark.parametrize("name", [COW, MOR])
def test_sql_rows_with_skipping_equal_rows_without(scans, spark, name, caplog):
    base, rows = scans[name]["base"], scans[name]["rows"]
    total = len(_kept(base, None))
    queries = {f"SELECT txn_id, merchant_name FROM hudi.`{base}` WHERE txn_id IN ('TXN-001', 'TXN-018', 'TXN-002')":
               _holding(rows, lambda k, v: k in ("TXN-001", "TXN-018")),
               f"SELECT txn_id, merchant_name FROM hudi.`{base}` WHERE merchant_name = 'Spotify'":
               _holding(rows, lambda k, v: v["merchant_name"] == "Spotify"),
               f"SELECT txn_id, txn_date FROM hudi.`{base}` WHERE txn_date = DATE '2024-01-16'":
               _holding(rows, lambda k, v: v["txn_date"] == dt.date(2024, 1, 16))}
    for query, holding in queries.items():
        caplog.clear()
        with caplog.at_level(logging.INFO, logger="storage.read.data_skipping"):
            got = sorted(tuple(r) for r in spark.sql(query).collect())
        assert got and f"{len(holding)} of {total} file slices may match" in caplog.text, query
        spark.sql("SET hoodie.enable.data.skipping=false")
        try:
            assert got == sorted(tuple(r) for r in spark.sql(query).collect())
        finally:
            spark.sql("RESET hoodie.enable.data.skipping")


def test_a_damaged_record_index_keeps_every_slice(scans, spark, tmp_path, caplog):
    base = tmp_path / "copy"
    shutil.copytree(scans[COW]["base"], base)
    for path in (base / ".hoodie" / "metadata" / "record_index").glob("*.hfile"):
        data = bytearray(path.read_bytes())
        data[len(data) // 3:len(data) // 3 + 32] = bytes(32)
        path.write_bytes(bytes(data))
    predicate = Comparison("txn_id", "=", "TXN-001")
    meta = HoodieTableMetaClient.load(str(base))
    every = file_slices_to_read(meta, HoodieConfig())
    with caplog.at_level(logging.WARNING):
        assert skip_by_record_index(HoodieTableMetadata(meta), every, predicate) == every
    assert "record-level index skipping is off" in caplog.text
    # the column stats (intact) still prune on their own
    assert _holding(scans[COW]["rows"], lambda k, v: k == "TXN-001") <= _kept(str(base), predicate)
    got = spark.read.format("hudi").load(str(base)).where("txn_id = 'TXN-001'").collect()
    assert [r.txn_id for r in got] == ["TXN-001"]


def test_secondary_index_without_record_index_keeps_every_slice(scans, tmp_path):
    """The secondary index maps values to record keys only: without record_index nothing places them."""
    base = Path(tmp_path / "copy")
    shutil.copytree(scans[COW]["base"], base)
    props = base / ".hoodie" / "hoodie.properties"
    text = props.read_text().replace("partition_stats,record_index,", "partition_stats,")
    props.write_text(text)
    meta = HoodieTableMetaClient.load(str(base))
    assert "record_index" not in meta.table_config.props["hoodie.table.metadata.partitions"]
    every = {s.file_id for s in file_slices_to_read(meta, HoodieConfig())}
    kept = {s.file_id for s in file_slices_to_read(meta, HoodieConfig(),
                                                   data_filter=Comparison("merchant_name", "=", "Spotify"))}
    # column stats (still there) may prune; the secondary index alone may not
    assert _holding(scans[COW]["rows"], lambda k, v: v["merchant_name"] == "Spotify") <= kept <= every
