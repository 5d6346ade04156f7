"""DynamoDBBasedLockProvider against a real DynamoDB endpoint (moto's server over HTTP, tests/s3_server.py): the
lock table is created as configured; threads and processes exclude each other; a lease whose holder died is taken
over after one lease duration; a live holder's heartbeat keeps it; an unreachable endpoint is a prompt
HoodieLockError naming the provider, the endpoint and the tables."""
from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import textwrap
import time
import uuid

import pytest
from lock_checks import assert_exclusive
from s3_server import ACCESS_KEY, REGION, SECRET_KEY

from storage.config import HoodieConfig
from storage.config import LockConfigKeys as LK
from storage.exception import HoodieLockError
from storage.io.storage import HoodieStorage
from storage.transaction.dynamodb_lock_provider import (
    CLASS_NAME,
    DynamoDBBasedLockProvider,
)
from storage.transaction.lock_provider import LockContext, create_lock_provider
from storage.transaction.transaction_manager import TransactionManager

LEASE_MS = 1500


@pytest.fixture
def lock_options(s3_server) -> dict[str, str]:
    """Options of a lock in a lock table of this test's own on the moto server."""
    return {"hoodie.write.concurrency.mode": "optimistic_concurrency_control", LK.PROVIDER.key: CLASS_NAME,
            LK.DYNAMODB_ENDPOINT_URL.key: s3_server.url, LK.DYNAMODB_REGION.key: REGION,
            LK.DYNAMODB_TABLE.key: f"locks_{uuid.uuid4().hex[:8]}", LK.AWS_ACCESS_KEY.key: ACCESS_KEY,
            LK.AWS_SECRET_KEY.key: SECRET_KEY, LK.WAIT_TIME_MS.key: str(LEASE_MS), LK.RETRY_WAIT_TIME_MS.key: "50",
            LK.CLIENT_NUM_RETRIES.key: "0", LK.CLIENT_RETRY_WAIT_TIME_MS.key: "50"}


def _context(tmp_path, options: dict) -> LockContext:
    return LockContext(str(tmp_path), str(tmp_path / ".hoodie"), HoodieStorage.for_path(str(tmp_path)),
                       HoodieConfig.of(options), "t")


def _provider(tmp_path, options: dict) -> DynamoDBBasedLockProvider:
    provider = create_lock_provider(_context(tmp_path, options))
    assert isinstance(provider, DynamoDBBasedLockProvider)
    return provider


def _manager(tmp_path, options: dict) -> TransactionManager:
    return TransactionManager(str(tmp_path), str(tmp_path / ".hoodie"), HoodieStorage.for_path(str(tmp_path)),
                              HoodieConfig.of(options), "t")


def _dynamodb(s3_server):
    import boto3

    return boto3.client("dynamodb", endpoint_url=s3_server.url, region_name=REGION, aws_access_key_id=ACCESS_KEY,
                        aws_secret_access_key=SECRET_KEY)


def test_threads_exclude_each_other(tmp_path, lock_options):
    options = {**lock_options, LK.WAIT_TIME_MS.key: "10000"}  # a long lease: waiters wait, never take over
    assert_exclusive([_manager(tmp_path, options) for _ in range(3)], rounds=8)


def test_lock_table_is_created_as_configured(tmp_path, lock_options, s3_server):
    options = {**lock_options, LK.DYNAMODB_BILLING_MODE.key: "provisioned", LK.DYNAMODB_READ_CAPACITY.key: "7",
               LK.DYNAMODB_WRITE_CAPACITY.key: "3"}
    provider = _provider(tmp_path, options)
    assert provider.try_lock(1)
    table = _dynamodb(s3_server).describe_table(TableName=options[LK.DYNAMODB_TABLE.key])["Table"]
    assert table["KeySchema"] == [{"AttributeName": "key", "KeyType": "HASH"}]
    assert table["ProvisionedThroughput"]["ReadCapacityUnits"] == 7
    assert table["ProvisionedThroughput"]["WriteCapacityUnits"] == 3
    item = _dynamodb(s3_server).get_item(TableName=options[LK.DYNAMODB_TABLE.key], Key={"key": {"S": "t"}})["Item"]
    assert item["ownerName"]["S"] == provider.owner and item["leaseDuration"]["S"] == str(LEASE_MS)
    provider.unlock()
    assert "Item" not in _dynamodb(s3_server).get_item(TableName=options[LK.DYNAMODB_TABLE.key],
                                                       Key={"key": {"S": "t"}})


