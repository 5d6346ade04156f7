"""Metadata-table records from the data table's state and actions (Hudi's HoodieTableMetadataUtil): the files and
stats records of committed files, their placement in MDT file groups, and what a compacted base file keeps."""
from __future__ import annotations

from collections.abc import Iterable
from dataclasses import replace

from storage.metadata.column_stats import aggregate_partition_stats
from storage.metadata.keys import (
    ALL_PARTITIONS_KEY,
    column_stats_key,
    file_group_index,
    mdt_partition_name,
    partition_stats_key,
)
from storage.metadata.records import ColumnStats, FileInfo, FileListing, MetadataRecord, MetadataRecordType
from storage.metadata.table_metadata import INIT_INSTANT_PREFIX, HoodieTableMetadata, combine_records
from storage.table.fs_view import FileSystemView


def committed_files(view: FileSystemView) -> dict[str, dict[str, int]]:
    """Partition -> {file name: size} of every committed data file (all slices, replaced file groups too: files
    leave the listing only when the cleaner deletes them)."""
    out: dict[str, dict[str, int]] = {p: {} for p in view.partitions()}
    groups = view.file_groups() + [g for g, _ in view.replaced_file_groups()]
    for group in groups:
        files = out.setdefault(group.file_group_id.partition_path, {})
        for file_slice in group.slices.values():
            if file_slice.base_file is not None:
                files[file_slice.base_file.name] = file_slice.base_file.size
            files.update((lf.name, lf.size) for lf in file_slice.log_files)
    return out


def slice_files(view: FileSystemView, partition: str) -> dict[str, set[str]]:
    """File id -> names of the files of its latest slice (file groups replaced by completed instants left out)."""
    return {s.file_id: {*([s.base_file.name] if s.base_file else []), *(lf.name for lf in s.log_files)}
            for s in view.latest_file_slices([partition])}


def slice_file_names(view: FileSystemView, partition: str) -> set[str]:
    return {n for names in slice_files(view, partition).values() for n in names}


def stats_by_file(reader: HoodieTableMetadata, partitions: list[str]) -> dict[str, dict[str, list[ColumnStats]]]:
    return {p: group_by_file(reader.column_stats(partition_path=p)) for p in partitions}


def group_by_file(stats: Iterable[ColumnStats]) -> dict[str, list[ColumnStats]]:
    out: dict[str, list[ColumnStats]] = {}
    for s in stats:
        out.setdefault(s.file_name or "", []).append(s)
    return out


def partition_list_record(partitions: Iterable[str]) -> MetadataRecord:
    return MetadataRecord(ALL_PARTITIONS_KEY, MetadataRecordType.PARTITION_LIST,
                          FileListing({mdt_partition_name(p): FileInfo(0) for p in sorted(partitions)}))


def files_record(partition: str, files: dict[str, int]) -> MetadataRecord:
    return MetadataRecord(mdt_partition_name(partition), MetadataRecordType.FILE_LIST,
                          FileListing({n: FileInfo(size) for n, size in sorted(files.items())}))


def column_stats_record(partition: str, stats: ColumnStats) -> MetadataRecord:
    return MetadataRecord(column_stats_key(stats.column_name or "", partition, stats.file_name or ""),
                          MetadataRecordType.COLUMN_STATS, stats)


def partition_stats_records(partition: str, stats: list[ColumnStats]) -> list[MetadataRecord]:
    return [MetadataRecord(partition_stats_key(s.column_name or "", partition), MetadataRecordType.PARTITION_STATS, s)
            for s in aggregate_partition_stats(mdt_partition_name(partition), stats)]


def by_file_group(records: list[MetadataRecord], count: int) -> list[list[MetadataRecord]]:
    """Records placed in their file groups (Java hash of the key mod `count`), one record per key."""
    groups: list[dict[str, MetadataRecord]] = [{} for _ in range(count)]
    for record in records:
        group = groups[file_group_index(record.key, count) if count > 1 else 0]
        previous = group.get(record.key)
        group[record.key] = record if previous is None else combine_records(previous, record)
    return [list(g.values()) for g in groups]


def for_base_file(record: MetadataRecord) -> MetadataRecord | None:
    """What a compacted base file keeps of a merged record: no tombstones (nothing older is left to cancel)."""
    payload = record.payload
    if isinstance(payload, ColumnStats):
        return None if payload.is_deleted else record
    if isinstance(payload, FileListing):
        return replace(record, payload=FileListing({n: i for n, i in payload.entries.items() if not i.is_deleted}))
    return record


def is_partition_init_instant(instant_time: str) -> bool:
    """An MDT partition initialisation: 00000000000000xxx (Hudi 1.x; version 6 on an empty table), or a version 6
    data instant plus a suffix of 010 or more (Hudi 0.x's createIndexInitTimestamp)."""
    return instant_time.startswith(INIT_INSTANT_PREFIX) or (len(instant_time) == 20 and instant_time[17:] >= "010")
