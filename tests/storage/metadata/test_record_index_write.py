"""The record index (MDT partition record_index) as this engine builds and keeps it: after every action it equals a
scan of the table's key -> (partition, file group) map (rebuild and compare), for COW and MOR, and a table that
has one keeps it whatever the writer's options say."""
from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pytest

from hudi_oracle import arrow_rows, check_record_index, hudi_rs_read, spark_rows
from storage.config import HoodieConfig
from storage.config import MetadataConfigKeys as MK
from storage.metadata.index_definitions import RECORD_INDEX, index_definitions
from storage.metadata.keys import file_group_index
from storage.metadata.record_index import shards
from storage.metadata.record_index_writer import (
    DELETED,
    DELTA_SCHEMA,
    FILE_ID,
    INSTANT_MS,
    KEY,
    PARTITION,
    by_shard,
    estimate_file_group_count,
    instant_millis,
    location_info,
    reduce_by_key,
)
from storage.metadata.table_metadata import HoodieTableMetadata
from storage.table.meta_client import HoodieTableMetaClient

SCHEMA = "id int, name string, fare double, ts long, dt string"
COLUMNS = ["id", "name", "fare", "ts", "dt"]
RLI_ON = {"hoodie.metadata.enable": "true", "hoodie.metadata.record.index.enable": "true",
          "hoodie.metadata.record.index.min.filegroup.count": "3",
          "hoodie.metadata.record.index.max.filegroup.count": "3"}


def _options(name: str, table_type: str, **extra: str) -> dict[str, str]:
    return {"hoodie.table.name": name, "hoodie.datasource.write.recordkey.field": "id",
            "hoodie.datasource.write.precombine.field": "ts", "hoodie.datasource.write.partitionpath.field": "dt",
            "hoodie.datasource.write.table.type": table_type, "hoodie.write.table.version": "9",
            "hoodie.upsert.shuffle.parallelism": "2", "hoodie.insert.shuffle.parallelism": "2",
            "hoodie.clean.automatic": "false", **RLI_ON, **extra}


def _write(spark, base: Path, opts: dict, rows: list[tuple], operation: str, **extra: str) -> None:
    spark.createDataFrame(rows, SCHEMA).write.format("hudi").options(**{**opts, **extra}) \
        .option("hoodie.datasource.write.operation", operation).mode("append").save(str(base))


@pytest.mark.parametrize("table_type", ["MERGE_ON_READ"])  # COW: the year simulation (test_metadata_year_...)
def test_every_action_keeps_the_record_index_equal_to_a_scan(spark, tmp_path, table_type):
    base = tmp_path / f"rli_{table_type[:3].lower()}"
    opts = _options(base.name, table_type)
    _write(spark, base, opts, [(1, "a", 1.5, 1, "x"), (2, "b", 2.5, 1, "y"), (3, "c", 3.5, 1, "x")], "insert")
    meta = HoodieTableMetaClient.load(str(base))
    assert len(shards(HoodieTableMetadata(meta), RECORD_INDEX)) == 3
    assert index_definitions(meta)[RECORD_INDEX].index_options == (("isPartitioned", "false"),)
    check_record_index(spark, base)
    _write(spark, base, opts, [(1, "a2", 0.5, 2, "x"), (4, "d", 9.5, 2, "y")], "upsert")
    check_record_index(spark, base)
    _write(spark, base, opts, [(2, "b", 2.5, 3, "y")], "delete")
    assert "2" not in check_record_index(spark, base)
    _write(spark, base, opts, [(5, "e", 5.5, 3, "x")], "insert_overwrite")
    indexed = check_record_index(spark, base)
    assert "1" not in indexed and "3" not in indexed and indexed["5"].partition_path == "x"
    if table_type == "MERGE_ON_READ":
        _write(spark, base, opts, [(4, "d2", 4.5, 4, "y")], "upsert",
               **{"hoodie.compact.inline": "true", "hoodie.compact.inline.max.delta.commits": "1"})
        check_record_index(spark, base)
    _write(spark, base, opts, [(6, "f", 6.5, 5, "y")], "insert",
           **{"hoodie.clustering.inline": "true", "hoodie.clustering.inline.max.commits": "1"})
    assert any(i.action == "replacecommit" for i in HoodieTableMetaClient.load(str(base)).timeline.completed())
    check_record_index(spark, base)
    _write(spark, base, opts, [(7, "g", 7.5, 6, "x")], "insert",
           **{"hoodie.metadata.compact.max.delta.commits": "1"})  # the MDT compacts its shards too
    check_record_index(spark, base)
    assert arrow_rows(hudi_rs_read(str(base)), COLUMNS) == spark_rows(spark.read.format("hudi").load(str(base)),
                                                                      COLUMNS)


def test_a_partition_move_keeps_the_insert(spark, tmp_path):
    base = tmp_path / "rli_move"
    opts = _options(base.name, "COPY_ON_WRITE", **{"hoodie.index.type": "GLOBAL_SIMPLE",
                                                   "hoodie.simple.index.update.partition.path": "true"})
    _write(spark, base, opts, [(1, "a", 1.5, 1, "x"), (2, "b", 2.5, 1, "x")], "insert")
    _write(spark, base, opts, [(1, "a2", 1.5, 2, "y")], "upsert")
    assert check_record_index(spark, base)["1"].partition_path == "y"


