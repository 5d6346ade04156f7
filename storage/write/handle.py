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
import pyarrow.parquet as pq

from storage.config import WriteConfigKeys as WK
from storage.fs_utils import (
    join_path,
    make_base_file_name,
    make_write_token,
)
from storage.table.partition_metadata import write_partition_metadata
from storage.write.merge_rows import (
    incoming_rows,
    merge_records,
    natural_order_for_delete_operation,
    split_deletes,
    stored_rows,
    written_part,
)
from storage.bloom.footer import written_by_arrow
from storage.io.base_file_writer import BloomSeed, write_base_file
from storage.io.parquet import open_parquet
from storage.io.request_metrics import counted_in_task
from storage.meta_fields import (
    RECORD_KEY,
)
from storage.testing.crash_points import fail_task_once
from storage.timeline.commit_metadata import NULL_COMMIT, HoodieWriteStat, RuntimeStats
from storage.write.markers import IOType, create_marker, delete_marker
from storage.write.task_context import (
    BUCKET_COLUMN,
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
        size = write_base_file(storage, path, output, ctx.bloom_settings, ctx.compression, ctx.row_group_bytes,
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
    bloom = ctx.bloom_settings.continued(stored) if stored is not None else None
    if bloom is None:
        return None
    live = kept.num_rows + counts["updates"]  # the stored keys the file keeps, all in the filter
    if counts["deletes"] and bloom.keys_held() - live > _STALE_BLOOM_KEYS * live:
        return None
    return BloomSeed(bloom, kept.num_rows)


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
            ordering = natural_order_for_delete_operation(deletes, ordering)
        blocks.append(DeleteBlock.from_columns(deletes.column(RECORD_KEY), target.partition_path, ordering,
                                               ctx.instant_time, ctx.avro_schema_json))
    created = write_new_log_file(storage, ctx.base_path, ctx.marker_dir, target.partition_path, target.file_id,
                                 target.log, token, blocks, ctx.data_block_max_size, ctx.instant_time)
    log_name, size, results = created.name, created.size, created.results
    storage.fsync(join_path(ctx.base_path, target.partition_path))
    fail_task_once("write.task_after_file")
    took = int((time.time() - started) * 1000)
    rel = f"{target.partition_path}/{log_name}" if target.partition_path else log_name
    base_name = target.base_file_path.rsplit("/", 1)[-1] if target.base_file_path else ""
    return HoodieWriteStat(
        fileId=target.file_id,
        path=rel,
        prevCommit=target.log.named_by(ctx.instant_time),
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
                       target: LogTarget, write_token: str, blocks: list, data_block_max_size: int,
                       instant_time: str):
    """A write's blocks in a log file of its own (`create_new_log_file`), named by an APPEND marker of the write.
    The marker comes first, so a crash leaves no unnamed file; a marker for a name another write took first is
    removed again, so undoing this write (which deletes the files its markers name) never touches that log."""
    from storage.file_group.log_format import create_new_log_file

    return create_new_log_file(
        storage, join_path(base_path, partition_path), file_id, target.named_by(instant_time), target.version,
        write_token,
        blocks, data_block_max_size=data_block_max_size,
        before_create=lambda name: create_marker(storage, marker_dir, partition_path, name, IOType.APPEND),
        on_taken=lambda name: delete_marker(storage, marker_dir, partition_path, name, IOType.APPEND))


