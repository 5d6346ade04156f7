"""The records of a file slice's log files, as Apache Hudi's HoodieMergedLogRecordScanner sees them
(spec §6).

Blocks are read in log-file order (base instant, version, write token) and, inside a file, in the order they
were appended. A block counts only when

- its INSTANT_TIME is a completed write instant visible at the query point (`instant_visible`); blocks of
  inflight, failed or later instants are skipped;
- no rollback COMMAND_BLOCK (itself at or before the query point) names its instant as TARGET_INSTANT_TIME;
- no log-compacted block (COMPACTED_BLOCK_TIMES header) supersedes its instant;
- it is not corrupt: damaged regions (`CorruptBlock`) and blocks whose content does not decode are skipped
  and reported, the blocks around them still count.

Which blocks count is `LogBlockSelector`'s job, shared with the metadata table's reader (HFILE_DATA_BLOCKs,
decoded in `storage.metadata.table_metadata`). Data blocks (Avro and Parquet) become Arrow tables conformed to the
reader schema; delete blocks become a (record_key, ordering_value) table. Every record carries the write sequence
of its block, which the record merger uses to tell later writes from earlier ones.
"""
from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Callable, Iterable, Iterator, Protocol

import pyarrow as pa

from storage.arrow_util import constant_array
from storage.io.storage import HoodieStorage
from storage.file_group.log_block import (
    AvroDataBlock,
    CommandBlock,
    CommandBlockType,
    DeleteBlock,
    HeaderMetadataType,
    HoodieCorruptedLogError,
    HoodieLogBlock,
    HoodieLogBlockType,
    ParquetDataBlock,
)
from storage.file_group.log_format import HoodieLogFileReader
from storage.merge.record_merger import (
    DELETE_KEY,
    DELETE_ORDERING,
    WRITE_SEQ,
    coerce_ordering_values,
    empty_deletes,
)
from storage.merge.schema_conform import conform_table

log = logging.getLogger(__name__)


@dataclass
class LogScanStats:
    log_files: int = 0
    blocks: int = 0
    data_blocks: int = 0
    delete_blocks: int = 0
    command_blocks: int = 0
    corrupt_blocks: int = 0
    skipped_blocks: int = 0  # instant not completed or not visible at the query point
    rolled_back_blocks: int = 0
    records: int = 0
    deletes: int = 0
    corrupt_reasons: list[str] = field(default_factory=list)


@dataclass
class LogScanResult:
    records: pa.Table  # the reader schema's columns + _hoodie_write_seq, in write order
    deletes: pa.Table  # record_key, ordering_value, _hoodie_write_seq
    stats: LogScanStats


RECORDS = "records"  # the kinds of tables a scan hands its sink
DELETES = "deletes"


class RecordSink(Protocol):
    def put(self, kind: str, table: pa.Table) -> None: ...


class _Collect:
    def __init__(self) -> None:
        self.tables: dict[str, list[pa.Table]] = {RECORDS: [], DELETES: []}

    def put(self, kind: str, table: pa.Table) -> None:
        self.tables[kind].append(table)


@dataclass
class LogBlockRef:
    """A block of a slice's log files: its write sequence (position among the slice's blocks), file and block."""

    seq: int
    path: str
    block: HoodieLogBlock


DATA_TABLE_BLOCKS = frozenset({HoodieLogBlockType.AVRO_DATA_BLOCK, HoodieLogBlockType.PARQUET_DATA_BLOCK,
                               HoodieLogBlockType.DELETE_BLOCK})
METADATA_TABLE_BLOCKS = frozenset({HoodieLogBlockType.HFILE_DATA_BLOCK, HoodieLogBlockType.DELETE_BLOCK})


