"""Writing the record-level index (MDT partition `record_index`: record key -> partition and file group) as Java
Hudi 1.x writes it (docs/design/record_index_write.md §1-§2; notes §3.6): its initialisation from the data table,
and the changes each data action makes to it.

Changes come from the files an action wrote, as Hudi's commit-metadata path derives them
(`convertMetadataToRecordIndexRecords`):
- a new base file of a new file group: every key it holds is an insert at its location;
- a base file rewriting a previous one (COW merge): only when the stat reports inserts or deletes, or its record
  count differs from the previous file's, are the two key sets compared (new - old inserted, old - new deleted);
  a plain update writes nothing, as in Hudi;
- a log file: the keys of its delete blocks are deleted; the keys of its data blocks are (re)inserted at its file
  group when the stat reports inserts (Java refuses log inserts with a record index; here they are indexed);
- clustering: every key of the new base files at its new location; compaction and clean: nothing;
- insert_overwrite / delete_partition: the keys of the replaced file groups are deleted unless written again.
One key deleted in one place and inserted in another by the same action (a partition move) keeps the insert.

Each record's `instantTime` is the epoch milliseconds (UTC: this engine's timeline) of the base instant of the
slice holding the key, which is what Hudi writes for an insert and what its initialisation writes. Key deltas are
Arrow tables; every shard's HFile cells share one Avro value per location, so a delta of millions of keys is
encoded by hashing and sorting, not record by record.
"""
from __future__ import annotations

import calendar
import functools
import logging
import math
import re
import uuid
from collections.abc import Iterable
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from storage.config import HoodieConfig
from storage.config import MetadataConfigKeys as MK
from storage.config import TableConfigKeys as TK
from storage.exception import HoodieConfigError
from storage.file_group.delete_record import DeleteRecord
from storage.file_group.log_block import AvroDataBlock, DeleteBlock, ParquetDataBlock
from storage.file_group.log_format import HoodieLogFileReader
from storage.fs_utils import join_path, parse_base_file_name
from storage.io.hfile.writer import CellArrays
from storage.io.parquet import parquet_file, read_parquet
from storage.meta_fields import RECORD_KEY
from storage.metadata.index_definitions import RECORD_INDEX, IndexDefinition, put_index_definition
from storage.metadata.index_delta import reduce_by_key as reduce_changes
from storage.metadata.index_delta import split_by_shard, upserts_and_deletes
from storage.metadata.keys import file_group_indexes
from storage.metadata.slice_records import SliceRecords
from storage.metadata.records import MetadataRecord, MetadataRecordType, MetaFields, RecordIndexInfo, encode_record
from storage.table.file_slice import FileSlice
from storage.table.fs_view import FileSystemView
from storage.table.meta_client import HoodieTableMetaClient
from storage.timeline.commit_metadata import HoodieCommitMetadata, HoodieWriteStat
from storage.timeline.instant_time import parse_instant

log = logging.getLogger(__name__)

RECORD_INDEX_FILE_GROUP_PREFIX = "record-index-"
AVERAGE_RECORD_SIZE = 48  # bytes per record Hudi sizes record_index file groups by
KEY, PARTITION, FILE_ID, INSTANT_MS, DELETED = "key", "partition", "file_id", "instant_ms", "deleted"
DELTA_SCHEMA = pa.schema([(KEY, pa.string()), (PARTITION, pa.string()), (FILE_ID, pa.string()),
                          (INSTANT_MS, pa.int64()), (DELETED, pa.bool_())])
_UUID_FILE_ID = re.compile(r"^([0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12})(?:-(\d+))?$")
_NO_CHANGE_OPERATIONS = frozenset({"compact", "log_compact", "delete_partition_prepped"})
_OVERWRITES = frozenset({"insert_overwrite", "insert_overwrite_table", "delete_partition"})
_CLUSTER = "cluster"


# ----------------------------------------------------------------------------------------------- settings


def record_index_wanted(config: HoodieConfig, meta: HoodieTableMetaClient, enabled: Iterable[str]) -> bool:
    """Whether a writer keeps record_index: the option asks for it, or the table has one (an index built by
    CREATE INDEX or by Java stays maintained; DROP INDEX removes it). Needs the meta fields (the keys are read
    from `_hoodie_record_key`) and the global layout."""
    wanted = config.get(MK.RECORD_INDEX_ENABLE) or RECORD_INDEX in set(enabled)
    if wanted and not meta.table_config.get(TK.POPULATE_META_FIELDS):
        raise HoodieConfigError(f"{meta.base_path}: the record index needs the meta fields "
                                f"({TK.POPULATE_META_FIELDS.key}=true); this table does not store them")
    return wanted


