"""The rows of one file group's write, shared by the in-memory merge (storage.write.handle), the streamed merge
of large base files (storage.write.merge_handle) and bulk inserts: incoming rows in the write's schema, deletes
split from writes, stored and incoming versions merged by the record merger, and the meta columns stamped on
what is written."""
from __future__ import annotations

import pyarrow as pa
import pyarrow.compute as pc

from storage.arrow_util import constant_array, row_numbers
from storage.meta_fields import (
    COMMIT_SEQNO,
    COMMIT_TIME,
    FILE_NAME,
    IS_DELETED,
    META_COLUMNS,
    RECORD_KEY,
)
from storage.merge import record_merger
from storage.merge.record_merger import BASE_WRITE_SEQ, DELETE_KEY, DELETE_ORDERING, WRITE_SEQ
from storage.write.task_context import OP_COLUMN, OP_DELETE, WriteTaskContext


def align_to_schema(table: pa.Table, schema: pa.Schema) -> pa.Table:
    """Columns of `schema`, in its order and types; columns a file lacks (added since) become nulls."""
    columns = []
    for f in schema:
        if f.name in table.column_names:
            col = table.column(f.name)
            columns.append(col if col.type == f.type else col.cast(f.type))
        else:
            columns.append(pa.nulls(table.num_rows, f.type))
    return pa.Table.from_arrays(columns, schema=schema)


def incoming_rows(incoming: pa.Table, ctx: WriteTaskContext) -> pa.Table:
    """A task's incoming records in the write's schema, with the operation column and (when given) the soft-delete
    marker `_hoodie_is_deleted` as side columns; one per key when the task combines them (`ctx.combine_by`: every
    record of a key reached this task, see storage.write.prepare.combines_in_tasks)."""
    if ctx.combine_by:
        incoming = record_merger.combine_records(incoming, list(ctx.combine_by))
    data = align_to_schema(incoming, pa.schema(list(ctx.schema) + [pa.field(OP_COLUMN, pa.int8())]))
    if IS_DELETED in incoming.column_names and IS_DELETED not in data.column_names:
        data = data.append_column(IS_DELETED, incoming.column(IS_DELETED))
    return data


def _stamp(table: pa.Table, ctx: WriteTaskContext, file_name: str, partition_id: int,
           first_seqno: int = 0) -> pa.Table:
    """Meta columns of freshly written records (sequence numbers from `first_seqno`, for files written in parts)."""
    n = table.num_rows
    numbers = row_numbers(n) if first_seqno == 0 else pc.add(row_numbers(n), first_seqno)
    seq = pc.binary_join_element_wise(pa.scalar(f"{ctx.instant_time}_{partition_id}"),
                                      pc.cast(numbers, pa.string()), "_")
    table = table.set_column(table.schema.get_field_index(COMMIT_TIME), COMMIT_TIME,
                             constant_array(ctx.instant_time, n, pa.string()))
    table = table.set_column(table.schema.get_field_index(COMMIT_SEQNO), COMMIT_SEQNO, seq)
    return _with_file_name(table, file_name)


def written_part(kept: pa.Table | None, new: pa.Table, ctx: WriteTaskContext, file_name: str, partition_id: int,
                 first_seqno: int = 0) -> pa.Table:
    """The rows a merge writes to the file `file_name`: the stored survivors `kept` (None for a new file group)
    renamed to the file, then the incoming versions `new` stamped with this write's meta columns (sequence numbers
    from `first_seqno`, for a file written in parts); meta columns nulled for tables without meta fields."""
    new_rows = _stamp(align_to_schema(new, ctx.schema), ctx, file_name, partition_id, first_seqno)
    output = new_rows if kept is None else pa.concat_tables([_with_file_name(kept, file_name), new_rows])
    return output if ctx.populate_meta_fields else null_meta_fields(output)


def _with_file_name(table: pa.Table, file_name: str) -> pa.Table:
    return table.set_column(table.schema.get_field_index(FILE_NAME), FILE_NAME,
                            constant_array(file_name, table.num_rows, pa.string()))


def _delete_mask(incoming: pa.Table) -> pa.Array:
    """Deletes come from the delete operation or `_hoodie_is_deleted`; a null operation is a write (a bulk insert's
    tasks do not receive the column)."""
    is_delete = pc.fill_null(pc.equal(incoming.column(OP_COLUMN), OP_DELETE), False)
    if IS_DELETED in incoming.column_names:
        is_delete = pc.or_(is_delete, pc.fill_null(incoming.column(IS_DELETED).cast(pa.bool_()), False))
    return is_delete


def split_deletes(incoming: pa.Table) -> tuple[pa.Table, pa.Table]:
    """(records to write, delete rows). A batch without deletes (the usual insert or upsert) is returned as it is:
    filtering copies every column."""
    is_delete = _delete_mask(incoming)
    if not pc.any(is_delete).as_py():
        return incoming, incoming.slice(0, 0)
    return incoming.filter(pc.invert(is_delete)), incoming.filter(is_delete)


def merge_records(old: pa.Table | None, incoming: pa.Table, ctx: WriteTaskContext) -> tuple[pa.Table, pa.Table, dict]:
    """(kept stored records, new records to stamp, counts) for one file group: the stored rows (write sequence
    -1) and the incoming ones (0) merged by the record merger with the table's `MergeSpec`, as a merge-on-read
    read or a compaction of the same versions would."""
    writes, delete_rows = split_deletes(incoming)
    if old is None or old.num_rows == 0:
        return old.slice(0, 0) if old is not None else None, writes, {
            "inserts": writes.num_rows, "updates": 0, "deletes": 0}
    return merge_with_stored(old, writes, delete_rows, ctx)


