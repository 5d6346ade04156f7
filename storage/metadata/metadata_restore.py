"""The metadata table through a data restore (Hudi 1.x's rules: storage.metadata.metadata_writer's module doc,
"Savepoint and restore"): restored to the same instant and synced with the restored data table, or rebuilt when it
cannot be restored."""
from __future__ import annotations

import logging
import time
from typing import TYPE_CHECKING

from storage.avro.container import read_avro_container, write_avro_container
from storage.avro.models import HOODIE_RESTORE_METADATA, HOODIE_RESTORE_PLAN
from storage.fs_utils import parse_base_file_name, parse_log_file_name
from storage.metadata.column_stats import tombstone
from storage.metadata.keys import ALL_PARTITIONS_KEY, mdt_partition_name
from storage.metadata.records import FileInfo, FileListing, MetadataRecord, MetadataRecordType
from storage.metadata.table_metadata import (
    COLUMN_STATS,
    FILES,
    PARTITION_STATS,
    HoodieTableMetadata,
    enabled_partitions,
)
from storage.metadata.table_metadata_util import (
    column_stats_record,
    committed_files,
    group_by_file,
    is_partition_init_instant,
    partition_stats_records,
    slice_file_names,
    stats_by_file,
)
from storage.table.fs_view import FileSystemView
from storage.timeline.instant import Action, HoodieInstant, State
from storage.timeline.rollback_records import restore_metadata_record, restore_plan_record, rollback_metadata_record

if TYPE_CHECKING:
    from storage.metadata.metadata_writer import MetadataWriter

log = logging.getLogger(__name__)


