"""Bulk insert without a shuffle: Hudi's row-writer bulk insert (BulkInsertDataInternalWriterHelper) with
`hoodie.bulkinsert.sort.mode=NONE`.

Each Spark task writes the records it holds, in their input order: one open base file per partition path it
meets, rolled over to a new file group once the file reaches hoodie.parquet.max.file.size in bytes written
(storage.write.rolling_files), or holds `records_per_file` records when hoodie.copyonwrite.insert.auto.split is
off (hoodie.copyonwrite.insert.split.size). Tasks name their file groups themselves (a
fresh file id per file), so the write needs no plan of file groups and no shuffle of the batch into them: one
pass over the input. Each file is announced by a CREATE marker before it is opened, so the files of a failed task
attempt are removed before the commit like those of any other write. Records wait per partition for a whole row
group (`hoodie.parquet.block.size`, at most 64 MB of Arrow memory): a task holds at most one row group per open
file.
"""
from __future__ import annotations

import json
import math
from dataclasses import dataclass
from typing import Iterator

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from storage.fs_utils import make_write_token
from storage.io.request_metrics import counted_in_task
from storage.keygen.arrow_keys import partition_paths, record_keys
from storage.meta_fields import PARTITION_PATH, RECORD_KEY
from storage.timeline.commit_metadata import HoodieWriteStat
from storage.write.handle import task_ids
from storage.write.merge_rows import incoming_rows, split_deletes
from storage.write.rolling_files import RollingBaseFiles
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
    """The files one task writes into one partition (storage.write.rolling_files: new file groups, rolled over at
    `hoodie.parquet.max.file.size` and at `ctx.records_per_file` records), and the records waiting for the next
    row group."""

    def __init__(self, ctx: WriteTaskContext, partition: str, partition_id: int, token: str):
        self.pending: list[pa.Table] = []
        self.pending_bytes = 0
        self.limit = min(ctx.row_group_bytes, _MAX_BUFFER_BYTES)
        self.files = RollingBaseFiles(ctx, partition, partition_id, token, max_records=ctx.records_per_file)

    def add(self, rows: pa.Table) -> None:
        self.pending.append(rows)
        self.pending_bytes += rows.nbytes
        if self.pending_bytes >= self.limit:
            self._flush()

    def finish(self) -> list[HoodieWriteStat]:
        self._flush()
        return self.files.finish()

    def abort(self) -> None:
        self.files.abort()

    def _flush(self) -> None:
        if not self.pending:
            return
        waiting = pa.concat_tables(self.pending) if len(self.pending) > 1 else self.pending[0]
        self.pending, self.pending_bytes = [], 0
        self.files.write(None, waiting)


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
