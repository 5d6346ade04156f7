"""The per-file-group write step, run once per bucket inside a Spark task on Arrow data.

`write_bucket` dispatches on what the bucket needs: a new file group (create handle), a rewrite of the
latest base file with the bucket's records merged in (copy-on-write merge handle), or log files of the group
(merge-on-read append handle). Base files roll over at `hoodie.parquet.max.file.size`
(storage.write.rolling_files), log files at `hoodie.logfile.max.size`. The result is a HoodieWriteStat per file
written: the commit messages that the driver publishes.
"""
from __future__ import annotations

import dataclasses
import json
import logging
import time

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from storage.config import LogFileConfigKeys
from storage.config import WriteConfigKeys as WK
from storage.fs_utils import (
    join_path,
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
from storage.io.base_file_writer import BloomSeed
from storage.io.parquet import open_parquet
from storage.io.request_metrics import counted_in_task
from storage.meta_fields import (
    RECORD_KEY,
)
from storage.engine.engine_context import local_task_ids
from storage.testing.crash_points import fail_task_once
from storage.timeline.commit_metadata import NULL_COMMIT, HoodieWriteStat, RuntimeStats
from storage.write.markers import IOType, create_marker, delete_marker
from storage.write.rolling_files import RollingBaseFiles
from storage.write.task_context import (
    BUCKET_COLUMN,
    BucketTarget,
    WriteTaskContext,
    LogTarget,
)

log = logging.getLogger(__name__)

_STALE_BLOOM_KEYS = 0.1  # a continued bloom filter may hold this share more keys than its file (keys since deleted)


def task_ids() -> tuple[int, int, int]:
    """(partition, stage, attempt) of the running task: Spark's, or the local engine's (whose stage numbers are
    unique in the process, so a rerun never writes a failed attempt's file names); 0s outside any task."""
    from pyspark import TaskContext

    tc = TaskContext.get()
    if tc is None:
        return local_task_ids() or (0, 0, 0)
    return tc.partitionId(), tc.stageId(), tc.taskAttemptId()


def write_bucket(incoming: pa.Table, ctx: WriteTaskContext) -> HoodieWriteStat:
    """`write_bucket_files` of a bucket known to fit one file: its write stat."""
    stats = write_bucket_files(incoming, ctx)
    if len(stats) != 1:
        raise ValueError(f"the bucket was written to {len(stats)} files: use write_bucket_files")
    return stats[0]


def write_bucket_files(incoming: pa.Table, ctx: WriteTaskContext) -> list[HoodieWriteStat]:
    """The bucket's write: its log files (merge-on-read appends) or its base files (a new file group, or the
    merge into one), rolled over at the size limits; one write stat per file written."""
    started = time.time()
    placement = incoming.column(BUCKET_COLUMN)[0].as_py()
    target = ctx.targets[ctx.placement[placement]]
    if target.log is not None:
        return append_bucket(incoming, ctx, target, started)
    partition_id, stage_id, attempt_id = task_ids()
    token = make_write_token(partition_id, stage_id, attempt_id)
    storage = ctx.storage
    data = incoming_rows(incoming, ctx)
    base, base_size = open_parquet(storage, target.base_file_path) if target.base_file_path else (None, 0)
    # a base file over hoodie.memory.merge.max.size is merged one row group at a time (storage.write.merge_handle)
    streaming = base is not None and base_size > ctx.merge_max_size
    base_rows = base.metadata.num_rows if base is not None else 0
    # the stored rows' bytes each: the base file's data pages (its footer, bloom filter included, apart)
    base_data = max(0, base_size - base.metadata.serialized_size - 12) if base is not None else 0
    files = RollingBaseFiles(ctx, target.partition_path, partition_id, token, target.file_id,
                             target.prev_commit if base is not None else NULL_COMMIT,
                             IOType.MERGE if base is not None else IOType.CREATE,
                             bytes_per_row=base_data / base_rows if base_rows else 0.0, measured=base_rows > 0)
    try:
        if streaming:
            from storage.write.merge_handle import stream_merge_into

            log.info("merging %s (%d bytes > %s=%d) one row group at a time", target.base_file_path, base_size,
                     WK.MERGE_MAX_SIZE.key, ctx.merge_max_size)
            counts = stream_merge_into(base, data, ctx, files)
        else:
            old = stored_rows(base.read(), ctx) if base is not None else None
            kept, writes, counts = merge_records(old, data, ctx)
            if ctx.sort_records and kept is None:
                writes = writes.sort_by([(RECORD_KEY, "ascending")])  # a bulk insert's sort mode
            rows = (kept.num_rows if kept is not None else 0) + writes.num_rows
            fits = files.expected_to_fit(rows)
            if base is not None and fits:
                files.seed_first(bloom_seed(base, target.base_file_path, kept, counts, ctx))
            updates = counts["updates"]
            if not fits and updates and old is not None:  # split over files: each file's own count of updates
                updates = pc.fill_null(pc.is_in(writes.column(RECORD_KEY), value_set=old.column(RECORD_KEY)), False)
            files.write(kept, writes, updates)
        files.add_deletes(counts["deletes"])
        return files.finish(counts, merged=base is not None)
    except BaseException:
        files.abort()
        raise


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
    """The function given to `groupBy(...).applyInArrow`: one bucket in, one JSON write stat per file out."""

    def run(table: pa.Table) -> pa.Table:
        with counted_in_task(ctx.requests):
            stats = write_bucket_files(table, ctx)
        return pa.table({"stat": pa.array([json.dumps(s.to_json_dict()) for s in stats], pa.string())})

    return run


# ----------------------------------------------------------------------------------------------- append handle


def append_bucket(incoming: pa.Table, ctx: WriteTaskContext, target: BucketTarget,
                  started: float) -> list[HoodieWriteStat]:
    """Merge-on-read append handle: the bucket's upserts as data blocks (of at most
    `hoodie.logfile.data.block.max.size` each) and its deletes as a delete block, in a new log file of the target
    slice (a new version per write, as Hudi does on file systems without append). A file that reaches
    `hoodie.logfile.max.size` is closed and the blocks that follow go to the next log version, as Hudi's
    HoodieLogFormatWriter rolls over: each log file holds at most the limit plus one block. One write stat per log
    file, as Hudi's append handle starts a new one for the file it rolled over to."""
    from storage.file_group.log_block import DeleteBlock

    partition_id, stage_id, attempt_id = task_ids()
    token = make_write_token(partition_id, stage_id, attempt_id)
    data = incoming_rows(incoming, ctx)
    writes, deletes = split_deletes(data)
    # records in logs carry the file id as their file name, as Hudi's append handle stamps them
    rows = written_part(None, writes, ctx, target.file_id, partition_id)
    storage = ctx.storage
    write_partition_metadata(storage, ctx.base_path, target.partition_path, ctx.instant_time)
    blocks = data_blocks(rows, ctx)  # (block, records)
    if deletes.num_rows:
        ordering_field = ctx.merge.ordering_field
        ordering = deletes.column(ordering_field) if ordering_field in deletes.column_names else None
        if ordering is not None:
            ordering = natural_order_for_delete_operation(deletes, ordering)
        blocks.append((DeleteBlock.from_columns(deletes.column(RECORD_KEY), target.partition_path, ordering,
                                                ctx.instant_time, ctx.avro_schema_json), -deletes.num_rows))
    base_name = target.base_file_path.rsplit("/", 1)[-1] if target.base_file_path else ""
    log_target = target.log
    stats = []
    for group in roll_over(blocks, ctx.log_file_max_size):
        created = write_new_log_file(storage, ctx.base_path, ctx.marker_dir, target.partition_path, target.file_id,
                                     log_target, token, [b for b, _ in group], ctx.data_block_max_size,
                                     ctx.instant_time)
        log_target = dataclasses.replace(log_target, version=created.version + 1)
        storage.fsync(join_path(ctx.base_path, target.partition_path))
        fail_task_once("write.task_after_file")
        took = int((time.time() - started) * 1000)
        started = time.time()
        written = sum(n for _, n in group if n > 0)
        deleted = -sum(n for _, n in group if n < 0)
        rel = f"{target.partition_path}/{created.name}" if target.partition_path else created.name
        stats.append(HoodieWriteStat(
            fileId=target.file_id,
            path=rel,
            prevCommit=target.log.named_by(ctx.instant_time),
            numWrites=written,
            numDeletes=deleted,
            numUpdateWrites=written,
            numInserts=0,
            totalWriteBytes=created.size,
            partitionPath=target.partition_path,
            totalLogRecords=written + deleted,
            totalLogBlocks=len(created.results),
            fileSizeInBytes=created.size,
            runtimeStats=RuntimeStats(0, 0, took),
            logVersion=created.version,
            logOffset=0,
            baseFile=base_name,
            logFiles=[created.name],
        ))
    if len(stats) > 1:
        sizes = ", ".join(str(s.fileSizeInBytes) for s in stats)
        log.info("%s/%s: log rolled over at %s=%d into %d files (%s bytes)", target.partition_path, target.file_id,
                 LogFileConfigKeys.LOG_FILE_MAX_SIZE.key, ctx.log_file_max_size, len(stats), sizes)
    return stats


def data_blocks(rows: pa.Table, ctx: WriteTaskContext) -> list[tuple[object, int]]:
    """The rows as data blocks of at most `ctx.data_block_max_size` content bytes each (Hudi's append handle
    flushes a block once its records reach that size), with their record counts."""
    from storage.file_group.log_block import AvroDataBlock, ParquetDataBlock

    if not rows.num_rows:
        return []
    if ctx.data_block_format == "parquet":
        # Arrow's in-memory bytes bound the block's compressed parquet content
        per_row = max(1, rows.nbytes // rows.num_rows)
        step = max(1, ctx.data_block_max_size // per_row)
        return [(ParquetDataBlock.from_table(rows.slice(i, step), ctx.avro_schema_json, ctx.instant_time,
                                             compression=ctx.compression), min(step, rows.num_rows - i))
                for i in range(0, rows.num_rows, step)]
    block = AvroDataBlock.from_table(rows, ctx.avro_schema_json, ctx.instant_time)
    return [(piece, piece.record_count()) for piece in block.split(ctx.data_block_max_size)]


def block_bytes(block) -> int:
    """The bytes `block` takes in a log file (storage.file_group.log_format.serialize_block), without encoding it."""
    from storage.file_group.log_block import encode_metadata

    return (6 + 8 + 4 + 4 + len(encode_metadata(block.header)) + 8 + len(block.read_content())
            + len(encode_metadata(block.footer)) + 8)


def roll_over(blocks: list[tuple[object, int]], max_size: int) -> list[list[tuple[object, int]]]:
    """The blocks of each log file: a file takes blocks until it reaches `max_size` bytes (Hudi's writer rolls
    over after the append that grew the file past the limit), so it holds at most the limit plus one block."""
    files: list[list[tuple[object, int]]] = [[]]
    size = 0
    for block in blocks:
        if files[-1] and size >= max_size:
            files.append([])
            size = 0
        files[-1].append(block)
        size += block_bytes(block[0])
    return files


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


