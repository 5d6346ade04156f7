"""The archived timeline of a table (Hudi's HoodieArchivedTimeline): the v6 archive log (timeline layout 1) and
the LSM history of table versions 8 and 9 (layout 2, storage.timeline.lsm_timeline).

Layout 1: archival moves old instants from `.hoodie/` into `.hoodie/archived/` (`hoodie.archivelog.folder`): log
files of the Hudi log format named `.commits_.archive.<version>_<writeToken>`, whose AVRO_DATA_BLOCKs hold one
HoodieArchivedMetaEntry per archived instant file (commitTime, actionType, actionState and the action's
metadata in the field Hudi uses for it). This module names those files and reads them back; writing is
storage.table_service.archival's job.

Layout 2: one row per archived action (its completed instant's file and its plan, as bytes); each row reads here as
the completed instant's entry, plus a requested entry for the plan of a compaction, log compaction, clean or
clustering, so callers see the same kind of entries for both layouts.

An instant may appear twice (an archival that died after writing its file and before deleting the instants
archives them again; a merge of small archive files that died before deleting them): entries are
de-duplicated by (time, action, state), and damaged blocks (a torn append) are skipped with a warning. An
instant whose completed file is still on the active timeline (archival died before deleting it) belongs to the
active timeline and is left out here.
"""
from __future__ import annotations

import logging
import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from storage.config import TableConfigKeys as K
from storage.file_group.log_block import AvroDataBlock
from storage.file_group.log_format import HoodieLogFileReader
from storage.io.storage import FileInfo
from storage.timeline.commit_metadata import HoodieCommitMetadata
from storage.timeline.instant import Action, HoodieInstant, State
from storage.timeline.lsm_timeline import LSMTimeline, LSMTimelineInstant
from storage.timeline.timeline import HoodieTimeline

if TYPE_CHECKING:  # the timeline is read through the table's meta client, which itself loads timelines
    from storage.table.meta_client import HoodieTableMetaClient

log = logging.getLogger(__name__)

ARCHIVE_FILE_PREFIX = ".commits_.archive."
ARCHIVE_WRITE_TOKEN = "1-0-1"  # HoodieLogFormat.UNKNOWN_WRITE_TOKEN
MERGE_ARCHIVE_PLAN_NAME = "mergeArchivePlan"
_ARCHIVE_RE = re.compile(r"^\.commits_\.archive\.(\d+)(?:_.*)?$")

# HoodieArchivedTimeline.getMetadataKey: the entry field holding a completed instant's metadata
METADATA_FIELD = {
    Action.COMMIT: "hoodieCommitMetadata",
    Action.DELTA_COMMIT: "hoodieCommitMetadata",
    Action.REPLACE_COMMIT: "hoodieReplaceCommitMetadata",
    Action.CLEAN: "hoodieCleanMetadata",
    Action.ROLLBACK: "hoodieRollbackMetadata",
    Action.SAVEPOINT: "hoodieSavePointMetadata",
    Action.COMPACTION: "hoodieCompactionPlan",
    Action.LOG_COMPACTION: "hoodieCompactionPlan",
    Action.INDEXING: "hoodieIndexCommitMetadata",
}


def archive_folder(meta: HoodieTableMetaClient) -> str:
    return f"{meta.meta_path}/{meta.table_config.get(K.ARCHIVELOG_FOLDER) or 'archived'}"


def archive_file_name(version: int) -> str:
    return f"{ARCHIVE_FILE_PREFIX}{version}_{ARCHIVE_WRITE_TOKEN}"


def archive_file_version(name: str) -> int | None:
    m = _ARCHIVE_RE.match(name)
    return int(m.group(1)) if m else None


def list_archive_files(meta: HoodieTableMetaClient) -> list[FileInfo]:
    """Archive files, oldest version first (one listing of the archive folder)."""
    folder = archive_folder(meta)
    if not meta.storage.is_dir(folder):
        return []
    infos = [i for i in meta.storage.list_dir(folder) if not i.is_dir and archive_file_version(i.name) is not None]
    return sorted(infos, key=lambda i: archive_file_version(i.name))


def read_archive_records(meta: HoodieTableMetaClient, path: str) -> list[dict[str, Any]]:
    """The HoodieArchivedMetaEntry records of one archive file, in order; damaged blocks are skipped."""
    records: list[dict[str, Any]] = []
    with HoodieLogFileReader(path, storage=meta.storage) as reader:
        for block in reader:
            if isinstance(block, AvroDataBlock):
                records.extend(block.iter_records())
            elif block.is_corrupt():
                log.warning("skipping a damaged block in archive file %s", path)
    return records


