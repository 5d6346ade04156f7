"""Reading a data table's metadata table (`<base>/.hoodie/metadata`, Hudi's HoodieBackedTableMetadata): the
partition list and file listings of the `files` partition, and the `column_stats` / `partition_stats` records -
so that readers can list a table, and skip files, without listing or opening its data files.

The metadata table (MDT) is a MERGE_ON_READ table of its own (notes §2): per MDT partition, file groups whose
slices are an HFile base file plus log files of HFILE_DATA_BLOCK (upserts) and DELETE_BLOCK (deletes) blocks.
Reading one goes:

1. Which MDT instants count (`valid_instants`, notes §4.3): an MDT deltacommit is written *before* its data
   instant completes, so it counts only when the data instant with the same time completed (or was archived,
   hence completed); the MDT's own instants - initialisation (`00000000000000…`), compactions, log compactions,
   rollbacks, table-version-6 suffixed instants - count when completed on the MDT timeline. `as_of` (a time on the
   axis the data table's time travel uses: completion times in table v8+, instant times in v6) narrows both.
2. The latest file slice of every file group of the MDT partition (`storage.table.file_groups`, the slicing the
   data table's file-system view uses, driven by the MDT timeline at `as_of`).
3. The slice's records merged by key as Hudi's HoodieMetadataPayload does: the valid log blocks in write order
   (`storage.file_group.log_scanner.LogBlockSelector`: blocks of invalid instants, rolled-back and log-compacted
   blocks skipped exactly as for data tables; a DELETE entry removes the key until a later record brings it
   back), then the base file's record with the logs' result. `files` listings: union, a later deletion removes
   a file (and is kept as a tombstone when the older side lacks the file), sizes take the larger;
   `column_stats` / `partition_stats`: a tombstone on either side or a tight-bound newer record replaces,
   otherwise min of mins, max of maxes and summed counts; other record types: the newer replaces.

Lookups read only the keys asked for: exact keys through the HFiles' block index (`HFileReader.get_many`), column
and partition filters as key-prefix scans, so asking for one partition's files or one column's stats decodes
only those cells.

Damage is never a wrong answer (issue 39; tests/storage/metadata/test_metadata_fuzz.py fuzzes it): reading raises
`HoodieCorruptedMetadataError` naming the damaged file, and the callers fall back - the file-system view lists
storage instead (`storage.table.fs_view`, with a warning), data skipping keeps every slice
(`storage.read.data_skipping`, with a warning). HFile blocks carry gzip CRC-32s (1.1) or CRC32C checksums (1.0.x),
so a flipped byte in a record is caught there; what no checksum covers is cross-checked:

- a damaged base HFile (trailer, block headers, checksums, cell order and count, a key or trailer string that is
  not UTF-8, a record that does not decode as a metadata record);
- a log file shorter than the bytes the MDT commit metadata says a completed deltacommit wrote (cut at a block
  boundary: no damaged block is left to see);
- a damaged log block within those bytes: bad magic or lengths, a header that does not parse, content that does
  not decode, a SCHEMA header that differs from the schema inside its HFile, a block type no MDT holds, and (table
  v8+, one writer instant per log file) an INSTANT_TIME that is not the instant in the file's name - such blocks
  would otherwise be skipped as a failed write's and committed records silently lost;
- the MDT's hoodie.properties (its checksum covers the table name only): not MERGE_ON_READ, or another table
  version or timeline layout than the data table's, or values that do not parse;
- its timeline: no completed MDT deltacommit for the data table's latest completed write (a damaged timeline path,
  or instant files that do not parse).

A damaged region past the committed bytes (a writer that died mid-append) is skipped with a warning, as for data
tables.
"""
from __future__ import annotations

import logging
import struct
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, replace
from typing import Any

