"""The crash matrix: every declared crash point (storage.testing.crash_points.CRASH_POINTS, by phase) through
the scenarios of its phase (crash_scenarios.py). A child process is killed at the point (os._exit, as SIGKILL:
no finally, no atexit); then the table must read the last committed state exactly (this engine and hudi-rs),
the next write or service run must recover (roll back, resume, redo), and the final table must equal the
expected state with nothing pending, no markers and no heartbeats left."""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from crash_scenarios import COLS, RECOVERY, SCHEMA, Scenario, apply, opts, scenarios_for
from hudi_oracle import arrow_rows, check_record_index, hudi_rs_read, rows, spark_rows
from quick_jvm import quick_jvm_env

import storage.write.write_operation as write_operation
from storage.metadata.table_metadata_util import committed_files
from storage.metadata.table_metadata import HoodieTableMetadata
from storage.table.fs_view import FileSystemView
from storage.table.meta_client import HoodieTableMetaClient
from storage.table_service.compaction import run_compaction
from storage.testing.crash_points import CRASH_EXIT_CODE, CRASH_POINTS, crash_env, points_by_phase

pytestmark = pytest.mark.multiprocess

# The cases a default run (and CI) takes among those whose child needs a Spark process of its own (~10 s each on
# two cores): per phase, a point before the action's files exist, one with its files written but not committed,
# and one after its commit - the three recoveries (nothing to undo, roll back or resume, nothing left). The other
# Spark cases run with CRASH_MATRIX=full (run it after changing a commit path); the cases without Spark always run.
CI_SPARK_CASES = frozenset({
    "write.after_requested-upsert_mor", "write.before_commit-upsert_mor", "write.before_commit-upsert_mor_spark",
    "write.before_commit-insert_overwrite_cow",
    "write.after_commit-delete_cow",
    "compaction.after_schedule-compaction_mor", "compaction.before_commit-compaction_mor",
    "compaction.after_commit-compaction_mor",
    "clustering.after_schedule-clustering_mor", "clustering.before_commit-clustering_mor",
    "rollback.after_requested-rollback_mor", "rollback.after_files_deleted-rollback_mor",
    "metadata.before_commit-upsert_mdt_cow", "metadata.after_commit-upsert_mdt_cow",
})
FULL_MATRIX = os.environ.get("CRASH_MATRIX", "").lower() == "full"


def _param(point: str, scenario: Scenario):
    case = f"{point}-{scenario.name}"
    marks = () if FULL_MATRIX or not scenario.needs_spark or case in CI_SPARK_CASES else \
        pytest.mark.skip(reason="outside the default crash-matrix subset: run with CRASH_MATRIX=full")
    return pytest.param(point, scenario, "", id=case, marks=marks)


def _cases():
    out = []
    for phase, points in points_by_phase().items():
        for point in points:
            try:
                found = scenarios_for(point)
            except LookupError as exc:
                out.append(pytest.param(point, None, str(exc), id=f"{point}-no-scenario"))
                continue
            out += [_param(point, s) for s in found]
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


# The child of a scenario that needs Spark: a fresh process with a local session of its own, which then reads its
# job (the crash point, the table, the operation) from stdin, runs the operation and dies at the point. The crash
# point is read from the environment when the operation reaches it (on the driver), so it is set once the job
# arrives. Such children are started one case ahead (SparkChildren): a child's JVM launches while the case before
# it goes on, where a Spark start-up per case was most of the matrix's time on two cores.
_SPARK_CHILD = textwrap.dedent("""
    import json, os, sys
    import sqlext
    spark = sqlext.session(master="local[1]", conf={"spark.ui.enabled": "false",
                           "spark.sql.shuffle.partitions": "1", "spark.ui.showConsoleProgress": "false"})
    job = json.loads(sys.stdin.readline() or "null")
    if job is None:
        raise SystemExit("no job: not needed after all")
    os.environ.update(job["env"])
    path, opts = job["path"], job["opts"]
    exec(job["operation"])
    raise SystemExit('the crash point was never reached')
""")

class SparkChildren:
    """Spark children started ahead: `take()` hands out the one started during the previous case (or starts one)
    and starts the next while more cases of the module need one."""

    def __init__(self, cwd: Path, wanted: int):
        self.cwd, self.wanted, self.started = cwd, wanted, []
        self.next = self._start() if wanted > 0 else None

    def _start(self):
        self.wanted -= 1
        log = self.cwd / f"child-{len(self.started)}.log"
        with open(log, "wb") as err:
            proc = subprocess.Popen([sys.executable, "-c", _SPARK_CHILD], stdin=subprocess.PIPE,
                                    stdout=subprocess.DEVNULL, stderr=err, cwd=str(self.cwd),
                                    env=quick_jvm_env())  # JIT tier 1: see quick_jvm
        proc.log = log
        self.started.append(proc)
        return proc

    def take(self):
        proc, self.next = self.next or self._start(), None
        if self.wanted > 0:
            self.next = self._start()
        return proc

    def close(self) -> None:
        for proc in self.started:
            if proc.poll() is None:
                proc.kill()
                proc.wait()