def entry_instant(record: dict[str, Any]) -> HoodieInstant | None:
    ts, action = record.get("commitTime"), record.get("actionType")
    if not ts or not action:
        return None
    state = State(record.get("actionState") or State.COMPLETED.value)
    return HoodieInstant(state, action, ts)


@dataclass(frozen=True)
class ArchivedEntry:
    """One archived instant file of a v6 archive (a HoodieArchivedMetaEntry)."""

    instant: HoodieInstant
    record: dict[str, Any]

    def metadata(self) -> dict[str, Any] | None:
        if self.instant.action == Action.REPLACE_COMMIT and not self.instant.is_completed:
            return self.record.get("hoodieRequestedReplaceMetadata") or self.record.get("HoodieInflightReplaceMetadata")
        if self.instant.action == Action.CLEAN and not self.instant.is_completed:
            return self.record.get("hoodieCleanerPlan")
        return self.record.get(METADATA_FIELD.get(self.instant.action, ""))

    def compaction_plan(self) -> dict[str, Any] | None:
        return self.record.get("hoodieCompactionPlan")

    def commit_metadata(self) -> HoodieCommitMetadata:
        return HoodieCommitMetadata.from_dict(self.metadata() or {})


@dataclass(frozen=True)
class LSMArchivedEntry:
    """One archived action of the LSM timeline, as its completed instant or as the pending instant of its plan."""

    instant: HoodieInstant
    row: LSMTimelineInstant

    def metadata(self) -> dict[str, Any] | None:
        return self.row.metadata_record() if self.instant.is_completed else self.row.plan_record()

    def compaction_plan(self) -> dict[str, Any] | None:
        return self.row.plan_record()

    def commit_metadata(self) -> HoodieCommitMetadata:
        return HoodieCommitMetadata.from_bytes(self.row.metadata or b"")


def _lsm_entries(meta: HoodieTableMetaClient, start: str | None, end: str | None) -> list[LSMArchivedEntry]:
    out = []
    for row in LSMTimeline.for_table(meta).instants(start, end):
        out.append(LSMArchivedEntry(row.instant, row))
        pending = row.pending_instant()
        if pending is not None:
            out.append(LSMArchivedEntry(pending, row))
    return out


def _v6_entries(meta: HoodieTableMetaClient, start: str | None, end: str | None) -> list[ArchivedEntry]:
    entries: dict[tuple[str, str, str], ArchivedEntry] = {}
    for info in list_archive_files(meta):
        for record in read_archive_records(meta, info.path):
            instant = entry_instant(record)
            if instant is None or (start and instant.timestamp < start) or (end and instant.timestamp > end):
                continue
            entries[(instant.timestamp, instant.action, instant.state.value)] = ArchivedEntry(instant, record)
    return list(entries.values())


def _action_key(instant: HoodieInstant) -> tuple[str, str]:
    return instant.timestamp, Action.COMPLETES_AS.get(instant.action, instant.action)


class HoodieArchivedTimeline:
    """The archived instants of a table between `start` and `end` (inclusive, instant times; None = open), read
    from the layout of the table's timeline."""

    def __init__(self, meta: HoodieTableMetaClient, start: str | None = None, end: str | None = None,
                 load: bool = True):
        self.meta = meta
        entries: list[ArchivedEntry | LSMArchivedEntry] = []
        if load:
            entries = _lsm_entries(meta, start, end) if meta.active_timeline.layout_version >= 2 else \
                _v6_entries(meta, start, end)
        active = {_action_key(i) for i in meta.timeline.completed()}
        self.entries = sorted((e for e in entries if _action_key(e.instant) not in active),
                              key=lambda e: e.instant.sort_key())
        self._completed = {e.instant: e for e in self.entries if e.instant.is_completed}
        self.timeline = HoodieTimeline(tuple(self._completed))

    def completed(self) -> HoodieTimeline:
        return self.timeline

    def metadata(self, instant: HoodieInstant) -> dict[str, Any] | None:
        entry = self._completed.get(instant)
        return entry.metadata() if entry else None

    def compaction_plan(self, instant_time: str) -> dict[str, Any] | None:
        """The plan of an archived compaction (its requested entry), None if `instant_time` was no compaction."""
        for e in self.entries:
            if e.instant.timestamp == instant_time and e.instant.action == Action.COMPACTION:
                return e.compaction_plan()
        return None

    def commit_metadata(self, instant: HoodieInstant) -> HoodieCommitMetadata:
        """A completed commit / deltacommit / replacecommit's metadata (the Avro form reads as the JSON one)."""
        entry = self._completed.get(instant)
        return entry.commit_metadata() if entry else HoodieCommitMetadata()