from storage.config import TableConfigKeys as TK
from storage.exception import (
    HoodieCorruptedLogError,
    HoodieCorruptedMetadataError,
    HoodieMetadataNotAvailableError,
)
from storage.file_group.log_block import DeleteBlock, HFileDataBlock
from storage.file_group.log_scanner import (
    METADATA_TABLE_BLOCKS,
    LogBlockRef,
    LogBlockSelector,
    LogScanStats,
)
from storage.fs_utils import META_FOLDER
from storage.io.hfile.format import HoodieHFileError
from storage.io.hfile.reader import Cell, HFileReader
from storage.metadata.bloom_filters import BLOOM_FILTERS
from storage.metadata.keys import (
    ALL_PARTITIONS_KEY,
    NON_PARTITIONED_NAME,
    bloom_filter_key,
    column_stats_prefix,
    hash_id,
    mdt_partition_name,
)
from storage.metadata.records import (
    BloomFilterInfo,
    ColumnStats,
    FileInfo,
    FileListing,
    MetadataRecord,
    decode_record,
)
from storage.table.file_groups import (
    SliceTimeline,
    build_file_groups,
    committed_log_extents,
    latest_merged_slice,
    list_table_files,
)
from storage.table.file_slice import FileSlice
from storage.table.meta_client import HoodieTableMetaClient
from storage.table.metadata_table import metadata_table_path
from storage.table.table_config import PROPERTIES_FILE
from storage.timeline.instant import Action, HoodieInstant

log = logging.getLogger(__name__)

FILES = "files"
COLUMN_STATS = "column_stats"
PARTITION_STATS = "partition_stats"

INIT_INSTANT_PREFIX = "00000000000000"  # Hudi's SOLO_COMMIT_TIMESTAMP: MDT partition initialisations
_MILLIS_INSTANT_LENGTH = 17  # table v6 MDT-only instants are a data instant plus a 3-digit suffix
_HASH_ID_LENGTH = len(hash_id(""))


# ----------------------------------------------------------------------------------------------- what is enabled


def enabled_partitions(meta_client: HoodieTableMetaClient) -> tuple[str, ...]:
    """The fully built MDT partitions the data table lists in `hoodie.table.metadata.partitions` (sorted)."""
    raw = meta_client.table_config.props.get(TK.METADATA_PARTITIONS.key) or ""
    return tuple(sorted({p.strip() for p in raw.split(",") if p.strip()}))


def is_metadata_table_available(meta_client: HoodieTableMetaClient) -> bool:
    """Can the data table be listed through its metadata table (`files` enabled and the MDT present)?"""
    return FILES in enabled_partitions(meta_client) and \
        HoodieTableMetaClient.exists(metadata_table_path(meta_client), meta_client.storage)


# ----------------------------------------------------------------------------------------------- valid instants


@dataclass(frozen=True)
class ValidInstants:
    """The MDT instants whose log blocks count: `instants`, plus any instant before `archived_before` (archived on
    both timelines after completing) that is not after `as_of`."""

    instants: frozenset[str]
    archived_before: str | None = None
    as_of: str | None = None

    def __contains__(self, instant: object) -> bool:
        if not isinstance(instant, str):
            return False
        if instant in self.instants:
            return True
        archived = self.archived_before is not None and instant < self.archived_before
        return archived and (self.as_of is None or instant <= self.as_of)


def _point(meta_client: HoodieTableMetaClient) -> Callable[[HoodieInstant], str]:
    """Where an instant of `meta_client`'s timeline sits on the time-travel axis (completion time in v8+)."""
    is_v8 = meta_client.table_config.timeline_layout_version >= 2
    return lambda i: i.completion_time if is_v8 and i.completion_time else i.timestamp


def _log_compaction_times(mdt: HoodieTableMetaClient) -> frozenset[str]:
    """MDT log compactions complete as deltacommits; their requested files tell them apart."""
    return frozenset(i.timestamp for i in mdt.active_timeline.all_files() if i.action == Action.LOG_COMPACTION)


def _is_mdt_own(instant: HoodieInstant, log_compactions: frozenset[str]) -> bool:
    """An MDT instant with no data-table counterpart: initialisation, compaction, log compaction, rollback,
    restore, clean, or a table-version-6 suffixed instant (`<data instant><3 digits>`)."""
    if instant.action != Action.DELTA_COMMIT:
        return True
    ts = instant.timestamp
    return ts.startswith(INIT_INSTANT_PREFIX) or ts in log_compactions or len(ts) > _MILLIS_INSTANT_LENGTH


