"""The in-process engine (storage.write.local) and the Spark engine write the same table for the same batches:
same rows (read by hudi-rs, an independent reader), same file groups per partition and data files, same commit
metadata counts; and the engine choice (`hoodie.sqlext.engine`) refuses what the in-process engine cannot run,
leaving the table as it was."""
from __future__ import annotations

import logging
from collections import Counter

import pyarrow as pa
import pytest
from hudi_oracle import arrow_rows, hudi_rs_read

from storage.client.write_client import write_dataframe
from storage.config import HoodieConfig
from storage.exception import HoodieWriteError
from storage.io.storage import HoodieStorage
from storage.table.fs_view import FileSystemView
from storage.table.meta_client import HoodieTableMetaClient

COLS = ["id", "name", "ts", "dt"]


def _batch(ids, ts, name="v", dt=None) -> pa.Table:
    ids = list(ids)
    return pa.table({"id": pa.array(ids, pa.int64()), "name": [f"{name}{i}" for i in ids],
                     "ts": pa.array([ts] * len(ids), pa.int64()),
                     "dt": [dt or f"2024-01-0{1 + i % 3}" for i in ids]})


# (operation, batch): a load, upserts with repeated keys in the batch (the greatest ts wins, then the later row),
# plain inserts, deletes of stored and unknown keys, stored keys sent to another partition (a global index moves
# them) and one key sent to two partitions in one batch (a global index keeps the greater ts)
BATCHES = [
    ("bulk_insert", _batch(range(40), 1)),
    ("upsert", pa.concat_tables([_batch(range(30, 60), 2, "u"), _batch([31, 45], 3, "w"), _batch([31], 2, "x")])),
    ("insert", _batch(range(100, 110), 4, "i")),
    ("delete", _batch([1, 2, 33, 105, 999], 5)),
    ("upsert", _batch(list(range(0, 12)) + [200, 201], 6, "z")),
    ("upsert", _batch([3, 4, 300], 7, "m", dt="2024-01-09")),
    ("upsert", pa.concat_tables([_batch([5], 9, "b", dt="2024-01-08"), _batch([5], 8, "a", dt="2024-01-07")])),
]


def _options(table_type: str, index: str, engine: str) -> dict[str, str]:
    opts = {"hoodie.table.name": "t", "hoodie.datasource.write.recordkey.field": "id",
            "hoodie.datasource.write.precombine.field": "ts", "hoodie.datasource.write.partitionpath.field": "dt",
            "hoodie.datasource.write.table.type": table_type, "hoodie.index.type": index,
            "hoodie.sqlext.engine": engine, "hoodie.compact.inline": "false"}
    if index == "BUCKET":
        opts["hoodie.bucket.index.num.buckets"] = "2"
    return opts


def _write(spark, path: str, opts: dict[str, str], operation: str, batch: pa.Table):
    df = spark.createDataFrame(batch.to_pandas())
    return write_dataframe(spark, df, path, HoodieConfig.of({**opts, "hoodie.datasource.write.operation": operation}))


def _shape(path: str) -> tuple[Counter, int]:
    """File groups per partition and the number of data files of the latest slices."""
    meta = HoodieTableMetaClient.load(path, HoodieStorage.for_path(path))
    slices = FileSystemView(meta).latest_file_slices()
    return Counter(s.partition_path for s in slices), sum(bool(s.base_file) + len(s.log_files) for s in slices)


def _counts(metadata) -> dict[str, tuple]:
    """Per partition: records written, inserted, updated, deleted (timings and names aside)."""
    out: dict[str, list[int]] = {}
    for s in metadata.write_stats():
        c = out.setdefault(s.partitionPath, [0, 0, 0, 0])
        for i, n in enumerate((s.numWrites, s.numInserts, s.numUpdateWrites, s.numDeletes)):
            c[i] += n
    return {p: tuple(c) for p, c in out.items()}


@pytest.mark.parametrize("table_type,index", [("COPY_ON_WRITE", "BLOOM"), ("MERGE_ON_READ", "BLOOM"),
                                              ("COPY_ON_WRITE", "SIMPLE"), ("MERGE_ON_READ", "BUCKET"),
                                              ("COPY_ON_WRITE", "GLOBAL_SIMPLE"), ("COPY_ON_WRITE", "GLOBAL_BLOOM"),
                                              ("MERGE_ON_READ", "GLOBAL_SIMPLE")])
