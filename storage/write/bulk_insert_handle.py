"""Bulk insert without a shuffle: Hudi's row-writer bulk insert (BulkInsertDataInternalWriterHelper) with
`hoodie.bulkinsert.sort.mode=NONE`.

Each Spark task writes the records it holds, in their input order: one open base file per partition path it
meets, rolled over to a new file group once the file holds `records_per_file` records (hoodie.parquet.max.file.size
over the average record size, as the planner sizes new file groups). Tasks name their file groups themselves (a
fresh file id per file), so the write needs no plan of file groups and no shuffle of the batch into them: one
pass over the input. Each file is announced by a CREATE marker before it is opened, so the files of a failed task
attempt are removed before the commit like those of any other write. Records wait per partition for a whole row
group (`hoodie.parquet.block.size`, at most 64 MB of Arrow memory): a task holds at most one row group per open
file.
"""
from __future__ import annotations

import json
import math
import time
from dataclasses import dataclass
from typing import Iterator

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from storage.fs_utils import join_path, make_base_file_name, make_write_token, new_file_id
from storage.table.partition_metadata import write_partition_metadata
from storage.io.base_file_writer import BaseFileWriter
from storage.io.request_metrics import counted_in_task
from storage.keygen.arrow_keys import partition_paths, record_keys
from storage.meta_fields import PARTITION_PATH, RECORD_KEY
from storage.testing.crash_points import fail_task_once
from storage.timeline.commit_metadata import NULL_COMMIT, HoodieWriteStat, RuntimeStats
from storage.write.handle import task_ids
from storage.write.merge_rows import incoming_rows, split_deletes, written_part
from storage.write.markers import IOType, create_marker
from storage.write.task_context import WriteTaskContext

_MAX_BUFFER_BYTES = 64 * 1024 * 1024
_CHUNK_ROWS = 65536


def by_partition(rows: pa.Table) -> Iterator[tuple[str, pa.Table]]:
    """The rows of each partition path, in input order within each (one stable sort, then slices). The sort is of
    the paths' dictionary codes (small integers): sorting the strings themselves costs several times more."""
    if rows.num_rows == 0:
        return
    encoded = pc.dictionary_encode(rows.column(PARTITION_PATH), null_encoding="encode").combine_chunks()
    paths = encoded.dictionary.to_pylist()
    if len(paths) == 1:
        yield paths[0], rows
        return
    codes = encoded.indices.to_numpy(zero_copy_only=False)
    rows = rows.take(pa.array(np.argsort(codes, kind="stable")))
    start = 0
    for code, count in enumerate(np.bincount(codes, minlength=len(paths)).tolist()):
        if count:
            yield paths[code], rows.slice(start, count)
            start += count


class _PartitionFiles:
    """The files one task writes into one partition: the open one, and the records waiting for its next row group."""

    def __init__(self, ctx: WriteTaskContext, partition: str, partition_id: int, token: str):
        self.ctx, self.partition, self.partition_id, self.token = ctx, partition, partition_id, token
        self.pending: list[pa.Table] = []
        self.pending_rows = self.pending_bytes = 0
        self.writer: BaseFileWriter | None = None
        self.file_id = self.file_name = ""
        self.files = 0
        self.started = 0.0
        self.stats: list[HoodieWriteStat] = []

    def add(self, rows: pa.Table) -> None:
        self.pending.append(rows)
        self.pending_rows += rows.num_rows
        self.pending_bytes += rows.nbytes
        while self.pending_rows and self.pending_rows >= self._room():  # the open file fills up: roll over
            self._flush(self._room())
            self._close()
        if self.pending_bytes >= min(self.ctx.row_group_bytes, _MAX_BUFFER_BYTES):
            self._flush(self.pending_rows)

    def finish(self) -> list[HoodieWriteStat]:
        if self.pending_rows:
            self._flush(self.pending_rows)
        if self.writer is not None:
            self._close()
        return self.stats

    def abort(self) -> None:
        if self.writer is not None:
            self.writer.abort()

    def _room(self) -> int:
        """Records the open file still takes (a file not opened yet: a whole file's)."""
        return max(1, self.ctx.records_per_file) - (self.writer.num_rows if self.writer is not None else 0)

    def _flush(self, n: int) -> None:
        """The first `n` waiting records into the open file (opened here if none is)."""
        waiting = pa.concat_tables(self.pending) if len(self.pending) > 1 else self.pending[0]
        head, rest = waiting.slice(0, n), waiting.slice(n)
        self.pending = [rest] if rest.num_rows else []
        self.pending_rows, self.pending_bytes = rest.num_rows, rest.nbytes if rest.num_rows else 0
        if self.writer is None:
            self._open()
        self.writer.write(written_part(None, head, self.ctx, self.file_name, self.partition_id, self.writer.num_rows))

    def _open(self) -> None:
        ctx = self.ctx
        storage = ctx.storage
        self.started = time.time()
        self.file_id = new_file_id(self.files)
        self.file_name = make_base_file_name(self.file_id, self.token, ctx.instant_time)
        if self.files == 0:
            write_partition_metadata(storage, ctx.base_path, self.partition, ctx.instant_time)
        create_marker(storage, ctx.marker_dir, self.partition, self.file_name, IOType.CREATE)
        self.writer = BaseFileWriter(storage, join_path(ctx.base_path, self.partition, self.file_name), ctx.schema,
                                     ctx.bloom_settings, ctx.compression, ctx.row_group_bytes, ctx.populate_meta_fields)
        self.files += 1

    def _close(self) -> None:
        ctx, writer = self.ctx, self.writer
        size = writer.close()
        ctx.storage.fsync(join_path(ctx.base_path, self.partition))  # the file's name is durable too
        fail_task_once("write.task_after_file")
        took = int((time.time() - self.started) * 1000)
        self.stats.append(HoodieWriteStat(
            fileId=self.file_id,
            path=f"{self.partition}/{self.file_name}" if self.partition else self.file_name,
            prevCommit=NULL_COMMIT, numWrites=writer.num_rows, numDeletes=0, numUpdateWrites=0,
            numInserts=writer.num_rows, totalWriteBytes=size, partitionPath=self.partition, fileSizeInBytes=size,
            runtimeStats=RuntimeStats(0, 0, took)))
        self.writer = None


