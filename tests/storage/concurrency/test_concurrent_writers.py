"""Writer processes upserting one table at once under optimistic concurrency control (bench.concurrent_writers,
which runs `--rounds 50` for the figures): disjoint rounds all commit, overlapping rounds commit exactly the
writers that did not conflict, losers get HoodieWriteConflictError, and the table read by this engine and by
hudi-rs equals the committed batches, with the file-system, Hive Metastore, ZooKeeper (a real server),
DynamoDB (moto's server over HTTP) and storage-based (conditional writes) locks; on merge-on-read a compactor
process racing the writers loses no update."""
from __future__ import annotations

import os
import uuid

import pytest
from quick_jvm import quick_jvm_env
from s3_server import ACCESS_KEY, REGION, SECRET_KEY
from zookeeper_server import zookeeper_server_fixture  # noqa: F401 - fixture

from bench.concurrent_writers import run

pytestmark = pytest.mark.multiprocess


@pytest.fixture(autouse=True)
def quick_writer_jvms(monkeypatch):
    """The writer and compactor processes (spawned: they inherit this environment) run their JVMs on JIT tier 1
    only: each does a few small writes, and their start-ups share two cores (see quick_jvm)."""
    monkeypatch.setenv("JAVA_TOOL_OPTIONS", quick_jvm_env()["JAVA_TOOL_OPTIONS"])


def test_three_writers_and_a_compactor_on_merge_on_read(spark, tmp_path):
    # the file-system lock: three writers racing in the shared partition and the compactor: still conflicts and a
    # compaction racing them; a fourth writer was one more JVM on two cores and asserted nothing more (two writers
    # alone with this lock asserted nothing this does not)
    figures = run(3, 2, "fs", mor=True, compactor=True, directory=str(tmp_path), spark=spark)["figures"]
    assert figures["disjoint_commits"] == 3 and figures["overlap_writes"] == 3
    assert figures["overlap_commits"] + figures["overlap_conflicts"] == figures["overlap_writes"]


def test_two_writers_hive_metastore_lock(spark, tmp_path):
    assert os.environ.get("HIVE_METASTORE_URIS"), "the session fixture shares its metastore with child processes"
    figures = run(2, 2, "hms", directory=str(tmp_path), spark=spark)["figures"]
    assert figures["disjoint_commits"] == 2 and figures["overlap_commits"] >= 1


def _assert_two_writers_two_rounds(figures: dict) -> None:
    """Round 1 overlaps (one file group): at least one writer commits, any other conflicts; round 2 is disjoint
    (own partitions): both commit. `run` has already checked that the table holds every committed update."""
    assert figures["disjoint_commits"] == figures["disjoint_writes"] == 2
    assert figures["overlap_commits"] >= 1
    assert figures["overlap_commits"] + figures["overlap_conflicts"] == figures["overlap_writes"] == 2


def test_two_writers_zookeeper_lock(spark, tmp_path, zookeeper_server):
    lock = {"hoodie.write.lock.zookeeper.url": zookeeper_server.url,
            "hoodie.write.lock.zookeeper.lock_key": f"concurrent-{uuid.uuid4().hex[:8]}"}
    _assert_two_writers_two_rounds(run(2, 2, "zk", directory=str(tmp_path), spark=spark, lock_options=lock)["figures"])


def test_two_writers_dynamodb_lock(spark, tmp_path, s3_server):
    lock = {"hoodie.write.lock.dynamodb.endpoint_url": s3_server.url, "hoodie.write.lock.dynamodb.region": REGION,
            "hoodie.write.lock.dynamodb.table": f"locks_{uuid.uuid4().hex[:8]}", "hoodie.aws.access.key": ACCESS_KEY,
            "hoodie.aws.secret.key": SECRET_KEY}
    _assert_two_writers_two_rounds(run(2, 2, "dynamodb", directory=str(tmp_path), spark=spark,
                                       lock_options=lock)["figures"])


def test_two_writers_storage_lock(spark, tmp_path):
    _assert_two_writers_two_rounds(run(2, 2, "storage", directory=str(tmp_path), spark=spark)["figures"])
    assert (tmp_path / "table" / ".hoodie" / ".locks" / "table_lock.json").exists()
