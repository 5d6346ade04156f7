"""From file infos to file groups and slices, given a timeline: the part of the file-system view that does not care
where the file infos come from (a listing of the table's directories today; the metadata table's `files`
partition for readers of the data table, and a listing of the metadata table's own directories for the reader of
the metadata table, `storage.metadata.table_metadata`, which cannot import `storage.table.fs_view` because the
view will list through it).

Only files written by completed commits are visible, and files older than the first instant of the active
timeline (their commits were archived, so they completed). In table v8 a log file names the deltacommit that
created it, and belongs to the slice with the greatest base instant at or before that commit's completion.
"""
from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from storage.fs_utils import (
    PARTITION_METAFILE,
    join_path,
    parse_base_file_name,
    parse_log_file_name,
    relative_partition_path,
)
from storage.io.storage import HoodieStorage
from storage.table.file_slice import FileSlice, HoodieBaseFile, HoodieFileGroup, HoodieFileGroupId, HoodieLogFile
from storage.table.meta_client import HoodieTableMetaClient
from storage.timeline.instant import Action, HoodieInstant


@dataclass
class FileListing:
    """The data files found: partitions (relative paths), base files, and log files with their partition."""

    partitions: set[str] = field(default_factory=set)
    base_files: list[HoodieBaseFile] = field(default_factory=list)
    log_files: list[tuple[str, HoodieLogFile]] = field(default_factory=list)


def list_table_files(storage: HoodieStorage, base_path: str, partitions: list[str] | None = None) -> FileListing:
    """The table's data files: one recursive listing of the table (`partitions` None) or one listing per named
    partition; `.hoodie` and other hidden directories are skipped."""
    listing = FileListing()
    base = base_path.rstrip("/")
    if partitions is None:
        infos = storage.list_files(base)
    else:
        infos = [i for p in partitions for i in storage.list_dir(f"{base}/{p}" if p else base) if not i.is_dir]
    for info in infos:
        directory, _, name = info.path[len(base) + 1:].rpartition("/")
        if any(part.startswith(".") for part in directory.split("/") if part):
            continue  # .hoodie, .temp and other hidden directories hold no data files
        _collect(listing, directory, info.path, info.size, name)
    return listing


def listing_of_files(base_path: str, files: Mapping[str, Mapping[str, int]],
                     partitions: Iterable[str] = ()) -> FileListing:
    """The listing of partition -> {file name: size} as a directory listing would give it (what the metadata
    table's `files` partition records); `partitions` are known partitions, with files or not."""
    listing = FileListing(partitions=set(partitions))
    for partition, entries in files.items():
        for name, size in entries.items():
            _collect(listing, partition, join_path(base_path, partition, name), size, name)
    return listing


def _collect(listing: FileListing, partition: str, path: str, size: int, name: str) -> None:
    if name == PARTITION_METAFILE or name.startswith(PARTITION_METAFILE):
        listing.partitions.add(partition)
        return
    if name.startswith("."):
        if parse_log_file_name(name):
            listing.log_files.append((partition, HoodieLogFile.of(path, size)))
            listing.partitions.add(partition)
        return
    if parse_base_file_name(name):
        listing.base_files.append(HoodieBaseFile.of(path, size))
        listing.partitions.add(partition)


