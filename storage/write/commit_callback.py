"""Post-commit callbacks: code outside storage — Hive sync, for one — learns about each completed commit
without storage knowing it exists (registered hooks), and with `hoodie.write.commit.callback.on=true` the
commit's options choose one of Hudi's callbacks (HTTP, Kafka or a Python class; see storage/callback/).

A callback that fails is logged and reported in the returned list; it never fails or undoes the commit,
which is already complete when callbacks run.
"""
from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import TYPE_CHECKING, Callable

from storage.config import HoodieConfig
from storage.config import WriteCommitCallbackConfigKeys as CB

if TYPE_CHECKING:
    from storage.timeline.commit_metadata import HoodieCommitMetadata

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class CommitEvent:
    base_path: str
    table_name: str
    instant_time: str
    action: str  # commit, deltacommit, replacecommit
    operation: str  # operationType of the commit metadata
    config: HoodieConfig  # the options the commit ran with
    metadata: "HoodieCommitMetadata | None" = None  # the completed commit's metadata, when the writer has it


CommitCallback = Callable[[CommitEvent], None]
_CALLBACKS: dict[str, CommitCallback] = {}


def register_commit_callback(name: str, callback: CommitCallback) -> None:
    """Register (or replace) the callback known as `name`."""
    _CALLBACKS[name] = callback


def unregister_commit_callback(name: str) -> None:
    _CALLBACKS.pop(name, None)


def fire_commit_callbacks(event: CommitEvent) -> list[tuple[str, Exception]]:
    """Run every registered callback, then the configured one; return the (name, error) of those that failed."""
    callbacks = list(_CALLBACKS.items())
    config = event.config
    if _configured_on(config):
        callbacks.append((config.get(CB.CALLBACK_CLASS_NAME), _configured_callback(config)))
    failures = []
    for name, callback in callbacks:
        try:
            callback(event)
        except Exception as exc:  # noqa: BLE001 - a callback must never fail the commit
            log.warning("commit callback %s failed for %s at %s: %s", name, event.instant_time, event.base_path, exc)
            failures.append((name, exc))
    return failures


def _configured_on(config: HoodieConfig) -> bool:
    try:
        return bool(config.get(CB.TURN_CALLBACK_ON))
    except ValueError as exc:
        log.warning("commit callback not run: %s", exc)
        return False


def _configured_callback(config: HoodieConfig) -> CommitCallback:
    """The `hoodie.write.commit.callback.class` callback as a CommitCallback; a bad configuration surfaces
    when it is called, so it is reported like a failed delivery."""
    def call(event: CommitEvent) -> None:
        from storage.callback import HoodieWriteCommitCallbackMessage, create_commit_callback

        message = HoodieWriteCommitCallbackMessage.of(event.instant_time, event.table_name, event.base_path,
                                                      event.action, event.metadata)
        create_commit_callback(config).call(message)
    return call
