"""One instant of the timeline and its file names in timeline layouts 1 (table v6) and 2 (table v8+)."""
from __future__ import annotations

import re
from dataclasses import dataclass
from enum import Enum


class State(str, Enum):
    REQUESTED = "REQUESTED"
    INFLIGHT = "INFLIGHT"
    COMPLETED = "COMPLETED"


_STATE_ORDER = {State.REQUESTED: 0, State.INFLIGHT: 1, State.COMPLETED: 2}


class Action:
    COMMIT = "commit"
    DELTA_COMMIT = "deltacommit"
    REPLACE_COMMIT = "replacecommit"
    CLUSTERING = "clustering"
    COMPACTION = "compaction"
    LOG_COMPACTION = "logcompaction"
    ROLLBACK = "rollback"
    CLEAN = "clean"
    SAVEPOINT = "savepoint"
    RESTORE = "restore"
    INDEXING = "indexing"

    ALL = frozenset(
        {COMMIT, DELTA_COMMIT, REPLACE_COMMIT, CLUSTERING, COMPACTION, LOG_COMPACTION, ROLLBACK, CLEAN, SAVEPOINT,
         RESTORE, INDEXING}
    )
    # Actions whose completed instants carry data files readers must see.
    WRITE_ACTIONS = frozenset({COMMIT, DELTA_COMMIT, REPLACE_COMMIT})
    # Pending table-service actions that complete under another action name.
    COMPLETES_AS = {COMPACTION: COMMIT, LOG_COMPACTION: DELTA_COMMIT, CLUSTERING: REPLACE_COMMIT}
    TABLE_SERVICE_ACTIONS = frozenset(COMPLETES_AS)
    # Hudi's HoodieTimeline.getCommitsTimeline: every action that writes data, under its pending names too.
    COMMITS_TIMELINE = WRITE_ACTIONS | TABLE_SERVICE_ACTIONS


_NAME_RE = re.compile(r"^(\d{14,20})(?:_(\d{14,20}))?\.([a-z]+)(?:\.(requested|inflight))?$")


@dataclass(frozen=True, order=False)
class HoodieInstant:
    state: State
    action: str
    timestamp: str
    completion_time: str | None = None

    @property
    def is_completed(self) -> bool:
        return self.state is State.COMPLETED

    @property
    def is_inflight(self) -> bool:
        return self.state is State.INFLIGHT

    @property
    def is_requested(self) -> bool:
        return self.state is State.REQUESTED

    def sort_key(self) -> tuple[str, int]:
        return self.timestamp, _STATE_ORDER[self.state]

    def with_state(self, state: State, completion_time: str | None = None) -> "HoodieInstant":
        action = self.action
        if state is State.COMPLETED:
            action = Action.COMPLETES_AS.get(action, action)
        return HoodieInstant(state, action, self.timestamp, completion_time)

    def file_name(self, layout_version: int = 1) -> str:
        t, a = self.timestamp, self.action
        if self.state is State.REQUESTED:
            return f"{t}.{a}.requested"
        if self.state is State.INFLIGHT:
            return f"{t}.inflight" if a == Action.COMMIT else f"{t}.{a}.inflight"
        if layout_version >= 2:
            if not self.completion_time:
                raise ValueError(f"completed instant {t}.{a} needs a completion time in timeline layout 2")
            return f"{t}_{self.completion_time}.{a}"
        return f"{t}.{a}"

    def __str__(self) -> str:
        done = f"__{self.completion_time}" if self.completion_time else ""
        return f"[{self.timestamp}{done}__{self.action}__{self.state.value}]"


def parse_instant_file_name(name: str) -> HoodieInstant | None:
    """The instant a timeline file name denotes, or None for files that are not instants."""
    m = _NAME_RE.match(name)
    if not m:
        return None
    ts, completion, first, suffix = m.groups()
    if first == "inflight" and suffix is None:
        return HoodieInstant(State.INFLIGHT, Action.COMMIT, ts)
    if first not in Action.ALL:
        return None
    if suffix == "requested":
        return HoodieInstant(State.REQUESTED, first, ts)
    if suffix == "inflight":
        return HoodieInstant(State.INFLIGHT, first, ts)
    return HoodieInstant(State.COMPLETED, first, ts, completion)