def estimate_file_group_count(records: int, config: HoodieConfig) -> int:
    """Hudi's estimateFileGroupCount for record_index: min == max pins the count; otherwise the records times the
    growth factor over what one file group of max.filegroup.size holds at 48 bytes a record, within [min, max]."""
    low, high = config.get(MK.RECORD_INDEX_MIN_FILE_GROUPS), config.get(MK.RECORD_INDEX_MAX_FILE_GROUPS)
    if low == high and low:
        return low
    expected = math.ceil(records * config.get(MK.RECORD_INDEX_GROWTH_FACTOR))
    per_group = config.get(MK.RECORD_INDEX_MAX_FILE_GROUP_SIZE) // AVERAGE_RECORD_SIZE
    count = expected // per_group
    return max(1, min(high, max(low, count)))


def instant_millis(instant: str) -> int:
    """Epoch milliseconds of an instant of this engine's (UTC) timeline."""
    moment = parse_instant(instant[:17])
    return calendar.timegm(moment.timetuple()) * 1000 + moment.microsecond // 1000


def record_index_definition() -> IndexDefinition:
    """index.json's entry for the global record index (as Java 1.1 writes it)."""
    return IndexDefinition(RECORD_INDEX, RECORD_INDEX, "", (), (("isPartitioned", "false"),), "V1")


def register_definition(meta: HoodieTableMetaClient) -> None:
    """Table version 9 names the record index in index.json (Java 1.0.x's version 8 tables do not)."""
    if meta.table_config.version >= 9:
        put_index_definition(meta, record_index_definition())


# ----------------------------------------------------------------------------------------------- records


def location_info(partition: str, file_id: str, instant_ms: int) -> RecordIndexInfo:
    """Hudi's record-index payload: file id encoding 0 (UUID bits + file index) for `<uuid>[-<n>]`, else 1."""
    m = _UUID_FILE_ID.match(file_id)
    if m is None:
        return RecordIndexInfo(partition, None, None, None, file_id, instant_ms, file_id_encoding=1)
    bits = uuid.UUID(m[1]).int
    high, low = bits >> 64, bits & (2 ** 64 - 1)
    return RecordIndexInfo(partition, _signed(high), _signed(low), int(m[2]) if m[2] is not None else -1, None,
                           instant_ms)


def _signed(value: int) -> int:
    return value - 2 ** 64 if value >= 2 ** 63 else value


def shard_cells(upserts: pa.Table, schema: str, file_name: str | None = None) -> CellArrays:
    """HFile cells (key, Avro value) of upsert rows of one shard, sorted by key: one value encoded per distinct
    location (partition, file id, instant) - the key is not part of the value. `file_name`: a base file's
    `_hoodie_file_name`, which Hudi fills in base files only."""
    if upserts.num_rows == 0:
        return CellArrays(pa.array([], pa.binary()), pa.array([], pa.binary()))
    upserts = upserts.sort_by([(KEY, "ascending")])
    location = pc.binary_join_element_wise(upserts[PARTITION], upserts[FILE_ID],
                                           pc.cast(upserts[INSTANT_MS], pa.string()), "\x00")
    encoded = pc.dictionary_encode(location).combine_chunks()
    values = []
    for text in encoded.dictionary.to_pylist():
        p, f, i = text.split("\x00")
        record = MetadataRecord("", MetadataRecordType.RECORD_INDEX, location_info(p, f, int(i)),
                                MetaFields(file_name=file_name))
        values.append(encode_record(record, schema))
    return CellArrays(upserts[KEY].combine_chunks().cast(pa.binary()),
                      pa.array(values, pa.binary()).take(encoded.indices))


def delete_block(keys: pa.Array, instant: str, partition: str = RECORD_INDEX) -> DeleteBlock:
    """The DELETE_BLOCK of an index shard's deleted keys (Hudi lands an index delete as a delete entry, keyed by
    the MDT partition)."""
    return DeleteBlock.from_records([DeleteRecord(k, partition) for k in sorted(keys.to_pylist())], instant)


