"""Execution of a clustering plan (Hudi's SparkSortAndSizeExecutionStrategy): one Spark task per clustering group
reads the group's file slices (merge-on-read: merged with their log files), orders the rows by the plan's sort
columns and layout strategy (storage.layout: linear, z-order, Hilbert), cuts them into the group's
numOutputFileGroups files of even size, and writes each as the first base file of a new file group at the
clustering instant, returning its write stat. The driver then publishes `<t>.replacecommit` (operationType CLUSTER)
whose partitionToReplaceFileIds hides the input file groups; until then readers see the old files only.

Records keep their commit time and sequence number (`hoodie.clustering.preserve.commit.metadata`, Hudi's default):
clustering rewrites rows, it does not change them. One task orders a whole group (up to
`hoodie.clustering.plan.strategy.max.bytes.per.group`) within the task's merge memory
(`hoodie.memory.compaction.max.size`, else the fraction of the Python worker's memory): past it, the rows are
sorted out of core (`storage.layout.external_sort`) and each output file is written a part at a time.
"""
from __future__ import annotations

import dataclasses
import json
import logging
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from storage.arrow_util import constant_array
from storage.config import HoodieConfig
from storage.fs_utils import join_path, make_base_file_name, make_write_token, new_file_id
from storage.table.partition_metadata import write_partition_metadata
from storage.io.base_file_writer import BaseFileWriter
from storage.io.request_metrics import counted_in_task
from storage.layout.external_sort import ExternalSorter
from storage.layout.space_curve import LayoutOptimizationStrategy, sort_indices
from storage.meta_fields import COMMIT_SEQNO, COMMIT_TIME, FILE_NAME
from storage.read.file_slice_reader import FileSliceMerge, FileSliceReadContext
from storage.read.mor_scan import DESCRIPTOR_SCHEMA, file_slice_of, slice_descriptor
from storage.table.file_slice import FileSlice
from storage.table.meta_client import HoodieTableMetaClient
from storage.timeline.commit_metadata import NULL_COMMIT, HoodieWriteStat, RuntimeStats
from storage.write.handle import task_ids
from storage.write.merge_rows import null_meta_fields
from storage.write.markers import IOType, create_marker
from storage.engine.engine_context import EngineContext
from storage.write.task_context import BaseFileTaskSettings

log = logging.getLogger(__name__)


@dataclass(frozen=True, kw_only=True)
class ClusteringTaskContext(BaseFileTaskSettings):
    """What every clustering task needs (`schema_ipc`: the data schema, no meta columns); small and picklable."""

    read: FileSliceReadContext
    sort_columns: tuple[str, ...]
    layout: LayoutOptimizationStrategy
    preserve_commit_metadata: bool

    @classmethod
    def of(cls, meta: HoodieTableMetaClient, instant_time: str, schema: pa.Schema, sort_columns: tuple[str, ...],
           layout: LayoutOptimizationStrategy, layered: HoodieConfig, preserve: bool,
           config: HoodieConfig) -> "ClusteringTaskContext":
        """`layered`: the table's properties with the options of `config` (the files are written as they say);
        the file slices are read with the options alone, as a read of the table is."""
        return cls(**BaseFileTaskSettings.of_table(meta, layered, instant_time, schema,
                                                   meta.table_config.populate_meta_fields),
                   read=FileSliceReadContext.for_table(meta, None, config), sort_columns=sort_columns,
                   layout=layout, preserve_commit_metadata=preserve)


def _order(ctx: ClusteringTaskContext):
    if not ctx.sort_columns:
        return None
    columns, layout = list(ctx.sort_columns), ctx.layout
    return lambda table: sort_indices(table, columns, layout) if table.num_rows > 1 else pa.array(
        range(table.num_rows), pa.int64())


def sorted_group(slices: list[FileSlice], ctx: ClusteringTaskContext) -> ExternalSorter:
    """The group's merged rows added to a sorter bounded by the task's merge memory (`MergeMemory`): each
    slice is read a piece at a time (`FileSliceMerge` spills its own log merge), so the task holds at most
    about the budget, whatever the group's size."""
    memory = ctx.read.memory
    sorter = ExternalSorter(_order(ctx), list(ctx.sort_columns), memory.budget(), memory.spill_path,
                            compression=memory.compression)
    try:
        for file_slice in slices:
            for piece in FileSliceMerge(file_slice, ctx.schema, ctx.read):
                sorter.add(piece)
    except BaseException:
        sorter.close()
        raise
    return sorter


def _cuts(num_rows: int, num_files: int) -> list[tuple[int, int]]:
    """(offset, length) of `num_files` consecutive runs of even size (no empty file)."""
    n = max(1, min(num_files, num_rows))
    base, extra = divmod(num_rows, n)
    out, offset = [], 0
    for i in range(n):
        length = base + (1 if i < extra else 0)
        out.append((offset, length))
        offset += length
    return out


