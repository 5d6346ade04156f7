"""Timeline helpers shared by the procedures: instants newest first, completion ("state transition") times,
the completed commit at an instant time, commit-metadata totals as Hudi's HoodieCommitMetadata computes them."""
from __future__ import annotations

from datetime import datetime, timezone

from storage.table.meta_client import HoodieTableMetaClient
from storage.timeline.commit_metadata import NULL_COMMIT, HoodieCommitMetadata
from storage.timeline.instant import Action, HoodieInstant
from storage.timeline.instant_time import format_instant

COMMIT_ACTIONS = Action.COMMITS_TIMELINE


def newest_first(instants) -> list[HoodieInstant]:
    return sorted(instants, key=lambda i: i.timestamp, reverse=True)


def completed_commits(meta: HoodieTableMetaClient) -> list[HoodieInstant]:
    return newest_first(meta.timeline.completed().of_actions(COMMIT_ACTIONS))


def state_transition_time(meta: HoodieTableMetaClient, instant: HoodieInstant) -> str | None:
    """The completion time (timeline layout 2 names it; layout 1: the instant file's modification time)."""
    if not instant.is_completed:
        return None
    if instant.completion_time:
        return instant.completion_time
    path = meta.active_timeline.all_files().get(instant)
    if path is None:
        return None
    try:
        moment = datetime.fromtimestamp(meta.storage.modification_time(path), tz=timezone.utc)
    except OSError:
        return None
    return format_instant(moment)


def commit_at(meta: HoodieTableMetaClient, instant_time: str) -> HoodieInstant | None:
    """The completed commit / deltacommit / replacecommit at `instant_time`."""
    for instant in meta.timeline.completed().of_actions(COMMIT_ACTIONS):
        if instant.timestamp == instant_time:
            return instant
    return None


def files_inserted(md: HoodieCommitMetadata) -> int:
    return sum(1 for s in md.write_stats() if (s.prevCommit or "").lower() == NULL_COMMIT)


def files_updated(md: HoodieCommitMetadata) -> int:
    return sum(1 for s in md.write_stats() if s.prevCommit is not None and s.prevCommit.lower() != NULL_COMMIT)


def total(md: HoodieCommitMetadata, field: str) -> int:
    return sum(int(getattr(s, field) or 0) for s in md.write_stats())