def valid_instants(data: HoodieTableMetaClient, mdt: HoodieTableMetaClient,
                   as_of: str | None = None) -> ValidInstants:
    """The MDT instants a reader may trust at `as_of` (None: now): completed on the MDT timeline, and - unless
    they are the MDT's own - completed on the data timeline too (Hudi's rule: the MDT deltacommit completes before
    its data instant, so a write that died in between left an MDT entry no reader may use)."""
    data_point, mdt_point = _point(data), _point(mdt)
    data_done = {i.timestamp for i in data.timeline.completed() if as_of is None or data_point(i) <= as_of}
    data_start = data.timeline.commits_timeline_start()
    log_compactions = _log_compaction_times(mdt)
    valid = set()
    for instant in mdt.timeline.completed():
        if as_of is not None and mdt_point(instant) > as_of:
            continue
        ts = instant.timestamp
        archived_on_data = data_start is not None and ts < data_start and (as_of is None or ts <= as_of)
        if ts in data_done or archived_on_data or _is_mdt_own(instant, log_compactions):
            valid.add(ts)
    mdt_start = mdt.timeline.commits_timeline_start()
    archived_before = min(mdt_start, data_start) if mdt_start and data_start else None
    ignored = sorted(i.timestamp for i in mdt.timeline.completed().of_actions([Action.DELTA_COMMIT])
                     if i.timestamp not in valid and (as_of is None or mdt_point(i) <= as_of))
    if ignored:
        log.info("metadata table of %s: deltacommits %s are not trusted (their data instants did not complete)",
                 data.base_path, ignored)
    return ValidInstants(frozenset(valid), archived_before, as_of)


# ----------------------------------------------------------------------------------------------- merging records


def combine_records(older: MetadataRecord, newer: MetadataRecord) -> MetadataRecord:
    """`newer` merged onto `older` (same key) as Hudi's HoodieMetadataPayload.preCombine does."""
    if isinstance(older.payload, FileListing) and isinstance(newer.payload, FileListing):
        return replace(newer, payload=combine_file_listings(older.payload, newer.payload))
    if isinstance(older.payload, ColumnStats) and isinstance(newer.payload, ColumnStats):
        return replace(newer, payload=combine_column_stats(older.payload, newer.payload))
    return newer


def combine_file_listings(older: FileListing, newer: FileListing) -> FileListing:
    """Union; a name deleted by `newer` leaves (a deletion of a name `older` lacks stays, as a tombstone for the
    base file the log records are merged onto later); sizes only grow, so the larger wins."""
    out = dict(older.entries)
    for name, info in newer.entries.items():
        previous = out.get(name)
        if previous is None:
            out[name] = info
        elif info.is_deleted:
            if previous.is_deleted:
                log.warning("file %s is deleted twice in the metadata table's files partition", name)
                out[name] = info
            else:
                del out[name]
        else:
            out[name] = FileInfo(max(info.size, previous.size), False)
    return FileListing(out)


def combine_column_stats(older: ColumnStats, newer: ColumnStats) -> ColumnStats:
    """A tombstone on either side, or tight bounds on the newer side (partition stats recomputed over the
    partition), replace; otherwise the two ranges and counts are aggregated (Hudi's mergeColumnStatsRecords)."""
    if newer.is_deleted or older.is_deleted or newer.is_tight_bound:
        return newer
    return replace(newer,
                   min_value=_extreme(older, newer, "min_value", min),
                   max_value=_extreme(older, newer, "max_value", max),
                   value_count=_sum(older.value_count, newer.value_count),
                   null_count=_sum(older.null_count, newer.null_count),
                   total_size=_sum(older.total_size, newer.total_size),
                   total_uncompressed_size=_sum(older.total_uncompressed_size, newer.total_uncompressed_size))


