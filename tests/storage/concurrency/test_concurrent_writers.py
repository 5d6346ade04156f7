"""Writer processes upserting one table at once under optimistic concurrency control (bench.concurrent_writers,
which runs `--rounds 50` for the figures): disjoint rounds all commit, overlapping rounds commit exactly the
writers that did not conflict, losers get HoodieWriteConflictError, and the table read by this engine and by
hudi-rs equals the committed batches, with the file-system and Hive Metastore locks, and four writers and a
compactor process on merge-on-read under each of ZooKeeper (a real server), DynamoDB (moto's server over HTTP)
and the storage-based lock (conditional writes); a compactor racing the writers loses no update, and the record
index the writers keep equals a scan of the table."""
from __future__ import annotations

import os
import uuid

import pytest
from hudi_oracle import check_record_index
from quick_jvm import quick_jvm_env
from s3_server import ACCESS_KEY, REGION, SECRET_KEY
from zookeeper_server import zookeeper_server_fixture  # noqa: F401 - fixture

from bench.concurrent_writers import COLUMNS, SCHEMA, batch, options, run

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
    # with the record index kept by every writer and the compactor: afterwards it equals a scan of the table
    record_index = {"hoodie.metadata.record.index.enable": "true",
                    "hoodie.metadata.record.index.min.filegroup.count": "2",
                    "hoodie.metadata.record.index.max.filegroup.count": "2"}
    result = run(3, 2, "fs", mor=True, compactor=True, directory=str(tmp_path), spark=spark,
                 write_options=record_index)
    figures = result["figures"]
    assert figures["disjoint_commits"] == 3 and figures["overlap_writes"] == 3
    assert figures["overlap_commits"] + figures["overlap_conflicts"] == figures["overlap_writes"]
    check_record_index(spark, result["path"])


def test_two_writers_hive_metastore_lock(spark, tmp_path):
    assert os.environ.get("HIVE_METASTORE_URIS"), "the session fixture shares its metastore with child processes"
    figures = run(2, 2, "hms", directory=str(tmp_path), spark=spark)["figures"]
    assert figures["disjoint_commits"] == 2 and figures["overlap_commits"] >= 1


@pytest.mark.parametrize("lock", ["zk", "dynamodb", "storage"])
def test_four_writers_and_a_compactor_under_each_lock_provider(spark, tmp_path, lock, request):
    """Issue 42's run for the lock providers teams use on object stores: four writer processes and a compactor
    process racing on a merge-on-read table, under ZooKeeper (a real server), DynamoDB (moto's server) and the
    storage-based lock (conditional writes): every round's disjoint writes commit, overlapping ones commit or
    conflict, and `run` checks that the table holds every committed update (none lost)."""
    if lock == "zk":
        server = request.getfixturevalue("zookeeper_server")
        lock_options = {"hoodie.write.lock.zookeeper.url": server.url,
                        "hoodie.write.lock.zookeeper.lock_key": f"concurrent-{uuid.uuid4().hex[:8]}"}
    elif lock == "dynamodb":
        lock_options = _dynamodb_lock(request.getfixturevalue("s3_server"))
    else:
        lock_options = {}
    figures = run(4, 2, lock, mor=True, compactor=True, directory=str(tmp_path), spark=spark,
                  lock_options=lock_options)["figures"]
    assert figures["disjoint_commits"] == figures["disjoint_writes"] == 4
    assert figures["overlap_commits"] >= 1
    assert figures["overlap_commits"] + figures["overlap_conflicts"] == figures["overlap_writes"] == 4


def _dynamodb_lock(s3_server) -> dict:
    return {"hoodie.write.lock.dynamodb.endpoint_url": s3_server.url, "hoodie.write.lock.dynamodb.region": REGION,
            "hoodie.write.lock.dynamodb.table": f"locks_{uuid.uuid4().hex[:8]}", "hoodie.aws.access.key": ACCESS_KEY,
            "hoodie.aws.secret.key": SECRET_KEY}


@pytest.mark.parametrize("lock", ["dynamodb", "storage"])
def test_writes_commit_under_the_lease_based_locks(spark, tmp_path, s3_server, lock):
    """The DynamoDB and storage-based providers reached through a writer's options (their cross-process exclusion,
    lease expiry and unreachable service are tests/storage/transaction's; writer processes racing under a lock
    are the ZooKeeper, metastore and file-system runs above): each commit takes and releases the lock."""
    path = str(tmp_path / "table")
    lock_options = _dynamodb_lock(s3_server) if lock == "dynamodb" else {}
    opts = options(path, lock, mor=False, lock_options=lock_options)
    for round_no in (1, 2):
        spark.createDataFrame(batch(round_no, 0, 1), SCHEMA).write.format("hudi").options(**opts) \
            .mode("append").save(path)
    got = sorted(tuple(r) for r in spark.read.format("hudi").load(path).select(*COLUMNS).collect())
    want = {}
    for round_no in (1, 2):
        want.update({row[0]: row for row in batch(round_no, 0, 1)})
    assert got == sorted(want.values())
    if lock == "storage":
        assert (tmp_path / "table" / ".hoodie" / ".locks" / "table_lock.json").exists()
    else:
        import boto3

        tables = boto3.client("dynamodb", endpoint_url=s3_server.url, region_name=REGION,
                              aws_access_key_id=ACCESS_KEY, aws_secret_access_key=SECRET_KEY).list_tables()
        assert lock_options["hoodie.write.lock.dynamodb.table"] in tables["TableNames"]
