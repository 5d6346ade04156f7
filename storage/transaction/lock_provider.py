"""Lock providers and their registry, keyed by Hudi's class names (`hoodie.write.lock.provider`).

A provider guards one table: `try_lock(timeout_s)` acquires it within the time or answers False, `unlock`
releases it. storage/ ships the in-process, file-system, ZooKeeper, DynamoDB and storage-based (conditional
writes) providers (registered by their modules, which storage.transaction.transaction_manager imports); other
layers register theirs (catalog/ registers Hudi's HiveMetastoreBasedLockProvider when it is imported), as Hudi
loads providers by class name.
"""
from __future__ import annotations

import logging
import time
from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import Callable

from storage.config import HoodieConfig
from storage.config import LockConfigKeys as LK
from storage.exception import HoodieLockError
from storage.io.storage import HoodieStorage

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class LockContext:
    """What a provider needs to know about the table it locks."""

    base_path: str
    meta_path: str
    storage: HoodieStorage
    config: HoodieConfig
    table_name: str = ""
    database: str = "default"


class LockProvider(ABC):
    """One table's lock, held by at most one owner at a time (across threads, or processes for the
    file-system and metastore providers)."""

    @abstractmethod
    def try_lock(self, timeout_s: float) -> bool:
        """Acquire within `timeout_s`; False when someone else held it all that time."""

    @abstractmethod
    def unlock(self) -> None:
        """Release a lock this provider holds."""

    def close(self) -> None:
        """Release what the provider holds (connections); the lock itself is released by `unlock`."""

    @property
    @abstractmethod
    def lock_name(self) -> str:
        """What is locked, for messages (a path, a metastore table)."""

    def owner_info(self) -> str:
        """Who holds the lock now, when the provider can tell ("" otherwise)."""
        return ""


def poll_until(try_once: Callable[[], bool], timeout_s: float, interval_s: float) -> bool:
    """`try_once()` until it answers True or `timeout_s` passed (one try at least), `interval_s` apart: the
    acquire loop of the providers whose service cannot wait on the caller's behalf."""
    deadline = time.monotonic() + max(timeout_s, 0)
    while True:
        if try_once():
            return True
        left = deadline - time.monotonic()
        if left <= 0:
            return False
        time.sleep(min(interval_s, left))


LockProviderFactory = Callable[[LockContext], LockProvider]

_REGISTRY: dict[str, LockProviderFactory] = {}


def register_lock_provider(class_name: str, factory: LockProviderFactory) -> None:
    """Make `hoodie.write.lock.provider=<class_name>` (or its simple name) create providers with `factory`."""
    _REGISTRY[class_name] = factory


def registered_lock_providers() -> list[str]:
    return sorted(_REGISTRY)


def create_lock_provider(context: LockContext) -> LockProvider:
    name = context.config.get(LK.PROVIDER)
    factory = _REGISTRY.get(name) or _by_simple_name(name)
    if factory is None:
        raise HoodieLockError(
            f"lock provider {name!r} ({LK.PROVIDER.key}) is not available for table {context.base_path}; "
            f"available: {', '.join(registered_lock_providers())} (the Hive Metastore provider registers when the "
            "catalog package is imported)")
    return factory(context)


def _by_simple_name(name: str) -> LockProviderFactory | None:
    simple = name.rsplit(".", 1)[-1]
    matches = [f for cls, f in _REGISTRY.items() if cls.rsplit(".", 1)[-1] == simple]
    return matches[0] if len(matches) == 1 else None
