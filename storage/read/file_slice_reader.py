"""The merged rows of one file slice: base file + log blocks (merge-on-read), the unit of work of MOR snapshot
reads (inside Spark tasks) and of compaction.

Public contract (used by storage/table_service/compaction.py):

    read_file_slice(file_slice: FileSlice, schema: pa.Schema, ctx: FileSliceReadContext) -> pa.Table

returns the slice's surviving records with the meta columns first, then the data columns of `schema` in its
order (`schema` may or may not list the meta columns). `FileSliceReadContext.for_table(meta_client, as_of, config)`
captures everything the merge needs from the table and timeline; it is a small picklable value, so the driver
builds it once and ships it to the tasks.

`FileSliceMerge(file_slice, schema, ctx, columns)` is the same merge as an iteration of tables, holding no more
of the slice's records than the merge memory budget (`MergeMemory`: hoodie.memory.compaction.max.size, spilling
past it through storage.merge.spillable_map); MOR snapshot scans and compaction stream its pieces.
"""
from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Iterator, Sequence

import pyarrow as pa
import pyarrow.compute as pc

from storage.arrow_util import constant_array
from storage.config import HoodieConfig, MemoryConfigKeys as MK
from storage.io.parquet import parquet_file, read_parquet_schema
from storage.io.storage import HoodieStorage
from storage.io.storage_options import StorageOptions
from storage.file_group.log_scanner import DELETES, RECORDS, HoodieMergedLogRecordScanner, LogScanStats
from storage.merge.record_merger import (
    DELETE_KEY,
    WRITE_SEQ,
    BASE_WRITE_SEQ,
    merge_records,
    record_keys_from_fields,
)
from storage.merge.spillable_map import SpillableMap, SpillStats, merge_memory_budget
from storage.merge.merge_resolver import MergeSpec, resolve_merge_spec
from storage.merge.schema_conform import conform_table
from storage.keygen.key_generator import resolve_keygen_type
from storage.meta_fields import IS_DELETED, RECORD_KEY, with_meta_columns
from storage.table.file_groups import committed_log_extents
from storage.table.file_slice import FileSlice
from storage.table.meta_client import HoodieTableMetaClient
from storage.timeline.instant import HoodieInstant

log = logging.getLogger(__name__)

MERGE_KEY = "_hoodie_merge_key"  # the key merged on when the table does not store _hoodie_record_key
_BASE_BATCH_ROWS = 8192  # base-file rows read at a time into the merge's spillable map


@dataclass(frozen=True)
class MergeMemory:
    """How much of a file slice's records one merge holds in memory before spilling (Hudi's HoodieMemoryConfig,
    the compaction memory, which Hudi's realtime / MOR snapshot readers use too): `max_size` is
    hoodie.memory.compaction.max.size (None: unset), else `fraction` (hoodie.memory.compaction.fraction) of the
    Python worker's memory (storage.merge.spillable_map.merge_memory_budget); spill files go under `spill_path`
    (hoodie.memory.spillable.map.path), lz4-compressed with `compression`
    (hoodie.common.diskmap.compression.enabled). The budget is resolved where the merge runs (in the task)."""

    max_size: int | None = None
    fraction: float = MK.COMPACTION_FRACTION.default
    spill_path: str = MK.SPILLABLE_MAP_PATH.default
    compression: bool = True

    @classmethod
    def of(cls, config: HoodieConfig) -> "MergeMemory":
        max_size = config.get(MK.COMPACTION_MAX_SIZE)
        return cls(None if max_size is None else int(max_size), float(config.get(MK.COMPACTION_FRACTION)),
                   str(config.get(MK.SPILLABLE_MAP_PATH) or MK.SPILLABLE_MAP_PATH.default),
                   bool(config.get(MK.DISK_MAP_COMPRESSION)))

    def budget(self) -> int:
        return merge_memory_budget(self.max_size, self.fraction)