@dataclass(frozen=True)
class ShardDelta:
    """What one record_index shard receives from one action."""

    shard: int
    upserts: pa.Table  # DELTA_SCHEMA rows, deleted false
    deletes: pa.Array  # keys


def by_shard(delta: pa.Table, shards: int) -> list[ShardDelta]:
    """`delta` (reduced: one row per key) split by shard, in shard order, shards without rows left out."""
    if delta.num_rows == 0:
        return []
    out = []
    for shard, part in split_by_shard(delta, file_group_indexes(delta[KEY].combine_chunks(), shards)):
        upserts, deletes = upserts_and_deletes(part, DELETED)
        out.append(ShardDelta(shard, upserts, deletes[KEY].combine_chunks()))
    return out


def reduce_by_key(delta: pa.Table) -> pa.Table:
    """One row per key: an insert wins over a delete of the same key (Hudi's reduceByKeys), the last insert over
    earlier ones."""
    return reduce_changes(delta, KEY, DELETED)


def _rows(keys: pa.Array, partition: str, file_id: str, instant_ms: int, deleted: bool) -> pa.Table:
    n = len(keys)
    return pa.table({KEY: keys.cast(pa.string()), PARTITION: pa.array([partition] * n, pa.string()),
                     FILE_ID: pa.array([file_id] * n, pa.string()),
                     INSTANT_MS: pa.array(np.full(n, instant_ms, dtype=np.int64)),
                     DELETED: pa.array(np.full(n, deleted, dtype=bool))}, schema=DELTA_SCHEMA)


def empty_delta() -> pa.Table:
    return DELTA_SCHEMA.empty_table()


# ----------------------------------------------------------------------------------------------- reading keys


class KeyReader:
    """Record keys of the data table's files and slices, read in this process (the key column only)."""

    def __init__(self, meta: HoodieTableMetaClient):
        self.meta = meta
        self.storage = meta.storage

    def path(self, partition: str, name: str) -> str:
        return join_path(self.meta.base_path, partition, name)

    def base_file_keys(self, path: str) -> pa.Array:
        return read_parquet(self.storage, path, [RECORD_KEY])[RECORD_KEY].combine_chunks()

    def base_file_rows(self, path: str) -> int:
        return parquet_file(self.storage, path).metadata.num_rows

    def log_file_keys(self, path: str, instant: str) -> tuple[pa.Array, pa.Array]:
        """(keys of data blocks, keys of delete blocks) that `instant` wrote into log file `path`."""
        written, deleted = [], []
        with HoodieLogFileReader(path, storage=self.storage) as reader:
            for block in reader:
                if block.instant_time != instant:
                    continue
                if isinstance(block, (AvroDataBlock, ParquetDataBlock)):
                    written.append(block.to_table()[RECORD_KEY].combine_chunks().cast(pa.string()))
                elif isinstance(block, DeleteBlock):
                    deleted.append(pa.array([r.record_key for r in block.delete_records()], pa.string()))
        return _concat(written), _concat(deleted)

    def slice_keys(self, file_slice: FileSlice, visible) -> pa.Array:
        """Keys of a file slice as a snapshot read sees them (log records merged, log deletes applied), sorted."""
        if not file_slice.log_files:
            return self.base_file_keys(file_slice.base_file.path) if file_slice.base_file \
                else pa.array([], pa.string())
        keys = self._records.rows(file_slice, visible)[RECORD_KEY].combine_chunks().cast(pa.string())
        return pc.take(keys, pc.array_sort_indices(keys))

    @functools.cached_property
    def _records(self) -> SliceRecords:
        return SliceRecords(self.meta, None, None, "the record index")


def _concat(arrays: list[pa.Array]) -> pa.Array:
    return pa.concat_arrays(arrays) if arrays else pa.array([], pa.string())


# ----------------------------------------------------------------------------------------------- deltas


def initial_delta(meta: HoodieTableMetaClient, view: FileSystemView) -> pa.Table:
    """Every key of the latest merged slices at its location (Hudi's record_index initialisation)."""
    reader = KeyReader(meta)
    frames = []
    for file_slice in view.latest_merged_file_slices():
        keys = reader.slice_keys(file_slice, view.is_committed)
        if len(keys):
            frames.append(_rows(keys, file_slice.partition_path, file_slice.file_id,
                                instant_millis(file_slice.base_instant), False))
    return pa.concat_tables(frames) if frames else empty_delta()


