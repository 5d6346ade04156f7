"""Hudi's HiveMetastoreBasedLockProvider against the real embedded metastore: the lock excludes a second
holder (another client, as another process would be), a queued request is withdrawn on timeout, and the
transaction manager picks the provider by Hudi's class name."""
from __future__ import annotations


import pytest
from lock_contention import count_overlaps

import catalog  # noqa: F401 - registers the provider
from catalog.hive_metastore_lock_provider import CLASS_NAME, HiveMetastoreBasedLockProvider
from storage.config import HoodieConfig
from storage.config import LockConfigKeys as LK
from storage.exception import HoodieLockError
from storage.io.storage import HoodieStorage
from storage.transaction.lock_provider import LockContext
from storage.transaction.transaction_manager import TransactionManager


def _context(tmp_path, uri, table="locked_t", **extra) -> LockContext:
    config = HoodieConfig.of({"hoodie.write.concurrency.mode": "optimistic_concurrency_control",
                              LK.PROVIDER.key: CLASS_NAME, LK.HIVE_METASTORE_URIS.key: uri,
                              LK.HIVE_TABLE.key: table, LK.WAIT_TIME_MS.key: "300",
                              LK.CLIENT_NUM_RETRIES.key: "1", LK.CLIENT_RETRY_WAIT_TIME_MS.key: "50", **extra})
    return LockContext(str(tmp_path), str(tmp_path / ".hoodie"), HoodieStorage.for_path("/"), config, "t")


def test_metastore_lock_excludes_and_releases(tmp_path, embedded_metastore):
    first = HiveMetastoreBasedLockProvider(_context(tmp_path, embedded_metastore.uri))
    second = HiveMetastoreBasedLockProvider(_context(tmp_path, embedded_metastore.uri))
    other_table = HiveMetastoreBasedLockProvider(_context(tmp_path, embedded_metastore.uri, table="other_t"))
    try:
        assert first.try_lock(1)
        assert "lock" in first.owner_info()
        assert not second.try_lock(0.3)  # queued, then withdrawn: it must not be granted later to no one
        assert other_table.try_lock(1)  # a different table is not blocked
        other_table.unlock()
        first.unlock()
        assert second.try_lock(1)  # the withdrawn request did not linger in front of it
        second.unlock()
    finally:
        for p in (first, second, other_table):
            p.close()


def test_transaction_manager_with_metastore_lock(tmp_path, embedded_metastore):
    ctx = _context(tmp_path, embedded_metastore.uri, table="txn_t")
    managers = [TransactionManager(ctx.base_path, ctx.meta_path, ctx.storage,
                                   ctx.config.with_values({LK.WAIT_TIME_MS.key: "20000"}), "txn_t")
                for _ in range(2)]
    assert count_overlaps(managers, rounds=5, hold_s=0.02) == 0
    holder = HiveMetastoreBasedLockProvider(ctx)
    try:
        assert holder.try_lock(1)
        with pytest.raises(HoodieLockError, match=r"Hive Metastore lock on default\.txn_t .*held by lock"):
            with TransactionManager(ctx.base_path, ctx.meta_path, ctx.storage, ctx.config, "txn_t").transaction():
                pass
    finally:
        holder.close()


def test_missing_metastore_is_a_clear_error(tmp_path, monkeypatch):
    monkeypatch.delenv("HIVE_METASTORE_URIS", raising=False)
    monkeypatch.setattr("catalog.hive_sync.metastore_in_use", lambda: None)
    config = HoodieConfig.of({LK.PROVIDER.key: CLASS_NAME})
    with pytest.raises(HoodieLockError, match="hoodie.write.lock.hivemetastore.uris"):
        HiveMetastoreBasedLockProvider(LockContext(str(tmp_path), str(tmp_path), HoodieStorage.for_path("/"), config, "t"))
