"""A write whose lock service (a real ZooKeeper server, a moto server as DynamoDB) dies during the write:

- killed after the data files are written, before the commit takes the lock: the write fails with the provider's
  clear HoodieLockError and leaves the table as it was (no completed instant, no data file of it; readers see
  the previous commit), and once the service is back the next write commits;
- killed while the commit holds the lock: the commit was decided under the lock and completes; the failed
  release is a warning, not an error (an error for a completed commit invites a retry that inserts twice).

The providers' own behaviour (exclusion, expiry, unreachable services) is tested beside this file."""
from __future__ import annotations

import contextlib
import logging
import os
import uuid

import pytest
from s3_server import ACCESS_KEY, REGION, SECRET_KEY, start_moto
from zookeeper_server import own_zookeeper_server_fixture  # noqa: F401 - fixture

from storage.config import LockConfigKeys as LK
from storage.exception import HoodieLockError
from storage.table.meta_client import HoodieTableMetaClient
from storage.transaction import dynamodb_lock_provider, zookeeper_lock_provider
from storage.transaction.transaction_manager import TransactionManager

pytestmark = pytest.mark.multiprocess

COLUMNS = ["id", "v", "ts"]


def _zookeeper(server) -> dict[str, str]:
    return {LK.PROVIDER.key: zookeeper_lock_provider.CLASS_NAME, LK.ZK_URL.key: server.url,
            LK.ZK_BASE_PATH.key: "/hudi/locks", LK.ZK_LOCK_KEY.key: f"t-{uuid.uuid4().hex[:8]}",
            LK.ZK_SESSION_TIMEOUT_MS.key: "1500", LK.ZK_CONNECTION_TIMEOUT_MS.key: "1000"}


def _dynamodb(url: str) -> dict[str, str]:
    return {LK.PROVIDER.key: dynamodb_lock_provider.CLASS_NAME, LK.DYNAMODB_ENDPOINT_URL.key: url,
            LK.DYNAMODB_REGION.key: REGION, LK.DYNAMODB_TABLE.key: f"locks_{uuid.uuid4().hex[:8]}",
            LK.AWS_ACCESS_KEY.key: ACCESS_KEY, LK.AWS_SECRET_KEY.key: SECRET_KEY,
            LK.CLIENT_NUM_RETRIES.key: "0", LK.CLIENT_RETRY_WAIT_TIME_MS.key: "50"}


class _ZookeeperService:
    def __init__(self, server):
        self.server = server

    def options(self) -> dict[str, str]:
        return _zookeeper(self.server)

    def kill(self) -> None:
        self.server.kill()

    def restart(self) -> None:
        self.server.restart()


class _DynamoDBService:
    """A moto server of this test's own (the session's serves other tests)."""

    def __init__(self, directory):
        self.directory = directory
        self.proc, self.endpoint, self.table = None, None, f"locks_{uuid.uuid4().hex[:8]}"
        self.restart()

    def options(self) -> dict[str, str]:
        return {**_dynamodb(self.endpoint.url), LK.DYNAMODB_TABLE.key: self.table}

    def kill(self) -> None:
        self.proc.kill()
        self.proc.wait(10)

    def restart(self) -> None:  # a new server: moto keeps nothing, the provider creates its lock table again
        self.proc, self.endpoint = start_moto(os.path.join(self.directory, "moto.log"))

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.kill()


@pytest.fixture(params=["zookeeper", "dynamodb"])
def service(request, tmp_path):
    if request.param == "zookeeper":
        yield _ZookeeperService(request.getfixturevalue("own_zookeeper_server"))
        return
    dynamo = _DynamoDBService(str(tmp_path))
    try:
        yield dynamo
    finally:
        dynamo.stop()


def _write(spark, path: str, rows: list[tuple], lock: dict[str, str]) -> None:
    opts = {"hoodie.table.name": "lost_lock", "hoodie.datasource.write.recordkey.field": "id",
            "hoodie.datasource.write.precombine.field": "ts", "hoodie.datasource.write.partitionpath.field": "",
            "hoodie.datasource.write.keygenerator.class": "org.apache.hudi.keygen.NonpartitionedKeyGenerator",
            "hoodie.write.concurrency.mode": "optimistic_concurrency_control", "hoodie.metadata.enable": "false",
            LK.WAIT_TIME_MS.key: "1000", **lock}
    spark.createDataFrame(rows, "id long, v string, ts long").write.format("hudi").options(**opts) \
        .mode("append").save(path)


def _rows(spark, path: str) -> list[tuple]:
    return sorted(tuple(r) for r in spark.read.format("hudi").load(path).select(*COLUMNS).collect())


def _kill_at_commit(monkeypatch, service, holding: bool) -> None:
    """Kill the service when the write's commit transaction starts: before it takes the lock, or just after."""
    original = TransactionManager.transaction

    @contextlib.contextmanager
    def transaction(self, purpose=""):
        if purpose != "commit":
            with original(self, purpose):
                yield
            return
        if not holding:
            service.kill()
        with original(self, purpose):
            if holding:
                service.kill()
            yield

    monkeypatch.setattr(TransactionManager, "transaction", transaction)


def test_lock_service_killed_before_and_during_a_commit(spark, tmp_path, service, monkeypatch, caplog):
    path = str(tmp_path / "table")
    _write(spark, path, [(1, "a", 1), (2, "b", 1)], service.options())
    files_before = sorted(p for p in os.listdir(path) if p.endswith(".parquet"))

    # killed before the commit takes the lock: a clear error, and the table as it was
    with monkeypatch.context() as patch:
        _kill_at_commit(patch, service, holding=False)
        with pytest.raises(HoodieLockError, match="unreachable"):
            _write(spark, path, [(2, "B", 2), (3, "c", 2)], service.options())
    meta = HoodieTableMetaClient.load(path)
    assert len(meta.timeline.completed()) == 1
    assert not meta.timeline.pending()  # the failed write removed its instants
    assert sorted(p for p in os.listdir(path) if p.endswith(".parquet")) == files_before
    assert _rows(spark, path) == [(1, "a", 1), (2, "b", 1)]

    # back again: the next write commits
    service.restart()
    _write(spark, path, [(2, "B", 2), (3, "c", 2)], service.options())
    assert _rows(spark, path) == [(1, "a", 1), (2, "B", 2), (3, "c", 2)]

    # killed while the commit holds the lock: the commit completes; the release fails with a warning, and the
    # inline clean after the commit cannot take the lock: its error says the rows are committed
    with monkeypatch.context() as patch, caplog.at_level(logging.WARNING, "storage.transaction"):
        _kill_at_commit(patch, service, holding=True)
        with pytest.raises(HoodieLockError, match="unreachable") as failed:
            _write(spark, path, [(1, "A", 3), (4, "d", 3)], service.options())
    assert any("completed before this table service failed" in note for note in failed.value.__notes__)
    assert any(r.name.startswith("storage.transaction") and ("releasing" in r.getMessage() or "at unlock"
                                                               in r.getMessage()) for r in caplog.records), caplog.text
    meta = HoodieTableMetaClient.load(path)
    assert len(meta.timeline.completed()) == 3 and not meta.timeline.pending()
    assert _rows(spark, path) == [(1, "A", 3), (2, "B", 2), (3, "c", 2), (4, "d", 3)]
