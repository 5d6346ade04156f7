"""Optimistic concurrency control inside one driver (threads, real Spark, real files): a write paused before
its commit while another write or a compaction changes the table; the loser fails with HoodieWriteConflictError
naming the file groups and the winner, its files are rolled back, and the table (hudi-rs agrees) holds exactly
the committed batches."""
from __future__ import annotations

import glob
import os
import threading

import pytest
from hudi_oracle import apply_batch, arrow_rows, hudi_rs_read, rows

import storage.write.write_operation as write_operation
from storage.config import HoodieConfig
from storage.exception import HoodieCompactionError, HoodieTableStateError, HoodieWriteConflictError, HoodieWriteError
from storage.table.meta_client import HoodieTableMetaClient
from storage.table_service.compaction import run_compaction, schedule_compaction
from storage.write.rollback import rollback

SCHEMA = "id int, name string, ts long, dt string"
COLS = ["id", "name", "ts", "dt"]
OCC = {"hoodie.write.concurrency.mode": "optimistic_concurrency_control",
       "hoodie.write.lock.provider": "org.apache.hudi.client.transaction.lock.InProcessLockProvider"}


def _opts(name, mor=False, version=6):
    return {"hoodie.table.name": name, "hoodie.datasource.write.recordkey.field": "id",
            "hoodie.datasource.write.precombine.field": "ts", "hoodie.datasource.write.partitionpath.field": "dt",
            "hoodie.datasource.write.table.type": "MERGE_ON_READ" if mor else "COPY_ON_WRITE",
            "hoodie.write.table.version": str(version), **OCC}


def _write(spark, path, batch, opts, operation="upsert"):
    spark.createDataFrame(batch, SCHEMA).write.format("hudi").options(**opts) \
        .option("hoodie.datasource.write.operation", operation).mode("append").save(str(path))


class PausedWrite:
    """A write in its own thread that stops at `point` until `resume()`; `error` is what it raised."""

    def __init__(self, monkeypatch, spark, path, batch, opts, point="write.before_commit"):
        self.reached, self.proceed, self.error = threading.Event(), threading.Event(), None
        original = write_operation.crash_point
        name = f"paused-{id(self)}"

        def hook(p):
            if p == point and threading.current_thread().name == name:
                self.reached.set()
                assert self.proceed.wait(120)
            original(p)

        monkeypatch.setattr(write_operation, "crash_point", hook)

        def run():
            try:
                _write(spark, path, batch, opts)
            except BaseException as exc:  # noqa: BLE001 - handed to the test
                self.error = exc

        self.thread = threading.Thread(target=run, name=name)
        self.thread.start()
        assert self.reached.wait(300), f"the paused write never reached {point}: {self.error!r}"

    def resume(self):
        self.proceed.set()
        self.thread.join(300)
        return self.error


def _table_rows(path):
    return arrow_rows(hudi_rs_read(str(path)), COLS)


def _expect(state):
    return rows([dict(zip(COLS, r)) for r in state.values()], COLS)


def _clean_timeline(path):
    meta = HoodieTableMetaClient.load(str(path))
    assert list(meta.timeline.pending()) == [], "no instant may stay pending"
    assert not os.listdir(meta.temp_path), "no markers may remain"


def test_overlapping_upserts_loser_is_rolled_back(spark, tmp_path, monkeypatch):
    path = tmp_path / "t"
    state = {}
    base = [(i, "v0", 1, "p") for i in range(4)]
    _write(spark, path, base, _opts("t"))
    apply_batch(state, base, ordering=2)
    files_before = set(glob.glob(f"{path}/p/*.parquet"))
    loser = PausedWrite(monkeypatch, spark, path, [(1, "loser", 2, "p")], _opts("t"))
    winner = [(2, "winner", 2, "p")]
    _write(spark, path, winner, _opts("t"))
    apply_batch(state, winner, ordering=2)
    error = loser.resume()
    assert isinstance(error, HoodieWriteConflictError), error
    meta = HoodieTableMetaClient.load(str(path))
    last = meta.timeline.completed().last().timestamp
    assert error.winner == last and f"commit {last}" in str(error)
    file_id = os.path.basename(next(iter(files_before))).split("_")[0]
    assert error.file_groups == (("p", file_id),) and f"p/{file_id}" in str(error)
    assert _table_rows(path) == _expect(state)
    _clean_timeline(path)
    assert len(glob.glob(f"{path}/p/*.parquet")) == 2  # the base and the winner's; the loser's file is gone


