"""Post-commit callbacks (Hudi's `hoodie.write.commit.callback.*`): code outside storage — Hive sync, for
one — learns about each completed commit without storage knowing it exists.

A callback that fails is logged and reported in the returned list; it never fails or undoes the commit,
which is already complete when callbacks run.
"""
from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Callable

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class CommitEvent:
    base_path: str
    table_name: str
    instant_time: str
    action: str  # commit, deltacommit, replacecommit
    operation: str  # operationType of the commit metadata
    options: dict  # the write options (hoodie.* keys) the commit ran with


CommitCallback = Callable[[CommitEvent], None]
_CALLBACKS: dict[str, CommitCallback] = {}


def register_commit_callback(name: str, callback: CommitCallback) -> None:
    """Register (or replace) the callback known as `name`."""
    _CALLBACKS[name] = callback


def unregister_commit_callback(name: str) -> None:
    _CALLBACKS.pop(name, None)


def fire_commit_callbacks(event: CommitEvent) -> list[tuple[str, Exception]]:
    """Run every callback; return the (name, error) of those that failed."""
    failures = []
    for name, callback in list(_CALLBACKS.items()):
        try:
            callback(event)
        except Exception as exc:  # noqa: BLE001 - a callback must never fail the commit
            log.warning("commit callback %s failed for %s at %s: %s", name, event.instant_time, event.base_path, exc)
            failures.append((name, exc))
    return failures