def _extreme(older: ColumnStats, newer: ColumnStats, field: str, pick: Callable[..., Any]):
    """The wrapped min (or max) of both records, compared by logical value (decimals as numbers, not bytes)."""
    candidates = [(s, getattr(s, field)) for s in (older, newer) if getattr(s, field) is not None]
    if len(candidates) < 2:
        return candidates[0][1] if candidates else None
    try:
        return pick(candidates, key=lambda c: c[1].to_python(c[0].value_type))[1]
    except TypeError:  # values of different types: the newer record's stands
        return getattr(newer, field)


def _sum(a: int | None, b: int | None) -> int | None:
    return None if a is None and b is None else (a or 0) + (b or 0)


# ----------------------------------------------------------------------------------------------- key queries


@dataclass(frozen=True)
class KeyQuery:
    """Which records of an MDT partition to read: exact `keys`, keys starting with one of `prefixes`, or every
    key (both None); `accept` filters row keys further before their values are decoded."""

    keys: frozenset[str] | None = None
    prefixes: tuple[str, ...] | None = None
    accept: Callable[[str], bool] | None = None

    def cells(self, reader: HFileReader) -> Iterator[Cell]:
        if self.keys is not None:
            found = reader.get_many(self.keys)
            cells: Iterable[Cell] = (Cell(k, found[k]) for k in sorted(found))
        elif self.prefixes is not None:
            cells = reader.scan_prefixes(self.prefixes)
        else:
            cells = reader.cells()
        for cell in cells:
            if self.accept is None or self.accept(cell.key_str):
                yield cell

    def matches(self, key: str) -> bool:
        if self.keys is not None and key not in self.keys:
            return False
        if self.prefixes is not None and not key.startswith(self.prefixes):
            return False
        return self.accept is None or self.accept(key)


ALL_KEYS = KeyQuery()


# ----------------------------------------------------------------------------------------------- the reader


def pending_restore(meta_client: HoodieTableMetaClient) -> HoodieInstant | None:
    """The data table's restore under way (requested or inflight), if any."""
    return meta_client.timeline.pending().of_actions([Action.RESTORE]).last()