@pytest.fixture(scope="module")
def spark_children(request, spark, tmp_path_factory):
    """Started after the session fixture, so the children share its metastore (HIVE_METASTORE_URIS) as before."""
    wanted = sum(1 for item in request.session.items
                 if item.module is request.module and getattr(item, "callspec", None) is not None
                 and getattr(item.callspec.params.get("scenario"), "needs_spark", False)
                 and item.get_closest_marker("skip") is None)
    children = SparkChildren(tmp_path_factory.mktemp("crash-children"), wanted)
    yield children
    children.close()


@pytest.fixture(scope="module")
def seeded_copy(spark, tmp_path_factory):
    """seeded_copy(scenario, path) -> the state: at `path` a copy (a directory copy, no Spark write) of a table
    holding the scenario's seed writes, written once per module for all the points that share the scenario."""
    root, made = tmp_path_factory.mktemp("crash-seeds"), {}

    def copy(scenario: Scenario, path: str) -> dict:
        key = (scenario.name, scenario.mor, repr(scenario.seed_ops))
        if key not in made:
            source, state = str(root / f"seed-{len(made)}" / "t"), {}
            for batch, operation in scenario.seed_ops:
                _write(spark, source, batch, operation, opts("t", scenario.mor, scenario.options))
                state = apply(state, batch, operation)
            made[key] = (source, state)
        source, state = made[key]
        shutil.copytree(source, path)
        return dict(state)

    return copy


def _run_child(point: str, scenario: Scenario, path: str, options: dict, cwd, children: SparkChildren) -> None:
    if scenario.needs_spark:
        proc = children.take()
        job = {"env": crash_env(point), "path": path, "opts": options, "operation": scenario.child}
        try:
            proc.communicate(json.dumps(job).encode() + b"\n", timeout=600)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
        assert proc.returncode == CRASH_EXIT_CODE, proc.log.read_text(errors="replace")[-3000:]
        return
    script = "spark = None\npath, opts = %r, %r\n" % (path, options) + scenario.child + \
        "\nraise SystemExit('the crash point was never reached')\n"
    env = {**os.environ, **crash_env(point)}
    proc = subprocess.run([sys.executable, "-c", script], env=env, cwd=str(cwd), capture_output=True, timeout=600)
    assert proc.returncode == CRASH_EXIT_CODE, proc.stderr.decode()[-3000:]


def _assert_reads(spark, path: str, state: dict, when: str) -> None:
    want = rows([dict(zip(COLS, r)) for r in state.values()], COLS)
    assert spark_rows(spark.read.format("hudi").load(path), COLS) == want, f"this engine, {when}"
    assert arrow_rows(hudi_rs_read(path), COLS) == want, f"hudi-rs, {when}"


def _assert_metadata_table_in_step(spark, path: str, when: str) -> None:
    """The metadata table lists exactly the committed files (what validate_metadata_table_files checks), and its
    record index, when it has one, equals a scan's key -> location map."""
    meta = HoodieTableMetaClient.load(path)
    listed = {p: f for p, f in committed_files(FileSystemView(meta, use_metadata_table=False)).items() if f}
    assert HoodieTableMetadata(meta).files_in_partitions(sorted(listed)) == listed, f"metadata table, {when}"
    if "record_index" in HoodieTableMetadata(meta).enabled_partitions:
        check_record_index(spark, path)


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


def test_default_subset_names_real_cases_of_every_spark_phase():
    cases = {p.id: p.values[1] for p in _cases() if p.values[1] is not None}
    assert CI_SPARK_CASES <= set(cases), sorted(CI_SPARK_CASES - set(cases))
    spark_phases = {i.split(".")[0] for i, s in cases.items() if s.needs_spark}
    assert spark_phases == {i.split(".")[0] for i in CI_SPARK_CASES}


@pytest.mark.parametrize("point, scenario, missing", _cases())
def test_crash_point(spark, spark_children, seeded_copy, tmp_path, monkeypatch, point, scenario, missing):
    if scenario is None:
        pytest.fail(missing)
    path = str(tmp_path / "t")
    options = opts("t", scenario.mor, scenario.options)
    state = seeded_copy(scenario, path)
    if scenario.failed_write_first:
        _leave_failed_write(spark, path, options, monkeypatch)

    _run_child(point, scenario, path, options, tmp_path, spark_children)
    state = scenario.state_after_crash(point, state)
    _assert_reads(spark, path, state, f"after a crash at {point}")
    if scenario.keeps_metadata_table:
        _assert_metadata_table_in_step(spark, path, f"after a crash at {point}")

    if scenario.recover == "compaction":
        run_compaction(spark, path)
    if scenario.rerun:
        exec(scenario.rerun, {"spark": spark, "path": path, "opts": options})  # the service run again finishes it
        state = scenario.recovered(state)
    _write(spark, path, RECOVERY, "upsert", options)
    state = apply(state, RECOVERY, "upsert")
    _assert_reads(spark, path, state, f"after recovering from {point}")
    if scenario.keeps_metadata_table:
        _assert_metadata_table_in_step(spark, path, f"after recovering from {point}")
    _assert_settled(path)