def commit_delta(meta: HoodieTableMetaClient, md: HoodieCommitMetadata, instant: str) -> pa.Table:
    """The record-index changes of commit `instant` (still inflight: the view shows the table before it)."""
    operation = (md.operationType or "").lower()
    if operation in _NO_CHANGE_OPERATIONS or md.compacted:
        return empty_delta()
    stats = md.write_stats()
    view = FileSystemView(meta, partitions=sorted({s.partitionPath for s in stats} |
                                                  set(md.partitionToReplaceFileIds or {})) or None)
    reader = KeyReader(meta)
    # the slices the commit writes over, looked up once (not one view scan per write stat)
    latest = {(s.partition_path, s.file_id): s for s in view.latest_file_slices()}
    frames = []
    for stat in stats:
        before = latest.get((stat.partitionPath, stat.fileId))
        if stat.logFiles and not (stat.path or "").endswith(".parquet"):
            frames += _log_stat_delta(reader, before, stat, instant)
        elif stat.path:
            previous = before.base_file.path if before is not None and before.base_file is not None and \
                operation != _CLUSTER else None
            frames += _base_stat_delta(reader, previous, stat, instant)
    if operation in _OVERWRITES:
        frames += _replaced_delta(reader, view, md.partitionToReplaceFileIds or {})
    delta = pa.concat_tables(frames) if frames else empty_delta()
    return reduce_by_key(delta)


def _base_stat_delta(reader: KeyReader, previous: str | None, stat: HoodieWriteStat,
                     instant: str) -> list[pa.Table]:
    """`previous`: the base file the stat's file replaces (None: a new file group, or clustering's output)."""
    path = reader.meta.base_path + "/" + stat.path
    parsed = parse_base_file_name(stat.path.rsplit("/", 1)[-1])
    millis = instant_millis(parsed.instant_time if parsed else instant)
    if previous is None:
        return [_rows(reader.base_file_keys(path), stat.partitionPath, stat.fileId, millis, False)]
    if not (stat.numInserts or stat.numDeletes) and stat.numWrites == reader.base_file_rows(previous):
        return []  # a plain update: same keys at the same place (Hudi writes nothing)
    new, old = reader.base_file_keys(path), reader.base_file_keys(previous)
    inserted = pc.filter(new, pc.invert(pc.is_in(new, value_set=old)))
    removed = pc.filter(old, pc.invert(pc.is_in(old, value_set=new)))
    return [_rows(inserted, stat.partitionPath, stat.fileId, millis, False),
            _rows(removed, stat.partitionPath, stat.fileId, millis, True)]


def _log_stat_delta(reader: KeyReader, before: FileSlice | None, stat: HoodieWriteStat,
                    instant: str) -> list[pa.Table]:
    if not (stat.numInserts or stat.numDeletes):
        return []
    millis = instant_millis(before.base_instant if before is not None else instant)
    out = []
    for name in stat.logFiles:
        written, deleted = reader.log_file_keys(reader.path(stat.partitionPath, name.rsplit("/", 1)[-1]), instant)
        if stat.numInserts and len(written):
            out.append(_rows(written, stat.partitionPath, stat.fileId, millis, False))
        if len(deleted):
            out.append(_rows(deleted, stat.partitionPath, stat.fileId, millis, True))
    return out


def _replaced_delta(reader: KeyReader, view: FileSystemView, replaced: dict[str, list[str]]) -> list[pa.Table]:
    """Deletes for every key of the replaced file groups (a key written again by the same action stays)."""
    wanted = {(p, f) for p, ids in replaced.items() for f in ids}
    out = []
    for file_slice in view.latest_merged_file_slices(sorted(replaced)):
        if (file_slice.partition_path, file_slice.file_id) in wanted:
            keys = reader.slice_keys(file_slice, view.is_committed)
            out.append(_rows(keys, file_slice.partition_path, file_slice.file_id, 0, True))
    return out


__all__ = ["DELTA_SCHEMA", "KeyReader", "RECORD_INDEX_FILE_GROUP_PREFIX", "ShardDelta", "by_shard",
           "commit_delta", "delete_block", "estimate_file_group_count", "initial_delta", "instant_millis",
           "location_info", "record_index_wanted", "reduce_by_key", "register_definition", "shard_cells"]
