"""A Spark task that fails after writing its file is retried (local[1,2]: two attempts per task); the retried
attempt writes a second file for the same file group and instant (a bulk insert's task: for a file group of its
own naming). The commit reconciles against the markers:
the failed attempt's file is deleted before publishing, the commit names exactly one file per file group, and
readers (this engine, hudi-rs) see the right rows, on copy-on-write and merge-on-read."""
from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import pytest
from hudi_oracle import arrow_rows, hudi_rs_read, rows
from quick_jvm import quick_jvm_env

from storage.table.meta_client import HoodieTableMetaClient
from storage.testing.crash_points import TASK_FAILURE_ENV_VAR

pytestmark = pytest.mark.multiprocess

SCHEMA = "id int, name string, ts long, dt string"
COLS = ["id", "name", "ts", "dt"]


CASES = [("COPY_ON_WRITE", "upsert"), ("MERGE_ON_READ", "upsert"), ("COPY_ON_WRITE", "bulk_insert")]
FIRST, SECOND = [(1, "a", 1, "p"), (2, "b", 1, "p")], [(1, "a2", 2, "p"), (3, "c", 2, "p")]
CASE_MARK, CASE_FAILED = "== killed-task case ", "== killed-task case failed: "


def _opts(table_type: str, first_operation: str) -> dict[str, str]:
    # a name of its own: the subprocess shares the test session's metastore, which refuses to re-point a name
    return {"hoodie.table.name": f"killed_{table_type}_{first_operation}".lower(),
            "hoodie.datasource.write.recordkey.field": "id",
            "hoodie.datasource.write.precombine.field": "ts", "hoodie.datasource.write.partitionpath.field": "dt",
            "hoodie.datasource.write.table.type": table_type,
            "hoodie.sqlext.engine": "SPARK"}  # Spark's task retries (the in-process engine fails the write instead)


@pytest.fixture(scope="module")
def retried_writes(spark, tmp_path_factory) -> dict[tuple[str, str], tuple[str, str]]:
    """(table_type, first_operation) -> (table path, the child's stderr while it wrote that table).

    ONE child process (its Spark session started with every write task's first attempt failing after its file)
    writes the cases' tables in turn, each on a path and table name of its own: one Spark start-up instead of one
    per case. Its stderr is cut into the cases' parts at the marker lines it prints before each case."""
    root = tmp_path_factory.mktemp("killed-task")
    jobs = [(table_type, op, str(root / f"{table_type}_{op}".lower() / "t"), _opts(table_type, op))
            for table_type, op in CASES]
    script = textwrap.dedent(f"""
        import sys, traceback
        import sqlext
        spark = sqlext.session(master="local[1,2]", conf={{"spark.ui.enabled": "false",
                               "spark.sql.shuffle.partitions": "1", "spark.ui.showConsoleProgress": "false"}})
        for table_type, first_operation, path, opts in {jobs!r}:
            print({CASE_MARK!r} + table_type + " " + first_operation, file=sys.stderr, flush=True)
            try:
                for batch, operation in (({FIRST!r}, first_operation), ({SECOND!r}, "upsert")):
                    spark.createDataFrame(batch, {SCHEMA!r}).write.format("hudi").options(**opts) \
                        .option("hoodie.datasource.write.operation", operation).mode("append").save(path)
            except Exception:
                traceback.print_exc()
                print({CASE_FAILED!r} + table_type + " " + first_operation, file=sys.stderr, flush=True)
    """)
    env = quick_jvm_env(**{TASK_FAILURE_ENV_VAR: "write.task_after_file"})  # JIT tier 1: see quick_jvm
    proc = subprocess.run([sys.executable, "-c", script], env=env, cwd=str(root), capture_output=True, timeout=900)
    stderr = proc.stderr.decode(errors="replace")
    assert proc.returncode == 0, stderr[-3000:]
    parts = stderr.split(CASE_MARK)[1:]
    logs = {tuple(part.split("\n", 1)[0].split()): part for part in parts}
    return {(table_type, op): (path, logs.get((table_type, op), "")) for table_type, op, path, _ in jobs}


@pytest.mark.parametrize("table_type,first_operation", CASES)
def test_retried_task_leaves_one_file_per_file_group(spark, retried_writes, table_type, first_operation):
    path, log = retried_writes[(table_type, first_operation)]
    assert log, f"the child never reached the case {table_type} {first_operation}"
    assert CASE_FAILED not in log, log[-3000:]
    assert "injected failure of task attempt 0" in log  # the failure really happened, and was retried
    first, second = FIRST, SECOND

    meta = HoodieTableMetaClient.load(path)
    commits = list(meta.timeline.completed())
    assert len(commits) == 2
    named = set()
    for instant in commits:
        stats = meta.active_timeline.commit_metadata(instant).write_stats()
        groups = [s.fileId for s in stats]
        assert len(groups) == len(set(groups)), "one file per file group and commit"
        named |= {os.path.basename(s.path) for s in stats}
    on_disk = {f for f in os.listdir(f"{path}/p") if f != ".hoodie_partition_metadata"}
    assert on_disk == named, "the failed attempts' files are gone"
    want = rows([dict(zip(COLS, r)) for r in {1: second[0], 2: first[1], 3: second[1]}.values()], COLS)
    assert arrow_rows(hudi_rs_read(path), COLS) == want
    assert rows([r.asDict() for r in spark.read.format("hudi").load(path).collect()], COLS) == want
