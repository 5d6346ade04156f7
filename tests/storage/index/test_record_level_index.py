"""RECORD_INDEX (storage/index/record_level_index.py): tags from the metadata table's record_index equal the
locations a full scan of the table gives (`_hoodie_record_key`, `_hoodie_partition_path`, the file group of
`_hoodie_file_name`), on the driver path (small batches) and the Spark path (keys shuffled by shard, looked up in
tasks), with nulls for keys the table does not hold; without a usable record index it tags as GLOBAL_SIMPLE does;
writes with it (the record index kept by the writer, or not built) give the table GLOBAL_SIMPLE gives."""
from __future__ import annotations

import logging
import random

import pytest
from pyspark.sql import functions as F
from pyspark.sql.types import StringType, StructField, StructType

from hudi_oracle import arrow_rows, hudi_rs_read, spark_rows
from storage.config import HoodieConfig, MetadataConfigKeys as MK, WriteConfigKeys as WK
from storage.exception import HoodieCorruptedMetadataError
from storage.index import INDEXES, LOC_FILE_ID, LOC_PARTITION, create_index
from storage.index import record_level_index
from storage.index.hoodie_index import FrameCache, file_id_of_file_name
from storage.index.index_factory import is_global_index
from storage.index.record_level_index import DRIVER_LOOKUP_MAX_KEYS, HoodieRecordIndex
from storage.index.simple_index import HoodieSimpleIndex
from storage.meta_fields import FILE_NAME, PARTITION_PATH, RECORD_KEY
from storage.metadata.index_definitions import RECORD_INDEX
from storage.metadata.record_index import all_record_locations
from storage.metadata.table_metadata import HoodieTableMetadata, enabled_partitions
from storage.table.fs_view import FileSystemView
from storage.table.meta_client import HoodieTableMetaClient

COW, MOR = "sample_cow_v9_txns_simple_meta", "sample_mor_avro_v9_txns_simple_meta"
# TXN-002 was deleted by the fixture's script: the record index no longer holds it
UNKNOWN = ["TXN-002", "TXN-999", "no-such-key"]
READ_SCHEMA = StructType([StructField(RECORD_KEY, StringType()), StructField(PARTITION_PATH, StringType())])
SCHEMA = "id string, name string, ts long, dt string"
COLS = ["id", "name", "ts", "dt"]


def _key_columns(df):
    return F.col(RECORD_KEY), F.col(PARTITION_PATH)


@pytest.fixture(scope="module")
def scans(spark, fixture_table) -> dict[str, tuple[str, dict]]:
    """Per fixture: base path and its live keys -> (partition, file id), from a full snapshot scan."""
    out = {}
    for name in (COW, MOR):
        base = str(fixture_table(name))
        frame = spark.read.format("hudi").load(base).select(
            RECORD_KEY, PARTITION_PATH, file_id_of_file_name(F.col(FILE_NAME)))
        out[name] = base, {r[0]: (r[1], r[2]) for r in frame.collect()}
    return out


def _records(spark, keys: list[str]):
    # a partition path no key is stored in: a global index finds keys anywhere
    return spark.createDataFrame([(k, "elsewhere") for k in keys], f"{RECORD_KEY} string, {PARTITION_PATH} string")


def _tags(spark, index, base: str, keys: list[str], broadcast: bool, in_view: bool = True) -> dict:
    """Key -> (stored partition, file id) as the index tags `keys`, through a file-system view (as the write
    client calls it) or from a list of base files."""
    records = _records(spark, keys)
    if in_view:
        fs_view = FileSystemView(HoodieTableMetaClient.load(base))
        tagged = index.tag_location_in_view(spark, records, fs_view, ["elsewhere"], _key_columns, broadcast,
                                            READ_SCHEMA)
    else:
        base_files = FileSystemView(HoodieTableMetaClient.load(base)).latest_base_files()
        tagged = index.tag_location(spark, records, base_files, _key_columns, broadcast, READ_SCHEMA)
    rows = tagged.select(RECORD_KEY, PARTITION_PATH, LOC_PARTITION, LOC_FILE_ID).collect()
    assert len(rows) == len(keys) and all(r[1] == "elsewhere" for r in rows)  # the batch itself is untouched
    return {r[0]: (r[2], r[3]) for r in rows}


def _only(monkeypatch, path: str) -> None:
    """Fail the lookup path not expected."""
    def refuse(*args, **kwargs):
        raise AssertionError(f"expected the {path} lookup only")
    if path == "driver":
        monkeypatch.setattr(HoodieRecordIndex, "spark_matches", refuse)
    else:
        monkeypatch.setattr(HoodieRecordIndex, "driver_matches", refuse)


