"""Writing a secondary index (MDT partition `secondary_index_<name>`: column value -> record keys) as Java Hudi 1.x
writes it (docs/design/record_index_write.md §3; notes §2.2, §3.7): its initialisation from the data table, and the
entries each data action adds and removes. Pure functions; metadata_writer integrates them.

- Entry key = escape(value) + "$" + escape(record key) (`keys.secondary_index_key`), where value is the column's
  value as Hudi spells it (`secondary_values`: what `toString()` of Spark's internal value gives - strings and
  integers as text, DATE as days since the epoch, TIMESTAMP as microseconds, FLOAT/DOUBLE as Java prints them)
  and a null value is the single NUL character. The payload is `HoodieSecondaryIndexInfo{isDeleted=false}`; a
  removed entry is a delete of its key (a DELETE-block entry, as 1.0.x writes them).
- Initialisation (`initial_entries`): one entry per live record of the latest merged slices, each slice read as
  a snapshot (log records merged with the table's merge mode, log deletes applied).
- Each commit (`commit_entries`, Hudi's `convertWriteStatsToSecondaryIndexRecords`): per file group a write stat
  touches, the map record key -> value of its previous slice (as the view shows it before the commit) against
  that of its current slice (the new base file, or the previous slice plus the commit's new log files): a new
  key inserts its entry, a changed value deletes the old entry and inserts the new one, a key gone deletes its
  entry. Compaction and clustering change nothing; insert_overwrite and delete_partition are refused, as Hudi
  refuses them. One entry deleted by one file group and inserted by another (a partition move) stays inserted.
- Sharding (`by_secondary_shard`): index definition version V2 (1.1) hashes escape(value) + "$", V1 (1.0.x) the
  whole key; the shard is Java's String hash mod the shard count (`keys.file_group_indexes`).

Entries travel as Arrow arrays and tables: values are spelt, escaped and hashed by Arrow compute, and every HFile
cell of a shard shares one encoded Avro value.
"""
from __future__ import annotations

import decimal
import json
import logging
from collections.abc import Callable, Iterable

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from storage.avro.schema_converter import avro_to_arrow_schema
from storage.exception import HoodieIndexError
from storage.fs_utils import join_path, parse_base_file_name, parse_log_file_name
from storage.io.hfile.writer import CellArrays
from storage.meta_fields import RECORD_KEY
from storage.metadata.index_delta import reduce_by_key, split_by_shard, upserts_and_deletes
from storage.metadata.slice_records import SliceRecords
from storage.metadata.keys import NULL_SECONDARY_VALUE, SECONDARY_KEY_SEPARATOR, file_group_indexes
from storage.metadata.records import MetadataRecord, MetadataRecordType, MetaFields, SecondaryIndexInfo, encode_record
from storage.table.file_slice import FileSlice, HoodieBaseFile, HoodieFileGroupId, HoodieLogFile
from storage.table.fs_view import FileSystemView
from storage.table.meta_client import HoodieTableMetaClient
from storage.table.schema_resolver import table_data_schema
from storage.timeline.commit_metadata import HoodieCommitMetadata, HoodieWriteStat

log = logging.getLogger(__name__)

KEY, DELETED = "key", "deleted"
ENTRY_SCHEMA = pa.schema([(KEY, pa.string()), (DELETED, pa.bool_())])
_VALUE = "value"
_NO_CHANGE_OPERATIONS = frozenset({"compact", "log_compact", "cluster"})
_REFUSED_OPERATIONS = frozenset({"insert_overwrite", "insert_overwrite_table", "delete_partition"})
_ESCAPED = r"([\\$\x00])"  # what escape_secondary prefixes with a backslash
_ESCAPE_WITH = "\\\\\\1"  # RE2 replacement: a literal backslash, then the matched character
# the key up to and including its first unescaped "$": escape(value) + "$" (a NUL value is a plain character)
_VALUE_PREFIX = r"(?s)^(?P<prefix>(?:[^\\$]|\\.)*\$)"


# ----------------------------------------------------------------------------------------------- spelling