def test_both_engines_write_the_same_table(spark, tmp_path, table_type, index):
    results = {}
    for engine in ("SPARK", "LOCAL"):
        path = str(tmp_path / engine)
        commits = [_counts(_write(spark, path, _options(table_type, index, engine), op, batch))
                   for op, batch in BATCHES]
        results[engine] = (arrow_rows(hudi_rs_read(path), COLS), _shape(path), commits)
    spark_rows, spark_shape, spark_commits = results["SPARK"]
    local_rows, local_shape, local_commits = results["LOCAL"]
    assert local_rows == spark_rows
    # 1 and 2 deleted, then upserted again; a global index moves 3, 4 and 5 (one record each) where a per-partition
    # one writes them again in each new partition
    moved = index.startswith("GLOBAL_")
    assert len(spark_rows) == 40 + 20 + 10 - 4 + 2 + 2 + (1 if moved else 3 + 2)
    assert (("id", 31), ("name", "w31"), ("ts", 3), ("dt", "2024-01-02")) in spark_rows  # the greatest ts won
    assert (("id", 5), ("name", "b5"), ("ts", 9), ("dt", "2024-01-08")) in spark_rows
    assert ((("id", 5), ("name", "a5"), ("ts", 8), ("dt", "2024-01-07")) in spark_rows) == (not moved)
    assert local_shape == spark_shape
    assert local_commits == spark_commits


@pytest.mark.parametrize("table_type", ["COPY_ON_WRITE", "MERGE_ON_READ"])
def test_both_engines_overwrite_the_same_way(spark, tmp_path, table_type):
    """insert_overwrite replaces the file groups of the batch's partitions, insert_overwrite_table every one."""
    batches = [("bulk_insert", _batch(range(30), 1)), ("upsert", _batch(range(25, 35), 2, "u")),
               ("insert_overwrite", _batch([3, 6, 500], 3, "o")),  # partitions 2024-01-01 and -03
               ("insert_overwrite_table", _batch([600, 601], 4, "t", dt="2024-01-05"))]
    results = {}
    for engine in ("SPARK", "LOCAL"):
        path = str(tmp_path / engine)
        rows, replaced = [], []
        for op, batch in batches:
            metadata = _write(spark, path, _options(table_type, "BLOOM", engine), op, batch)
            replaced.append({p: len(ids) for p, ids in (metadata.partitionToReplaceFileIds or {}).items()})
            rows.append(arrow_rows(hudi_rs_read(path), COLS))
        results[engine] = (rows, replaced, _shape(path))
    assert results["LOCAL"] == results["SPARK"]
    rows, replaced, _ = results["LOCAL"]
    assert sorted(dict(r)["id"] for r in rows[2]) == sorted([3, 6, 500] + [i for i in range(35) if i % 3 == 1])
    assert sorted(replaced[2]) == ["2024-01-01", "2024-01-03"] and not replaced[1]
    assert sorted(dict(r)["id"] for r in rows[3]) == [600, 601]


def test_auto_runs_small_writes_in_process_and_large_ones_on_spark(spark, tmp_path, caplog):
    path = str(tmp_path / "t")
    opts = _options("COPY_ON_WRITE", "BLOOM", "AUTO")
    with caplog.at_level(logging.DEBUG, logger="storage.write.local.choice"):
        _write(spark, path, opts, "upsert", _batch(range(10), 1))
        _write(spark, path, {**opts, "hoodie.sqlext.engine.local.max.bytes": "10"}, "upsert", _batch(range(5), 2))
    engines = [r.getMessage().split(" runs on ")[1].split(" ")[0] for r in caplog.records if " runs on " in r.getMessage()]
    assert engines == ["LOCAL", "SPARK"]
    stored = sorted(tuple(v for _, v in r[:3]) for r in arrow_rows(hudi_rs_read(path), COLS))
    assert stored == sorted([(i, f"v{i}", 2) for i in range(5)] + [(i, f"v{i}", 1) for i in range(5, 10)])


def _instants(path: str) -> list[str]:
    meta = HoodieTableMetaClient.load(path, HoodieStorage.for_path(path))
    return [str(i) for i in meta.active_timeline.reload().timeline.instants]


@pytest.mark.parametrize("options,message", [
    ({"hoodie.sqlext.engine.local.max.bytes": "100"}, "hoodie.sqlext.engine.local.max.bytes=100"),
    ({"hoodie.index.type": "RECORD_INDEX"}, "hoodie.index.type=RECORD_INDEX"),
])
def test_a_forced_in_process_write_it_cannot_run_is_refused_with_the_table_unchanged(spark, tmp_path, options,
                                                                                  message):
    path = str(tmp_path / "t")
    opts = _options("COPY_ON_WRITE", "BLOOM", "LOCAL")
    _write(spark, path, opts, "upsert", _batch(range(10), 1))
    before, rows_before = _instants(path), arrow_rows(hudi_rs_read(path), COLS)
    with pytest.raises(HoodieWriteError, match="hoodie.sqlext.engine=LOCAL") as err:
        _write(spark, path, {**opts, **options}, "upsert", _batch(range(200), 2))
    assert message in str(err.value)
    assert _instants(path) == before
    assert arrow_rows(hudi_rs_read(path), COLS) == rows_before
