"""The per-file-group write step, run once per bucket inside a Spark task on Arrow data.

`write_bucket` dispatches on what the bucket needs: a new file group (create handle), a rewrite of the
latest base file with the bucket's records merged in (copy-on-write merge handle). Merge-on-read adds
an append handle here. The result is a HoodieWriteStat: the commit message that the driver publishes.
"""
from __future__ import annotations

import json
import logging
import time

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from storage.arrow_util import constant_array, row_numbers
from storage.config import WriteConfigKeys as WK
from storage.fs_utils import (
    join_path,
    make_base_file_name,
    make_write_token,
    write_partition_metadata,
)
from storage.bloom import continued_bloom_filter
from storage.bloom.footer import written_by_arrow
from storage.io.base_file_writer import BloomSeed, write_base_file
from storage.io.parquet import open_parquet
from storage.io.request_metrics import counted_in_task
from storage.meta_fields import (
    COMMIT_SEQNO,
    COMMIT_TIME,
    FILE_NAME,
    IS_DELETED,
    META_COLUMNS,
    RECORD_KEY,
)
from storage.testing.crash_points import fail_task_once
from storage.timeline.commit_metadata import NULL_COMMIT, HoodieWriteStat, RuntimeStats
from storage.write.markers import IOType, create_marker, delete_marker
from storage.merge import record_merger
from storage.merge.record_merger import BASE_WRITE_SEQ, DELETE_KEY, DELETE_ORDERING, WRITE_SEQ
from storage.write.task_context import (
    BUCKET_COLUMN,
    OP_COLUMN,
    OP_DELETE,
    BucketTarget,
    WriteTaskContext,
    LogTarget,
)

log = logging.getLogger(__name__)

_STALE_BLOOM_KEYS = 0.1  # a continued bloom filter may hold this share more keys than its file (keys since deleted)


def task_ids() -> tuple[int, int, int]:
    from pyspark import TaskContext

    tc = TaskContext.get()
    if tc is None:
        return 0, 0, 0
    return tc.partitionId(), tc.stageId(), tc.taskAttemptId()


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
        ordering = _natural_order_for_delete_operation(deletes, deletes.column(ordering_field))
    else:
        ordering = pa.nulls(deletes.num_rows)
    return pa.table({DELETE_KEY: deletes.column(RECORD_KEY), DELETE_ORDERING: ordering,
                     WRITE_SEQ: constant_array(0, deletes.num_rows, pa.int64())})


def write_bucket(incoming: pa.Table, ctx: WriteTaskContext) -> HoodieWriteStat:
    started = time.time()
    placement = incoming.column(BUCKET_COLUMN)[0].as_py()
    target = ctx.targets[ctx.placement[placement]]
    if target.log is not None:
        return append_bucket(incoming, ctx, target, started)
    partition_id, stage_id, attempt_id = task_ids()
    file_name = make_base_file_name(target.file_id, make_write_token(partition_id, stage_id, attempt_id), ctx.instant_time)
    storage = ctx.storage
    data = incoming_rows(incoming, ctx)
    base, base_size = open_parquet(storage, target.base_file_path) if target.base_file_path else (None, 0)
    # a base file over hoodie.memory.merge.max.size is merged one row group at a time (storage.write.merge_handle)
    streaming = base is not None and base_size > ctx.merge_max_size
    if not streaming:
        old = stored_rows(base.read(), ctx) if base is not None else None
        kept, writes, counts = merge_records(old, data, ctx)
        if ctx.sort_records and kept is None:
            writes = writes.sort_by([(RECORD_KEY, "ascending")])  # a bulk insert's sort mode
        output = written_part(kept, writes, ctx, file_name, partition_id)
    write_partition_metadata(storage, ctx.base_path, target.partition_path, ctx.instant_time)
    create_marker(storage, ctx.marker_dir, target.partition_path, file_name,
                  IOType.MERGE if target.base_file_path else IOType.CREATE)
    path = join_path(ctx.base_path, target.partition_path, file_name)
    if streaming:
        from storage.write.merge_handle import stream_merge

        log.info("merging %s (%d bytes > %s=%d) one row group at a time", target.base_file_path, base_size,
                 WK.MERGE_MAX_SIZE.key, ctx.merge_max_size)
        written, counts, size = stream_merge(base, data, ctx, storage, path, file_name, partition_id)
    else:
        seed = bloom_seed(base, target.base_file_path, kept, counts, ctx) if base is not None else None
        size = write_base_file(storage, path, output, ctx.bloom_options, ctx.compression, ctx.row_group_bytes,
                               ctx.populate_meta_fields, seed)
        written = output.num_rows
    storage.fsync(join_path(ctx.base_path, target.partition_path))  # the file's name is durable too
    fail_task_once("write.task_after_file")
    took = int((time.time() - started) * 1000)
    return HoodieWriteStat(
        fileId=target.file_id,
        path=f"{target.partition_path}/{file_name}" if target.partition_path else file_name,
        prevCommit=target.prev_commit if target.base_file_path else NULL_COMMIT,
        numWrites=written,
        numDeletes=counts["deletes"],
        numUpdateWrites=counts["updates"],
        numInserts=counts["inserts"],
        totalWriteBytes=size,
        partitionPath=target.partition_path,
        fileSizeInBytes=size,
        runtimeStats=RuntimeStats(0, took if base is not None else 0, took if base is None else 0),
    )