class LogBlockSelector:
    """The blocks of a file slice's log files that count, in write order - the rules of the module doc, shared by
    every reader of log files (the data table's record scanner below, the metadata table's reader in
    `storage.metadata.table_metadata`), which decode the blocks themselves.

    `kinds` are the block types the reader decodes (others are passed over); `instant_visible`, `latest_instant`
    and `committed_extent` as for `HoodieMergedLogRecordScanner`. A reader that cannot decode a selected block
    reports it through `corrupt`, which skips it or fails as the committed extent says; `check_skipped` (None for
    data tables) sees each block about to be passed over - a type other than `kinds` and COMMAND_BLOCK, or an
    instant that is not visible - and may raise `HoodieCorruptedLogError` when its header must be damaged.
    """

    def __init__(self, log_paths: Iterable[str], instant_visible: Callable[[str], bool],
                 latest_instant: str | None = None, storage: HoodieStorage | None = None,
                 committed_extent: Callable[[str], int] | None = None,
                 kinds: frozenset[HoodieLogBlockType] = DATA_TABLE_BLOCKS,
                 stats: LogScanStats | None = None,
                 check_skipped: Callable[[LogBlockRef], None] | None = None) -> None:
        self.log_paths = list(log_paths)
        self.instant_visible = instant_visible
        self.latest_instant = latest_instant
        self.storage = storage
        # bytes of a log file that completed commits account for: damage inside them is an error, not a skip
        self.committed_extent = committed_extent
        self.kinds = kinds
        self.stats = stats if stats is not None else LogScanStats(log_files=len(self.log_paths))
        # a reader that can tell a skipped block from a damaged one (the metadata table's: it knows every block
        # type it may hold, and its log files name the instant that wrote them) may raise
        # `HoodieCorruptedLogError` for a block about to be passed over
        self.check_skipped = check_skipped

    def valid_blocks(self) -> Iterator[LogBlockRef]:
        """Each block that counts; once the caller is done with it (the iteration resumes), a lazily loaded
        block's content is dropped again, so a scan holds one block's bytes at a time."""
        blocks = self._read_blocks()
        invalid = self._superseded_instants(blocks)
        for b in blocks:
            if b.block.block_type not in self.kinds:
                if self.check_skipped is not None and b.block.block_type != HoodieLogBlockType.COMMAND_BLOCK:
                    self.check_skipped(b)
                continue
            instant = b.block.instant_time
            if instant is None or not self.instant_visible(instant):
                if self.check_skipped is not None:
                    self.check_skipped(b)
                self.stats.skipped_blocks += 1
                continue
            if instant in invalid:
                self.stats.rolled_back_blocks += 1
                continue
            try:
                yield b
            finally:
                if b.block.content_loader is not None:
                    b.block.content = None  # loaded lazily: read again if ever needed, not kept

    def _read_blocks(self) -> list[LogBlockRef]:
        out: list[LogBlockRef] = []
        for path in self.log_paths:
            with HoodieLogFileReader(path, lazy=True, storage=self.storage) as reader:
                for block in reader:
                    self.stats.blocks += 1
                    if block.is_corrupt():
                        self.corrupt(LogBlockRef(len(out), path, block), getattr(block, "reason", ""))
                        continue
                    out.append(LogBlockRef(len(out), path, block))
        return out

    def corrupt(self, b: LogBlockRef, reason: str) -> None:
        """A damaged region is skipped, as Hudi does for the partial block a dying writer leaves at a log file's
        end; unless it lies within the bytes a completed commit recorded for the file: then committed records
        would silently vanish, so reading fails naming the file."""
        extent = self.committed_extent(b.path) if self.committed_extent is not None else 0
        if b.block.offset < extent:
            raise HoodieCorruptedLogError(f"{b.path}: block at offset {b.block.offset} is damaged ({reason}) within "
                                          f"the {extent} bytes a completed commit wrote")
        self.stats.corrupt_blocks += 1
        message = f"{b.path}: corrupt block at offset {b.block.offset} skipped: {reason}"
        self.stats.corrupt_reasons.append(message)
        log.warning(message)

    def _superseded_instants(self, blocks: list[LogBlockRef]) -> set[str]:
        """Instants whose blocks no longer count: rollback targets and instants folded into a log-compacted
        block."""
        invalid: set[str] = set()
        for b in blocks:
            block = b.block
            if isinstance(block, CommandBlock):
                self.stats.command_blocks += 1
                if self._applies(block.instant_time) and self._is_rollback(b):
                    invalid.add(block.target_instant_time or "")
            compacted = block.header.get(HeaderMetadataType.COMPACTED_BLOCK_TIMES)
            if compacted and block.instant_time and self.instant_visible(block.instant_time):
                invalid |= {t.strip() for t in compacted.split(",") if t.strip()}
        invalid.discard("")
        return invalid

    def _applies(self, instant: str | None) -> bool:
        return instant is not None and (self.latest_instant is None or instant <= self.latest_instant)

    def _is_rollback(self, b: LogBlockRef) -> bool:
        try:
            return b.block.command_type == CommandBlockType.ROLLBACK_BLOCK  # type: ignore[attr-defined]
        except HoodieCorruptedLogError as exc:
            self.corrupt(b, str(exc))
            return False