class SliceTimeline:
    """What slicing files needs from a table's timeline at a point `as_of` (an instant time, compared with
    completion times in table v8+; None = the latest completed instant): which writes are committed there, when
    they completed, and which compactions are pending (their plans start new slices)."""

    def __init__(self, meta_client: HoodieTableMetaClient, as_of: str | None = None,
                 include_pending_compaction: bool = True):
        self.meta_client = meta_client
        self.as_of = as_of
        self.is_v8 = meta_client.table_config.timeline_layout_version >= 2
        completed = meta_client.timeline.completed().write_timeline()
        self.visible: dict[str, HoodieInstant] = {
            i.timestamp: i for i in completed if as_of is None or self.point(i) <= as_of
        }
        # write instants before the active timeline's start were archived after completing (Hudi's
        # isBeforeTimelineStarts): their files are committed, not leftovers of failed writes
        self.timeline_start = meta_client.timeline.commits_timeline_start()
        self.pending_compactions = {
            i.timestamp for i in meta_client.timeline.pending().of_actions([Action.COMPACTION])
        } if include_pending_compaction else set()
        self._pending_slice_starts: dict[tuple[str, str], str] | None = None
        self._archived_completions: dict[str, str] | None = None

    def point(self, instant: HoodieInstant) -> str:
        """Where `instant` sits on the time axis `as_of` is given in: its completion time in v8+."""
        return instant.completion_time if self.is_v8 and instant.completion_time else instant.timestamp

    def is_committed(self, instant_time: str) -> bool:
        """Is a file written at `instant_time` part of the table at the point?"""
        if instant_time in self.visible:
            return True
        archived = self.timeline_start is not None and instant_time < self.timeline_start
        return archived and (self.as_of is None or instant_time <= self.as_of)

    def log_base_instant(self, partition: str, lf: HoodieLogFile, group: HoodieFileGroup | None) -> str | None:
        """The base instant of the slice log file `lf` belongs to (None: not committed at the point)."""
        if not self.is_v8:
            ts = lf.instant_time
            if self.is_committed(ts) or ts in self.pending_compactions:
                return ts
            return None
        creator = self.visible.get(lf.instant_time)
        if creator is not None:
            point = self.point(creator)
        elif self.is_committed(lf.instant_time):  # written by an archived deltacommit
            point = self._archived_completion_time(lf.instant_time)
        else:
            return None
        # Hudi's HoodieFileGroup.getBaseInstantTime: the latest slice start (a base file's instant, or a pending
        # compaction's, where the next slice begins) at or before the log's completion time, compared with start
        # times (request times): a log that completes after a compaction was planned belongs to the new slice
        starts = [k for k, s in (group.slices.items() if group else []) if s.base_file]
        pending = self._compaction_starts().get((partition, lf.file_id))
        starts += [pending] if pending else []
        earlier = [k for k in starts if k <= point]
        if earlier:
            return max(earlier)
        # no base file before it: the log joins the slice an earlier log of a base-less group started (Hudi's
        # addLogFile with the group's slices so far; logs are added oldest first), else starts one itself
        log_starts = [k for k in (group.slices if group else {}) if k <= point]
        return max(log_starts) if log_starts else lf.instant_time

    def _archived_completion_time(self, instant_time: str) -> str:
        """The completion time of an archived write (Hudi's CompletionTimeQueryView reads the archive too); the
        archive is read once per view, only when a live log file was written by an archived instant."""
        if self._archived_completions is None:
            from storage.timeline.archived_timeline import HoodieArchivedTimeline

            archived = HoodieArchivedTimeline(self.meta_client, end=self.timeline_start).completed()
            self._archived_completions = {i.timestamp: i.completion_time for i in archived if i.completion_time}
        return self._archived_completions.get(instant_time) or instant_time

    def _compaction_starts(self) -> dict[tuple[str, str], str]:
        """(partition, file id) -> the pending compaction planned for it (the plans read once per view)."""
        if self._pending_slice_starts is None:
            from storage.table.pending_plans import pending_compaction_instants

            self._pending_slice_starts = pending_compaction_instants(self.meta_client) if self.pending_compactions \
                else {}
        return self._pending_slice_starts


def build_file_groups(listing: FileListing, base_path: str,
                      timeline: SliceTimeline) -> dict[HoodieFileGroupId, HoodieFileGroup]:
    """The file groups of the committed files of `listing` (paths under `base_path`), sliced by `timeline`."""
    groups: dict[HoodieFileGroupId, HoodieFileGroup] = {}
    for bf in listing.base_files:
        if not timeline.is_committed(bf.instant_time):
            continue  # written by an instant that is not completed (or after as_of)
        partition = relative_partition_path(base_path, bf.path.rsplit("/", 1)[0])
        fg_id = HoodieFileGroupId(partition, bf.file_id)
        groups.setdefault(fg_id, HoodieFileGroup(fg_id)).slice_at(bf.instant_time).base_file = bf
    for partition, lf in sorted(listing.log_files, key=lambda entry: (entry[0], entry[1].order_key())):
        base_instant = timeline.log_base_instant(partition, lf, groups.get(HoodieFileGroupId(partition, lf.file_id)))
        if base_instant is None:
            continue
        fg_id = HoodieFileGroupId(partition, lf.file_id)
        groups.setdefault(fg_id, HoodieFileGroup(fg_id)).slice_at(base_instant).log_files.append(lf)
    return groups


def committed_log_extents(meta_client: HoodieTableMetaClient) -> dict[str, int]:
    """Log file name -> the largest size a completed commit recorded for it: the bytes of a log file that
    completed commits account for (damage inside them is an error for readers, damage past them is the partial
    block of a writer that died)."""
    extents: dict[str, int] = {}
    for instant in meta_client.timeline.completed().write_timeline():
        md = meta_client.active_timeline.commit_metadata_if_active(instant)
        if md is None:  # archived since the timeline was listed: only damage detection is weaker
            continue
        for stat in md.write_stats():
            for name in stat.logFiles or ([stat.path] if stat.path and ".log." in stat.path else []):
                name = name.rsplit("/", 1)[-1]
                extents[name] = max(extents.get(name, 0), int(stat.fileSizeInBytes or 0))
    return extents


def latest_merged_slice(group: HoodieFileGroup, pending_compactions: set[str]) -> FileSlice | None:
    """The group's latest slice as readers must see it while a compaction is pending: a slice that starts at a
    pending compaction has no base file yet, so it is read together with the slice before it (that slice's base
    file and log files, then its own log files)."""
    latest = group.latest_slice()
    if latest is None or latest.base_file is not None or latest.base_instant not in pending_compactions:
        return latest
    older = [s for s in group.ordered_slices() if s.base_instant < latest.base_instant and not s.is_empty()]
    if not older:
        return latest
    previous = older[0]
    return FileSlice(latest.file_group_id, previous.base_instant, previous.base_file,
                     previous.log_files + latest.log_files)
