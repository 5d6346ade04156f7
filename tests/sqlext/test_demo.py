"""README's first command runs `python -m sqlext.demo`: it runs to the end on embedded defaults (its own
./spark-warehouse and metastore, stopped afterwards) and shows what it says it shows."""
from __future__ import annotations

import os
import re
import subprocess
import sys

from quick_jvm import quick_jvm_env


def test_demo_runs_on_embedded_defaults(tmp_path):
    # a new user's process: no metastore configured (the test session's is in HIVE_METASTORE_URIS), so the embedded
    # one of its own ./spark-warehouse
    env = {k: v for k, v in os.environ.items() if k != "HIVE_METASTORE_URIS"} | {"PYSPARK_PYTHON": sys.executable}
    env = quick_jvm_env(env)  # its JVMs on JIT tier 1 only (see quick_jvm): what it runs is the same
    try:
        run = subprocess.run([sys.executable, "-m", "sqlext.demo"], cwd=tmp_path, env=env, capture_output=True,
                             text=True, timeout=600)
    finally:
        subprocess.run([sys.executable, "-m", "sqlext.cli", "metastore", "stop", "--warehouse",
                        str(tmp_path / "spark-warehouse")], cwd=tmp_path, env=env, capture_output=True, timeout=120)
    assert run.returncode == 0, run.stderr[-3000:]
    out = run.stdout
    for title in ("after upsert", "after delete", "time travel", "MERGE INTO demo_rides", "SHOW TABLES",
                  "demo_rides_rt", "demo_rides_ro", "run_compaction", "after the compaction"):
        assert title in out, title
    tables = set(re.findall(r"\b(demo_rides(?:_ro|_rt)?)\b", out.split("== SHOW TABLES")[1].split("== SELECT")[0]))
    assert tables == {"demo_rides", "demo_rides_ro", "demo_rides_rt"}
    ro_before = out.split("demo_rides_ro (read-optimized")[1].split("==")[0]
    ro_after = out.split("demo_rides_ro after the compaction")[1]
    assert "|7.0 " in ro_before and "|9.5 " in ro_after  # bob's update reaches the read-optimized table