@pytest.mark.parametrize("name", [COW, MOR])
@pytest.mark.parametrize("path,broadcast,max_keys,parallelism", [
    ("driver", True, DRIVER_LOOKUP_MAX_KEYS, 0),
    ("spark", False, DRIVER_LOOKUP_MAX_KEYS, 0),  # a large batch: never collected
    ("spark", True, 5, 3),  # broadcast, but more distinct keys than the driver takes
])
def test_tags_equal_a_full_scan(spark, scans, monkeypatch, name, path, broadcast, max_keys, parallelism):
    base, stored = scans[name]
    assert len(stored) >= 10 and RECORD_INDEX in enabled_partitions(HoodieTableMetaClient.load(base))
    _only(monkeypatch, path)
    index = create_index("RECORD_INDEX", base_path=base)
    index.driver_lookup_max_keys, index.parallelism = max_keys, parallelism
    keys = sorted(stored) + UNKNOWN
    expected = {**stored, **{k: (None, None) for k in UNKNOWN}}
    assert _tags(spark, index, base, keys, broadcast) == expected
    # without a view (tag_location): the table is loaded from the index's base path
    assert _tags(spark, index, base, keys, broadcast, in_view=False) == expected


def test_subset_and_only_unknown_keys(spark, scans):
    base, stored = scans[COW]
    index = HoodieRecordIndex(base_path=base)
    some = sorted(stored)[::3]
    for broadcast in (True, False):
        assert _tags(spark, index, base, some, broadcast) == {k: stored[k] for k in some}
        assert _tags(spark, index, base, UNKNOWN, broadcast) == {k: (None, None) for k in UNKNOWN}


def test_cow_fixture_tags_equal_global_simple(spark, scans):
    base, stored = scans[COW]
    keys = sorted(stored) + UNKNOWN
    simple = create_index("GLOBAL_SIMPLE", base_path=base)
    assert _tags(spark, HoodieRecordIndex(base_path=base), base, keys, True) == _tags(spark, simple, base, keys, True)


def test_driver_lookup_caches_its_matches_for_the_write(spark, scans):
    base, stored = scans[COW]
    cache = FrameCache()
    index = HoodieRecordIndex(base_path=base, cache=cache)
    assert _tags(spark, index, base, sorted(stored)[:4], True) == {k: stored[k] for k in sorted(stored)[:4]}
    assert cache.holds_lookup and not cache.counted
    assert sorted(r[0] for r in cache.lookup.collect()) == sorted(stored)[:4]  # only the keys found
    cache.release()


def test_factory_and_options():
    assert "RECORD_INDEX" in INDEXES
    index = create_index("record_index")
    assert isinstance(index, HoodieRecordIndex) and index.is_global
    assert index.update_partition_path is False  # hoodie.record.index.update.partition.path's default, as Hudi's
    on = HoodieConfig.of({WK.RECORD_INDEX_UPDATE_PARTITION_PATH.key: "true"})
    assert create_index("RECORD_INDEX", config=on).update_partition_path is True
    # the other types' options do not apply to it, nor its to them
    off = HoodieConfig.of({WK.SIMPLE_INDEX_UPDATE_PARTITION_PATH.key: "false"})
    assert create_index("RECORD_INDEX", config=off).update_partition_path is False
    assert create_index("RECORD_INDEX", config=HoodieConfig.of({WK.SIMPLE_INDEX_UPDATE_PARTITION_PATH.key: "true"})) \
        .update_partition_path is False
    assert create_index("GLOBAL_SIMPLE", config=on).update_partition_path is True  # its own default
    assert create_index("RECORD_INDEX", True).update_partition_path is True
    assert is_global_index(HoodieConfig.of({WK.INDEX_TYPE.key: " record_index "}))


# ----------------------------------------------------------------------------------------------- fallback


def _write(spark, path: str, batch: list[tuple], opts: dict, operation: str) -> None:
    spark.createDataFrame(batch, SCHEMA).write.format("hudi").options(**opts) \
        .option(WK.OPERATION.key, operation).mode("append").save(path)


def _opts(table_type: str, index_type: str, **extra) -> dict:
    opts = {"hoodie.table.name": "t", "hoodie.datasource.write.table.type": table_type,
            "hoodie.datasource.write.recordkey.field": "id", "hoodie.datasource.write.precombine.field": "ts",
            "hoodie.datasource.write.partitionpath.field": "dt", WK.INDEX_TYPE.key: index_type}
    opts.update(extra)
    return opts