class HoodieMergedLogRecordScanner:
    """Valid log records of one file slice.

    `instant_visible(instant)` says whether a data or delete block's instant is a completed write at the query
    point; `latest_instant` (None = no limit) bounds which rollback command blocks apply. `key_fields` (for
    tables without meta fields) fills `_hoodie_record_key` from the data when it is null.
    """

    def __init__(self, log_paths: Iterable[str], schema: pa.Schema, instant_visible: Callable[[str], bool],
                 latest_instant: str | None = None, ordering_field: str | None = None,
                 key_filler: Callable[[pa.Table], pa.Table] | None = None,
                 storage: HoodieStorage | None = None,
                 committed_extent: Callable[[str], int] | None = None) -> None:
        self.selector = LogBlockSelector(log_paths, instant_visible, latest_instant, storage, committed_extent)
        self.log_paths = self.selector.log_paths
        self.schema = schema
        self.ordering_type = schema.field(ordering_field).type if ordering_field and ordering_field in schema.names else None
        self.key_filler = key_filler
        self.stats = self.selector.stats

    def scan(self) -> LogScanResult:
        """Every valid log record and delete record, in memory."""
        sink = _Collect()
        self.scan_into(sink)
        return LogScanResult(self._concat_records(sink.tables[RECORDS]), self.concat_deletes(sink.tables[DELETES]),
                             self.stats)

    def scan_into(self, sink: "RecordSink") -> LogScanStats:
        """Hand each valid block's records to `sink` in write order, as `sink.put(RECORDS, table)` (the reader
        schema's columns + _hoodie_write_seq) or `sink.put(DELETES, table)` (record_key, ordering_value,
        _hoodie_write_seq); a block's bytes are dropped once decoded, so the scan holds no more than the sink
        keeps (e.g. a `storage.merge.spillable_map.SpillableMap`)."""
        for b in self.selector.valid_blocks():
            try:
                if b.block.block_type == HoodieLogBlockType.DELETE_BLOCK:
                    sink.put(DELETES, self._deletes(b))
                else:
                    sink.put(RECORDS, self._records(b))
            except HoodieCorruptedLogError as exc:
                self.selector.corrupt(b, str(exc))
        return self.stats

    # -- decoding ---------------------------------------------------------------------------------------

    def _records(self, b: LogBlockRef) -> pa.Table:
        block = b.block
        if isinstance(block, AvroDataBlock):
            table = block.to_table()
        elif isinstance(block, ParquetDataBlock):
            table = block.to_table()
        else:  # pragma: no cover - filtered by the caller
            raise HoodieCorruptedLogError(f"not a data block: {block.block_type.name}")
        if block.header.get(HeaderMetadataType.IS_PARTIAL, "").lower() == "true":
            log.warning("%s: partial-update block at offset %d is read as full records", b.path, block.offset)
        self.stats.data_blocks += 1
        self.stats.records += table.num_rows
        if self.key_filler is not None:
            table = self.key_filler(table)
        table = conform_table(table, self.schema, f"log block at offset {block.offset} of {b.path}")
        return table.append_column(WRITE_SEQ, constant_array(b.seq, table.num_rows, pa.int64()))

    def _deletes(self, b: LogBlockRef) -> pa.Table:
        block = b.block
        assert isinstance(block, DeleteBlock)
        records = block.delete_records()
        self.stats.delete_blocks += 1
        self.stats.deletes += len(records)
        keys = pa.array([r.record_key for r in records], pa.string())
        ordering = _ordering_array([r.ordering_value for r in records], [r.ordering_type for r in records])
        ordering = coerce_ordering_values(ordering, self.ordering_type)
        return pa.table({DELETE_KEY: keys, DELETE_ORDERING: ordering,
                         WRITE_SEQ: constant_array(b.seq, len(records), pa.int64())})

    def _concat_records(self, tables: list[pa.Table]) -> pa.Table:
        if not tables:
            return self.schema.append(pa.field(WRITE_SEQ, pa.int64())).empty_table()
        return pa.concat_tables(tables)

    def concat_deletes(self, tables: list[pa.Table]) -> pa.Table:
        """Delete tables of several blocks as one (ordering values unified, or natural order when they cannot
        be)."""
        if not tables:
            return empty_deletes(self.ordering_type or pa.null())
        if len(tables) == 1:
            return tables[0]
        try:
            return pa.concat_tables(tables, promote_options="permissive")
        except (pa.ArrowInvalid, pa.ArrowTypeError):
            # ordering values of unrelated types and no ordering column to unify them: natural order
            return pa.concat_tables([t.set_column(1, DELETE_ORDERING, pa.nulls(t.num_rows)) for t in tables],
                                    promote_options="permissive")


def _ordering_array(values: list, types: list[pa.DataType | None]) -> pa.Array:
    """The orderingVal of delete records, typed by the union branch they were written with."""
    typed = [t for v, t in zip(values, types) if v is not None and t is not None]
    if not typed:
        return pa.nulls(len(values))
    try:
        return pa.array(values, typed[0])
    except (pa.ArrowInvalid, pa.ArrowTypeError, OverflowError):
        log.warning("delete records mix ordering value types; deleting in natural order")
        return pa.nulls(len(values))