def test_a_table_with_a_record_index_keeps_it(spark, tmp_path):
    base = tmp_path / "rli_keep"
    opts = _options(base.name, "COPY_ON_WRITE")
    _write(spark, base, opts, [(1, "a", 1.5, 1, "x")], "insert")
    plain = {k: v for k, v in opts.items() if k not in RLI_ON}
    _write(spark, base, plain, [(2, "b", 2.5, 1, "y")], "insert")  # option unset: the index stays maintained
    assert set(check_record_index(spark, base)) == {"1", "2"}


# ----------------------------------------------------------------------------------------------- pure logic


def _delta(rows: list[tuple]) -> pa.Table:
    return pa.Table.from_pylist([dict(zip([KEY, PARTITION, FILE_ID, INSTANT_MS, DELETED], r)) for r in rows],
                                schema=DELTA_SCHEMA)


def test_an_insert_wins_over_a_delete_of_the_same_key():
    reduced = reduce_by_key(_delta([("k1", "x", "f1", 1, True), ("k1", "y", "f2", 2, False),
                                    ("k2", "x", "f1", 1, True), ("k3", "x", "f1", 1, False),
                                    ("k3", "x", "f3", 3, False)]))
    assert reduced.to_pylist() == [
        {KEY: "k1", PARTITION: "y", FILE_ID: "f2", INSTANT_MS: 2, DELETED: False},
        {KEY: "k2", PARTITION: "x", FILE_ID: "f1", INSTANT_MS: 1, DELETED: True},
        {KEY: "k3", PARTITION: "x", FILE_ID: "f3", INSTANT_MS: 3, DELETED: False}]


def test_shards_follow_the_java_hash():
    keys = [f"key-{i}" for i in range(50)] + ["polygenelubricants"]  # hashes to Integer.MIN_VALUE
    parts = by_shard(_delta([(k, "x", "f", 1, i % 3 == 0) for i, k in enumerate(keys)]), 4)
    seen = {}
    for d in parts:
        for k in d.upserts[KEY].to_pylist() + d.deletes.to_pylist():
            seen[k] = d.shard
    assert seen == {k: file_group_index(k, 4) for k in keys}


@pytest.mark.parametrize("records, expected", [(0, 10), (100_000_000, 10), (200_000_000, 17),
                                               (10 ** 14, 10_000)])
def test_the_shard_count_is_hudis_estimate(records, expected):
    assert estimate_file_group_count(records, HoodieConfig()) == expected
    pinned = HoodieConfig().with_values({MK.RECORD_INDEX_MIN_FILE_GROUPS.key: 4,
                                         MK.RECORD_INDEX_MAX_FILE_GROUPS.key: 4})
    assert estimate_file_group_count(records, pinned) == 4


def test_file_ids_are_encoded_as_hudi_does():
    info = location_info("x", "8f1c2d3e-0000-4000-8000-00000000abcd-0", 5)
    assert info.file_id_encoding == 0 and info.file_group_id == "8f1c2d3e-0000-4000-8000-00000000abcd-0"
    assert location_info("x", "8f1c2d3e-0000-4000-8000-00000000abcd", 5).file_index == -1
    other = location_info("x", "not-a-uuid", 5)
    assert other.file_id_encoding == 1 and other.file_group_id == "not-a-uuid"
    assert instant_millis("20240102030405678") == 1704164645678


def test_a_defined_secondary_index_is_built_kept_and_refuses_overwrites(spark, tmp_path):
    from hudi_oracle import check_secondary_indexes
    from storage.exception import HoodieIndexError
    from storage.metadata.index_definitions import IndexDefinition, put_index_definition

    base = tmp_path / "si_table"
    opts = _options(base.name, "MERGE_ON_READ")
    _write(spark, base, opts, [(1, "a", 1.5, 1, "x"), (2, "b", 2.5, 1, "y"), (3, None, 3.5, 1, "x")], "insert")
    put_index_definition(HoodieTableMetaClient.load(str(base)), IndexDefinition(
        "secondary_index_by_name", "secondary_index", "identity", ("name",), (), "V2"))
    _write(spark, base, opts, [(1, "a2", 0.5, 2, "x"), (4, "b", 9.5, 2, "y")], "upsert")  # builds it, then keeps it
    entries = check_secondary_indexes(spark, base)["secondary_index_by_name"]
    assert {"a2$1", "b$2", "b$4", "\x00$3"} == entries
    _write(spark, base, opts, [(2, "b", 2.5, 3, "y")], "delete")
    assert "b$2" not in check_secondary_indexes(spark, base)["secondary_index_by_name"]
    timeline = sorted(p.name for p in (base / ".hoodie" / "timeline").iterdir() if p.is_file())
    with pytest.raises(HoodieIndexError, match="Can not perform operation INSERT_OVERWRITE on secondary index"):
        _write(spark, base, opts, [(5, "e", 5.5, 3, "x")], "insert_overwrite")
    assert sorted(p.name for p in (base / ".hoodie" / "timeline").iterdir() if p.is_file()) == timeline