def test_without_record_index_tags_as_global_simple(spark, tmp_path, caplog):
    path = str(tmp_path / "t")
    _write(spark, path, [(f"k{i}", "a", 1, f"p{i % 3}") for i in range(12)], _opts("COPY_ON_WRITE", "GLOBAL_SIMPLE"),
           "insert")
    assert RECORD_INDEX not in enabled_partitions(HoodieTableMetaClient.load(path))
    keys = [f"k{i}" for i in range(0, 16, 2)]
    simple = create_index("GLOBAL_SIMPLE", base_path=path)
    index = create_index("RECORD_INDEX", base_path=path)
    with caplog.at_level(logging.INFO, logger=record_level_index.__name__):
        for broadcast in (True, False):
            expected = _tags(spark, simple, path, keys, broadcast)
            assert sum(v[1] is not None for v in expected.values()) == 6
            assert _tags(spark, index, path, keys, broadcast) == expected
            assert _tags(spark, index, path, keys, broadcast, in_view=False) == expected
    fallbacks = [r for r in caplog.records if "falling back to GLOBAL_SIMPLE" in r.getMessage()]
    assert len(fallbacks) == 1 and fallbacks[0].levelno == logging.INFO  # once, however often it tags


def test_partitioned_or_damaged_record_index_falls_back(spark, scans, monkeypatch, caplog):
    base, stored = scans[COW]
    keys = sorted(stored) + UNKNOWN
    expected = _tags(spark, create_index("GLOBAL_SIMPLE", base_path=base), base, keys, False)

    def no_lookup(*args, **kwargs):
        raise AssertionError("the record index was read")
    monkeypatch.setattr(HoodieRecordIndex, "tag_from_record_index", no_lookup)
    with monkeypatch.context() as m:
        m.setattr(record_level_index, "record_index_is_partitioned", lambda meta: True)
        assert _tags(spark, HoodieRecordIndex(base_path=base), base, keys, False) == expected

    def damaged(metadata, partition):
        raise HoodieCorruptedMetadataError("record-index-0000-0 is not a shard")
    monkeypatch.setattr(record_level_index, "shards", damaged)
    with caplog.at_level(logging.WARNING, logger=record_level_index.__name__):
        assert _tags(spark, HoodieRecordIndex(base_path=base), base, keys, True) == expected
    assert any("record index unusable" in r.getMessage() for r in caplog.records)


def test_no_table_yet_tags_every_record_new(spark, tmp_path):
    tagged = HoodieRecordIndex(base_path=str(tmp_path / "none")).tag_location(
        spark, _records(spark, ["a", "b"]), [], _key_columns, True, READ_SCHEMA)
    assert sorted(tuple(r) for r in tagged.select(RECORD_KEY, LOC_PARTITION, LOC_FILE_ID).collect()) == \
        [("a", None, None), ("b", None, None)]


def test_fallback_uses_the_simple_index_with_its_settings():
    cache = FrameCache()
    index = HoodieRecordIndex(update_partition_path=True, base_path="/t", cache=cache)
    fallback = index._fallback()
    assert isinstance(fallback, HoodieSimpleIndex)
    assert (fallback.is_global, fallback.update_partition_path, fallback.base_path, fallback.cache) == \
        (True, True, "/t", cache)


# ----------------------------------------------------------------------------------------------- writes


def _batches(seed: str) -> list[tuple[str, list[tuple]]]:
    """(operation, rows): inserts, upserts moving keys between partitions (and back), inserts, deletes."""
    rnd = random.Random(seed)
    parts = ["p0", "p1", "p2"]
    first = [(f"k{i:03d}", "n", 1, rnd.choice(parts)) for i in range(40)]
    where = {r[0]: r[3] for r in first}
    out = [("insert", first)]
    for ts in (2, 3):
        keys = rnd.sample(sorted(where), 15)
        batch = [(k, f"u{ts}", ts, rnd.choice(parts) if rnd.random() < 0.5 else where[k]) for k in keys]
        batch += [(f"n{ts}{i}", f"i{ts}", ts, rnd.choice(parts)) for i in range(5)]
        where.update((r[0], r[3]) for r in batch)
        out.append(("upsert", batch))
        gone = rnd.sample(sorted(where), 4)
        out.append(("delete", [(k, "d", ts, where.pop(k)) for k in gone]))
    return out


def _table_after(spark, path: str, opts: dict, seed: str) -> list[tuple]:
    for operation, batch in _batches(seed):
        _write(spark, path, batch, opts, operation)
    return spark_rows(spark.read.format("hudi").load(path).select(*COLS, PARTITION_PATH), COLS + [PARTITION_PATH])


