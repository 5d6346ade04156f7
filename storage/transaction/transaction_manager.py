"""Hudi's TransactionManager: the table lock around the short critical sections of a write or table service
(creating an instant, resolving conflicts and publishing a commit, scheduling a table service, rolling back
failed writes).

`hoodie.write.concurrency.mode`: SINGLE_WRITER (Hudi's default) guards only the threads of this process (the
in-process lock, whatever provider is configured); OPTIMISTIC_CONCURRENCY_CONTROL (and Hudi 1.x's
NON_BLOCKING_CONCURRENCY_CONTROL, treated here as optimistic) takes the lock of `hoodie.write.lock.provider`,
shared by every process writing the table.
"""
from __future__ import annotations

import logging
from contextlib import contextmanager
from typing import Iterator

from storage.config import HoodieConfig
from storage.config import LockConfigKeys as LK
from storage.config import WriteConfigKeys as WK
from storage.exception import HoodieWriteError
from storage.io.storage import HoodieStorage
from storage.transaction import (  # noqa: F401 - built-ins register
    dynamodb_lock_provider,
    file_system_lock_provider,
    in_process_lock_provider,
    storage_lock_provider,
    zookeeper_lock_provider,
)
from storage.transaction.lock_manager import LockManager
from storage.transaction.lock_provider import LockContext, create_lock_provider

log = logging.getLogger(__name__)

SINGLE_WRITER = "SINGLE_WRITER"
OPTIMISTIC = "OPTIMISTIC_CONCURRENCY_CONTROL"
NON_BLOCKING = "NON_BLOCKING_CONCURRENCY_CONTROL"
EAGER, LAZY, NEVER = "EAGER", "LAZY", "NEVER"


def concurrency_mode(config: HoodieConfig) -> str:
    mode = str(config.get(WK.WRITE_CONCURRENCY_MODE)).strip().upper()
    if mode not in (SINGLE_WRITER, OPTIMISTIC, NON_BLOCKING):
        raise HoodieWriteError(f"unknown {WK.WRITE_CONCURRENCY_MODE.key} {mode!r}; use single_writer, "
                               "optimistic_concurrency_control or non_blocking_concurrency_control")
    return mode


def is_multi_writer(config: HoodieConfig) -> bool:
    return concurrency_mode(config) != SINGLE_WRITER


def failed_writes_policy(config: HoodieConfig) -> str:
    """hoodie.cleaner.policy.failed.writes, inferred as Hudi does: LAZY for multi-writer, EAGER otherwise.
    EAGER with several writers would roll back the others' running writes, so it is refused."""
    given = config.get(WK.FAILED_WRITES_CLEANER_POLICY)
    policy = str(given or (LAZY if is_multi_writer(config) else EAGER)).strip().upper()
    if policy not in (EAGER, LAZY, NEVER):
        raise HoodieWriteError(f"unknown {WK.FAILED_WRITES_CLEANER_POLICY.key} {policy!r}; use EAGER, LAZY or NEVER")
    if policy == EAGER and is_multi_writer(config):
        raise HoodieWriteError(f"{WK.FAILED_WRITES_CLEANER_POLICY.key}=EAGER cannot be used with "
                               f"{WK.WRITE_CONCURRENCY_MODE.key}={concurrency_mode(config).lower()}: set it to LAZY")
    return policy


class TransactionManager:
    """The lock of one table for one writer or service; `with manager.transaction(): ...`."""

    def __init__(self, base_path: str, meta_path: str, storage: HoodieStorage, config: HoodieConfig,
                 table_name: str = "", database: str = "default"):
        self.config = config
        self.multi_writer = is_multi_writer(config)
        effective = config if self.multi_writer else config.with_values(
            {LK.PROVIDER.key: in_process_lock_provider.CLASS_NAME})
        context = LockContext(base_path, meta_path, storage, effective, table_name, database)
        self._lock_manager = LockManager(create_lock_provider(context), effective)

    @classmethod
    def for_table(cls, meta_client, config: HoodieConfig) -> "TransactionManager":
        tc = meta_client.table_config
        return cls(meta_client.base_path, meta_client.meta_path, meta_client.storage, config, tc.name,
                   tc.database_name or "default")

    @contextmanager
    def transaction(self, purpose: str = "") -> Iterator[None]:
        """The lock held around the body. A release that fails (the lock service went away meanwhile) is logged,
        never raised: what the body did under the lock stands (a completed commit reported as failed invites a
        retry that writes its inserts twice), the lease or session of a lease-based lock lapses on its own, and
        an exception of the body is the one the caller sees."""
        self._lock_manager.lock()
        log.debug("transaction start: %s", purpose)
        try:
            yield
        finally:
            self._release(purpose)

    def _release(self, purpose: str) -> None:
        try:
            self._lock_manager.unlock()
        except Exception as exc:  # noqa: BLE001 - see transaction()
            log.warning("releasing %s after %s failed: %s; it stays taken until its lease or session expires",
                        self._lock_manager.provider.lock_name, purpose or "a transaction", exc)
        else:
            log.debug("transaction end: %s", purpose)

    def close(self) -> None:
        self._lock_manager.close()
