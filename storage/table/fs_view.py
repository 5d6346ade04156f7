"""The file-system view: file groups and their slices as of a completed instant.

Only files written by completed commits are visible, and files older than the first instant of the active
timeline (their commits were archived, so they completed); file groups replaced by a completed replacecommit
are hidden (`replaced_file_groups` keeps them for the cleaner).
In table v8 a log file names the deltacommit that created it, and belongs to the slice with
the greatest base instant at or before that commit's completion.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from storage.io.storage import FileInfo, HoodieStorage
from storage.fs_utils import PARTITION_METAFILE, parse_base_file_name, parse_log_file_name, relative_partition_path
from storage.table.file_slice import FileSlice, HoodieBaseFile, HoodieFileGroup, HoodieFileGroupId, HoodieLogFile
from storage.table.meta_client import HoodieTableMetaClient
from storage.timeline.instant import Action, HoodieInstant


@dataclass
class _Listing:
    partitions: set[str] = field(default_factory=set)
    base_files: list[HoodieBaseFile] = field(default_factory=list)
    log_files: list[tuple[str, HoodieLogFile]] = field(default_factory=list)


def list_table_files(storage: HoodieStorage, base_path: str, partitions: list[str] | None = None) -> _Listing:
    """The table's data files: one recursive listing of the table (`partitions` None) or one listing per named
    partition; `.hoodie` and other hidden directories are skipped."""
    listing = _Listing()
    base = base_path.rstrip("/")
    if partitions is None:
        infos = storage.list_files(base)
    else:
        infos = [i for p in partitions for i in storage.list_dir(f"{base}/{p}" if p else base) if not i.is_dir]
    for info in infos:
        directory, _, name = info.path[len(base) + 1:].rpartition("/")
        if any(part.startswith(".") for part in directory.split("/") if part):
            continue  # .hoodie, .temp and other hidden directories hold no data files
        _collect(listing, directory, info, name)
    return listing


def _collect(listing: _Listing, partition: str, info: FileInfo, name: str) -> None:
    if name == PARTITION_METAFILE or name.startswith(PARTITION_METAFILE):
        listing.partitions.add(partition)
        return
    if name.startswith("."):
        if parse_log_file_name(name):
            listing.log_files.append((partition, HoodieLogFile.of(info.path, info.size)))
            listing.partitions.add(partition)
        return
    if parse_base_file_name(name):
        listing.base_files.append(HoodieBaseFile.of(info.path, info.size))
        listing.partitions.add(partition)


class FileSystemView:
    """File groups of a table as of `as_of` (an instant time; None = the latest completed instant)."""

    def __init__(self, meta_client: HoodieTableMetaClient, as_of: str | None = None, partitions: list[str] | None = None,
                 include_pending_compaction: bool = True):
        self.meta_client = meta_client
        self.as_of = as_of
        self.is_v8 = meta_client.table_config.timeline_layout_version >= 2
        completed = meta_client.timeline.completed().write_timeline()
        self.visible: dict[str, HoodieInstant] = {
            i.timestamp: i for i in completed if as_of is None or self._point(i) <= as_of
        }
        # write instants before the active timeline's start were archived after completing (Hudi's
        # isBeforeTimelineStarts): their files are committed, not leftovers of failed writes
        self.timeline_start = meta_client.timeline.commits_timeline_start()
        self.pending_compactions = {
            i.timestamp for i in meta_client.timeline.pending().of_actions([Action.COMPACTION])
        } if include_pending_compaction else set()
        self.replaced = self._replaced_file_groups()
        self._pending_slice_starts: dict[tuple[str, str], str] | None = None
        self._archived_completions: dict[str, str] | None = None
        listing = list_table_files(meta_client.storage, meta_client.base_path, partitions)
        self._partitions = sorted(listing.partitions)
        self._groups = self._build_groups(listing)

    def _point(self, instant: HoodieInstant) -> str:
        return instant.completion_time if self.is_v8 and instant.completion_time else instant.timestamp

    def is_committed(self, instant_time: str) -> bool:
        """Is a file written at `instant_time` part of the table at the view's point?"""
        if instant_time in self.visible:
            return True
        archived = self.timeline_start is not None and instant_time < self.timeline_start
        return archived and (self.as_of is None or instant_time <= self.as_of)

    def _replaced_file_groups(self) -> dict[HoodieFileGroupId, str]:
        """Replaced file group -> the time of the replacecommit that replaced it."""
        replaced: dict[HoodieFileGroupId, str] = {}
        for instant in sorted(self.visible.values(), key=HoodieInstant.sort_key):
            if instant.action == Action.REPLACE_COMMIT:
                meta = self.meta_client.active_timeline.commit_metadata(instant)
                for p, f in meta.replaced_file_ids():
                    replaced.setdefault(HoodieFileGroupId(p, f), instant.timestamp)
        return replaced

    def _build_groups(self, listing: _Listing) -> dict[HoodieFileGroupId, HoodieFileGroup]:
        groups: dict[HoodieFileGroupId, HoodieFileGroup] = {}
        for bf in listing.base_files:
            if not self.is_committed(bf.instant_time):
                continue  # written by an instant that is not completed (or after as_of)
            partition = relative_partition_path(self.meta_client.base_path, bf.path.rsplit("/", 1)[0])
            fg_id = HoodieFileGroupId(partition, bf.file_id)
            groups.setdefault(fg_id, HoodieFileGroup(fg_id)).slice_at(bf.instant_time).base_file = bf
        for partition, lf in listing.log_files:
            base_instant = self._log_base_instant(partition, lf, groups.get(HoodieFileGroupId(partition, lf.file_id)))
            if base_instant is None:
                continue
            fg_id = HoodieFileGroupId(partition, lf.file_id)
            groups.setdefault(fg_id, HoodieFileGroup(fg_id)).slice_at(base_instant).log_files.append(lf)
        self._replaced_groups = {fg_id: groups.pop(fg_id) for fg_id in list(groups) if fg_id in self.replaced}
        return groups

    def _log_base_instant(self, partition: str, lf: HoodieLogFile, group: HoodieFileGroup | None) -> str | None:
        if not self.is_v8:
            ts = lf.instant_time
            if self.is_committed(ts) or ts in self.pending_compactions:
                return ts
            return None
        creator = self.visible.get(lf.instant_time)
        if creator is not None:
            point = self._point(creator)
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
        return max(earlier) if earlier else lf.instant_time

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

    # -- queries ---------------------------------------------------------------------------------
    def partitions(self) -> list[str]:
        return list(self._partitions)

    def file_groups(self, partition: str | None = None) -> list[HoodieFileGroup]:
        return [g for k, g in sorted(self._groups.items()) if partition is None or k.partition_path == partition]

    def replaced_file_groups(self, partition: str | None = None,
                             before: str | None = None) -> list[tuple[HoodieFileGroup, str]]:
        """(file group, replacing instant) of the replaced file groups, those replaced before `before` only if
        given (Hudi's getReplacedFileGroupsBefore / getAllReplacedFileGroups)."""
        return [(g, self.replaced[k]) for k, g in sorted(self._replaced_groups.items())
                if (partition is None or k.partition_path == partition)
                and (before is None or self.replaced[k] < before)]

    def latest_file_slices(self, partitions: list[str] | None = None) -> list[FileSlice]:
        wanted = None if partitions is None else set(partitions)
        out = []
        for fg_id, group in sorted(self._groups.items()):
            if wanted is not None and fg_id.partition_path not in wanted:
                continue
            latest = group.latest_slice()
            if latest is not None:
                out.append(latest)
        return out

    def latest_base_files(self, partitions: list[str] | None = None) -> list[HoodieBaseFile]:
        return [s.base_file for s in self.latest_file_slices(partitions) if s.base_file is not None]


    def latest_merged_file_slices(self, partitions: list[str] | None = None) -> list[FileSlice]:
        """Latest slices as readers must see them while a compaction is pending: a slice that starts at a pending
        compaction has no base file yet, so it is read together with the slice before it (that slice's base file
        and log files, then its own log files)."""
        out = []
        for latest in self.latest_file_slices(partitions):
            if latest.base_file is None and latest.base_instant in self.pending_compactions:
                group = self._groups[latest.file_group_id]
                older = [s for s in group.ordered_slices() if s.base_instant < latest.base_instant and not s.is_empty()]
                if older:
                    previous = older[0]
                    latest = FileSlice(latest.file_group_id, previous.base_instant, previous.base_file,
                                       previous.log_files + latest.log_files)
            out.append(latest)
        return out