class HoodieTableMetadata:
    """The metadata table of the data table `meta_client` at `as_of` (None: the latest).

    Raises `HoodieMetadataNotAvailableError` when the data table has no usable metadata table (no `files` partition
    enabled, or no `.hoodie/metadata`): callers list storage instead. So does a data table with a restore under way
    (unless `allow_pending_restore`: the restore's own MDT step): its rollbacks leave the MDT to the restore's
    completion (metadata_writer, "Savepoint and restore"), so until then it may still list rolled-back files.
    """

    def __init__(self, meta_client: HoodieTableMetaClient, as_of: str | None = None,
                 allow_pending_restore: bool = False):
        self.data_meta = meta_client
        self.as_of = as_of
        self.enabled_partitions = enabled_partitions(meta_client)
        if FILES not in self.enabled_partitions:
            raise HoodieMetadataNotAvailableError(
                f"{meta_client.base_path}: the metadata table's files partition is not enabled "
                f"({TK.METADATA_PARTITIONS.key}={','.join(self.enabled_partitions) or '(empty)'})")
        restoring = pending_restore(meta_client)
        if restoring is not None and not allow_pending_restore:
            raise HoodieMetadataNotAvailableError(
                f"{meta_client.base_path}: restore {restoring.timestamp} is under way; the metadata table is brought "
                "in step when it completes")
        self.base_path = metadata_table_path(meta_client)
        if not HoodieTableMetaClient.exists(self.base_path, meta_client.storage):
            raise HoodieMetadataNotAvailableError(f"{meta_client.base_path}: no metadata table at {self.base_path}")
        self.storage = meta_client.storage
        try:
            self.mdt_meta = HoodieTableMetaClient.load(self.base_path, meta_client.storage)
            self._check_config()
            self.valid = valid_instants(meta_client, self.mdt_meta, as_of)
            self._check_in_step()
            self._slicing = SliceTimeline(self.mdt_meta, as_of)
        except HoodieCorruptedMetadataError:
            raise
        except ValueError as exc:  # a value of its hoodie.properties that does not parse, or names no usable path
            raise HoodieCorruptedMetadataError(f"the metadata table at {self.base_path} cannot be loaded "
                                               f"({self._properties_path} damaged?): {exc!r}") \
                from exc
        self._slices: dict[str, list[FileSlice]] = {}
        self._extents: dict[str, int] | None = None
        self.stats = LogScanStats()

    @property
    def _properties_path(self) -> str:
        return f"{self.base_path}/{META_FOLDER}/{PROPERTIES_FILE}"

    def _check_config(self) -> None:
        """The MDT's hoodie.properties must say what every MDT is - a MERGE_ON_READ table of the data table's
        version and timeline layout (its checksum covers the table name only, so a damaged value would be read,
        e.g. a layout that slices the MDT's log files as table v6 does)."""
        data, mdt = self.data_meta.table_config, self.mdt_meta.table_config
        found = (mdt.is_mor, mdt.version, mdt.timeline_layout_version)
        if found != (True, data.version, data.timeline_layout_version):
            raise HoodieCorruptedMetadataError(
                f"{self._properties_path} is damaged: table type {mdt.table_type}, version "
                f"{mdt.version}, timeline layout {mdt.timeline_layout_version}; a metadata table of "
                f"{self.data_meta.base_path} is MERGE_ON_READ, version {data.version}, layout "
                f"{data.timeline_layout_version}")

    def _check_in_step(self) -> None:
        """The data table's latest completed write (at `as_of`) must have its MDT deltacommit (which completes
        first; a writer that does not keep the MDT drops it), unless the MDT was (re)initialised after that write
        completed. Otherwise the MDT would list an older state: its timeline or its hoodie.properties (whose
        checksum covers the table name only) was damaged, e.g. a timeline path that finds no instants."""
        point, mdt_point = _point(self.data_meta), _point(self.mdt_meta)
        writes = self.data_meta.timeline.completed().write_timeline()
        latest = writes.filter(lambda i: self.as_of is None or point(i) <= self.as_of).last()
        if latest is None or latest.timestamp in self.valid:
            return
        # an MDT (re)built from the data table after that write completed lists it without a deltacommit of its own
        rebuilt = any(mdt_point(i) > point(latest) for i in self.mdt_meta.timeline.completed()
                      if self.as_of is None or mdt_point(i) <= self.as_of)
        if not rebuilt:
            raise HoodieCorruptedMetadataError(
                f"{self.data_meta.base_path}: the metadata table at {self.base_path} has no completed deltacommit "
                f"for the latest write {latest.timestamp} (its timeline or "
                f"{self._properties_path} is damaged, or it is out of step)")

    # -- the data table's listing ------------------------------------------------------------------

    def all_partition_paths(self) -> list[str]:
        """The data table's partitions (relative paths; "" for a non-partitioned table), sorted."""
        record = self.read_records(FILES, KeyQuery(keys=frozenset({ALL_PARTITIONS_KEY}))).get(ALL_PARTITIONS_KEY)
        names = _live_entries(record)
        return sorted("" if name == NON_PARTITIONED_NAME else name for name in names)

    def files_in_partition(self, partition_path: str) -> dict[str, int]:
        """File name -> size of the data files (base and log files) of `partition_path`."""
        return self.files_in_partitions([partition_path])[partition_path]

    def files_in_partitions(self, partition_paths: Iterable[str]) -> dict[str, dict[str, int]]:
        """`files_in_partition` of several partitions, read in one pass over the files partition."""
        wanted = {p: mdt_partition_name(p) for p in partition_paths}
        records = self.read_records(FILES, KeyQuery(keys=frozenset(wanted.values())))
        return {p: _live_entries(records.get(key)) for p, key in wanted.items()}

    # -- statistics ---------------------------------------------------------------------------------

    def column_stats(self, partition_path: str | None = None,
                     columns: Iterable[str] | None = None) -> list[ColumnStats]:
        """Column statistics of the data files (of `partition_path` only, and of `columns` only, when given),
        sorted by file and column; tombstones (`is_deleted`) left out."""
        self._require(COLUMN_STATS)
        columns = None if columns is None else sorted(set(columns))
        if columns is not None:
            query = KeyQuery(prefixes=tuple(column_stats_prefix(c, partition_path) for c in columns))
        elif partition_path is not None:
            partition_id = hash_id(mdt_partition_name(partition_path))
            query = KeyQuery(accept=lambda key: key[_HASH_ID_LENGTH:2 * _HASH_ID_LENGTH] == partition_id)
        else:
            query = ALL_KEYS
        return _live_stats(self.read_records(COLUMN_STATS, query))

    def partition_stats(self, columns: Iterable[str] | None = None,
                        partition_paths: Iterable[str] | None = None) -> list[ColumnStats]:
        """Per-partition statistics (`file_name` = the partition's name in the MDT: its path, "." when
        non-partitioned), of `columns` / `partition_paths` only when given, sorted by partition and column."""
        self._require(PARTITION_STATS)
        prefixes = None if columns is None else tuple(hash_id(c) for c in sorted(set(columns)))
        accept = None
        if partition_paths is not None:
            ids = {hash_id(mdt_partition_name(p)) for p in partition_paths}
            accept = lambda key: key[_HASH_ID_LENGTH:2 * _HASH_ID_LENGTH] in ids  # noqa: E731
        return _live_stats(self.read_records(PARTITION_STATS, KeyQuery(prefixes=prefixes, accept=accept)))

    def bloom_filters(self, partition_path: str, file_names: Iterable[str]) -> dict[str, BloomFilterInfo]:
        """The live bloom_filters records of the named base files of `partition_path`, by file name (files without
        one - never indexed, or deleted - are absent)."""
        self._require(BLOOM_FILTERS)
        names = {bloom_filter_key(partition_path, n): n for n in file_names}
        records = self.read_records(BLOOM_FILTERS, KeyQuery(keys=frozenset(names)))
        return {names[k]: r.payload for k, r in records.items()
                if isinstance(r.payload, BloomFilterInfo) and not r.payload.is_deleted}

    # -- records ------------------------------------------------------------------------------------

    def file_slices(self, partition: str) -> list[FileSlice]:
        """The latest (merged) file slice of each file group of MDT partition `partition`."""
        if partition not in self._slices:
            listing = list_table_files(self.storage, self.base_path, [partition])
            groups = build_file_groups(listing, self.base_path, self._slicing)
            slices = [latest_merged_slice(g, self._slicing.pending_compactions) for _, g in sorted(groups.items())]
            self._slices[partition] = [s for s in slices if s is not None]
        return self._slices[partition]

    def file_stats(self) -> dict[str, int]:
        """Sizes and counts of each enabled MDT partition's latest slices, as Hudi's HoodieBackedTableMetadata.stats
        names them (`<partition>.totalBaseFileSizeInBytes`, `.totalLogFileSizeInBytes`, `.baseFileCount`,
        `.logFileCount`)."""
        out: dict[str, int] = {}
        for partition in self.enabled_partitions:
            slices = self.file_slices(partition)
            bases = [s.base_file for s in slices if s.base_file is not None]
            logs = [lf for s in slices for lf in s.log_files]
            out.update({f"{partition}.totalBaseFileSizeInBytes": sum(b.size for b in bases),
                        f"{partition}.totalLogFileSizeInBytes": sum(lf.size for lf in logs),
                        f"{partition}.baseFileCount": len(bases), f"{partition}.logFileCount": len(logs)})
        return out

    def read_records(self, partition: str, query: KeyQuery = ALL_KEYS) -> dict[str, MetadataRecord]:
        """The merged records of MDT partition `partition` that `query` selects, by key."""
        self._require(partition)
        out: dict[str, MetadataRecord] = {}
        for file_slice in self.file_slices(partition):
            out.update(self._read_slice(file_slice, query))
        return out

    def slice_records(self, file_slice: FileSlice, query: KeyQuery = ALL_KEYS) -> dict[str, MetadataRecord]:
        """The merged records `query` selects of one MDT file slice: all of them for an MDT compaction's new base
        file, the keys of one shard for an index lookup."""
        return self._read_slice(file_slice, query)

    def _require(self, partition: str) -> None:
        if partition not in self.enabled_partitions:
            raise HoodieMetadataNotAvailableError(
                f"{self.data_meta.base_path}: metadata table partition {partition} is not enabled "
                f"({TK.METADATA_PARTITIONS.key}={','.join(self.enabled_partitions)})")

    def _read_slice(self, file_slice: FileSlice, query: KeyQuery) -> dict[str, MetadataRecord]:
        """The slice's records: its log records merged in write order, then merged onto the base file's."""
        logs = self._merge_logs(file_slice, query)
        out: dict[str, MetadataRecord] = {}
        if file_slice.base_file is not None:
            for record in self._base_records(file_slice.base_file.path, query):
                if record.key not in logs:
                    out[record.key] = record
                    continue
                newer = logs.pop(record.key)
                if newer is not None:  # None: deleted by a log DELETE entry
                    out[record.key] = combine_records(record, newer)
        out.update((k, r) for k, r in logs.items() if r is not None)
        return out

    def _base_records(self, path: str, query: KeyQuery) -> list[MetadataRecord]:
        try:
            reader = HFileReader(self.storage.read_bytes(path), path)
            schema = reader.schema
            if not schema:
                raise HoodieHFileError(f"{path}: no `schema` file info entry to decode the records with")
            return [decode_record(c.key, c.value, schema, path) for c in query.cells(reader)]
        except HoodieCorruptedMetadataError:
            raise
        except _UNREADABLE as exc:  # HoodieHFileError, or a damaged trailer / key that does not decode
            raise HoodieCorruptedMetadataError(f"metadata table base file {path} is damaged: {exc!r}") from exc

    def _merge_logs(self, file_slice: FileSlice, query: KeyQuery) -> dict[str, MetadataRecord | None]:
        """Key -> the log records merged in write order (None: deleted by the last DELETE entry for it)."""
        self.stats.log_files += len(file_slice.log_files)
        for lf in file_slice.log_files:
            extent = self._committed_extent(lf.path)
            if lf.size < extent:  # cut at a block boundary: no damaged block to see, committed records gone
                raise HoodieCorruptedMetadataError(
                    f"metadata table log file {lf.path} is damaged: it has {lf.size} bytes, a completed commit "
                    f"wrote {extent} (truncated)")
        selector = LogBlockSelector([lf.path for lf in file_slice.sorted_log_files()], self.valid.__contains__,
                                    latest_instant=self.as_of, storage=self.storage,
                                    committed_extent=self._committed_extent, kinds=METADATA_TABLE_BLOCKS,
                                    stats=self.stats, check_skipped=self._check_skipped_block(file_slice))
        merged: dict[str, MetadataRecord | None] = {}
        try:
            for ref in selector.valid_blocks():
                try:
                    block_records = self._block_records(ref, query)
                except (HoodieCorruptedLogError, *_UNREADABLE) as exc:
                    selector.corrupt(ref, str(exc))  # raises when committed records would be lost
                    continue
                for key, record in block_records:
                    previous = merged.get(key)
                    merged[key] = record if record is None or previous is None else combine_records(previous, record)
        except HoodieCorruptedLogError as exc:
            raise HoodieCorruptedMetadataError(f"metadata table log file is damaged: {exc}") from exc
        return merged

    def _block_records(self, ref: LogBlockRef, query: KeyQuery) -> list[tuple[str, MetadataRecord | None]]:
        """(key, record) of a block's entries that `query` selects; record None for a DELETE entry."""
        block = ref.block
        if isinstance(block, DeleteBlock):
            self.stats.delete_blocks += 1
            return [(r.record_key, None) for r in block.delete_records() if query.matches(r.record_key)]
        assert isinstance(block, HFileDataBlock)
        reader = block.hfile(ref.path)
        # the HFile's own `schema` (inside its gzip-checked file info) is trusted over the block header's, which
        # no checksum covers: a header schema that differs from it was damaged
        schema = reader.schema or block.schema_json
        if not schema:
            raise HoodieCorruptedLogError(f"{ref.path}: HFILE_DATA_BLOCK at offset {block.offset} has no schema")
        if block.schema_json and block.schema_json != schema:
            raise HoodieCorruptedLogError(f"{ref.path}: HFILE_DATA_BLOCK at offset {block.offset} has a SCHEMA "
                                          f"header that differs from its HFile's schema (damaged header)")
        self.stats.data_blocks += 1
        where = f"{ref.path} (block at offset {block.offset})"
        return [(c.key_str, decode_record(c.key, c.value, schema, where)) for c in query.cells(reader)]

    def _check_skipped_block(self, file_slice: FileSlice) -> Callable[[LogBlockRef], None]:
        """What tells a block about to be passed over, within the bytes a completed commit wrote, from a damaged
        one (skipping it would silently lose committed records): an MDT holds no block types but HFILE_DATA,
        DELETE and COMMAND blocks, so another type is a damaged type field; and in table v8+, where each log file
        is written by the one instant its name carries, a block whose INSTANT_TIME header is another instant had
        that header damaged."""
        writers = {lf.path: lf.parsed.instant_time for lf in file_slice.log_files} \
            if self.mdt_meta.table_config.timeline_layout_version >= 2 else {}

        def check(ref: LogBlockRef) -> None:
            block = ref.block
            if block.offset >= self._committed_extent(ref.path):
                return  # past what completed commits wrote: a failed writer's block, skipped as Hudi does
            if block.block_type not in METADATA_TABLE_BLOCKS:
                raise HoodieCorruptedLogError(f"{ref.path}: block at offset {block.offset} is a "
                                              f"{block.block_type.name}, which no metadata table holds (damaged type)")
            writer = writers.get(ref.path)
            if writer is not None and block.instant_time != writer:
                raise HoodieCorruptedLogError(
                    f"{ref.path}: {block.block_type.name} at offset {block.offset} has INSTANT_TIME "
                    f"{block.instant_time!r}, not the instant {writer} that wrote the file (damaged header)")
        return check

    def _committed_extent(self, path: str) -> int:
        """How many bytes of MDT log file `path` completed MDT deltacommits wrote (their commit metadata)."""
        if self._extents is None:
            self._extents = committed_log_extents(self.mdt_meta)
        return self._extents.get(path.rsplit("/", 1)[-1], 0)