def test_timeout_names_the_lock_and_the_keys(tmp_path, lock_options):
    options = {**lock_options, LK.DYNAMODB_PARTITION_KEY.key: "orders"}
    holder, waiter = _manager(tmp_path, options), _manager(tmp_path, {**options, LK.WAIT_TIME_MS.key: "300"})
    with holder.transaction():
        started = time.monotonic()
        with pytest.raises(HoodieLockError, match=rf"could not acquire DynamoDB lock {options[LK.DYNAMODB_TABLE.key]}"
                                                  r"\[key=orders\] at http://127.0.0.1.*wait_time_ms=300"
                                                  r".*held by owner"):
            with waiter.transaction():
                pass
        assert time.monotonic() - started < 5
    with waiter.transaction():
        pass


def test_heartbeat_keeps_a_long_holders_lease(tmp_path, lock_options):
    holder, waiter = _provider(tmp_path, lock_options), _provider(tmp_path, lock_options)
    assert holder.try_lock(1)
    assert not waiter.try_lock(LEASE_MS / 1000 * 2)  # two leases long: only heartbeats kept it
    assert not holder.lost
    holder.unlock()
    assert waiter.try_lock(1)
    waiter.unlock()


def _hold_in_child(tmp_path, options: dict, hold_s: float) -> subprocess.Popen:
    script = textwrap.dedent(f"""
        import sys, time
        sys.path.insert(0, {os.getcwd()!r})
        from storage.config import HoodieConfig
        from storage.io.storage import HoodieStorage
        from storage.transaction.lock_provider import LockContext
        from storage.transaction.dynamodb_lock_provider import DynamoDBBasedLockProvider
        ctx = LockContext({str(tmp_path)!r}, {str(tmp_path / '.hoodie')!r}, HoodieStorage.for_path({str(tmp_path)!r}),
                          HoodieConfig.of({options!r}), "t")
        provider = DynamoDBBasedLockProvider(ctx)
        assert provider.try_lock(10)
        print("locked", flush=True)
        time.sleep({hold_s})
        provider.unlock()
    """)
    proc = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True)
    assert proc.stdout.readline().strip() == "locked"
    return proc


def test_another_process_holds_then_releases(tmp_path, lock_options):
    child = _hold_in_child(tmp_path, lock_options, 1.0)
    provider = _provider(tmp_path, lock_options)
    assert not provider.try_lock(0.2)
    assert f":{child.pid}" in provider.owner_info()
    assert provider.try_lock(10)
    assert child.wait(10) == 0
    provider.unlock()


def test_a_dead_holders_lease_is_taken_over_after_one_lease(tmp_path, lock_options):
    child = _hold_in_child(tmp_path, lock_options, 60)
    child.send_signal(signal.SIGKILL)
    child.wait(10)
    provider = _provider(tmp_path, lock_options)
    started = time.monotonic()
    assert provider.try_lock(LEASE_MS / 1000 * 3)
    # the waiter must watch the record version stand still for a whole lease before taking it over
    assert LEASE_MS / 1000 <= time.monotonic() - started < LEASE_MS / 1000 * 3
    provider.unlock()


def test_unreachable_endpoint_is_a_prompt_clear_error(tmp_path, lock_options):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    provider = _provider(tmp_path, {**lock_options, LK.DYNAMODB_ENDPOINT_URL.key: f"http://127.0.0.1:{port}"})
    started = time.monotonic()
    with pytest.raises(HoodieLockError, match=rf"DynamoDB at http://127.0.0.1:{port} "
                                              r"\(hoodie.write.lock.dynamodb.endpoint_url\), lock table locks_\w+ "
                                              rf"\(hoodie.write.lock.dynamodb.table\), partition key t, for table "
                                              rf"{tmp_path} .*unreachable"):
        provider.try_lock(30)
    assert time.monotonic() - started < 10


def test_endpoint_killed_mid_run(tmp_path, lock_options):
    from s3_server import start_moto

    proc, endpoint = start_moto(str(tmp_path / "moto.log"))  # a server of this test's own, to kill
    try:
        options = {**lock_options, LK.DYNAMODB_ENDPOINT_URL.key: endpoint.url}
        holder, waiter = _provider(tmp_path, options), _provider(tmp_path, options)
        assert holder.try_lock(1)
        assert not waiter.try_lock(0.1)
    finally:
        proc.kill()
        proc.wait(10)
    started = time.monotonic()
    with pytest.raises(HoodieLockError, match=rf"DynamoDB at {endpoint.url} .*unreachable"):
        waiter.try_lock(30)
    with pytest.raises(HoodieLockError, match=rf"DynamoDB at {endpoint.url} .*unreachable"):
        holder.unlock()  # the holder learns that it could not release: its lease lapses on its own
    assert time.monotonic() - started < 15