@dataclass(frozen=True)
class FileSliceReadContext:
    """What merging a file slice needs to know about the table and the query point.

    valid_instants: completed write instants (commit, deltacommit, replacecommit) visible at the query point;
        only log blocks of these instants count (table v8: visibility by completion time).
    pending_instants: instants on the active timeline that have not completed (never read).
    first_active_instant: instants older than this were archived after completing; their blocks count.
    as_of: the query point (instant time in v6, completion time in v8), None = latest.
    """

    base_path: str
    table_version: int
    timeline_layout_version: int
    valid_instants: frozenset[str]
    pending_instants: frozenset[str]
    first_active_instant: str | None
    as_of: str | None
    merge: MergeSpec  # the table's merge (storage.merge.merge_resolver)
    record_key_fields: tuple[str, ...]
    populate_meta_fields: bool = True
    complex_keys: bool = False  # ComplexKeyGenerator: keys spelled `f:v,...` even for one field
    storage_options: StorageOptions = field(default_factory=StorageOptions)  # how tasks reach the table
    memory: MergeMemory = field(default_factory=MergeMemory)  # the merge's memory budget and spill files

    @property
    def storage(self) -> HoodieStorage:
        return HoodieStorage.for_path(self.base_path, self.storage_options)

    @property
    def is_v8(self) -> bool:
        return self.timeline_layout_version >= 2

    def committed_log_extent(self, path: str) -> int:
        """How many bytes of the log file `path` completed commits wrote (0 when none names it). Read from the
        commit metadata only when a damaged block is met, so intact reads never pay for it."""
        return _committed_log_extents(self.base_path, self.storage_options).get(path.rsplit("/", 1)[-1], 0)

    def is_instant_visible(self, instant_time: str) -> bool:
        """Does a log block written by `instant_time` count at the query point?"""
        if instant_time in self.valid_instants:
            return True
        if instant_time in self.pending_instants:
            return False
        archived = self.first_active_instant is not None and instant_time < self.first_active_instant
        return archived and (self.as_of is None or instant_time <= self.as_of)

    @classmethod
    def for_table(cls, meta_client: HoodieTableMetaClient, as_of: str | None = None,
                  config: HoodieConfig = HoodieConfig()) -> "FileSliceReadContext":
        """The context of a read of `meta_client`'s table at `as_of` (None: the latest), whose records merge as the
        table's properties and the read's options (`config`) say (storage.merge.merge_resolver)."""
        table = meta_client.table_config
        is_v8 = table.timeline_layout_version >= 2
        timeline = meta_client.timeline

        def point(i: HoodieInstant) -> str:
            return i.completion_time if is_v8 and i.completion_time else i.timestamp

        valid = frozenset(i.timestamp for i in timeline.completed().write_timeline()
                          if as_of is None or point(i) <= as_of)
        pending = frozenset(i.timestamp for i in timeline.pending())
        first = timeline.commits_timeline_start()
        ordering = table.precombine_field or None
        return cls(
            base_path=meta_client.base_path,
            table_version=table.version,
            timeline_layout_version=table.timeline_layout_version,
            valid_instants=valid,
            pending_instants=pending,
            first_active_instant=first,
            as_of=as_of,
            merge=resolve_merge_spec(table, ordering, config),
            record_key_fields=tuple(table.record_key_fields or ()),
            populate_meta_fields=table.populate_meta_fields,
            complex_keys=resolve_keygen_type(table.keygen_class, table.record_key_fields or [],
                                             table.partition_fields or []) == "COMPLEX",
            storage_options=meta_client.storage_options,
            memory=MergeMemory.of(config),
        )


def _committed_log_extents(base_path: str, storage_options: StorageOptions) -> dict[str, int]:
    """Log file name -> the largest size a completed commit recorded for it."""
    meta = HoodieTableMetaClient.load(base_path, HoodieStorage.for_path(base_path, storage_options))
    return committed_log_extents(meta)


def read_file_slice(file_slice: FileSlice, schema: pa.Schema, ctx: FileSliceReadContext,
                    columns: Sequence[str] | None = None) -> pa.Table:
    """The merged records of `file_slice`: meta columns, then the data columns of `schema` in its order
    (only those named in `columns`, when given)."""
    return read_file_slice_with_stats(file_slice, schema, ctx, columns)[0]


