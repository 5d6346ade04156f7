"""Completing an action: the one step where every action that changes a table — commit, deltacommit and
replacecommit (writes, clustering, insert overwrite, delete partition, schema change), compaction, clean,
rollback, restore, savepoint — leaves inflight (Hudi's BaseActionExecutor handing its metadata to
HoodieTable's commit).

`complete_action` runs, in this order:
1. under the lock the caller holds for the action (the table lock for writes and services; none where Hudi takes
   none), the timeline is listed again and the caller's check runs (a writer's conflict resolution, "still
   inflight"): a failing check leaves the action inflight, for the caller to undo;
2. the pre-complete hooks, still under that lock: what must be in step with the data before readers can see
   the instant (the metadata table is updated here, as Hudi updates it before completing the data instant);
   a failing hook leaves the action inflight too;
3. the completed instant with the action's metadata;
4. after the lock, the post-complete hooks: what follows a completed action and never undoes it (a failing one is
   logged).

Hooks are registered from the layers above (storage/ never imports them): the dependency points down.
"""
from __future__ import annotations

import logging
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass
from typing import Callable

from storage.table.meta_client import HoodieTableMetaClient
from storage.timeline.commit_metadata import HoodieCommitMetadata
from storage.timeline.instant import HoodieInstant

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class ActionCompletion:
    """One action about to complete: its inflight instant, the bytes of its completed instant file, and the
    typed metadata those bytes were made from (HoodieCommitMetadata for commit kinds, the Avro record of a clean,
    rollback, restore or savepoint). `operation`: the commit metadata's operationType (UPSERT, COMPACT, CLUSTER,
    ALTER_SCHEMA, ...), or the action's name for a clean, rollback, restore or savepoint."""

    meta: HoodieTableMetaClient
    inflight: HoodieInstant
    content: bytes
    metadata: object = None
    operation: str = ""

    @classmethod
    def of_commit(cls, meta: HoodieTableMetaClient, inflight: HoodieInstant, metadata: HoodieCommitMetadata,
                  operation: str) -> "ActionCompletion":
        """A commit kind completing with `metadata`, in the form the table's timeline layout stores."""
        return cls(meta, inflight, metadata.to_bytes(meta.table_config.version), metadata, operation)

    @property
    def action(self) -> str:
        return self.inflight.action

    @property
    def instant_time(self) -> str:
        return self.inflight.timestamp


PreCompleteHook = Callable[[ActionCompletion], None]
PostCompleteHook = Callable[[ActionCompletion, HoodieInstant], None]
_PRE_COMPLETE: list[PreCompleteHook] = []
_POST_COMPLETE: list[PostCompleteHook] = []


def register_pre_complete(hook: PreCompleteHook) -> Callable[[], None]:
    """Run `hook` before every action completes, under its lock; returns the function that unregisters it."""
    _PRE_COMPLETE.append(hook)
    return lambda: _PRE_COMPLETE.remove(hook)


def register_post_complete(hook: PostCompleteHook) -> Callable[[], None]:
    """Run `hook` after every action completed; returns the function that unregisters it."""
    _POST_COMPLETE.append(hook)
    return lambda: _POST_COMPLETE.remove(hook)


def complete_action(completion: ActionCompletion, lock: AbstractContextManager | None = None,
                    check: Callable[[], None] | None = None) -> HoodieInstant:
    """Check, pre-complete hooks, completed instant (under `lock`), then post-complete hooks: the completed
    instant."""
    timeline = completion.meta.active_timeline
    with lock if lock is not None else nullcontext():
        timeline.reload()
        if check is not None:
            check()
        for hook in tuple(_PRE_COMPLETE):
            hook(completion)
        completed = timeline.transition_to_complete(completion.inflight, completion.content)
    for post in tuple(_POST_COMPLETE):
        try:
            post(completion, completed)
        except Exception:  # noqa: BLE001 - the action is complete; what follows it never undoes it
            log.exception("after %s of %s: %s failed", completed, completion.meta.base_path,
                          getattr(post, "__qualname__", post))
    return completed