def secondary_values(column: pa.ChunkedArray | pa.Array) -> pa.Array:
    """Each value of `column` as Hudi's secondary index spells it (string, nulls kept): `toString()` of Spark's
    internal value - strings as they are, integers as decimal text, DATE as days since the epoch, TIMESTAMP as
    microseconds since the epoch, FLOAT and DOUBLE as Java's Float/Double.toString. Other types cannot carry a
    secondary index (Hudi's eligibility rule) and raise HoodieIndexError."""
    if isinstance(column, pa.ChunkedArray):
        column = column.combine_chunks() if column.num_chunks else pa.array([], column.type)
    kind = column.type
    if pa.types.is_dictionary(kind):
        column, kind = column.dictionary_decode(), kind.value_type
    if pa.types.is_string(kind):
        return column
    if pa.types.is_large_string(kind) or pa.types.is_string_view(kind):
        return column.cast(pa.string())
    if pa.types.is_integer(kind):
        return column.cast(pa.string())
    if pa.types.is_date(kind):
        days = column if pa.types.is_date32(kind) else column.cast(pa.date32())
        return days.cast(pa.int32()).cast(pa.string())
    if pa.types.is_timestamp(kind):
        micros = column if kind.unit == "us" else pc.cast(column, pa.timestamp("us", kind.tz), safe=False)
        return micros.cast(pa.int64()).cast(pa.string())
    if pa.types.is_floating(kind) and not pa.types.is_float16(kind):
        return _java_floating_text(column)
    raise HoodieIndexError(f"a secondary index cannot be kept on a column of type {kind}: Hudi indexes string, "
                           f"integer, float, double, date and timestamp columns only")


def _java_floating_text(column: pa.Array) -> pa.Array:
    """Java's Float/Double.toString of every value: Arrow's shortest round-trip digits (of the value's own width),
    laid out as Java does. Each distinct value is laid out once."""
    shortest = column.cast(pa.string())
    distinct = pc.unique(shortest.drop_null())
    if len(distinct) == 0:
        return shortest
    single = pa.types.is_float32(column.type)
    laid_out = pa.array([_java_layout(t, single) for t in distinct.to_pylist()], pa.string())
    return pc.take(laid_out, pc.index_in(shortest, value_set=distinct))


def _java_layout(text: str, single: bool = False) -> str:
    """A shortest decimal text ("12.5", "1e+20", "0.00001", "nan") of a double (a float when `single`) as Java's
    Double/Float.toString lays it out: plain with at least one fraction digit for 1e-3 <= |x| < 1e7, otherwise
    d.dddE<n>. Java prints at least two significant digits' worth of precision: where the shortest text has one
    digit, the two-digit decimal closest to the exact value is printed (4.9E-324, not 5.0E-324)."""
    special = {"nan": "NaN", "inf": "Infinity", "-inf": "-Infinity", "+inf": "Infinity"}
    if text.lower() in special:
        return special[text.lower()]
    sign = "-" if text.startswith("-") else ""
    mantissa, _, exponent = text.lstrip("+-").lower().partition("e")
    whole, _, fraction = mantissa.partition(".")
    digits = whole + fraction
    significant = digits.lstrip("0")
    if not significant.rstrip("0"):
        return sign + "0.0"
    power = len(whole) - 1 + (int(exponent) if exponent else 0) - (len(digits) - len(significant))
    significant = significant.rstrip("0")
    if len(significant) == 1:
        value = abs(float(np.float32(text)) if single else float(text))
        two = format(decimal.Decimal(value), ".1e")  # e.g. "4.9e-324", exact value rounded half-even
        significant, power = (two[0] + two[2]).rstrip("0"), int(two.partition("e")[2])
    if -3 <= power < 7:
        if power >= 0:
            return sign + significant[:power + 1].ljust(power + 1, "0") + "." + (significant[power + 1:] or "0")
        return sign + "0." + "0" * (-power - 1) + significant
    return sign + significant[0] + "." + (significant[1:] or "0") + "E" + str(power)


def escape(text: pa.Array) -> pa.Array:
    """`keys.escape_secondary` of every string (nulls stay null)."""
    return pc.replace_substring_regex(text, pattern=_ESCAPED, replacement=_ESCAPE_WITH)


def entry_keys(values: pa.Array, record_keys: pa.Array) -> pa.Array:
    """`keys.secondary_index_key(value, record key)` of each pair: spelt values (None = SQL NULL, the NUL
    character) and record keys."""
    value_part = pc.fill_null(escape(_flat(values)), NULL_SECONDARY_VALUE)
    return pc.binary_join_element_wise(value_part, escape(_flat(record_keys).cast(pa.string())),
                                       SECONDARY_KEY_SEPARATOR)


def _flat(column: pa.Array | pa.ChunkedArray) -> pa.Array:
    if isinstance(column, pa.ChunkedArray):
        return column.combine_chunks() if column.num_chunks else pa.array([], column.type)
    return column


def value_prefixes(keys: pa.Array) -> pa.Array:
    """escape(value) + "$" of each entry key (up to and including its first unescaped "$")."""
    prefixes = pc.struct_field(pc.extract_regex(keys, _VALUE_PREFIX), [0])
    if prefixes.null_count:
        bad = pc.filter(keys, pc.is_null(prefixes))[0].as_py()
        raise HoodieIndexError(f"{bad!r} is not a secondary index key (no unescaped {SECONDARY_KEY_SEPARATOR!r})")
    return prefixes


# ----------------------------------------------------------------------------------------------- reading slices


