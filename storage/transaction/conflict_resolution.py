"""Conflict resolution of optimistic concurrency control, as Hudi's
SimpleConcurrentFileWritesConflictResolutionStrategy: at commit, under the table lock, the file groups this
write touched are checked against every instant that the write did not see when it planned:

- write instants (commit, deltacommit, replacecommit) completed since then;
- compactions scheduled since then, pending or completed: this write planned its log appends against the file
  slice such a compaction rewrites, so they would be dropped with the old slice (a compaction already pending
  when the write planned is no conflict: the write went to the new slice).

Overlapping file groups make the write lose: `HoodieWriteConflictError` names them and the winning instant.
"""
from __future__ import annotations

import logging
from dataclasses import dataclass

from storage.config import HoodieConfig
from storage.config import LockConfigKeys as LK
from storage.exception import HoodieWriteConflictError, HoodieWriteError
from storage.table.meta_client import HoodieTableMetaClient
from storage.timeline.instant import Action, HoodieInstant
from storage.timeline.timeline import HoodieTimeline
from storage.transaction.concurrent_operation import ConcurrentOperation

log = logging.getLogger(__name__)

SIMPLE_STRATEGY = "org.apache.hudi.client.transaction.SimpleConcurrentFileWritesConflictResolutionStrategy"
_TABLE_SERVICES = Action.TABLE_SERVICE_ACTIONS


@dataclass(frozen=True)
class TimelineSnapshot:
    """The instants a write saw when it planned: timestamp -> completed."""

    seen: dict[str, bool]

    @classmethod
    def of(cls, timeline: HoodieTimeline) -> "TimelineSnapshot":
        return cls({i.timestamp: i.is_completed for i in timeline})

    def is_new(self, instant: HoodieInstant) -> bool:
        if _is_table_service(instant):
            return instant.timestamp not in self.seen
        return not self.seen.get(instant.timestamp, False)


def _is_table_service(instant: HoodieInstant) -> bool:
    # a completed compaction is a `commit` whose timestamp once had a compaction action; the timeline merges the two
    return instant.action in _TABLE_SERVICES


def candidate_instants(meta: HoodieTableMetaClient, snapshot: TimelineSnapshot, own: str) -> list[HoodieInstant]:
    compaction_times = {i.timestamp for i in meta.active_timeline.all_files() if i.action in _TABLE_SERVICES}
    out = []
    for instant in meta.timeline:
        if instant.timestamp == own:
            continue
        if instant.timestamp in compaction_times:
            if instant.timestamp not in snapshot.seen:
                out.append(instant)
        elif instant.is_completed and instant.action in Action.WRITE_ACTIONS and snapshot.is_new(instant):
            out.append(instant)
    return out


def check_strategy(config: HoodieConfig) -> None:
    name = config.get(LK.CONFLICT_RESOLUTION_STRATEGY)
    if name.rsplit(".", 1)[-1] != SIMPLE_STRATEGY.rsplit(".", 1)[-1]:
        raise HoodieWriteError(f"conflict resolution strategy {name!r} ({LK.CONFLICT_RESOLUTION_STRATEGY.key}) is not "
                               f"supported; use {SIMPLE_STRATEGY}")


def resolve_conflicts(meta: HoodieTableMetaClient, this: ConcurrentOperation, snapshot: TimelineSnapshot) -> None:
    """Raise `HoodieWriteConflictError` when an instant this write did not see touched its file groups.
    `meta`'s timeline must have been reloaded under the table lock."""
    for instant in candidate_instants(meta, snapshot, this.instant_time):
        other = ConcurrentOperation.of_instant(meta, instant)
        overlap = sorted(this.file_groups & other.file_groups)
        if overlap:
            shown = ", ".join(f"{p}/{f}" if p else f for p, f in overlap[:10])
            more = f" and {len(overlap) - 10} more" if len(overlap) > 10 else ""
            raise HoodieWriteConflictError(
                f"write conflict on table {meta.base_path}: {this.action} {this.instant_time} and "
                f"{other.describe()}, which completed or was scheduled after this write started, both changed file "
                f"groups {shown}{more}; {this.instant_time} was rolled back (retry the write)",
                this.instant_time, other.instant_time, tuple(overlap))
        log.debug("no conflict between %s and %s", this.instant_time, other.describe())
