"""The S3 flows on `local-cluster[2,1,2048]` — two executor JVMs, each with its own Python workers, as on a real
cluster — against moto's S3 server: the executors reach the table through the URI and the Spark conf's
credentials alone, and hudi-rs reading the bucket agrees with what the cluster read.

The DataFrame flow runs for merge-on-read only: it reaches the executors' every table-writing path - new base files,
log files for upserts and deletes, compaction merging both into new base files, merge-on-read snapshot and
time-travel reads - and the SQL flow's MERGE upserts a copy-on-write table (base files rewritten on the executors).
The copy-on-write DataFrame flow itself (three writes, time travel, hudi-rs) runs on S3 in local mode:
tests/storage/test_s3_tables.py::test_table_on_s3[COPY_ON_WRITE]."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from hudi_oracle import hudi_rs_read
from quick_jvm import quick_jvm_env
from s3_server import ACCESS_KEY, SECRET_KEY

ROOT = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.cluster
TABLE_TYPES = ("MERGE_ON_READ",)


def _expected_rows() -> list[list]:
    state = {i: [i, f"n{i}", float(i)] for i in range(40)}
    for i in range(0, 40, 5):
        state[i] = [i, f"u{i}", i * 2.0]
    state[50] = [50, "new", 5.0]
    for i in (1, 2, 3):
        state.pop(i)
    return sorted(state.values())


def test_flows_on_local_cluster_against_s3(s3_server, tmp_path):
    bucket = s3_server.new_bucket("cluster")
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]).rstrip(os.pathsep))
    for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "HIVE_METASTORE_URIS"):
        env.pop(name, None)  # credentials come from the Spark conf only
    env = quick_jvm_env(env)  # the driver's and the executors' JVMs on JIT tier 1 only (see quick_jvm)
    proc = subprocess.run(
        [sys.executable, str(Path(__file__).with_name("local_cluster_flows.py")), "local-cluster[2,1,2048]",
         s3_server.url, ACCESS_KEY, SECRET_KEY, bucket, *TABLE_TYPES],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-4000:]
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    assert out["executors"] == 2
    expected = _expected_rows()
    assert sorted(k for k in out if k not in ("executors", "sql")) == sorted(TABLE_TYPES)
    for table_type in TABLE_TYPES:
        got = out[table_type]
        assert got["rows"] == expected
        assert got["first"] == list(range(40))
        rs = hudi_rs_read(f"s3a://{bucket}/{table_type.lower()}", storage_options=s3_server.hudi_rs_options())
        assert sorted([r["id"], r["name"], r["price"]] for r in rs.to_pylist()) == expected
    assert out["sql"] == [[1, 1.0], [2, 20.0], [3, 3.0]]
    assert list(tmp_path.iterdir()) in ([], [tmp_path / "spark-warehouse"])  # nothing of the tables locally