# what a damaged HFile makes reading it raise: HoodieHFileError (and HoodieCorruptedMetadataError, from decoding a
# record) are ValueErrors, like a trailer string or key that is not UTF-8; struct.error for a cut field
_UNREADABLE = (ValueError, struct.error)


def _live_entries(record: MetadataRecord | None) -> dict[str, int]:
    """Name -> size of a listing record's entries that are not deleted."""
    if record is None:
        return {}
    if not isinstance(record.payload, FileListing):
        raise HoodieCorruptedMetadataError(f"metadata record {record.key!r} is a {record.type.name}, not a listing")
    return {name: info.size for name, info in sorted(record.payload.entries.items()) if not info.is_deleted}


def _live_stats(records: dict[str, MetadataRecord]) -> list[ColumnStats]:
    stats = []
    for record in records.values():
        if not isinstance(record.payload, ColumnStats):
            raise HoodieCorruptedMetadataError(f"metadata record {record.key!r} is a {record.type.name}, "
                                               f"not column statistics")
        if not record.payload.is_deleted:
            stats.append(record.payload)
    return sorted(stats, key=lambda s: (s.file_name or "", s.column_name or ""))


__all__ = ["ALL_KEYS", "COLUMN_STATS", "FILES", "PARTITION_STATS", "HoodieTableMetadata", "KeyQuery",
           "ValidInstants", "combine_column_stats", "combine_file_listings", "combine_records",
           "enabled_partitions", "is_metadata_table_available", "valid_instants"]
