"""StorageBasedLockProvider (Hudi 1.1) on local files and on a real S3 endpoint (moto's server over HTTP): the lock
file is Hudi's JSON at .hoodie/.locks/table_lock.json; threads and processes exclude each other; a dead holder's
lock is taken over once its validity passes; a live holder's heartbeat keeps it; an unreachable store is a
prompt HoodieLockError naming the provider, the store and the table."""
from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import textwrap
import time

import pytest
from lock_checks import assert_exclusive

from storage.config import HoodieConfig
from storage.config import LockConfigKeys as LK
from storage.exception import HoodieLockError
from storage.io.storage import HoodieStorage
from storage.io.storage_options import StorageOptions
from storage.transaction.lock_provider import LockContext, create_lock_provider
from storage.transaction.storage_lock_provider import (
    CLASS_NAME,
    StorageBasedLockProvider,
)
from storage.transaction.transaction_manager import TransactionManager

VALIDITY_S, POLL_S = 2.0, 0.2


def _options(**extra) -> dict[str, str]:
    return {"hoodie.write.concurrency.mode": "optimistic_concurrency_control", LK.PROVIDER.key: CLASS_NAME,
            LK.STORAGE_VALIDITY_TIMEOUT_SECS.key: str(VALIDITY_S), LK.STORAGE_HEARTBEAT_POLL_SECS.key: str(POLL_S),
            LK.RETRY_WAIT_TIME_MS.key: "50", LK.WAIT_TIME_MS.key: "300", LK.CLIENT_NUM_RETRIES.key: "1",
            LK.CLIENT_RETRY_WAIT_TIME_MS.key: "50", **extra}


def _s3_options(endpoint_url: str) -> dict[str, str]:
    from s3_server import ACCESS_KEY, REGION, SECRET_KEY

    return {"fs.s3a.endpoint": endpoint_url, "fs.s3a.access.key": ACCESS_KEY, "fs.s3a.secret.key": SECRET_KEY,
            "fs.s3a.endpoint.region": REGION, "fs.s3a.path.style.access": "true",
            "fs.s3a.connection.establish.timeout": "1000", "fs.s3a.connection.timeout": "2000",
            "fs.s3a.attempts.maximum": "2"}


@pytest.fixture(params=["local", "s3"])
def table(request, tmp_path):
    """(base path, storage options) of a table on local disk or in a fresh bucket of the moto server."""
    if request.param == "local":
        (tmp_path / ".hoodie").mkdir()
        return str(tmp_path), {}
    server = request.getfixturevalue("s3_server")
    return f"s3a://{server.new_bucket()}/t", _s3_options(server.url)


def _storage(base: str, s3: dict) -> HoodieStorage:
    return HoodieStorage.for_path(base, StorageOptions.of(s3, use_env=False) if s3 else None)


def _provider(base: str, s3: dict, **extra) -> StorageBasedLockProvider:
    ctx = LockContext(base, f"{base}/.hoodie", _storage(base, s3), HoodieConfig.of(_options(**extra)), "t")
    provider = create_lock_provider(ctx)
    assert isinstance(provider, StorageBasedLockProvider)
    return provider


def _manager(base: str, s3: dict, **extra) -> TransactionManager:
    return TransactionManager(base, f"{base}/.hoodie", _storage(base, s3), HoodieConfig.of(_options(**extra)), "t")


def _read_lock_file(base: str, s3_server=None) -> dict:
    if base.startswith("s3a://"):
        bucket, key = base[len("s3a://"):].split("/", 1)
        body = s3_server.client().get_object(Bucket=bucket, Key=f"{key}/.hoodie/.locks/table_lock.json")["Body"]
        return json.loads(body.read())
    with open(os.path.join(base, ".hoodie", ".locks", "table_lock.json")) as f:
        return json.load(f)


def test_threads_exclude_each_other(table):
    base, s3 = table
    managers = [_manager(base, s3, **{LK.WAIT_TIME_MS.key: "20000"}) for _ in range(3)]
    assert_exclusive(managers, rounds=8)