class _SliceReader:
    """(record key, spelt value) of the data table's file slices, read in this process (`SliceRecords`)."""

    def __init__(self, meta: HoodieTableMetaClient, column: str, schema: pa.Schema | None):
        self.column = column
        self.records = SliceRecords(meta, column, schema, "a secondary index")

    def values(self, file_slice: FileSlice, visible: Callable[[str], bool]) -> pa.Table:
        """(key, value) of each live record of `file_slice` as a snapshot read sees it (value spelt, one row a
        key)."""
        rows = self.records.rows(file_slice, visible)
        return pa.table({KEY: _flat(rows[RECORD_KEY]), _VALUE: secondary_values(rows[self.column])})


def _table_schema(meta: HoodieTableMetaClient, md: HoodieCommitMetadata | None) -> pa.Schema | None:
    """The data columns as the commit wrote them (its schema may add the column), else the table's."""
    text = md.schema if md is not None else None
    if text:
        try:
            return avro_to_arrow_schema(json.loads(text))
        except (ValueError, KeyError, TypeError) as exc:
            log.warning("%s: the commit's writer schema cannot be read (%r); using the table's", meta.base_path, exc)
    return table_data_schema(meta)


# ----------------------------------------------------------------------------------------------- entries


def initial_entries(meta: HoodieTableMetaClient, view: FileSystemView, column: str) -> pa.Array:
    """The entry key of every live record of the latest merged slices (Hudi's secondary index initialisation:
    `readSecondaryKeysFromFileSlices`, a snapshot read of each slice)."""
    reader = _SliceReader(meta, column, _table_schema(meta, None))
    parts = []
    for file_slice in view.latest_merged_file_slices():
        rows = reader.values(file_slice, view.is_committed)
        if rows.num_rows:
            parts.append(entry_keys(rows[_VALUE], rows[KEY]))
    keys = pa.concat_arrays(parts) if parts else pa.array([], pa.string())
    log.debug("secondary index on %s of %s: %d initial entries", column, meta.base_path, len(keys))
    return keys


def empty_entries() -> pa.Table:
    return ENTRY_SCHEMA.empty_table()


def commit_entries(meta: HoodieTableMetaClient, md: HoodieCommitMetadata, instant: str, column: str) -> pa.Table:
    """The secondary index changes of commit `instant` (still inflight: the view shows the table before it), as
    (key, deleted) rows, one per entry key (an insert wins over a delete of the same key)."""
    operation = (md.operationType or "").lower()
    if operation in _REFUSED_OPERATIONS:
        raise HoodieIndexError(f"Can not perform operation {operation.upper()} on secondary index")
    if operation in _NO_CHANGE_OPERATIONS or md.compacted:
        return empty_entries()
    groups: dict[tuple[str, str], list[HoodieWriteStat]] = {}
    for stat in md.write_stats():
        if stat.path or stat.logFiles:
            groups.setdefault((stat.partitionPath, stat.fileId), []).append(stat)
    if not groups:
        return empty_entries()
    partitions = sorted({p for p, _ in groups})
    view = FileSystemView(meta, partitions=partitions)
    previous = {(s.partition_path, s.file_id): s for s in view.latest_merged_file_slices(partitions)}
    reader = _SliceReader(meta, column, _table_schema(meta, md))

    def with_instant(t: str) -> bool:
        return t == instant or view.is_committed(t)

    parts = []
    for (partition, file_id), stats in sorted(groups.items()):
        before = previous.get((partition, file_id))
        after = _current_slice(meta, partition, file_id, instant, before, stats)
        old = reader.values(before, view.is_committed) if before is not None else None
        parts.append(_diff(old, reader.values(after, with_instant)))
    entries = reduce_entries(pa.concat_tables(parts))
    log.debug("secondary index on %s of %s: commit %s inserts %d entries, deletes %d", column, meta.base_path,
              instant, pc.sum(pc.invert(entries[DELETED])).as_py() or 0, pc.sum(entries[DELETED]).as_py() or 0)
    return entries


def _current_slice(meta: HoodieTableMetaClient, partition: str, file_id: str, instant: str,
                   before: FileSlice | None, stats: list[HoodieWriteStat]) -> FileSlice:
    """The file group's slice once the commit completes: its new base file (a full image of the group), or the
    previous slice; plus the log files the commit wrote (a log file it appended to is not listed twice)."""
    base, logs = None, {}
    for stat in stats:
        for name in {n.rsplit("/", 1)[-1] for n in ([stat.path] if stat.path else []) + list(stat.logFiles or [])}:
            path = join_path(meta.base_path, partition, name)
            if parse_log_file_name(name) is not None:
                logs[name] = HoodieLogFile.of(path, 0)
            elif parse_base_file_name(name) is not None:
                base = HoodieBaseFile.of(path, int(stat.fileSizeInBytes or 0))
    if base is None and before is not None:
        base = before.base_file
        logs = {**{lf.name: lf for lf in before.log_files}, **logs}
    start = base.instant_time if base is not None else (before.base_instant if before is not None else instant)
    return FileSlice(HoodieFileGroupId(partition, file_id), start, base, list(logs.values()))


