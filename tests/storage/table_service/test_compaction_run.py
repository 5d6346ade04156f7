"""Compaction execution on merge-on-read tables we write: the merged rows before and after compaction equal the
expected state and what hudi-rs reads; a compaction that fails half-way changes nothing and is redone."""
from __future__ import annotations

import glob
import os

import pytest

from hudi_oracle import apply_batch, arrow_rows, hudi_rs_read, rows, spark_rows
from storage.config import HoodieConfig
from storage.table.fs_view import FileSystemView
from storage.table.meta_client import HoodieTableMetaClient
from storage.table_service import compactor
from storage.table_service.compaction import HoodieCompactionError, run_compaction, schedule_compaction, show_compaction

SCHEMA = "id int, name string, price double, ts long, dt string"
COLS = ["id", "name", "price", "ts", "dt"]


def _opts(name, **extra):
    return {"hoodie.table.name": name, "hoodie.datasource.write.table.type": "MERGE_ON_READ",
            "hoodie.datasource.write.recordkey.field": "id", "hoodie.datasource.write.precombine.field": "ts",
            "hoodie.datasource.write.partitionpath.field": "dt",
            # event-time ordering: a late record with a smaller ts must lose, in logs and after compaction
            "hoodie.datasource.write.payload.class": "org.apache.hudi.common.model.DefaultHoodieRecordPayload",
            **extra}


def _write(spark, path, data, opts, operation="upsert"):
    spark.createDataFrame(data, SCHEMA).write.format("hudi").options(**opts) \
        .option("hoodie.datasource.write.operation", operation).mode("append").save(str(path))


def _expected(state):
    return rows([dict(zip(COLS, r)) for r in state.values()], COLS)


def _ours(spark, path, **opts):
    return spark_rows(spark.read.format("hudi").options(**opts).load(str(path)), COLS)


def _build(spark, path, opts):
    """Three deltacommits: inserts, upserts (with an out-of-order ts that must lose), deletes."""
    state: dict = {}
    b1 = [(i, f"n{i}", float(i), 5, f"2024-01-0{1 + i % 2}") for i in range(12)]
    b2 = [(i, f"u{i}", i * 2.0, 6, f"2024-01-0{1 + i % 2}") for i in range(0, 12, 3)] + \
         [(1, "stale", -1.0, 1, "2024-01-02"), (30, "new", 1.0, 1, "2024-01-01")]
    b3 = [(i, "x", 0.0, 7, f"2024-01-0{1 + i % 2}") for i in (2, 3)]
    for batch, op in ((b1, "upsert"), (b2, "upsert"), (b3, "delete")):
        _write(spark, path, batch, opts, op)
        apply_batch(state, batch, delete=op == "delete")
    return state


def test_compaction_folds_logs_into_base_files(spark, tmp_path):
    path = tmp_path / "c"
    opts = _opts("c")
    state = _build(spark, path, opts)
    assert _ours(spark, path) == _expected(state) == arrow_rows(hudi_rs_read(str(path)), COLS)
    before_compaction = HoodieTableMetaClient.load(str(path)).timeline.completed().last().timestamp

    instant = schedule_compaction(str(path))
    assert instant
    # a write while the compaction is pending lands in the slice at the compaction instant; our reader merges
    # it with the slice before (hudi-rs does not, so only ours is checked here)
    b4 = [(0, "v0", 9.0, 8, "2024-01-01"), (5, "v5", 9.0, 8, "2024-01-02")]
    _write(spark, path, b4, opts)
    planned_state = dict(state)
    apply_batch(state, b4)
    assert _ours(spark, path) == _expected(state)

    assert run_compaction(spark, str(path)) == [instant]
    mc = HoodieTableMetaClient.load(str(path))
    completed = mc.timeline.completed()
    commit = completed.find(instant)
    assert commit is not None and commit.action == "commit"
    metadata = mc.active_timeline.commit_metadata(commit)
    assert metadata.operationType == "COMPACT" and metadata.compacted
    stats = metadata.write_stats()
    assert stats and all(s.prevCommit < instant and s.totalLogFilesCompacted >= 1 for s in stats)
    assert [c["state"] for c in show_compaction(str(path))] == ["COMPLETED"]
    assert not os.path.exists(mc.marker_dir(instant))

    # the same rows through both readers, and hudi-rs now sees everything (the pending slice became a base file)
    assert _ours(spark, path) == _expected(state) == arrow_rows(hudi_rs_read(str(path)), COLS)
    # read-optimized now shows the compacted rows (everything but the post-schedule write b4)
    ro = _ours(spark, path, **{"hoodie.datasource.query.type": "read_optimized"})
    assert ro == _expected(planned_state)
    # the compacted base files keep each record's own commit time; only the file name is new
    compacted = spark.read.format("hudi").option("hoodie.datasource.query.type", "read_optimized").load(str(path))
    commit_times = {r[0] for r in compacted.select("_hoodie_commit_time").distinct().collect()}
    assert instant not in commit_times and commit_times <= set(mc.timeline.completed().timestamps())
    names = {r[0] for r in compacted.select("_hoodie_file_name").distinct().collect()}
    assert {n for n in names if n.endswith(f"_{instant}.parquet")} == {s.path.rsplit("/", 1)[-1] for s in stats}
    # time travel to before the compaction still reads the old slices
    old = _ours(spark, path, **{"as.of.instant": before_compaction})
    assert old == arrow_rows(hudi_rs_read(str(path), as_of=before_compaction), COLS)
    # and every completed instant reads the same through both readers (the b4 deltacommit included: its slice
    # is now the compacted one)
    for point in mc.timeline.completed().timestamps():
        assert _ours(spark, path, **{"as.of.instant": point}) == arrow_rows(hudi_rs_read(str(path), as_of=point),
                                                                           COLS), f"as of {point}"


