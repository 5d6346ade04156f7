"""Writer processes upserting one table at once under optimistic concurrency control (bench.concurrent_writers,
which runs `--rounds 50` for the figures): disjoint rounds all commit, overlapping rounds commit exactly the
writers that did not conflict, losers get HoodieWriteConflictError, and the table read by this engine and by
hudi-rs equals the committed batches, with the file-system lock and the Hive Metastore lock; on merge-on-read a
compactor process racing the writers loses no update."""
from __future__ import annotations

import os

import pytest

from bench.concurrent_writers import run

pytestmark = pytest.mark.multiprocess


def test_two_writers_file_system_lock(spark, tmp_path):
    figures = run(2, 4, "fs", directory=str(tmp_path), spark=spark)["figures"]
    assert figures["disjoint_commits"] == figures["disjoint_writes"] == 4
    assert figures["overlap_commits"] + figures["overlap_conflicts"] == figures["overlap_writes"] == 4


def test_four_writers_and_a_compactor_on_merge_on_read(spark, tmp_path):
    figures = run(4, 2, "fs", mor=True, compactor=True, directory=str(tmp_path), spark=spark)["figures"]
    assert figures["disjoint_commits"] == 4 and figures["overlap_writes"] == 4


def test_two_writers_hive_metastore_lock(spark, tmp_path):
    assert os.environ.get("HIVE_METASTORE_URIS"), "the session fixture shares its metastore with child processes"
    figures = run(2, 2, "hms", directory=str(tmp_path), spark=spark)["figures"]
    assert figures["disjoint_commits"] == 2 and figures["overlap_commits"] >= 1
