"""The active timeline of a table: listing instants, filtering them, reading and writing their files."""
from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Callable, Iterable

from storage.exception import HoodieCorruptedMetadataError
from storage.io.storage import HoodieStorage
from storage.timeline.commit_metadata import HoodieCommitMetadata
from storage.timeline.instant import Action, HoodieInstant, State, parse_instant_file_name
from storage.timeline.instant_time import format_instant, new_instant_time, parse_instant

log = logging.getLogger(__name__)

# HoodieTimeline.getCommitsAndCompactionTimeline: the actions whose instants publish or will publish data files
COMMITS_TIMELINE_ACTIONS = frozenset({Action.COMMIT, Action.DELTA_COMMIT, Action.REPLACE_COMMIT, Action.COMPACTION,
                                      Action.LOG_COMPACTION, Action.CLUSTERING})


@dataclass(frozen=True)
class HoodieTimeline:
    """An immutable, ordered view of instants; filters return new timelines."""

    instants: tuple[HoodieInstant, ...]

    def __iter__(self):
        return iter(self.instants)

    def __len__(self) -> int:
        return len(self.instants)

    def filter(self, pred: Callable[[HoodieInstant], bool]) -> "HoodieTimeline":
        return HoodieTimeline(tuple(i for i in self.instants if pred(i)))

    def completed(self) -> "HoodieTimeline":
        return self.filter(lambda i: i.is_completed)

    def pending(self) -> "HoodieTimeline":
        return self.filter(lambda i: not i.is_completed)

    def of_actions(self, actions: Iterable[str]) -> "HoodieTimeline":
        wanted = frozenset(actions)
        return self.filter(lambda i: i.action in wanted)

    def write_timeline(self) -> "HoodieTimeline":
        """commit, deltacommit and replacecommit instants: the ones that publish data files."""
        return self.of_actions(Action.WRITE_ACTIONS)

    def until(self, instant_time: str) -> "HoodieTimeline":
        return self.filter(lambda i: i.timestamp <= instant_time)

    def between(self, start_exclusive: str | None, end_inclusive: str | None) -> "HoodieTimeline":
        return self.filter(
            lambda i: (start_exclusive is None or i.timestamp > start_exclusive)
            and (end_inclusive is None or i.timestamp <= end_inclusive)
        )

    def timestamps(self) -> list[str]:
        return [i.timestamp for i in self.instants]

    def last(self) -> HoodieInstant | None:
        return self.instants[-1] if self.instants else None

    def first(self) -> HoodieInstant | None:
        return self.instants[0] if self.instants else None

    def contains_timestamp(self, ts: str) -> bool:
        return any(i.timestamp == ts for i in self.instants)

    def find(self, ts: str) -> HoodieInstant | None:
        for i in self.instants:
            if i.timestamp == ts:
                return i
        return None

    def commits_timeline_start(self) -> str | None:
        """The time of the first write or table-service instant (any state): write instants older than it were
        archived after completing (Hudi's `isBeforeTimelineStarts`). Clean, rollback and savepoint instants are
        archived on their own schedule, so they do not mark the start. Nor does a savepointed commit: archival
        beyond a savepoint (`hoodie.archive.beyond.savepoint`) keeps it and archives the commits after it, so the
        timeline starts at the first commit that is not savepointed (Hudi's getFirstNonSavepointCommit), or, when
        every commit left is savepointed (e.g. after a restore), at the last of them: all older ones were archived."""
        commits = list(self.of_actions(COMMITS_TIMELINE_ACTIONS))
        savepointed = {i.timestamp for i in self.instants if i.action == Action.SAVEPOINT}
        first = next((i for i in commits if i.timestamp not in savepointed), commits[-1] if commits else None)
        return first.timestamp if first else None

    def is_before_timeline_starts(self, instant_time: str) -> bool:
        start = self.commits_timeline_start()
        return start is not None and instant_time < start