class MetadataTableRestore:
    """The MDT side of one data restore, written through `writer` (its deltacommit, file and instant helpers)."""

    def __init__(self, writer: "MetadataWriter"):
        self.writer = writer

    def restore(self, restore_time: str) -> None:
        """The MDT side of data restore `restore_time` (metadata_writer's module doc, "Savepoint and restore"), before the data
        restore completes: the MDT restored to the same instant T and synced with the restored data table in a
        deltacommit at `restore_time`, or - when it cannot be restored to T - rebuilt from the restored data table."""
        self.writer.data.reload()
        timeline = self.writer.data.active_timeline
        restore = self.writer.data.timeline.find(restore_time)
        plan = read_avro_container(timeline.read_bytes(timeline.requested_of(restore))) if restore else {}
        target = plan.get("savepointToRestoreTimestamp")
        self.writer.discard(restore_time)  # the sync of an earlier attempt at this restore
        reason = self._unrestorable(target)
        if reason is not None:
            self.writer.rebuild(f"restore {restore_time} to {target}: {reason}")
            return
        self._restore_to(target)
        self.writer.deltacommit(restore_time, self._sync_records())
        log.info("metadata table of %s: restored to %s and synced with the data table at %s", self.writer.data.base_path,
                 target, restore_time)

    def _unrestorable(self, target: str | None) -> str | None:
        """Why the MDT cannot be restored to data instant `target` (None: it can). Hudi's restoreToSavepoint
        deletes the MDT when `target` is at or before its oldest compaction or before its active timeline;
        update(HoodieRestoreMetadata) refuses when a `files` file group has no slice based at or before
        `target` (checked here for every partition kept), and when the MDT never had `target` (initialised
        later, or a partition initialised after it) there is nothing to restore to."""
        if not target:
            return "the restore plan names no instant to restore to"
        timeline = self.writer.mdt.reload().timeline
        if timeline.is_before_timeline_starts(target):
            return f"{target} is before the metadata table's active timeline"
        oldest = timeline.completed().of_actions([Action.COMMIT]).first()
        if oldest is not None and target <= oldest.timestamp:
            return f"{target} is not after the metadata table's oldest compaction {oldest.timestamp}"
        synced = timeline.completed().of_actions([Action.DELTA_COMMIT]).find(target)
        if synced is None:
            return f"the metadata table has no completed deltacommit {target}"
        point = synced.completion_time or synced.timestamp
        late = [i.timestamp for i in timeline.completed()
                if is_partition_init_instant(i.timestamp) and (i.completion_time or i.timestamp) > point]
        if late:
            return f"partitions were initialised after {target} ({', '.join(late)})"
        for partition in enabled_partitions(self.writer.data):
            oldest_file: dict[str, str] = {}
            for info in self.writer.storage.list_dir(f"{self.writer.base_path}/{partition}"):
                parsed = parse_base_file_name(info.name) or parse_log_file_name(info.name)
                if parsed:
                    known = oldest_file.get(parsed.file_id)
                    oldest_file[parsed.file_id] = min(known, parsed.instant_time) if known else parsed.instant_time
            # the cleaner deletes whole slices, oldest first: the oldest file left starts the oldest slice left
            late = sorted(fg for fg, first in oldest_file.items() if first > target)
            if late:
                return f"no file slice of {partition}/{late[0]} starts at or before {target} (cleaned)"
        return None

    def _restore_to(self, target: str) -> None:
        """Hudi's restoreToInstant on the MDT: every MDT write or compaction after `target` rolled back, newest
        first, under an MDT restore instant (requested plan, inflight, completed HoodieRestoreMetadata); each
        rollback deletes the files the instant wrote and its instant files (v8+ logs are per instant; no
        rollback instant of its own, as in a data restore). A pending MDT restore (a killed attempt) is finished
        with its plan first."""
        timeline = self.writer.mdt.active_timeline
        pending = self.writer.mdt.timeline.pending().of_actions([Action.RESTORE]).last()
        if pending is None:
            later = [i for i in self.writer.mdt.timeline.of_actions(Action.COMMITS_TIMELINE) if i.timestamp > target]
            if not later:
                return
            pending = timeline.create_requested(Action.RESTORE, timeline.new_instant_time(),
                                                write_avro_container(HOODIE_RESTORE_PLAN,
                                                                     restore_plan_record(later, target)))
        plan = read_avro_container(timeline.read_bytes(timeline.requested_of(pending)))
        inflight = pending if pending.is_inflight else timeline.transition_to_inflight(pending)
        started = time.time()
        rolled: dict[str, list] = {}
        for entry in plan.get("instantsToRollback") or []:
            instant = HoodieInstant(State.COMPLETED, entry["action"], entry["commitTime"])
            files = self.writer.instant_files(instant.timestamp)
            deleted = {p: [path for path in paths if self.writer.storage.delete(path) or not self.writer.storage.exists(path)]
                       for p, paths in files.items()}
            record = rollback_metadata_record(inflight.timestamp, 0, instant, deleted, {})
            self.writer.delete_instant(instant.timestamp)
            rolled[instant.timestamp] = [record]
        record = restore_metadata_record(inflight.timestamp, int((time.time() - started) * 1000), plan, rolled)
        timeline.transition_to_complete(inflight, write_avro_container(HOODIE_RESTORE_METADATA, record))
        self.writer.mdt.reload()
        log.info("metadata table of %s: restored to %s (%d instants rolled back) at %s", self.writer.data.base_path,
                 target, len(rolled), inflight.timestamp)

    def _sync_records(self) -> dict[str, list[MetadataRecord]]:
        """Hudi's restore sync (fetchOutofSyncFilesRecordsFromMetadataTable): the restored MDT compared with the
        data table's committed files listed from storage - files the data table's cleans after the restored
        instant deleted, or any other difference: `files` additions and deletions, partitions gone; column
        stats of added files and tombstones of deleted ones; and (beyond Hudi, which leaves partition_stats as
        of the restored instant) the partition stats of every partition that changed."""
        reader = HoodieTableMetadata(self.writer.data, allow_pending_restore=True)
        view = FileSystemView(self.writer.data, use_metadata_table=False)
        on_storage = {p: files for p, files in committed_files(view).items() if files}
        known_partitions = set(reader.all_partition_paths())
        recorded = reader.files_in_partitions(sorted(known_partitions | set(on_storage)))
        added = {p: {n: s for n, s in files.items() if recorded[p].get(n) != s} for p, files in on_storage.items()}
        added = {p: files for p, files in added.items() if files}
        deleted = {p: sorted(set(files) - set(on_storage.get(p, {}))) for p, files in recorded.items()}
        deleted = {p: names for p, names in deleted.items() if names}
        gone = sorted(known_partitions - set(view.partitions()))
        out: dict[str, list[MetadataRecord]] = {FILES: []}
        if set(on_storage) - known_partitions or gone:
            entries = {mdt_partition_name(p): FileInfo(0) for p in sorted(set(on_storage) - known_partitions)}
            entries.update((mdt_partition_name(p), FileInfo(0, True)) for p in gone)
            out[FILES].append(MetadataRecord(ALL_PARTITIONS_KEY, MetadataRecordType.PARTITION_LIST,
                                             FileListing(entries)))
        for partition in sorted(set(added) | set(deleted)):
            entries = {n: FileInfo(s) for n, s in added.get(partition, {}).items()}
            entries.update((n, FileInfo(0, True)) for n in deleted.get(partition, []))
            out[FILES].append(MetadataRecord(mdt_partition_name(partition), MetadataRecordType.FILE_LIST,
                                             FileListing(entries)))
        if COLUMN_STATS not in self.writer.settings.partitions or not (added or deleted):
            return out
        changed = sorted(set(added) | set(deleted))
        known = stats_by_file(reader, changed)
        fresh = self.writer.stats_of(added)
        out[COLUMN_STATS] = [column_stats_record(p, tombstone(s)) for p, names in deleted.items()
                             for n in names for s in known.get(p, {}).get(n, [])]
        out[COLUMN_STATS] += [column_stats_record(p, s) for p, lst in fresh.items() for s in lst]
        if PARTITION_STATS in self.writer.settings.partitions:
            out[PARTITION_STATS] = []
            for partition in changed:
                by_file = {**known.get(partition, {}), **group_by_file(fresh.get(partition, []))}
                names = slice_file_names(view, partition)
                parts = [s for name in sorted(names)
                         for s in (by_file[name] if name in by_file else self.writer.data_file_stats(partition, name))]
                if parts:
                    out[PARTITION_STATS] += partition_stats_records(partition, parts)
        return out