def test_disjoint_writes_both_commit(spark, tmp_path, monkeypatch):
    path = tmp_path / "t"
    state = {}
    for batch in ([(1, "a", 1, "p1")], [(2, "b", 1, "p2")]):
        _write(spark, path, batch, _opts("t"))
        apply_batch(state, batch, ordering=2)
    first = [(1, "a2", 2, "p1")]
    paused = PausedWrite(monkeypatch, spark, path, first, _opts("t"))
    second = [(2, "b2", 2, "p2"), (3, "c", 1, "p2")]
    _write(spark, path, second, _opts("t"))
    assert paused.resume() is None
    for batch in (first, second):
        apply_batch(state, batch, ordering=2)
    assert _table_rows(path) == _expect(state)
    _clean_timeline(path)


def test_a_writer_that_started_earlier_but_completed_later_conflicts(spark, tmp_path, monkeypatch):
    """Completion-time semantics of conflict detection (table version 9: completion times in the timeline):
    A requests first, B second; A completes after B started. A's request time is before B's, so only its
    completion time shows B did not see it: B must lose on the shared file group, not overwrite A's update."""
    path = tmp_path / "t"
    opts = _opts("t", version=9)
    state = {}
    base = [(i, "v0", 1, "p") for i in range(3)]
    _write(spark, path, base, opts)
    apply_batch(state, base, ordering=2)
    first = PausedWrite(monkeypatch, spark, path, [(1, "A", 2, "p")], opts)
    second = PausedWrite(monkeypatch, spark, path, [(2, "B", 2, "p")], opts)
    assert first.resume() is None
    apply_batch(state, [(1, "A", 2, "p")], ordering=2)
    error = second.resume()
    meta = HoodieTableMetaClient.load(str(path))
    a = meta.timeline.completed().last()
    assert isinstance(error, HoodieWriteConflictError) and error.winner == a.timestamp, error
    assert a.timestamp < error.instant_time < a.completion_time  # B requested between A's request and completion
    assert _table_rows(path) == _expect(state)
    _clean_timeline(path)


@pytest.mark.parametrize("version", [6, 8])
def test_compaction_scheduled_under_a_running_write(spark, tmp_path, monkeypatch, version):
    """Single writer: scheduling is refused while a deltacommit is inflight (as Hudi). Optimistic concurrency:
    the compaction may go ahead; the deltacommit that planned its log against the compacted slice then fails
    with a conflict instead of having its update dropped by readers (as Hudi's strategy decides at every table
    version: a compaction scheduled after the write began, on its file groups)."""
    path = tmp_path / "m"
    opts = _opts("m", mor=True, version=version)
    state = {}
    for batch in ([(i, "v0", 1, "p") for i in range(3)], [(0, "v1", 2, "p")]):
        _write(spark, path, batch, opts)
        apply_batch(state, batch, ordering=2)
    paused = PausedWrite(monkeypatch, spark, path, [(1, "lost?", 3, "p")], opts)
    pending = HoodieTableMetaClient.load(str(path)).timeline.pending().last().timestamp
    with pytest.raises(HoodieCompactionError, match=f"while write .*{pending}.* is pending"):
        schedule_compaction(str(path))
    compaction = schedule_compaction(str(path), HoodieConfig.of(OCC))
    assert compaction is not None
    run_compaction(spark, str(path), compaction, HoodieConfig.of(OCC))
    error = paused.resume()
    assert isinstance(error, HoodieWriteConflictError) and error.winner == compaction, error
    assert _table_rows(path) == _expect(state)
    _clean_timeline(path)
    after = [(1, "v2", 3, "p")]  # the next write goes to the compacted slice and is read
    _write(spark, path, after, opts)
    apply_batch(state, after, ordering=2)
    assert _table_rows(path) == _expect(state)


def test_a_write_rolled_back_under_it_never_publishes(spark, tmp_path, monkeypatch):
    path = tmp_path / "t"
    base = [(1, "v0", 1, "p")]
    _write(spark, path, base, _opts("t"))
    paused = PausedWrite(monkeypatch, spark, path, [(1, "ghost", 2, "p")], _opts("t"))
    meta = HoodieTableMetaClient.load(str(path))
    rollback(meta, meta.timeline.pending().last())  # as a writer that took its heartbeat for dead would
    error = paused.resume()
    assert isinstance(error, HoodieTableStateError) and "no longer inflight" in str(error), error
    assert _table_rows(path) == _expect({1: base[0]})
    _clean_timeline(path)


def test_eager_failed_writes_policy_is_refused_with_several_writers(spark, tmp_path):
    with pytest.raises(HoodieWriteError, match="hoodie.cleaner.policy.failed.writes=EAGER cannot be used"):
        _write(spark, tmp_path / "t", [(1, "a", 1, "p")], {**_opts("t"), "hoodie.cleaner.policy.failed.writes": "EAGER"})
    assert not (tmp_path / "t").exists()