def _diff(old: pa.Table | None, new: pa.Table) -> pa.Table:
    """Entry changes from a file group's (key, value) map before to after: inserts of new keys, delete + insert
    of changed values, deletes of keys gone."""
    if old is None or old.num_rows == 0:
        return _entries(entry_keys(new[_VALUE], new[KEY]), False)
    marked_old = old.append_column("_old", pa.array(np.ones(old.num_rows, bool)))
    marked_new = new.append_column("_new", pa.array(np.ones(new.num_rows, bool)))
    joined = marked_new.join(marked_old, keys=KEY, join_type="full outer", left_suffix="_after",
                             right_suffix="_before", coalesce_keys=True)
    in_new = pc.fill_null(joined["_new"], False)
    in_old = pc.fill_null(joined["_old"], False)
    after, before = joined[_VALUE + "_after"], joined[_VALUE + "_before"]
    same = pc.or_kleene(pc.and_(pc.is_null(after), pc.is_null(before)), pc.fill_null(pc.equal(after, before), False))
    changed = pc.and_(pc.and_(in_new, in_old), pc.invert(same))
    inserted = pc.or_(pc.and_(in_new, pc.invert(in_old)), changed)
    removed = pc.or_(pc.and_(in_old, pc.invert(in_new)), changed)
    keys = joined[KEY]
    return pa.concat_tables([
        _entries(entry_keys(pc.filter(after, inserted).combine_chunks(), pc.filter(keys, inserted).combine_chunks()),
                 False),
        _entries(entry_keys(pc.filter(before, removed).combine_chunks(), pc.filter(keys, removed).combine_chunks()),
                 True)])


def _entries(keys: pa.Array, deleted: bool) -> pa.Table:
    return pa.table({KEY: keys, DELETED: pa.array(np.full(len(keys), deleted, bool))}, schema=ENTRY_SCHEMA)


def reduce_entries(entries: pa.Table) -> pa.Table:
    """One row per entry key, sorted by key: deleted only when every row of the key deletes it (Hudi's
    reduceByKeys keeps the non-deleted record)."""
    if entries.num_rows == 0:
        return empty_entries()
    return reduce_by_key(entries.select([KEY, DELETED]), KEY, DELETED).cast(ENTRY_SCHEMA)


# ----------------------------------------------------------------------------------------------- shards and cells


def by_secondary_shard(entries: pa.Table, count: int, version: str | None) -> list[tuple[int, pa.Array, pa.Array]]:
    """(shard, upserted keys, deleted keys) of each shard `entries` (reduced: a key once, sorted) reach, in shard
    order, keys sorted. V2 shards by escape(value) + "$" (every entry of a value in one shard), V1 (or no
    definition) by the whole key."""
    if entries.num_rows == 0:
        return []
    keys = _flat(entries[KEY])
    hashed = value_prefixes(keys) if (version or "").upper() == "V2" else keys
    out = []
    for shard, part in split_by_shard(entries.select([KEY, DELETED]), file_group_indexes(hashed, count)):
        upserts, deletes = upserts_and_deletes(part, DELETED)
        out.append((shard, _flat(upserts[KEY]), _flat(deletes[KEY])))
    return out


def secondary_cells(keys: pa.Array | Iterable[str], schema: str, file_name: str | None = None) -> CellArrays:
    """HFile cells (key, Avro value) of upserted entries of one shard, sorted by key (UTF-8 byte order), each key
    once; every cell shares the one encoded `HoodieSecondaryIndexInfo{isDeleted=false}`. `file_name`: a base
    file's `_hoodie_file_name`, which Hudi fills in base files only."""
    if not isinstance(keys, (pa.Array, pa.ChunkedArray)):
        keys = pa.array(list(keys), pa.string())
    keys = pc.unique(keys.drop_null()).cast(pa.binary())
    ordered = pc.take(keys, pc.array_sort_indices(keys))
    value = encode_record(MetadataRecord("", MetadataRecordType.SECONDARY_INDEX, SecondaryIndexInfo(False),
                                         MetaFields(file_name=file_name)), schema)
    return CellArrays(ordered, pa.array([value], pa.binary()).take(np.zeros(len(ordered), np.int64)))


__all__ = ["DELETED", "ENTRY_SCHEMA", "KEY", "by_secondary_shard", "commit_entries", "entry_keys", "escape",
           "initial_entries", "reduce_entries", "secondary_cells", "secondary_values", "value_prefixes"]
