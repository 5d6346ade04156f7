"""Lock providers really exclude each other: threads (in-process), processes (file system); a lock that is
never free fails with a HoodieLockError naming the lock, its holder and the keys to tune."""
from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import time

import pytest
from lock_contention import count_overlaps

from storage.config import HoodieConfig
from storage.config import LockConfigKeys as LK
from storage.exception import HoodieLockError
from storage.io.storage import HoodieStorage
from storage.transaction.file_system_lock_provider import FileSystemBasedLockProvider
from storage.transaction.lock_provider import LockContext, create_lock_provider, registered_lock_providers
from storage.transaction.transaction_manager import TransactionManager

FS = "org.apache.hudi.client.transaction.lock.FileSystemBasedLockProvider"
IN_PROCESS = "org.apache.hudi.client.transaction.lock.InProcessLockProvider"
OCC = {"hoodie.write.concurrency.mode": "optimistic_concurrency_control"}
FAST = {LK.WAIT_TIME_MS.key: "200", LK.CLIENT_NUM_RETRIES.key: "1", LK.CLIENT_RETRY_WAIT_TIME_MS.key: "50"}


def _manager(tmp_path, provider: str, **extra) -> TransactionManager:
    meta = tmp_path / ".hoodie"
    meta.mkdir(exist_ok=True)
    config = HoodieConfig.of({**OCC, **FAST, LK.PROVIDER.key: provider, **extra})
    return TransactionManager(str(tmp_path), str(meta), HoodieStorage.for_path(str(tmp_path)), config, "t")


@pytest.mark.parametrize("provider", [IN_PROCESS, FS])
def test_providers_exclude_concurrent_holders(tmp_path, provider):
    slow = {LK.WAIT_TIME_MS.key: "10000"}
    assert count_overlaps([_manager(tmp_path, provider, **slow) for _ in range(3)]) == 0
    assert not (tmp_path / ".hoodie" / "lock").exists()  # released


@pytest.mark.parametrize("provider", [IN_PROCESS, FS])
def test_timeout_names_the_lock_and_the_keys(tmp_path, provider):
    holder, waiter = _manager(tmp_path, provider), _manager(tmp_path, provider)
    with holder.transaction():
        started = time.monotonic()
        with pytest.raises(HoodieLockError, match=r"could not acquire .*hoodie.write.lock.wait_time_ms=200"):
            with waiter.transaction():
                pass
        assert time.monotonic() - started < 5
    with waiter.transaction():  # free again
        pass


def test_file_system_lock_excludes_another_process(tmp_path):
    """A child process holds the lock file; this process cannot take it until the child releases it."""
    (tmp_path / ".hoodie").mkdir()
    script = textwrap.dedent(f"""
        import sys, time
        from storage.config import HoodieConfig
        from storage.io.storage import HoodieStorage
        from storage.transaction.transaction_manager import TransactionManager
        cfg = HoodieConfig.of({{"hoodie.write.concurrency.mode": "optimistic_concurrency_control",
                               "hoodie.write.lock.provider": "{FS}"}})
        m = TransactionManager({str(tmp_path)!r}, {str(tmp_path / '.hoodie')!r}, HoodieStorage.for_path("/"), cfg)
        with m.transaction():
            print("locked", flush=True)
            time.sleep(1.5)
    """)
    child = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, env=os.environ.copy())
    assert child.stdout.readline().strip() == b"locked"
    with pytest.raises(HoodieLockError, match="held by .*\"pid\": %d" % child.pid):
        with _manager(tmp_path, FS).transaction():
            pass
    patient = _manager(tmp_path, FS, **{LK.WAIT_TIME_MS.key: "20000"})
    with patient.transaction():
        assert child.wait(30) == 0


def test_file_system_lock_expiry_and_path(tmp_path):
    lock_dir = tmp_path / "locks"
    ctx = LockContext(str(tmp_path), str(tmp_path / ".hoodie"), HoodieStorage.for_path("/"),
                      HoodieConfig.of({LK.FILESYSTEM_PATH.key: str(lock_dir), LK.FILESYSTEM_EXPIRE_MINUTES.key: "1"}))
    first, second = FileSystemBasedLockProvider(ctx), FileSystemBasedLockProvider(ctx)
    assert first.try_lock(0) and (lock_dir / "lock").exists()
    assert not second.try_lock(0.1)
    old = time.time() - 120  # the holder died two minutes ago
    os.utime(lock_dir / "lock", (old, old))
    assert second.try_lock(0)
    first.unlock()  # the expired owner never removes the new holder's lock
    assert (lock_dir / "lock").exists()
    second.unlock()
    assert not (lock_dir / "lock").exists()


def test_unknown_provider_and_registry(tmp_path):
    assert {IN_PROCESS, FS} <= set(registered_lock_providers())
    ctx = LockContext(str(tmp_path), str(tmp_path), HoodieStorage.for_path("/"),
                      HoodieConfig.of({LK.PROVIDER.key: "org.apache.hudi.client.transaction.lock.NoSuchLockProvider"}))
    with pytest.raises(HoodieLockError, match="NoSuchLockProvider.*not available.*FileSystemBasedLockProvider"):
        create_lock_provider(ctx)
    simple = LockContext(str(tmp_path), str(tmp_path), HoodieStorage.for_path("/"),
                         HoodieConfig.of({LK.PROVIDER.key: "InProcessLockProvider"}))
    assert create_lock_provider(simple).try_lock(0)