def read_file_slice_with_stats(file_slice: FileSlice, schema: pa.Schema, ctx: FileSliceReadContext,
                               columns: Sequence[str] | None = None) -> tuple[pa.Table, LogScanStats]:
    """`read_file_slice` as one table, with the log scan's statistics (the merge's pieces concatenated: callers
    that must stay within the memory budget iterate a `FileSliceMerge` instead)."""
    merge = FileSliceMerge(file_slice, schema, ctx, columns)
    pieces = list(merge)
    merged = pa.concat_tables(pieces) if len(pieces) > 1 else pieces[0]
    return merged, merge.stats


class FileSliceMerge:
    """The merged records of one file slice, as an iteration of tables (all with `out_schema`).

    The base file's rows (read a batch at a time) and then the valid log blocks' records and deletes go into a
    `SpillableMap` bounded by the context's memory budget (`MergeMemory`). When they fit, the iteration yields
    one table: the slice merged at once. When they do not, the map spills them hash-partitioned by record key
    and each partition (all versions of its keys) is merged in turn and yielded. Either way every partition goes
    through the same `merge_records`, so the rows are the same; only their order differs (partition by
    partition). Spill files are removed when the iteration ends, is closed, or fails.

    After the iteration, `stats` holds the log scan's statistics and `spill` the map's."""

    def __init__(self, file_slice: FileSlice, schema: pa.Schema, ctx: FileSliceReadContext,
                 columns: Sequence[str] | None = None):
        self.file_slice, self.ctx = file_slice, ctx
        full_schema = with_meta_columns(schema)
        if columns is None:
            self.out_schema = full_schema
        else:
            wanted = set(columns)
            self.out_schema = pa.schema([f for f in full_schema if f.name in wanted])
        self.merge_schema, self.ordering_field = _merge_schema(self.out_schema, full_schema, file_slice, ctx)
        self.stats = LogScanStats(log_files=len(file_slice.log_files))
        self.spill = SpillStats()
        self.num_rows = 0

    def __iter__(self) -> Iterator[pa.Table]:
        file_slice, ctx = self.file_slice, self.ctx
        key = RECORD_KEY if ctx.populate_meta_fields else MERGE_KEY
        scanner = HoodieMergedLogRecordScanner(
            [lf.path for lf in file_slice.sorted_log_files()], self.merge_schema, ctx.is_instant_visible,
            latest_instant=ctx.as_of, ordering_field=self.ordering_field, key_filler=_key_filler(ctx),
            storage=ctx.storage, committed_extent=ctx.committed_log_extent)
        size = (file_slice.base_file.size if file_slice.base_file else 0) + sum(lf.size for lf in file_slice.log_files)
        records = SpillableMap(ctx.memory.budget(), ctx.memory.spill_path, {RECORDS: key, DELETES: DELETE_KEY},
                               compression=ctx.memory.compression, size_hint=size,
                               concat={DELETES: scanner.concat_deletes})
        self.spill = records.stats
        try:
            for base in _read_base_batches(file_slice, self.merge_schema, ctx, records.budget):
                records.put(RECORDS, base.append_column(
                    WRITE_SEQ, constant_array(BASE_WRITE_SEQ, base.num_rows, pa.int64())))
            self.stats = scanner.scan_into(records)
            has_log_rows = self.stats.records > 0 or self.stats.deletes > 0
            merge = ctx.merge.for_ordering_field(self.ordering_field)  # commit time when the slice lacks the field
            yielded = False
            for part in records.partitions():
                rows = part[RECORDS]
                if rows is None:
                    continue
                if has_log_rows:
                    rows = merge_records(rows, part[DELETES], merge.mode, merge.ordering_field, key_column=key)
                rows = rows.select(self.out_schema.names)
                self.num_rows += rows.num_rows
                yielded = True
                yield rows
            if not yielded:
                yield self.merge_schema.empty_table().select(self.out_schema.names)
        finally:
            records.close()
        log.debug("file slice %s/%s@%s: %d rows (%s; %s)", file_slice.partition_path, file_slice.file_id,
                  file_slice.base_instant, self.num_rows, self.stats, self.spill)


