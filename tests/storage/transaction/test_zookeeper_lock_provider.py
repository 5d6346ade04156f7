"""ZookeeperBasedLockProvider against a real ZooKeeper server (Debian's package, tests/zookeeper_server.py):
threads and processes exclude each other, a holder that dies loses the lock when its session expires, a live
holder keeps it however long it holds it, and an unreachable or killed server is a prompt HoodieLockError."""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
import uuid

import pytest
from lock_checks import assert_exclusive
from zookeeper_server import own_zookeeper_server_fixture, zookeeper_server_fixture  # noqa: F401 - fixtures

from storage.config import HoodieConfig
from storage.config import LockConfigKeys as LK
from storage.exception import HoodieLockError
from storage.io.storage import HoodieStorage
from storage.transaction.lock_provider import LockContext, create_lock_provider
from storage.transaction.transaction_manager import TransactionManager
from storage.transaction.zookeeper_lock_provider import (
    CLASS_NAME,
    ZookeeperBasedLockProvider,
)

SESSION_MS = 1500


def _options(url: str, key: str, **extra) -> dict[str, str]:
    return {"hoodie.write.concurrency.mode": "optimistic_concurrency_control", LK.PROVIDER.key: CLASS_NAME,
            LK.ZK_URL.key: url, LK.ZK_BASE_PATH.key: "/hudi/locks", LK.ZK_LOCK_KEY.key: key,
            LK.ZK_SESSION_TIMEOUT_MS.key: str(SESSION_MS), LK.ZK_CONNECTION_TIMEOUT_MS.key: "5000",
            LK.WAIT_TIME_MS.key: "300", LK.CLIENT_NUM_RETRIES.key: "1", LK.CLIENT_RETRY_WAIT_TIME_MS.key: "50",
            LK.NUM_RETRIES.key: "2", LK.RETRY_WAIT_TIME_MS.key: "100", **extra}


def _context(tmp_path, options: dict) -> LockContext:
    meta = tmp_path / ".hoodie"
    meta.mkdir(exist_ok=True)
    return LockContext(str(tmp_path), str(meta), HoodieStorage.for_path(str(tmp_path)), HoodieConfig.of(options), "t")


def _provider(tmp_path, options: dict) -> ZookeeperBasedLockProvider:
    provider = create_lock_provider(_context(tmp_path, options))
    assert isinstance(provider, ZookeeperBasedLockProvider)
    return provider


def _manager(tmp_path, options: dict) -> TransactionManager:
    meta = tmp_path / ".hoodie"
    meta.mkdir(exist_ok=True)
    return TransactionManager(str(tmp_path), str(meta), HoodieStorage.for_path(str(tmp_path)),
                              HoodieConfig.of(options), "t")


def _key() -> str:
    return f"t-{uuid.uuid4().hex[:8]}"


def test_threads_exclude_each_other(tmp_path, zookeeper_server):
    options = _options(zookeeper_server.url, _key(), **{LK.WAIT_TIME_MS.key: "10000"})
    managers = [_manager(tmp_path, options) for _ in range(3)]
    try:
        assert_exclusive(managers)
    finally:
        for m in managers:
            m.close()


def test_timeout_names_the_lock_and_the_keys(tmp_path, zookeeper_server):
    key = _key()
    holder, waiter = _manager(tmp_path, _options(zookeeper_server.url, key)), _manager(tmp_path, _options(
        zookeeper_server.url, key))
    try:
        with holder.transaction():
            started = time.monotonic()
            with pytest.raises(HoodieLockError, match=rf"could not acquire ZooKeeper lock /hudi/locks/{key} at "
                                                      rf"{zookeeper_server.url}.*hoodie.write.lock.wait_time_ms=300"
                                                      r".*held by .*pid"):
                with waiter.transaction():
                    pass
            assert time.monotonic() - started < 5
        with waiter.transaction():  # free again
            pass
    finally:
        holder.close()
        waiter.close()


def test_lock_key_defaults_to_the_table_name_and_missing_keys_are_named(tmp_path, zookeeper_server):
    options = _options(zookeeper_server.url, "")
    options.pop(LK.ZK_LOCK_KEY.key)
    provider = _provider(tmp_path, options)
    assert provider.settings.lock_path == "/hudi/locks/t"
    options.pop(LK.ZK_BASE_PATH.key)
    with pytest.raises(HoodieLockError, match=r"needs hoodie.write.lock.zookeeper.base_path"):
        _provider(tmp_path, options)
    bare = _options("127.0.0.1", _key(), **{LK.ZK_PORT.key: str(zookeeper_server.port)})
    assert _provider(tmp_path, bare).settings.hosts == zookeeper_server.url  # zookeeper.port fills the host


def _hold_in_child(tmp_path, options: dict, hold_s: float) -> subprocess.Popen:
    """A child process that takes the lock, prints `locked`, holds it `hold_s` and exits without unlocking
    (unless killed before)."""
    script = textwrap.dedent(f"""
        import sys, time
        sys.path.insert(0, {os.getcwd()!r})
        from storage.config import HoodieConfig
        from storage.io.storage import HoodieStorage
        from storage.transaction.lock_provider import LockContext, create_lock_provider
        from storage.transaction import zookeeper_lock_provider  # registers
        ctx = LockContext({str(tmp_path)!r}, {str(tmp_path / '.hoodie')!r}, HoodieStorage.for_path({str(tmp_path)!r}),
                          HoodieConfig.of({options!r}), "t")
        provider = create_lock_provider(ctx)
        assert provider.try_lock(10)
        print("locked", flush=True)
        time.sleep({hold_s})
        provider.unlock()
        provider.close()
    """)
    proc = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True)
    assert proc.stdout.readline().strip() == "locked"
    return proc