@dataclass(frozen=True)
class RollingLayout:
    """How a bulk insert writes without a plan: `records_per_file` per file, the input coalesced to `tasks` tasks
    (0: left as it is, `hoodie.bulkinsert.shuffle.parallelism` chose it)."""

    records_per_file: int
    tasks: int


def rolling_layout(counts: dict[str, int] | None, records_per_file: int, explicit_parallelism: bool,
                   slack: float = 1.25) -> RollingLayout | None:
    """The layout of a bulk insert of `counts` records per partition written without a plan, or None when it would
    scatter them over more files than the planned write (each task writes at least one file per partition it holds):
    the input runs in as many tasks as its largest partition fills files, each holding a share of every partition,
    which for partitions of similar sizes is the planned number of files; skewed partitions would leave the small
    ones in many small files, so those are planned (a shuffle) instead."""
    per_file = max(1, records_per_file)
    if explicit_parallelism:
        return RollingLayout(per_file, 0)
    if not counts:
        return None
    tasks = max(math.ceil(c / per_file) for c in counts.values())
    planned = sum(math.ceil(c / per_file) for c in counts.values())
    rolling = sum(min(tasks, c) for c in counts.values())
    return RollingLayout(per_file, tasks) if rolling <= planned * slack else None


def _chunks(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.Table]:
    """Spark's Arrow batches (10,000 rows by default) gathered into tables of at least `_CHUNK_ROWS` rows: the
    per-table steps (schema alignment, the split by partition) cost the same for a small table as for a large one."""
    held: list[pa.RecordBatch] = []
    rows = 0
    for batch in batches:
        held.append(batch)
        rows += batch.num_rows
        if rows >= _CHUNK_ROWS:
            yield pa.Table.from_batches(held)
            held, rows = [], 0
    if held:
        yield pa.Table.from_batches(held)


def _keyed(chunk: pa.Table, ctx: WriteTaskContext) -> pa.Table:
    """The chunk with its record keys and partition paths: computed here when the write left them to the tasks
    (`ctx.task_keys`, storage.keygen.arrow_keys), else as Spark computed them."""
    if ctx.task_keys is None:
        return chunk
    return chunk.append_column(RECORD_KEY, record_keys(ctx.task_keys, chunk)).append_column(
        PARTITION_PATH, partition_paths(ctx.task_keys, chunk))


def rolling_write_udf(ctx: WriteTaskContext):
    """The function given to `mapInArrow`: a task's records in, one JSON write stat per file it wrote out."""

    def run(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        partition_id, stage_id, attempt_id = task_ids()
        token = make_write_token(partition_id, stage_id, attempt_id)
        files: dict[str, _PartitionFiles] = {}
        with counted_in_task(ctx.requests):
            try:
                for chunk in _chunks(batches):
                    writes, _ = split_deletes(incoming_rows(_keyed(chunk, ctx), ctx))
                    for partition, rows in by_partition(writes):
                        if partition not in files:
                            files[partition] = _PartitionFiles(ctx, partition, partition_id, token)
                        files[partition].add(rows)
                stats = [stat for handle in files.values() for stat in handle.finish()]
            except BaseException:
                for handle in files.values():
                    handle.abort()
                raise
        yield pa.RecordBatch.from_pydict({"stat": [json.dumps(s.to_json_dict()) for s in stats]},
                                         schema=pa.schema([("stat", pa.string())]))

    return run
