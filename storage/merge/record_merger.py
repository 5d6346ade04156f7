"""Merging the versions of each record key of a file slice, in Arrow (Hudi's HoodieMergedLogRecordScanner and record merger).

Every candidate carries a write sequence (`_hoodie_write_seq`): base-file rows come first (-1), log records
follow in the order their blocks were written. The merge mode says which version of a key wins:

- EVENT_TIME_ORDERING: the greatest value of the ordering (precombine) field; ties go to the later write.
  A null ordering value sorts below every other value.
- COMMIT_TIME_ORDERING: the later write, whatever the ordering field says.

Deletes come as delete records (from DELETE_BLOCKs, with an ordering value) or as rows whose
`_hoodie_is_deleted` is true. A delete record whose ordering value is absent or zero has "natural order" (it is
what Spark SQL DELETE writes): it removes the key when it was written after the winning version. Under
event-time ordering any other delete removes the key when its (ordering value, write sequence) is greater than
the winner's; under commit-time ordering the later write wins. A winning row with `_hoodie_is_deleted` set
deletes its key.

Which mode a table merges with is decided in one place, storage.merge.merge_resolver (`MergeSpec`); the
copy-on-write writer, the merge-on-read readers and compaction all merge through `merge_records`.
"""
from __future__ import annotations

import enum
import logging

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from storage.arrow_util import constant_array, flat_array, row_numbers
from storage.meta_fields import IS_DELETED, RECORD_KEY
from storage.config import TableConfigKeys as TK
from storage.exception import HoodieMergeError

log = logging.getLogger(__name__)

WRITE_SEQ = "_hoodie_write_seq"
BASE_WRITE_SEQ = -1
DELETE_KEY = "record_key"
DELETE_ORDERING = "ordering_value"


class RecordMergeMode(str, enum.Enum):
    EVENT_TIME_ORDERING = "EVENT_TIME_ORDERING"
    COMMIT_TIME_ORDERING = "COMMIT_TIME_ORDERING"


# ----------------------------------------------------------------------------------------------- merging


def empty_deletes(ordering_type: pa.DataType = pa.null()) -> pa.Table:
    return pa.table({DELETE_KEY: pa.array([], pa.string()), DELETE_ORDERING: pa.array([], ordering_type),
                     WRITE_SEQ: pa.array([], pa.int64())})


def merge_records(records: pa.Table, deletes: pa.Table | None, mode: RecordMergeMode,
                  ordering_field: str | None, key_column: str = RECORD_KEY) -> pa.Table:
    """The surviving version of each key of `records` (base rows, then log rows in write order, each with
    `_hoodie_write_seq`), with `deletes` (record_key, ordering_value, _hoodie_write_seq) applied.

    Rows come back in the order of `records` (base file order first, then new keys in log order); the
    `_hoodie_write_seq` column is kept. Rows whose key is null are kept as they are (they cannot be merged)."""
    if mode == RecordMergeMode.EVENT_TIME_ORDERING and (not ordering_field or ordering_field not in records.column_names):
        raise HoodieMergeError(f"event-time ordering needs the ordering field {ordering_field!r} in the records "
                               f"(columns: {', '.join(records.column_names)})")
    if records.num_rows == 0:
        return records
    winners = _winners(records, mode, ordering_field, key_column)
    keep = _survivors(records, winners, deletes, mode, ordering_field, key_column)
    chosen = pc.filter(winners, keep)
    return records.take(pc.take(chosen, pc.array_sort_indices(chosen)))


def _winners(records: pa.Table, mode: RecordMergeMode, ordering_field: str | None, key_column: str) -> pa.Array:
    """Row index of the winning version of each key (and of every row with a null key)."""
    ordering = [records[ordering_field]] if mode == RecordMergeMode.EVENT_TIME_ORDERING else []
    return _greatest_per_key(records[key_column], [*ordering, records[WRITE_SEQ]])


def _greatest_per_key(keys: pa.ChunkedArray | pa.Array, ordering: list) -> pa.Array:
    """Row index of the row of each key with the greatest `ordering` values (compared in turn, a null below any
    value; the later row on a tie), and of every row with a null key."""
    columns = {"k": keys, **{f"o{i}": values for i, values in enumerate(ordering)}, "i": row_numbers(len(keys))}
    sort_keys = [("k", "ascending", "at_end")] + [(name, "descending", "at_end") for name in columns if name != "k"]
    frame = pa.table(columns)
    order = pc.sort_indices(frame, sort_keys=sort_keys)
    sorted_keys = flat_array(pc.take(frame["k"], order))
    first = pc.or_(_first_of_runs(sorted_keys), pc.is_null(sorted_keys))
    return pc.filter(flat_array(pc.take(frame["i"], order)), first)


def combine_records(records: pa.Table, ordering_columns: list[str], key_column: str = RECORD_KEY) -> pa.Table:
    """One row per key of an incoming batch (Hudi's preCombine): the row with the greatest `ordering_columns`
    values (the precombine field, then the input order), in input order. A batch without repeated keys is
    returned as it is."""
    keys = records[key_column]
    if pc.count_distinct(keys, mode="all").as_py() == records.num_rows:
        return records
    chosen = _greatest_per_key(keys, [records[c] for c in ordering_columns])
    return records.take(pc.take(chosen, pc.array_sort_indices(chosen)))


