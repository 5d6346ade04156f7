"""The file-system view: file groups and their slices as of a completed instant.

Only files written by completed commits are visible, and files older than the first instant of the active
timeline (their commits were archived, so they completed); file groups replaced by a completed replacecommit
are hidden (`replaced_file_groups` keeps them for the cleaner).
In table v8 a log file names the deltacommit that created it, and belongs to the slice with
the greatest base instant at or before that commit's completion. How files become groups and slices lives in
`storage.table.file_groups` (shared with the metadata table's reader); this view adds the listing, replaced file
groups and the queries.

Where the file infos come from (Hudi's, hudi-rs's and Trino's rule): a table whose metadata table has its `files`
partition enabled (`hoodie.table.metadata.partitions`) is listed through it - partitions from its
`__all_partitions__` record, files per partition from theirs - unless the caller says not to
(`use_metadata_table`, the reader option `hoodie.metadata.enable`); storage is then not listed at all, so a file no
commit recorded there (a stray copy) is not part of the table. The latest metadata table is read, as a
listing is the latest.
When it is missing or damaged the view logs a warning naming the table and why (the damaged file), and lists the
directories: the documented fallback for a damaged metadata table (what counts as damaged:
`storage.metadata.table_metadata`), so a damaged one never yields another set of files.
"""
from __future__ import annotations

import logging

from storage.exception import HoodieCorruptedMetadataError, HoodieMetadataNotAvailableError
from storage.metadata.table_metadata import FILES, HoodieTableMetadata, enabled_partitions
from storage.table.file_groups import (
    FileListing,
    SliceTimeline,
    build_file_groups,
    latest_merged_slice,
    list_table_files,
    listing_of_files,
)
from storage.table.file_slice import FileSlice, HoodieBaseFile, HoodieFileGroup, HoodieFileGroupId
from storage.table.meta_client import HoodieTableMetaClient
from storage.timeline.instant import Action, HoodieInstant

__all__ = ["FileSystemView", "list_table_files", "metadata_listing"]

log = logging.getLogger(__name__)


def metadata_listing(metadata: HoodieTableMetadata, partitions: list[str] | None = None) -> FileListing:
    """The data files the metadata table records, of `partitions` (None: every partition `__all_partitions__`
    names), as a directory listing would give them."""
    known = set(metadata.all_partition_paths())
    files = metadata.files_in_partitions(sorted(known) if partitions is None else partitions)
    present = known if partitions is None else {p for p in partitions if p in known or files[p]}
    return listing_of_files(metadata.data_meta.base_path, files, present)


def listing_source(meta_client: HoodieTableMetaClient, partitions: list[str] | None = None,
                   use_metadata_table: bool = True) -> tuple[FileListing, HoodieTableMetadata | None]:
    """The table's data files now, and the metadata table they were read from (None: storage was listed).

    Through its metadata table's `files` partition when it has one and `use_metadata_table`, else (or when that is
    unusable, with a warning) by listing storage. Always the latest state, as a directory listing is (Hudi reads
    the latest metadata table too: its older slices may be compacted or cleaned away); a view as of an earlier
    point keeps what that point can see."""
    if use_metadata_table and FILES in enabled_partitions(meta_client):
        try:
            metadata = HoodieTableMetadata(meta_client)
            return metadata_listing(metadata, partitions), metadata
        except (HoodieMetadataNotAvailableError, HoodieCorruptedMetadataError) as exc:
            log.warning("table %s: its metadata table cannot be used to list files (%s); listing storage instead",
                        meta_client.base_path, exc)
    return list_table_files(meta_client.storage, meta_client.base_path, partitions), None


def table_listing(meta_client: HoodieTableMetaClient, partitions: list[str] | None = None,
                  use_metadata_table: bool = True) -> FileListing:
    """The table's data files now (`listing_source` without the metadata table it came from)."""
    return listing_source(meta_client, partitions, use_metadata_table)[0]


class FileSystemView:
    """File groups of a table as of `as_of` (an instant time; None = the latest completed instant), listed through
    the metadata table unless `use_metadata_table` is False (module doc)."""

    def __init__(self, meta_client: HoodieTableMetaClient, as_of: str | None = None, partitions: list[str] | None = None,
                 include_pending_compaction: bool = True, use_metadata_table: bool = True):
        self.meta_client = meta_client
        self.as_of = as_of
        self.slicing = SliceTimeline(meta_client, as_of, include_pending_compaction)
        self.is_v8 = self.slicing.is_v8
        self.visible: dict[str, HoodieInstant] = self.slicing.visible
        self.timeline_start = self.slicing.timeline_start
        self.pending_compactions = self.slicing.pending_compactions
        self.replaced = self._replaced_file_groups()
        # the metadata table listed through, kept for readers of its other partitions (data skipping)
        listing, self.metadata = listing_source(meta_client, partitions, use_metadata_table)
        self._partitions = sorted(listing.partitions)
        self._groups = self._build_groups(listing)

    def is_committed(self, instant_time: str) -> bool:
        """Is a file written at `instant_time` part of the table at the view's point?"""
        return self.slicing.is_committed(instant_time)

    def _replaced_file_groups(self) -> dict[HoodieFileGroupId, str]:
        """Replaced file group -> the time of the replacecommit that replaced it."""
        replaced: dict[HoodieFileGroupId, str] = {}
        for instant in sorted(self.visible.values(), key=HoodieInstant.sort_key):
            if instant.action == Action.REPLACE_COMMIT:
                meta = self.meta_client.active_timeline.commit_metadata_if_active(instant)
                if meta is None:
                    # archived since the timeline was listed: archival waits until the cleaner deleted the file
                    # groups it replaced, and the listing below is taken after, so none of them is listed
                    continue
                for p, f in meta.replaced_file_ids():
                    replaced.setdefault(HoodieFileGroupId(p, f), instant.timestamp)
        return replaced

    def _build_groups(self, listing: FileListing) -> dict[HoodieFileGroupId, HoodieFileGroup]:
        groups = build_file_groups(listing, self.meta_client.base_path, self.slicing)
        self._replaced_groups = {fg_id: groups.pop(fg_id) for fg_id in list(groups) if fg_id in self.replaced}
        return groups

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
        return [latest_merged_slice(self._groups[s.file_group_id], self.pending_compactions)
                for s in self.latest_file_slices(partitions)]