def test_another_process_holds_then_releases(tmp_path, zookeeper_server):
    options = _options(zookeeper_server.url, _key())
    (tmp_path / ".hoodie").mkdir()
    child = _hold_in_child(tmp_path, options, 1.5)
    provider = _provider(tmp_path, options)
    try:
        assert not provider.try_lock(0.3)
        assert "pid" in provider.owner_info() and str(child.pid) in provider.owner_info()
        assert provider.try_lock(10)  # granted once the child unlocks
        assert child.wait(10) == 0
    finally:
        provider.close()


def test_a_dead_holder_loses_the_lock_with_its_session(tmp_path, zookeeper_server):
    options = _options(zookeeper_server.url, _key())
    (tmp_path / ".hoodie").mkdir()
    child = _hold_in_child(tmp_path, options, 60)
    provider = _provider(tmp_path, options)
    try:
        child.send_signal(signal.SIGKILL)
        child.wait(10)
        killed = time.monotonic()
        assert not provider.try_lock(0.1)  # the session outlives the process for up to session_timeout_ms
        assert provider.try_lock(SESSION_MS / 1000 * 3 + 2)
        assert time.monotonic() - killed < SESSION_MS / 1000 * 3 + 2
    finally:
        provider.close()


def test_a_live_holder_keeps_the_lock_longer_than_its_session_timeout(tmp_path, zookeeper_server):
    options = _options(zookeeper_server.url, _key())
    holder, waiter = _provider(tmp_path, options), _provider(tmp_path, options)
    try:
        assert holder.try_lock(5)
        assert not waiter.try_lock(SESSION_MS / 1000 * 2)  # the client's pings keep the session alive
        assert not holder.lost
        holder.unlock()
        assert waiter.try_lock(5)
    finally:
        holder.close()
        waiter.close()


def test_unreachable_server_is_a_prompt_clear_error(tmp_path):
    with __import__("socket").socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # nothing listens there once closed
    provider = _provider(tmp_path, _options(f"127.0.0.1:{port}", "t", **{LK.ZK_CONNECTION_TIMEOUT_MS.key: "1000"}))
    started = time.monotonic()
    with pytest.raises(HoodieLockError, match=rf"ZooKeeper at 127.0.0.1:{port} \(hoodie.write.lock.zookeeper.url\) "
                                              rf"is unreachable .*table {tmp_path}.*connection_timeout_ms=1000"):
        provider.try_lock(30)
    assert time.monotonic() - started < 5
    provider.close()


def test_server_killed_mid_run(tmp_path, own_zookeeper_server):
    server = own_zookeeper_server
    options = _options(server.url, _key(), **{LK.ZK_CONNECTION_TIMEOUT_MS.key: "1500"})
    holder, waiter = _provider(tmp_path, options), _provider(tmp_path, options)
    try:
        assert holder.try_lock(5)
        server.kill()
        started = time.monotonic()
        with pytest.raises(HoodieLockError, match=rf"ZooKeeper at {server.url} .*unreachable"):
            waiter.try_lock(30)
        assert time.monotonic() - started < 4  # the connection timeout, not the 30 s asked for
        server.restart()
        # the restarted server gives the holder's session one more session timeout to come back: the holder
        # either reconnects in time and still holds the lock, or its session expires, ZooKeeper drops its znode
        # and the holder is told; never both
        deadline = time.monotonic() + 15
        while not (holder.lost or holder.client.connected) and time.monotonic() < deadline:
            time.sleep(0.05)
        if holder.lost:
            assert waiter.try_lock(SESSION_MS / 1000 * 3 + 5)
            holder.unlock()  # nothing left to release: no error
        else:
            assert holder.client.connected
            assert not waiter.try_lock(SESSION_MS / 1000)
            holder.unlock()
            assert waiter.try_lock(5)
    finally:
        holder.close()
        waiter.close()


def test_znodes_follow_curators_naming_and_order(tmp_path, zookeeper_server):
    """A Java Hudi writer (Curator's InterProcessMutex) names its contender `_c_<uuid>-lock-<seq>`: such a node
    with the lowest sequence holds the lock against this provider, and ours carry the `-lock-` marker Curator
    sorts by."""
    from kazoo.client import KazooClient

    key = _key()
    raw = KazooClient(zookeeper_server.url)
    raw.start(timeout=5)
    try:
        java = raw.create(f"/hudi/locks/{key}/_c_8f14e45f-ceea-467f-a0e6-1d1d6c1b2b66-lock-", b"10.0.0.1",
                          ephemeral=True, sequence=True, makepath=True)
        provider = _provider(tmp_path, _options(zookeeper_server.url, key))
        try:
            assert not provider.try_lock(0.3)  # the Curator contender came first
            raw.delete(java)
            assert provider.try_lock(5)
            ours = raw.get_children(f"/hudi/locks/{key}")
            assert len(ours) == 1 and "-lock-" in ours[0] and ours[0][-10:].isdigit()
        finally:
            provider.close()
    finally:
        raw.stop()
        raw.close()
