"""Hudi's InProcessLockProvider: one lock per table path shared by the threads of this process."""
from __future__ import annotations

import threading

from storage.transaction.lock_provider import LockContext, LockProvider, register_lock_provider

CLASS_NAME = "org.apache.hudi.client.transaction.lock.InProcessLockProvider"

_LOCKS: dict[str, threading.Lock] = {}
_LOCKS_GUARD = threading.Lock()


def _table_lock(base_path: str) -> threading.Lock:
    with _LOCKS_GUARD:
        return _LOCKS.setdefault(base_path.rstrip("/"), threading.Lock())


class InProcessLockProvider(LockProvider):
    def __init__(self, context: LockContext):
        self._path = context.base_path
        self._lock = _table_lock(context.base_path)
        self._held = False

    def try_lock(self, timeout_s: float) -> bool:
        self._held = self._lock.acquire(timeout=max(timeout_s, 0))
        return self._held

    def unlock(self) -> None:
        if self._held:
            self._held = False
            self._lock.release()

    @property
    def lock_name(self) -> str:
        return f"in-process lock of {self._path}"


register_lock_provider(CLASS_NAME, InProcessLockProvider)
