"""README's first command runs `python -m sqlext.demo`: it runs to the end on embedded defaults (its own
./spark-warehouse and metastore, stopped afterwards) and shows what it says it shows.

The run is a new user's process (new_user_runs): no metastore configured, its JVMs on JIT tier 1 only; it starts
together with README's runnable blocks (test_readme) when both are selected."""
from __future__ import annotations

import re

from new_user_runs import new_user_run


def test_demo_runs_on_embedded_defaults(request, tmp_path_factory):
    run = new_user_run(request, tmp_path_factory, "demo").result()
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