def _merge_schema(out_schema: pa.Schema, full_schema: pa.Schema, file_slice: FileSlice,
                  ctx: FileSliceReadContext) -> tuple[pa.Schema, str | None]:
    """The output columns plus what the merge needs: the record key, the soft-delete marker, the ordering
    field and, without meta fields, the key fields (types from the table schema, else the base file)."""
    schema = out_schema
    for name in ([RECORD_KEY] if ctx.populate_meta_fields else []) + [IS_DELETED]:
        if name not in schema.names and name in full_schema.names:
            schema = schema.append(full_schema.field(name))
    ordering = ctx.merge.ordering_field
    if ordering and ordering not in schema.names and ordering in full_schema.names:
        schema = schema.append(full_schema.field(ordering))
    needs_base = (ordering and ordering not in schema.names) or not ctx.populate_meta_fields
    # the base file's footer, read only when the merge needs a column the read schema lacks
    base_schema = read_parquet_schema(ctx.storage, file_slice.base_file.path) \
        if needs_base and file_slice.base_file else None
    if ordering and ordering not in schema.names:
        found = _field_type(base_schema, ordering)
        if found is None:
            log.warning("ordering field %r is neither in the read schema nor in the base file of %s; merging by "
                        "commit time", ordering, file_slice.file_id)
            ordering = None
        else:
            schema = schema.append(pa.field(ordering, found))
    if not ctx.populate_meta_fields:
        for f in ctx.record_key_fields:
            if f not in schema.names:
                found = (full_schema.field(f).type if f in full_schema.names else None) \
                    or _field_type(base_schema, f) or pa.string()
                schema = schema.append(pa.field(f, found))
        schema = schema.append(pa.field(MERGE_KEY, pa.string()))
    return schema, ordering


def _field_type(file_schema: pa.Schema | None, name: str) -> pa.DataType | None:
    return file_schema.field(name).type if file_schema is not None and name in file_schema.names else None


def _key_filler(ctx: FileSliceReadContext):
    if ctx.populate_meta_fields:
        return None
    fields = ctx.record_key_fields

    def fill(table: pa.Table) -> pa.Table:
        computed = record_keys_from_fields(table, fields, ctx.complex_keys)
        if RECORD_KEY in table.column_names:
            computed = pc.coalesce(table[RECORD_KEY].combine_chunks(), computed)
        if MERGE_KEY in table.column_names:
            table = table.drop_columns([MERGE_KEY])
        return table.append_column(MERGE_KEY, computed)

    return fill


def _read_base_batches(file_slice: FileSlice, schema: pa.Schema, ctx: FileSliceReadContext,
                       budget: int) -> Iterator[pa.Table]:
    """The base file's rows in the merge schema, in batches of at most a quarter of `budget` bytes (as the
    footer's uncompressed sizes tell; nothing when the slice has no base file)."""
    if file_slice.base_file is None:
        return
    path = file_slice.base_file.path
    wanted = [n for n in schema.names if n != MERGE_KEY]
    parquet = parquet_file(ctx.storage, path)
    present = [n for n in wanted if n in parquet.schema_arrow.names]
    filler = _key_filler(ctx)
    if parquet.metadata.num_rows == 0:
        table = parquet.schema_arrow.empty_table().select(present)
        yield conform_table(filler(table) if filler is not None else table, schema, path)
        return
    meta = parquet.metadata
    per_row = max(1, sum(meta.row_group(i).total_byte_size for i in range(meta.num_row_groups)) // meta.num_rows)
    batch_rows = max(16, min(_BASE_BATCH_ROWS, budget // 4 // per_row))
    for batch in parquet.iter_batches(batch_size=batch_rows, columns=present):
        table = pa.Table.from_batches([batch])
        if filler is not None:
            table = filler(table)
        yield conform_table(table, schema, path)