def test_failed_compaction_changes_nothing_and_is_redone(spark, tmp_path, monkeypatch):
    path = tmp_path / "f"
    opts = _opts("f")
    state = _build(spark, path, opts)
    instant = schedule_compaction(str(path))

    def die(*_a, **_k):
        raise RuntimeError("executor lost")

    from storage.timeline.timeline import ActiveTimeline

    original = ActiveTimeline.transition_to_complete
    monkeypatch.setattr(ActiveTimeline, "transition_to_complete", die)
    with pytest.raises(RuntimeError, match="executor lost"):
        run_compaction(spark, str(path), instant)
    monkeypatch.setattr(ActiveTimeline, "transition_to_complete", original)
    # new base files exist on disk but are invisible: the instant is inflight
    written = glob.glob(f"{path}/**/*_{instant}.parquet", recursive=True)
    assert written
    assert [c["state"] for c in show_compaction(str(path))] == ["INFLIGHT"]
    assert _ours(spark, path) == _expected(state) == arrow_rows(hudi_rs_read(str(path)), COLS)

    assert run_compaction(spark, str(path)) == [instant]
    for f in written:  # the failed attempt's files were removed before the plan ran again
        assert not os.path.exists(f)
    assert _ours(spark, path) == _expected(state) == arrow_rows(hudi_rs_read(str(path)), COLS)
    with pytest.raises(HoodieCompactionError, match="already completed"):
        run_compaction(spark, str(path), instant)


def test_inline_compaction_after_n_deltacommits(spark, tmp_path):
    path = tmp_path / "i"
    opts = _opts("i", **{"hoodie.compact.inline": "true", "hoodie.compact.inline.max.delta.commits": "2"})
    state: dict = {}
    for ts, batch in enumerate(([(1, "a", 1.0, 1, "d"), (2, "b", 1.0, 1, "d")], [(1, "a2", 2.0, 2, "d")]), 1):
        _write(spark, path, batch, opts)
        apply_batch(state, batch)
    mc = HoodieTableMetaClient.load(str(path))
    actions = [i.action for i in mc.timeline.completed()]
    assert actions == ["deltacommit", "deltacommit", "commit"]
    assert [s for s in FileSystemView(mc).latest_file_slices() if s.log_files] == []
    assert _ours(spark, path) == _expected(state) == arrow_rows(hudi_rs_read(str(path)), COLS)


def test_operation_slice_names_a_missing_file(tmp_path):
    with pytest.raises(compactor.HoodieCompactionExecutionError, match="does not exist"):
        compactor._operation_slice(str(tmp_path), {"partitionPath": "p", "fileId": "f", "baseInstantTime": "1",
                                                   "dataFilePath": None, "deltaFilePaths": [".f_1.log.1_0-1-1"]}, {})


def test_compaction_of_java_written_table(spark, fixture_table, tmp_path):
    """trips 8i1u (Java Hudi): rider-D's update lives in a log; after our compaction it is in the base file and
    every reader agrees."""
    import shutil

    path = tmp_path / "trips"
    shutil.copytree(fixture_table("trips_mor_avro_v6_trips_8i1u"), path)
    columns = ["uuid", "rider", "driver", "fare", "city"]
    before = arrow_rows(hudi_rs_read(str(path)), columns)
    instant = schedule_compaction(str(path), HoodieConfig.of({
        "hoodie.compaction.strategy": "org.apache.hudi.table.action.compact.strategy.UnBoundedCompactionStrategy"}))
    assert run_compaction(spark, str(path), instant) == [instant]
    assert arrow_rows(hudi_rs_read(str(path)), columns) == before
    ro = spark.read.format("hudi").option("hoodie.datasource.query.type", "read_optimized").load(str(path))
    assert spark_rows(ro, columns) == before
    assert {r.rider: r.fare for r in ro.collect()}["rider-D"] == 25.0