def test_lock_file_is_hudis_json_and_unlock_marks_it_expired(table, request):
    base, s3 = table
    s3_server = request.getfixturevalue("s3_server") if s3 else None
    provider = _provider(base, s3)
    before = time.time() * 1000
    assert provider.try_lock(1)
    doc = _read_lock_file(base, s3_server)
    assert set(doc) == {"expired", "validUntil", "owner"} and doc["expired"] is False
    assert before + VALIDITY_S * 1000 - 100 <= doc["validUntil"] <= time.time() * 1000 + VALIDITY_S * 1000
    assert doc["owner"] == provider.owner
    provider.unlock()
    assert _read_lock_file(base, s3_server)["expired"] is True
    assert _provider(base, s3).try_lock(0.5)  # an expired-marked lock is free


def test_timeout_names_the_lock_and_the_keys(table):
    base, s3 = table
    holder, waiter = _manager(base, s3), _manager(base, s3)
    with holder.transaction():
        started = time.monotonic()
        with pytest.raises(HoodieLockError, match=r"could not acquire storage lock .*/\.hoodie/\.locks/table_lock\.json"
                                                  r".*hoodie.write.lock.wait_time_ms=300.*held by owner"):
            with waiter.transaction():
                pass
        assert time.monotonic() - started < 5
    with waiter.transaction():
        pass


def test_heartbeat_keeps_a_long_holders_lock(table):
    base, s3 = table
    holder, waiter = _provider(base, s3), _provider(base, s3)
    assert holder.try_lock(1)
    assert not waiter.try_lock(VALIDITY_S * 1.5)  # past the validity: only renewals kept it
    assert not holder.lost
    holder.unlock()
    assert waiter.try_lock(1)
    waiter.unlock()


def _hold_in_child(base: str, hold_s: float) -> subprocess.Popen:
    script = textwrap.dedent(f"""
        import sys, time
        sys.path.insert(0, {os.getcwd()!r})
        from storage.config import HoodieConfig
        from storage.io.storage import HoodieStorage
        from storage.transaction.lock_provider import LockContext
        from storage.transaction.storage_lock_provider import StorageBasedLockProvider
        ctx = LockContext({base!r}, {base + '/.hoodie'!r}, HoodieStorage.for_path({base!r}),
                          HoodieConfig.of({_options()!r}), "t")
        provider = StorageBasedLockProvider(ctx)
        assert provider.try_lock(10)
        print("locked", flush=True)
        time.sleep({hold_s})
        provider.unlock()
    """)
    proc = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True)
    assert proc.stdout.readline().strip() == "locked"
    return proc


def test_another_process_holds_then_releases(tmp_path):
    (tmp_path / ".hoodie").mkdir()
    child = _hold_in_child(str(tmp_path), 1.0)
    provider = _provider(str(tmp_path), {})
    assert not provider.try_lock(0.2)
    assert f":{child.pid}" in provider.owner_info()
    assert provider.try_lock(10)
    assert child.wait(10) == 0
    provider.unlock()


def test_a_dead_holders_lock_is_taken_over_after_its_validity(tmp_path):
    (tmp_path / ".hoodie").mkdir()
    child = _hold_in_child(str(tmp_path), 60)
    child.send_signal(signal.SIGKILL)
    child.wait(10)
    killed = time.monotonic()
    provider = _provider(str(tmp_path), {})
    assert not provider.try_lock(0.2)  # still valid: its last renewal is recent
    assert provider.try_lock(VALIDITY_S + 3)
    assert VALIDITY_S * 0.5 < time.monotonic() - killed < VALIDITY_S + 3
    assert _read_lock_file(str(tmp_path))["owner"] == provider.owner
    provider.unlock()


def test_validity_must_cover_ten_heartbeats(tmp_path):
    with pytest.raises(HoodieLockError, match=r"validity.timeout.secs=1 must be at least 10 times "
                                              r"hoodie.write.lock.storage.heartbeat.poll.secs=0.5"):
        _provider(str(tmp_path), {}, **{LK.STORAGE_VALIDITY_TIMEOUT_SECS.key: "1",
                                        LK.STORAGE_HEARTBEAT_POLL_SECS.key: "0.5"})


def test_unreachable_s3_is_a_prompt_clear_error():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    provider = _provider("s3a://nowhere/t", _s3_options(f"http://127.0.0.1:{port}"))
    started = time.monotonic()
    with pytest.raises(HoodieLockError, match=rf"S3 endpoint http://127.0.0.1:{port} .*cannot be reached for the "
                                              r"lock of table s3a://nowhere/t \(hoodie.write.lock.provider="):
        provider.try_lock(30)
    assert time.monotonic() - started < 10
