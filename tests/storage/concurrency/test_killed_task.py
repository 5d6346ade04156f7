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

from storage.table.meta_client import HoodieTableMetaClient
from storage.testing.crash_points import TASK_FAILURE_ENV_VAR

pytestmark = pytest.mark.multiprocess

SCHEMA = "id int, name string, ts long, dt string"
COLS = ["id", "name", "ts", "dt"]


@pytest.mark.parametrize("table_type,first_operation", [("COPY_ON_WRITE", "upsert"), ("MERGE_ON_READ", "upsert"),
                                                          ("COPY_ON_WRITE", "bulk_insert")])
def test_retried_task_leaves_one_file_per_file_group(spark, tmp_path, table_type, first_operation):
    path = str(tmp_path / "t")
    # a name of its own: the subprocesses share the test session's metastore, which refuses to re-point a name
    opts = {"hoodie.table.name": f"killed_{table_type}_{first_operation}".lower(),
            "hoodie.datasource.write.recordkey.field": "id",
            "hoodie.datasource.write.precombine.field": "ts", "hoodie.datasource.write.partitionpath.field": "dt",
            "hoodie.datasource.write.table.type": table_type}
    first, second = [(1, "a", 1, "p"), (2, "b", 1, "p")], [(1, "a2", 2, "p"), (3, "c", 2, "p")]
    script = textwrap.dedent(f"""
        import sqlext
        spark = sqlext.session(master="local[1,2]", conf={{"spark.ui.enabled": "false",
                               "spark.sql.shuffle.partitions": "1", "spark.ui.showConsoleProgress": "false"}})
        for batch, operation in (({first!r}, {first_operation!r}), ({second!r}, "upsert")):
            spark.createDataFrame(batch, {SCHEMA!r}).write.format("hudi").options(**{opts!r}) \
                .option("hoodie.datasource.write.operation", operation).mode("append").save({path!r})
    """)
    env = {**os.environ, TASK_FAILURE_ENV_VAR: "write.task_after_file"}
    proc = subprocess.run([sys.executable, "-c", script], env=env, cwd=str(tmp_path), capture_output=True, timeout=600)
    assert proc.returncode == 0, proc.stderr.decode()[-3000:]
    assert b"injected failure of task attempt 0" in proc.stderr  # the failure really happened, and was retried

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