@pytest.mark.parametrize("table_type, update_partition_path", [("COPY_ON_WRITE", True), ("MERGE_ON_READ", False)])
def test_writes_without_record_index_equal_global_simple(spark, tmp_path, table_type, update_partition_path):
    """A table whose metadata table has no record_index yet is written as under GLOBAL_SIMPLE (Hudi's fallback),
    with RECORD_INDEX's own update-partition-path option."""
    flag = str(update_partition_path).lower()
    seed = f"{table_type}{flag}"
    simple = _table_after(spark, str(tmp_path / "simple"), _opts(
        table_type, "GLOBAL_SIMPLE", **{WK.SIMPLE_INDEX_UPDATE_PARTITION_PATH.key: flag}), seed)
    rli = _table_after(spark, str(tmp_path / "rli"), _opts(
        table_type, "RECORD_INDEX", **{WK.RECORD_INDEX_UPDATE_PARTITION_PATH.key: flag}), seed)
    assert rli == simple and len(rli) > 40


def _rli_on(**extra: str) -> dict[str, str]:
    return {MK.ENABLE.key: "true", MK.RECORD_INDEX_ENABLE.key: "true", MK.RECORD_INDEX_MIN_FILE_GROUPS.key: "3",
            MK.RECORD_INDEX_MAX_FILE_GROUPS.key: "3", **extra}


def _index_equals_scan(spark, path: str) -> None:
    """The table's record index holds exactly its live keys, each at its partition and file group."""
    meta = HoodieTableMetaClient.load(path)
    assert RECORD_INDEX in enabled_partitions(meta)
    scan = spark.read.format("hudi").load(path).select(RECORD_KEY, PARTITION_PATH,
                                                       file_id_of_file_name(F.col(FILE_NAME))).collect()
    held = all_record_locations(HoodieTableMetadata(meta))
    assert {k: (v.partition_path, v.file_id) for k, v in held.items()} == {r[0]: (r[1], r[2]) for r in scan}


@pytest.mark.parametrize("table_type, update_partition_path", [("COPY_ON_WRITE", False), ("MERGE_ON_READ", True)])
def test_writes_with_record_index_equal_global_simple(spark, tmp_path, monkeypatch, table_type,
                                                      update_partition_path):
    """Written with the record index kept (hoodie.metadata.record.index.enable) and used to tag upserts and
    deletes (partition moves included), the table equals the same sequence written with GLOBAL_SIMPLE."""
    lookups = []
    tag = HoodieRecordIndex.tag_from_record_index

    def counted(self, *args, **kwargs):
        lookups.append(1)
        return tag(self, *args, **kwargs)
    monkeypatch.setattr(HoodieRecordIndex, "tag_from_record_index", counted)
    flag = str(update_partition_path).lower()
    seed = f"rli{table_type}{flag}"
    simple = _table_after(spark, str(tmp_path / "simple"), _opts(
        table_type, "GLOBAL_SIMPLE", **{WK.SIMPLE_INDEX_UPDATE_PARTITION_PATH.key: flag}), seed)
    path = str(tmp_path / "rli")
    rli = _table_after(spark, path, _opts(
        table_type, "RECORD_INDEX", **_rli_on(**{WK.RECORD_INDEX_UPDATE_PARTITION_PATH.key: flag})), seed)
    assert rli == simple and len(rli) > 40
    assert arrow_rows(hudi_rs_read(path), COLS) == spark_rows(spark.read.format("hudi").load(path), COLS)
    # every lookup reads the record index: on MOR too, where a global index otherwise reads the merged table
    # (storage/write/locate.py `_live_keys`) once there are log files
    assert len(lookups) == 4
    _index_equals_scan(spark, path)


def test_mor_inserts_go_to_base_files_and_are_indexed(spark, tmp_path):
    """Hudi's record index does not index log files: MOR inserts open base files, never a small slice's log."""
    path = str(tmp_path / "t")
    opts = _opts("MERGE_ON_READ", "RECORD_INDEX", **_rli_on())
    _write(spark, path, [(f"k{i}", "a", 1, "p0") for i in range(10)], opts, "insert")
    _write(spark, path, [("k1", "b", 2, "p0"), ("new1", "b", 2, "p0"), ("new2", "b", 2, "p0")], opts, "upsert")
    _index_equals_scan(spark, path)
    meta = HoodieTableMetaClient.load(path)
    located = all_record_locations(HoodieTableMetadata(meta))
    from storage.metadata.record_index_writer import instant_millis

    # the small slice took the inserts by a new base file (its base instant is the upsert's), not a log
    upsert = meta.timeline.completed().last().timestamp
    assert located["new1"].instant_time == instant_millis(upsert)
    assert not any(p.name.startswith(".") and upsert in p.name for p in (tmp_path / "t" / "p0").iterdir())