def merge_with_stored(old: pa.Table, writes: pa.Table, delete_rows: pa.Table,
                      ctx: WriteTaskContext) -> tuple[pa.Table, pa.Table, dict]:
    """`merge_records` once the incoming rows are split into writes and deletes; `old` may be any part of the
    stored rows (the streaming merge passes one row group, with the incoming rows of its keys)."""
    merge = ctx.merge.for_ordering_field(ctx.merge.ordering_field if ctx.merge.ordering_field in old.column_names
                                         else None)
    if not delete_rows.num_rows and IS_DELETED not in writes.column_names:
        unique = record_merger.merge_unique_keys(old, writes, merge.mode, merge.ordering_field)
        if unique is not None:  # the usual upsert: no key twice in the file or the batch, nothing deleted
            keep_stored, written = unique
            kept, writes = old.filter(keep_stored), writes.filter(written)
            updates = old.num_rows - kept.num_rows
            return kept, writes, {"inserts": writes.num_rows - updates, "updates": updates, "deletes": 0}
    deletes = _delete_records(delete_rows, merge.ordering_field)
    if not writes.num_rows and IS_DELETED not in old.column_names:
        keep = record_merger.delete_unique_keys(old, deletes, merge.mode)
        if keep is not None:  # the usual delete: stored keys unique, every delete removes its key
            kept = old.filter(keep)
            return kept, writes, {"inserts": 0, "updates": 0, "deletes": old.num_rows - kept.num_rows}
    candidates = _candidates(old, writes, merge.ordering_field)
    survivors = record_merger.merge_records(candidates, deletes, merge.mode, merge.ordering_field)
    from_old = pc.equal(survivors[WRITE_SEQ], BASE_WRITE_SEQ)
    kept = old.take(pc.filter(survivors[_ROW], from_old))
    # every incoming row of a key an incoming version won (an insert without combining keeps its duplicates)
    writes = writes.filter(pc.is_in(writes.column(RECORD_KEY), pc.filter(survivors[RECORD_KEY], pc.invert(from_old))))
    updates = pc.sum(pc.is_in(writes.column(RECORD_KEY), old.column(RECORD_KEY)).cast(pa.int64())).as_py() or 0
    deleted = old.num_rows - kept.num_rows - updates
    return kept, writes, {"inserts": writes.num_rows - updates, "updates": updates, "deletes": deleted}


_ROW = "_hoodie_row"  # position of a stored candidate


def _candidates(old: pa.Table, writes: pa.Table, ordering_field: str | None) -> pa.Table:
    """The versions the merger chooses from: key, write sequence, position (and ordering value)."""
    columns = {
        RECORD_KEY: pa.chunked_array(old.column(RECORD_KEY).chunks + writes.column(RECORD_KEY).chunks, pa.string()),
        WRITE_SEQ: pa.concat_arrays([constant_array(BASE_WRITE_SEQ, old.num_rows, pa.int64()),
                                     constant_array(0, writes.num_rows, pa.int64())]),
        _ROW: row_numbers(old.num_rows + writes.num_rows),
    }
    if ordering_field:
        ordering = old.column(ordering_field)
        columns[ordering_field] = pa.chunked_array(ordering.chunks + writes.column(ordering_field).cast(ordering.type).chunks,
                                                   ordering.type)
    return pa.table(columns)


def _delete_records(deletes: pa.Table, ordering_field: str | None) -> pa.Table:
    """The incoming deletes as the merger takes them (key, ordering value, write sequence 0): what a merge-on-read
    write puts in its delete block."""
    if ordering_field and ordering_field in deletes.column_names:
        ordering = natural_order_for_delete_operation(deletes, deletes.column(ordering_field))
    else:
        ordering = pa.nulls(deletes.num_rows)
    return pa.table({DELETE_KEY: deletes.column(RECORD_KEY), DELETE_ORDERING: ordering,
                     WRITE_SEQ: constant_array(0, deletes.num_rows, pa.int64())})


def stored_rows(table: pa.Table, ctx: WriteTaskContext) -> pa.Table:
    """Rows read from the base file in the write's schema (and, without meta fields, with their record keys)."""
    table = align_to_schema(table, ctx.schema)
    return _with_keys_from_fields(table, ctx) if not ctx.populate_meta_fields else table


def _with_keys_from_fields(table: pa.Table, ctx: WriteTaskContext) -> pa.Table:
    """Stored rows of a table without meta fields: their record keys, computed from the key fields."""
    from storage.merge.record_merger import record_keys_from_fields

    keys = record_keys_from_fields(table, ctx.record_key_fields, ctx.complex_keys)
    return table.set_column(table.schema.get_field_index(RECORD_KEY), RECORD_KEY, keys)


def null_meta_fields(table: pa.Table) -> pa.Table:
    for name in META_COLUMNS:
        if name != FILE_NAME:
            idx = table.schema.get_field_index(name)
            table = table.set_column(idx, name, pa.nulls(table.num_rows, pa.string()))
    return table


def natural_order_for_delete_operation(deletes: pa.Table, ordering: pa.ChunkedArray) -> pa.Array:
    """Ordering values of delete records: a delete *operation* (SQL DELETE, `operation=delete`) is in natural
    order, written as 0 of the ordering field's type (null for non-numeric fields) exactly as Java Hudi writes
    it, so it removes the record whatever its ordering value; a soft delete (`_hoodie_is_deleted`) inside an
    upsert keeps the record's own value."""
    ordering = ordering.combine_chunks()
    t = ordering.type
    natural = pa.scalar(0).cast(t) if (pa.types.is_integer(t) or pa.types.is_floating(t)) else pa.scalar(None, t)
    return pc.if_else(pc.equal(deletes.column(OP_COLUMN).combine_chunks(), OP_DELETE), natural, ordering)
