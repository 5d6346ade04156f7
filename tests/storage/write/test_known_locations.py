"""A batch that brings its records' stored locations (`known_locations`: SQL UPDATE, DELETE and MERGE read them
from the target's meta columns) is written without an index lookup - and looked up after all when a file group
it names was replaced since it was read."""
from __future__ import annotations

import sys
from pathlib import Path

import pytest
from pyspark.sql import functions as F

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "table_service"))
from service_helpers import COLS, expected, options, ours, theirs, write  # noqa: E402
from hudi_oracle import apply_batch  # noqa: E402
from storage.client.write_client import write_dataframe  # noqa: E402
from storage.config import HoodieConfig  # noqa: E402
from storage.index.hoodie_index import LOC_FILE_ID, LOC_PARTITION, file_id_of_file_name  # noqa: E402
from storage.meta_fields import FILE_NAME, PARTITION_PATH  # noqa: E402
from storage.table.fs_view import FileSystemView  # noqa: E402
from storage.table.meta_client import HoodieTableMetaClient  # noqa: E402
from storage.table_service.clustering import run_clustering, schedule_clustering  # noqa: E402


def test_file_id_of_a_stored_records_file_name(spark):
    names = [("4a5d-0_1-2-3_20261127101010123.parquet",), (".4a5d-0_20261127101010123.log.1_0-1-2",),
             ("4a5d-0",), (None,)]
    got = spark.createDataFrame(names, "n string").select(file_id_of_file_name(F.col("n"))).collect()
    assert [r[0] for r in got] == ["4a5d-0", "4a5d-0", "4a5d-0", None]


def _located_updates(spark, path, keys: list[int], name: str, ts: int):
    stored = spark.read.format("hudi").load(str(path)).where(F.col("id").isin(keys))
    return stored.select(F.col("id"), F.lit(name).alias("name"), F.lit(ts).cast("long").alias("ts"), F.col("dt"),
                         file_id_of_file_name(F.col(FILE_NAME)).alias(LOC_FILE_ID),
                         F.col(PARTITION_PATH).alias(LOC_PARTITION))


def _groups(path) -> set:
    return {g.file_group_id for g in FileSystemView(HoodieTableMetaClient.load(str(path))).file_groups()}


@pytest.mark.parametrize("table_type", ["COPY_ON_WRITE", "MERGE_ON_READ"])
def test_known_locations_update_in_place_and_survive_a_clustering(spark, tmp_path, table_type):
    path = tmp_path / f"kl_{table_type[:3].lower()}"
    opts = options(path.name, table_type)
    state: dict = {}
    for n in range(3):  # three bulk inserts: three file groups per partition
        data = [(n * 10 + i, f"v{n}", 1, f"p{i % 2}") for i in range(6)]
        write(spark, path, data, opts, "bulk_insert")
        apply_batch(state, data, ordering=2)
    groups = _groups(path)

    updates = _located_updates(spark, path, [0, 11, 23], "u", 2)
    write_dataframe(spark, updates, str(path), HoodieConfig.of(opts), known_locations=True)
    apply_batch(state, [(0, "u", 2, "p0"), (11, "u", 2, "p1"), (23, "u", 2, "p1")], ordering=2)
    assert ours(spark, path) == expected(state) == theirs(path)
    assert _groups(path) == groups, "a record with a known location was written to a new file group"

    # read the locations, then let a clustering replace every file group before the write
    stale = _located_updates(spark, path, [1, 12], "s", 3).localCheckpoint()
    assert stale.count() == 2
    schedule_clustering(str(path), HoodieConfig.of({"hoodie.clustering.plan.strategy.small.file.limit": "1048576"}))
    run_clustering(spark, str(path))
    assert not (_groups(path) & groups), "the clustering left a file group in place: the test proves nothing"
    write_dataframe(spark, stale, str(path), HoodieConfig.of(opts), known_locations=True)
    apply_batch(state, [(1, "s", 3, "p1"), (12, "s", 3, "p0")], ordering=2)
    assert ours(spark, path) == expected(state) == theirs(path)
    assert [c for c in spark.read.format("hudi").load(str(path)).columns if not c.startswith("_hoodie")] == COLS
