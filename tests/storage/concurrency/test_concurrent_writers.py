"""Writer processes upserting one table at once under optimistic concurrency control (bench.concurrent_writers,
which runs `--rounds 50` for the figures): disjoint rounds all commit, overlapping rounds commit exactly the
writers that did not conflict, losers get HoodieWriteConflictError, and the table read by this engine and by
hudi-rs equals the committed batches, with the file-system lock and the Hive Metastore lock; on merge-on-read a
compactor process racing the writers loses no update."""
from __future__ import annotations

import os

import pytest
from quick_jvm import quick_jvm_env

from bench.concurrent_writers import run

pytestmark = pytest.mark.multiprocess


@pytest.fixture(autouse=True)
def quick_writer_jvms(monkeypatch):
    """The writer and compactor processes (spawned: they inherit this environment) run their JVMs on JIT tier 1
    only: each does a few small writes, and their start-ups share two cores (see quick_jvm)."""
    monkeypatch.setenv("JAVA_TOOL_OPTIONS", quick_jvm_env()["JAVA_TOOL_OPTIONS"])


def test_two_writers_file_system_lock(spark, tmp_path):
    figures = run(2, 4, "fs", directory=str(tmp_path), spark=spark)["figures"]
    assert figures["disjoint_commits"] == figures["disjoint_writes"] == 4
    assert figures["overlap_commits"] + figures["overlap_conflicts"] == figures["overlap_writes"] == 4


def test_three_writers_and_a_compactor_on_merge_on_read(spark, tmp_path):
    # three writers racing in the shared partition and the compactor: still conflicts and a compaction racing them;
    # a fourth writer was one more JVM on two cores and asserted nothing more
    figures = run(3, 2, "fs", mor=True, compactor=True, directory=str(tmp_path), spark=spark)["figures"]
    assert figures["disjoint_commits"] == 3 and figures["overlap_writes"] == 3


def test_two_writers_hive_metastore_lock(spark, tmp_path):
    assert os.environ.get("HIVE_METASTORE_URIS"), "the session fixture shares its metastore with child processes"
    figures = run(2, 2, "hms", directory=str(tmp_path), spark=spark)["figures"]
    assert figures["disjoint_commits"] == 2 and figures["overlap_commits"] >= 1
