"""The crash matrix: every declared crash point (storage.testing.crash_points.CRASH_POINTS, by phase) through
the scenarios of its phase (crash_scenarios.py). A child process is killed at the point (os._exit, as SIGKILL:
no finally, no atexit); then the table must read the last committed state exactly (this engine and hudi-rs),
the next write or service run must recover (roll back, resume, redo), and the final table must equal the
expected state with nothing pending, no markers and no heartbeats left."""
from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import pytest
from crash_scenarios import COLS, RECOVERY, SCHEMA, Scenario, apply, opts, scenarios_for
from hudi_oracle import arrow_rows, hudi_rs_read, rows, spark_rows

import storage.write.write_operation as write_operation
from storage.table.meta_client import HoodieTableMetaClient
from storage.table_service.compaction import run_compaction
from storage.testing.crash_points import CRASH_EXIT_CODE, CRASH_POINTS, crash_env, points_by_phase

pytestmark = pytest.mark.multiprocess

def _cases():
    out = []
    for phase, points in points_by_phase().items():
        for point in points:
            try:
                found = scenarios_for(point)
            except LookupError as exc:
                out.append(pytest.param(point, None, str(exc), id=f"{point}-no-scenario"))
                continue
            out += [pytest.param(point, s, "", id=f"{point}-{s.name}") for s in found]
    return out


def _write(spark, path, batch, operation, options):
    spark.createDataFrame(batch, SCHEMA).write.format("hudi").options(**options) \
        .option("hoodie.datasource.write.operation", operation).mode("append").save(path)


class _Crashed(BaseException):
    pass


def _leave_failed_write(spark, path, options, monkeypatch):
    """A write that died after writing its files, before its commit, and whose heartbeat is gone."""
    def crash(point):
        if point == "write.before_commit":
            raise _Crashed()

    with monkeypatch.context() as m:
        m.setattr(write_operation, "crash_point", crash)
        m.setattr(write_operation, "abort_write", lambda *a: None)  # a killed process undoes nothing
        with pytest.raises(_Crashed):
            _write(spark, path, [(1, "lost", 5, "p1"), (40, "lost", 5, "p2")], "upsert", options)
    assert HoodieTableMetaClient.load(path).timeline.pending().last() is not None


def _run_child(point: str, scenario: Scenario, path: str, options: dict, cwd) -> None:
    session = textwrap.dedent("""
        import sqlext
        spark = sqlext.session(master="local[1]", conf={"spark.ui.enabled": "false",
                               "spark.sql.shuffle.partitions": "1", "spark.ui.showConsoleProgress": "false"})
    """) if scenario.needs_spark else "spark = None\n"
    script = session + "path, opts = %r, %r\n" % (path, options) + scenario.child + "\nraise SystemExit('the crash point was never reached')\n"
    env = {**os.environ, **crash_env(point)}
    proc = subprocess.run([sys.executable, "-c", script], env=env, cwd=str(cwd), capture_output=True, timeout=600)
    assert proc.returncode == CRASH_EXIT_CODE, proc.stderr.decode()[-3000:]


def _assert_reads(spark, path: str, state: dict, when: str) -> None:
    want = rows([dict(zip(COLS, r)) for r in state.values()], COLS)
    assert spark_rows(spark.read.format("hudi").load(path), COLS) == want, f"this engine, {when}"
    assert arrow_rows(hudi_rs_read(path), COLS) == want, f"hudi-rs, {when}"


def _assert_settled(path: str) -> None:
    meta = HoodieTableMetaClient.load(path)
    assert list(meta.timeline.pending()) == [], "nothing may stay pending"
    assert os.listdir(meta.temp_path) == [], "no markers may remain"
    heartbeats = os.path.join(meta.meta_path, ".heartbeat")
    assert not os.path.exists(heartbeats) or os.listdir(heartbeats) == [], "no heartbeat may remain"


def test_every_point_is_declared_once_by_phase():
    assert sum(len(p) for p in points_by_phase().values()) == len(CRASH_POINTS)
    assert {"write", "compaction", "clustering", "rollback", "clean", "archive", "savepoint",
            "restore"} <= set(points_by_phase())


@pytest.mark.parametrize("point, scenario, missing", _cases())
def test_crash_point(spark, tmp_path, monkeypatch, point, scenario, missing):
    if scenario is None:
        pytest.fail(missing)
    path = str(tmp_path / "t")
    options = opts("t", scenario.mor)
    state: dict = {}
    for batch, operation in scenario.seed_ops:
        _write(spark, path, batch, operation, options)
        state = apply(state, batch, operation)
    if scenario.failed_write_first:
        _leave_failed_write(spark, path, options, monkeypatch)

    _run_child(point, scenario, path, options, tmp_path)
    state = scenario.state_after_crash(point, state)
    _assert_reads(spark, path, state, f"after a crash at {point}")

    if scenario.recover == "compaction":
        run_compaction(spark, path)
    if scenario.rerun:
        exec(scenario.rerun, {"spark": spark, "path": path, "opts": options})  # the service run again finishes it
        state = scenario.recovered(state)
    _write(spark, path, RECOVERY, "upsert", options)
    state = apply(state, RECOVERY, "upsert")
    _assert_reads(spark, path, state, f"after recovering from {point}")
    _assert_settled(path)