def merge_unique_keys(stored: pa.Table, incoming: pa.Table, mode: RecordMergeMode, ordering_field: str | None,
                      key_column: str = RECORD_KEY) -> tuple[pa.Array, pa.Array] | None:
    """`merge_records` of stored rows (written first) and incoming rows (written after them) when no key repeats
    on either side and nothing is deleted: each stored key looked up among the (fewer) incoming ones by hash, no
    sort of all versions. Returns (whether each stored row is kept, whether each incoming row is written: a new
    key, or an update that wins), or None when a side repeats a key (then `merge_records` decides)."""
    stored_keys, incoming_keys = flat_array(stored[key_column]), flat_array(incoming[key_column])
    if not (_unique_keys(incoming_keys) and _unique_keys(stored_keys)):
        return None
    position = pc.index_in(stored_keys, value_set=incoming_keys)  # per stored row: its key's incoming row
    wins = pc.is_valid(position)
    if mode == RecordMergeMode.EVENT_TIME_ORDERING:
        old = flat_array(stored[ordering_field])
        new = pc.take(flat_array(incoming[ordering_field]).cast(old.type), position)
        # a later write wins a tie; a null ordering value loses to any value
        wins = pc.and_(wins, pc.or_(pc.is_null(old), pc.fill_null(pc.greater_equal(new, old), False)))
    lost = pc.filter(position, pc.and_(pc.is_valid(position), pc.invert(wins)))
    written = np.ones(len(incoming_keys), dtype=bool)
    written[lost.to_numpy(zero_copy_only=False)] = False
    return pc.invert(wins), pa.array(written)


def _unique_keys(keys: pa.Array) -> bool:
    """No key null, none twice: the condition of the hash-lookup merges."""
    return not keys.null_count and len(pc.unique(keys)) == len(keys)


def delete_unique_keys(stored: pa.Table, deletes: pa.Table, mode: RecordMergeMode,
                       key_column: str = RECORD_KEY) -> pa.Array | None:
    """`merge_records` of stored rows and incoming deletes only (`DELETE_KEY`, `DELETE_ORDERING`), each delete
    later than the stored versions: whether each stored row is kept (its key not deleted), looked up by hash, no
    sort. None when a stored key repeats or is null, or a delete carries an ordering value that must be compared
    (event-time ordering): then `merge_records` decides."""
    keys = flat_array(stored[key_column])
    if not _unique_keys(keys):
        return None
    ordering = flat_array(deletes[DELETE_ORDERING])
    if mode == RecordMergeMode.EVENT_TIME_ORDERING and not pc.all(_is_natural_order(ordering)).as_py():
        return None
    return pc.invert(pc.is_in(keys, value_set=flat_array(deletes[DELETE_KEY])))


def _first_of_runs(sorted_keys: pa.Array) -> pa.Array:
    """True where a sorted key differs from the one before it."""
    n = len(sorted_keys)
    if n == 0:
        return pa.array([], pa.bool_())
    previous, current = sorted_keys.slice(0, n - 1), sorted_keys.slice(1)
    changed = pc.fill_null(pc.not_equal(current, previous), True)
    return pa.concat_arrays([pa.array([True]), changed])


def _survivors(records: pa.Table, winners: pa.Array, deletes: pa.Table | None, mode: RecordMergeMode,
               ordering_field: str | None, key_column: str) -> pa.Array:
    """For each winner: False when a delete removes its key."""
    keep = constant_array(True, len(winners), pa.bool_())
    if IS_DELETED in records.column_names:
        flagged = pc.fill_null(pc.cast(flat_array(pc.take(records[IS_DELETED], winners)), pa.bool_()), False)
        keep = pc.and_(keep, pc.invert(flagged))
    if deletes is None or deletes.num_rows == 0:
        return keep
    frame = pa.table({"k": flat_array(pc.take(records[key_column], winners)),
                      "s": flat_array(pc.take(records[WRITE_SEQ], winners)), "pos": row_numbers(len(winners))})
    if mode == RecordMergeMode.COMMIT_TIME_ORDERING:
        removed = _later_delete(frame, deletes)
    else:
        frame = frame.append_column("o", flat_array(pc.take(records[ordering_field], winners)))
        removed = _event_time_delete(frame, deletes)
    return pc.and_(keep, pc.invert(removed))


def _later_delete(frame: pa.Table, deletes: pa.Table) -> pa.Array:
    """Per winner: is there a delete of its key written after it?"""
    latest = deletes.select([DELETE_KEY, WRITE_SEQ]).group_by(DELETE_KEY).aggregate([(WRITE_SEQ, "max")])
    joined = _join_by_position(frame, latest, ["d_seq"])
    return pc.fill_null(pc.greater(joined["d_seq"], joined["s"]), False).combine_chunks()