def bloom_seed(base: pq.ParquetFile, path: str, kept: pa.Table | None, counts: dict[str, int],
               ctx: WriteTaskContext) -> BloomSeed | None:
    """The rewritten file's own bloom filter, as the start of the new file's: it holds the kept records' keys already,
    so only the incoming keys are hashed (Hudi hashes every key again; the filter holds the same keys). Only a filter
    this engine wrote, in Hudi's hash order (a legacy Hadoop-order footer is built afresh, so a rewrite repairs it),
    and of the write's settings. After deletes the filter still holds the deleted keys: harmless to a lookup (a false positive
    the file's keys then rule out), so it is continued while such stale keys stay within `_STALE_BLOOM_KEYS` of the
    file's live ones, and built afresh beyond that."""
    if kept is None or not ctx.populate_meta_fields or not kept.num_rows:
        return None
    if not written_by_arrow(base.metadata):
        return None
    from storage.index.key_lookup import trusted_bloom_filter

    stored = trusted_bloom_filter(base.metadata, path)
    bloom = continued_bloom_filter(stored, **ctx.bloom_options) if stored is not None else None
    if bloom is None:
        return None
    live = kept.num_rows + counts["updates"]  # the stored keys the file keeps, all in the filter
    if counts["deletes"] and bloom.keys_held() - live > _STALE_BLOOM_KEYS * live:
        return None
    return BloomSeed(bloom, kept.num_rows)


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


STAT_SCHEMA_DDL = "stat string"


def write_bucket_udf(ctx: WriteTaskContext):
    """The function given to `groupBy(...).applyInArrow`: one bucket in, one JSON write stat out."""

    def run(table: pa.Table) -> pa.Table:
        with counted_in_task(ctx.requests):
            stat = write_bucket(table, ctx)
        return pa.table({"stat": [json.dumps(stat.to_json_dict())]})

    return run


# ----------------------------------------------------------------------------------------------- append handle