class ActiveTimeline:
    """Reads and writes instant files under the timeline directory (`.hoodie/` in v6, `.hoodie/timeline/` in v8)."""

    def __init__(self, storage: HoodieStorage, timeline_path: str, layout_version: int):
        self.storage = storage
        self.path = timeline_path
        self.layout_version = layout_version
        self._files: dict[HoodieInstant, str] = {}
        self._schemas: dict[HoodieInstant, str | None] = {}
        self.timeline = HoodieTimeline(())
        self.reload()

    # -- reading ---------------------------------------------------------------------------------
    def reload(self) -> "ActiveTimeline":
        """List the timeline directory again (one listing)."""
        files: dict[HoodieInstant, str] = {}
        for info in self.storage.list_dir(self.path):
            if info.is_dir:
                continue
            instant = parse_instant_file_name(info.name)
            if instant is None:
                continue
            if self.layout_version >= 2 and instant.is_completed and not instant.completion_time:
                continue  # in layout 2 a completed instant must name its completion time
            files[instant] = info.path
        return self._rebuild(files)

    def _rebuild(self, files: dict[HoodieInstant, str]) -> "ActiveTimeline":
        latest: dict[tuple[str, str], HoodieInstant] = {}
        for instant in files:
            key = (instant.timestamp, _base_action(instant.action))
            if key not in latest or _state_rank(instant) > _state_rank(latest[key]):
                latest[key] = instant
        self._files = files
        self._schemas = {i: s for i, s in self._schemas.items() if i in files}
        self.timeline = HoodieTimeline(tuple(sorted(latest.values(), key=HoodieInstant.sort_key)))
        return self

    def _added(self, instant: HoodieInstant) -> "ActiveTimeline":
        """This process created `instant`'s file: the timeline knows it without listing again."""
        return self._rebuild({**self._files, instant: self._instant_path(instant)})

    def all_files(self) -> dict[HoodieInstant, str]:
        return dict(self._files)

    def read_bytes(self, instant: HoodieInstant) -> bytes:
        path = self._files.get(instant) or f"{self.path}/{instant.file_name(self.layout_version)}"
        return self.storage.read_bytes(path)

    def commit_metadata(self, instant: HoodieInstant) -> HoodieCommitMetadata:
        data = self.read_bytes(instant)
        try:
            return HoodieCommitMetadata.from_bytes(data)
        except Exception as exc:  # a corrupt instant file must name itself
            raise HoodieCorruptedMetadataError(f"cannot parse commit metadata of instant {instant} "
                                               f"({self._files.get(instant, instant.file_name(self.layout_version))}): "
                                               f"{exc}") from exc

    def commit_metadata_if_active(self, instant: HoodieInstant) -> HoodieCommitMetadata | None:
        """`commit_metadata`, or None when the instant's file is gone: archival (another process, under the table
        lock) moved it to the archive after this timeline was listed. For readers that go over many completed
        instants (file sizing, replaced file groups, log extents) and can do without the archived ones."""
        try:
            return self.commit_metadata(instant)
        except FileNotFoundError:
            log.info("instant %s left the active timeline of %s after it was listed (archived)", instant, self.path)
            return None

    def commit_schema(self, instant: HoodieInstant) -> str | None:
        """The writer schema a completed instant's commit metadata records, decoded once per instant file (a read
        plans with it several times; a completed instant file never changes in place)."""
        if instant not in self._schemas:
            self._schemas[instant] = self.commit_metadata(instant).schema
        return self._schemas[instant]

    def requested_of(self, instant: HoodieInstant) -> HoodieInstant:
        for cand in self._files:
            if cand.timestamp == instant.timestamp and cand.is_requested:
                return cand
        return HoodieInstant(State.REQUESTED, instant.action, instant.timestamp)

    # -- writing ---------------------------------------------------------------------------------
    def new_instant_time(self) -> str:
        last = max((i.timestamp for i in self._files), default=None)
        return new_instant_time(after=last)

    def _instant_path(self, instant: HoodieInstant) -> str:
        return f"{self.path}/{instant.file_name(self.layout_version)}"

    def _create(self, instant: HoodieInstant, content: bytes) -> None:
        """Create-if-absent (the content is synced before the name appears), then the directory is synced so the
        new name survives a power loss: a durable commit never points at a vanished instant file."""
        self.storage.create(self._instant_path(instant), content)
        self.storage.fsync(self.path)

    def create_requested(self, action: str, timestamp: str, content: bytes = b"") -> HoodieInstant:
        instant = HoodieInstant(State.REQUESTED, action, timestamp)
        self._create(instant, content)
        log.debug("created %s", instant)
        return self._added(instant).timeline.find(timestamp) or instant

    def transition_to_inflight(self, requested: HoodieInstant, content: bytes = b"") -> HoodieInstant:
        inflight = HoodieInstant(State.INFLIGHT, requested.action, requested.timestamp)
        self._create(inflight, content)
        self._added(inflight)
        return inflight

    def transition_to_complete(self, inflight: HoodieInstant, content: bytes = b"") -> HoodieInstant:
        completion = format_instant(parse_instant(self.new_instant_time())) if self.layout_version >= 2 else None
        completed = inflight.with_state(State.COMPLETED, completion)
        self._create(completed, content)
        self._added(completed)
        log.info("completed %s", completed)
        return completed

    def delete_instant_file(self, instant: HoodieInstant) -> None:
        """Remove one instant file (archival, savepoint deletion); absent is fine (a retried service)."""
        path = self._files.get(instant) or self._instant_path(instant)
        self.storage.delete(path)
        self._rebuild({i: p for i, p in self._files.items() if i != instant})

    def delete_instant_files(self, timestamp: str) -> None:
        """Remove every file of a pending instant (after its rollback completed)."""
        remaining = dict(self._files)
        for instant, path in self._files.items():
            if instant.timestamp == timestamp and not instant.is_completed:
                self.storage.delete(path)
                del remaining[instant]
        self._rebuild(remaining)


def _base_action(action: str) -> str:
    """Group a table service's pending action with the action it completes as."""
    return Action.COMPLETES_AS.get(action, action)


def _state_rank(instant: HoodieInstant) -> int:
    return {State.REQUESTED: 0, State.INFLIGHT: 1, State.COMPLETED: 2}[instant.state]