def _event_time_delete(frame: pa.Table, deletes: pa.Table) -> pa.Array:
    ordering = _ordering_values(deletes[DELETE_ORDERING], frame["o"].type)
    natural = _is_natural_order(ordering)
    deletes = pa.table({DELETE_KEY: deletes[DELETE_KEY], DELETE_ORDERING: ordering, WRITE_SEQ: deletes[WRITE_SEQ]})
    removed = constant_array(False, frame.num_rows, pa.bool_())
    natural_deletes = deletes.filter(natural)
    if natural_deletes.num_rows:
        removed = pc.or_(removed, _later_delete(frame, natural_deletes))
    ordered = deletes.filter(pc.invert(natural))
    if ordered.num_rows:
        removed = pc.or_(removed, _greater_ordered_delete(frame, ordered))
    return removed


def _greater_ordered_delete(frame: pa.Table, ordered: pa.Table) -> pa.Array:
    """Per winner: a delete of its key with a greater (ordering value, write sequence)."""
    order = pc.sort_indices(ordered, sort_keys=[(DELETE_KEY, "ascending", "at_end"),
                                                (DELETE_ORDERING, "descending", "at_end"),
                                                (WRITE_SEQ, "descending", "at_end")])
    ordered = ordered.take(order)
    best = ordered.filter(_first_of_runs(flat_array(ordered[DELETE_KEY])))
    joined = _join_by_position(frame, best, ["d_o", "d_seq"])
    o, s, d_o, d_seq = joined["o"], joined["s"], joined["d_o"], joined["d_seq"]
    has_delete = pc.is_valid(d_seq)
    greater = pc.or_(pc.fill_null(pc.greater(d_o, o), False),
                     pc.and_(pc.fill_null(pc.equal(d_o, o), False), pc.greater(d_seq, s)))
    greater = pc.or_(greater, pc.and_(pc.is_null(o), pc.is_valid(d_o)))  # null orders below any value
    return pc.and_(has_delete, pc.fill_null(greater, False)).combine_chunks()


def _join_by_position(frame: pa.Table, per_key: pa.Table, names: list[str]) -> pa.Table:
    """`frame` left-joined with one row per key of `per_key` (key column first), in `frame` order."""
    key_first = [DELETE_KEY] + [c for c in per_key.column_names if c != DELETE_KEY]  # aggregate puts keys last
    renamed = per_key.select(key_first).rename_columns(["k", *names])
    joined = frame.join(renamed, keys="k", join_type="left outer", use_threads=False)
    return joined.take(pc.sort_indices(joined["pos"]))


def _ordering_values(values: pa.ChunkedArray | pa.Array, target: pa.DataType) -> pa.Array:
    values = flat_array(values)
    if values.type == target:
        return values
    try:
        return pc.cast(values, target)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as exc:
        log.warning("delete ordering values of type %s do not convert to %s (%s); deleting in natural order",
                    values.type, target, exc)
        return pa.nulls(len(values), target)


def _is_natural_order(ordering: pa.Array) -> pa.Array:
    """Absent or zero ordering values: the delete orders by write time (what Spark SQL DELETE writes)."""
    missing = pc.is_null(ordering)
    t = ordering.type
    if pa.types.is_integer(t) or pa.types.is_floating(t) or pa.types.is_decimal(t):
        return pc.or_(missing, pc.fill_null(pc.equal(ordering, pa.scalar(0).cast(t)), False))
    return missing


def coerce_ordering_values(values: pa.ChunkedArray | pa.Array, target: pa.DataType | None) -> pa.Array:
    """Delete-record ordering values as the ordering column's type (nulls, i.e. natural order, where they do
    not convert)."""
    values = flat_array(values)
    if target is None or values.type == target:
        return values
    return _ordering_values(values, target)


def record_keys_from_fields(table: pa.Table, key_fields: list[str] | tuple[str, ...],
                            complex_keys: bool | None = None) -> pa.Array:
    """Record keys as Hudi's key generators spell them when the table does not store `_hoodie_record_key`:
    the value of a single key field, else (or with `complex_keys`, the ComplexKeyGenerator) `field:value` pairs
    joined by commas (null -> `__null__`, empty -> `__empty__`)."""
    if not key_fields:
        raise HoodieMergeError(f"the table has neither _hoodie_record_key values nor {TK.RECORDKEY_FIELDS.key}")
    missing = [f for f in key_fields if f not in table.column_names]
    if missing:
        raise HoodieMergeError(f"record key field(s) {', '.join(missing)} missing from the records")
    parts = [_key_text(table[f]) for f in key_fields]
    if len(parts) == 1 and not complex_keys:
        return parts[0]
    pieces = []
    for name, text in zip(key_fields, parts):
        pieces.append(pc.binary_join_element_wise(pa.scalar(name), text, ":"))
    return flat_array(pc.binary_join_element_wise(*pieces, ","))


def _key_text(column: pa.ChunkedArray) -> pa.Array:
    text = flat_array(pc.cast(column, pa.string()))
    text = pc.if_else(pc.equal(text, ""), pa.scalar("__empty__"), text)
    return flat_array(pc.fill_null(text, "__null__"))