def _restamp(table: pa.Table, ctx: ClusteringTaskContext, file_name: str, partition_id: int,
             first_row: int = 0) -> pa.Table:
    """`first_row`: the position in its file of the table's first row (sequence numbers count per file)."""
    n = table.num_rows
    if not ctx.preserve_commit_metadata:
        table = table.set_column(table.schema.get_field_index(COMMIT_TIME), COMMIT_TIME,
                                 constant_array(ctx.instant_time, n, pa.string()))
        positions = pa.array(np.arange(first_row, first_row + n, dtype=np.int64))
        seq = pc.binary_join_element_wise(pa.scalar(f"{ctx.instant_time}_{partition_id}"),
                                          pc.cast(positions, pa.string()), "_")
        table = table.set_column(table.schema.get_field_index(COMMIT_SEQNO), COMMIT_SEQNO, seq)
    table = table.set_column(table.schema.get_field_index(FILE_NAME), FILE_NAME,
                             constant_array(file_name, n, pa.string()))
    return table if ctx.populate_meta_fields else null_meta_fields(table)


def _runs(tables: Iterator[pa.Table], lengths: list[int]) -> Iterator[Iterator[pa.Table]]:
    """The ordered tables cut into consecutive runs of `lengths` rows (each run: an iteration of tables)."""
    pending: list[pa.Table] = []

    def run(length: int) -> Iterator[pa.Table]:
        while length:
            if not pending:
                pending.append(next(tables))
            head = pending.pop()
            take = min(length, head.num_rows)
            if take < head.num_rows:
                pending.append(head.slice(take))
            length -= take
            if take:
                yield head.slice(0, take)

    for length in lengths:
        yield run(length)


def cluster_group(slices: list[FileSlice], num_output_files: int, ctx: ClusteringTaskContext) -> list[HoodieWriteStat]:
    """One clustering group: its rows ordered and written as new file groups; their write stats."""
    started = time.time()
    partition = slices[0].partition_path
    with sorted_group(slices, ctx) as sorter:
        if sorter.num_rows == 0:
            return []
        partition_id, stage_id, attempt_id = task_ids()
        token = make_write_token(partition_id, stage_id, attempt_id)
        storage = ctx.read.storage
        write_partition_metadata(storage, ctx.base_path, partition, ctx.instant_time)
        stats = []
        cuts = _cuts(sorter.num_rows, num_output_files)
        runs = _runs(iter(sorter.sorted_tables()), [length for _, length in cuts])
        for index, run in enumerate(runs):
            file_id = new_file_id(index)
            file_name = make_base_file_name(file_id, token, ctx.instant_time)
            create_marker(storage, ctx.marker_dir, partition, file_name, IOType.CREATE)
            rows, size = _write_file(run, ctx, partition, file_name, partition_id)
            stats.append(HoodieWriteStat(
                fileId=file_id, path=f"{partition}/{file_name}" if partition else file_name, prevCommit=NULL_COMMIT,
                numWrites=rows, numInserts=rows, totalWriteBytes=size, partitionPath=partition,
                fileSizeInBytes=size, runtimeStats=RuntimeStats(int((time.time() - started) * 1000), 0, 0)))
        if sorter.spilled:
            log.info("clustering group of %d rows in %s sorted out of core: %s", sorter.num_rows, partition,
                     sorter.stats)
    return stats


def _write_file(run: Iterator[pa.Table], ctx: ClusteringTaskContext, partition: str, file_name: str,
                partition_id: int) -> tuple[int, int]:
    """One output file from its run of ordered rows; (rows, bytes)."""
    writer, rows = None, 0
    try:
        for part in run:
            part = _restamp(part, ctx, file_name, partition_id, rows)
            if writer is None:
                writer = BaseFileWriter(ctx.read.storage, join_path(ctx.base_path, partition, file_name), part.schema,
                                        ctx.bloom_settings, ctx.compression, ctx.row_group_bytes,
                                        ctx.populate_meta_fields)
            writer.write(part)
            rows += part.num_rows
    except BaseException:
        if writer is not None:
            writer.abort()
        raise
    assert writer is not None, "a clustering output file without rows"
    return rows, writer.close()


_GROUP_SCHEMA = "slices string, outputs int"


def _clustering_tasks(ctx: ClusteringTaskContext):
    def run(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        for batch in batches:
            for row in batch.to_pylist():  # one row per clustering group, never per record
                slices = [file_slice_of(d) for d in json.loads(row["slices"])]
                with counted_in_task(ctx.requests):
                    stats = cluster_group(slices, row["outputs"], ctx)
                yield pa.RecordBatch.from_pydict({"stat": [json.dumps(s.to_json_dict()) for s in stats]},
                                                 schema=pa.schema([("stat", pa.string())]))

    return run


def _descriptor(s: FileSlice) -> dict[str, Any]:
    return dict(zip(DESCRIPTOR_SCHEMA.fieldNames(), slice_descriptor(s)))


def run_clustering_tasks(engine: EngineContext, groups: list[tuple[list[FileSlice], int]],
                         ctx: ClusteringTaskContext) -> list[HoodieWriteStat]:
    """The groups packed by size into a few tasks of `engine` (Spark's, or threads of this process)."""
    rows = [(json.dumps([_descriptor(s) for s in slices]), outputs) for slices, outputs in groups]
    costs = [float(sum(s.total_size() for s in slices)) for slices, _ in groups]
    out = engine.map_packed(rows, costs, _GROUP_SCHEMA, _clustering_tasks(ctx), "stat string")
    return [HoodieWriteStat.from_dict(json.loads(r[0])) for r in out]


def with_requests(ctx: ClusteringTaskContext, accumulator) -> ClusteringTaskContext:
    return dataclasses.replace(ctx, requests=accumulator)