def append_bucket(incoming: pa.Table, ctx: WriteTaskContext, target: BucketTarget, started: float) -> HoodieWriteStat:
    """Merge-on-read append handle: the bucket's upserts as Avro data blocks and its deletes as a delete block,
    in a new log file of the target slice (a new version per write, as Hudi does on file systems without append)."""
    from storage.file_group.log_block import AvroDataBlock, DeleteBlock, ParquetDataBlock

    partition_id, stage_id, attempt_id = task_ids()
    token = make_write_token(partition_id, stage_id, attempt_id)
    data = incoming_rows(incoming, ctx)
    writes, deletes = split_deletes(data)
    # records in logs carry the file id as their file name, as Hudi's append handle stamps them
    rows = written_part(None, writes, ctx, target.file_id, partition_id)
    storage = ctx.storage
    write_partition_metadata(storage, ctx.base_path, target.partition_path, ctx.instant_time)
    blocks = []
    if rows.num_rows and ctx.data_block_format == "parquet":
        blocks.append(ParquetDataBlock.from_table(rows, ctx.avro_schema_json, ctx.instant_time,
                                                  compression=ctx.compression))
    elif rows.num_rows:
        blocks.append(AvroDataBlock.from_table(rows, ctx.avro_schema_json, ctx.instant_time))
    if deletes.num_rows:
        ordering_field = ctx.merge.ordering_field
        ordering = deletes.column(ordering_field) if ordering_field in deletes.column_names else None
        if ordering is not None:
            ordering = _natural_order_for_delete_operation(deletes, ordering)
        blocks.append(DeleteBlock.from_columns(deletes.column(RECORD_KEY), target.partition_path, ordering,
                                               ctx.instant_time, ctx.avro_schema_json))
    created = write_new_log_file(storage, ctx.base_path, ctx.marker_dir, target.partition_path, target.file_id,
                                 target.log, token, blocks, ctx.data_block_max_size)
    log_name, size, results = created.name, created.size, created.results
    storage.fsync(join_path(ctx.base_path, target.partition_path))
    fail_task_once("write.task_after_file")
    took = int((time.time() - started) * 1000)
    rel = f"{target.partition_path}/{log_name}" if target.partition_path else log_name
    base_name = target.base_file_path.rsplit("/", 1)[-1] if target.base_file_path else ""
    return HoodieWriteStat(
        fileId=target.file_id,
        path=rel,
        prevCommit=target.log.base_instant,
        numWrites=rows.num_rows,
        numDeletes=deletes.num_rows,
        numUpdateWrites=rows.num_rows,
        numInserts=0,
        totalWriteBytes=size,
        partitionPath=target.partition_path,
        totalLogRecords=rows.num_rows + deletes.num_rows,
        totalLogBlocks=len(results),
        fileSizeInBytes=size,
        runtimeStats=RuntimeStats(0, 0, took),
        logVersion=created.version,
        logOffset=0,
        baseFile=base_name,
        logFiles=[log_name],
    )


def write_new_log_file(storage, base_path: str, marker_dir: str, partition_path: str, file_id: str,
                       target: LogTarget, write_token: str, blocks: list, data_block_max_size: int):
    """A write's blocks in a log file of its own (`create_new_log_file`), named by an APPEND marker of the write.
    The marker comes first, so a crash leaves no unnamed file; a marker for a name another write took first is
    removed again, so undoing this write (which deletes the files its markers name) never touches that log."""
    from storage.file_group.log_format import create_new_log_file

    return create_new_log_file(
        storage, join_path(base_path, partition_path), file_id, target.base_instant, target.version, write_token,
        blocks, data_block_max_size=data_block_max_size,
        before_create=lambda name: create_marker(storage, marker_dir, partition_path, name, IOType.APPEND),
        on_taken=lambda name: delete_marker(storage, marker_dir, partition_path, name, IOType.APPEND))


def _natural_order_for_delete_operation(deletes: pa.Table, ordering: pa.ChunkedArray) -> pa.Array:
    """Ordering values of delete records: a delete *operation* (SQL DELETE, `operation=delete`) is in natural
    order, written as 0 of the ordering field's type (null for non-numeric fields) exactly as Java Hudi writes
    it, so it removes the record whatever its ordering value; a soft delete (`_hoodie_is_deleted`) inside an
    upsert keeps the record's own value."""
    ordering = ordering.combine_chunks()
    t = ordering.type
    natural = pa.scalar(0).cast(t) if (pa.types.is_integer(t) or pa.types.is_floating(t)) else pa.scalar(None, t)
    return pc.if_else(pc.equal(deletes.column(OP_COLUMN).combine_chunks(), OP_DELETE), natural, ordering)
