"""Execution of a clustering plan (Hudi's SparkSortAndSizeExecutionStrategy): one Spark task per clustering group
reads the group's file slices (merge-on-read: merged with their log files), orders the rows by the plan's sort
columns and layout strategy (storage.layout: linear, z-order, Hilbert), cuts them into the group's
numOutputFileGroups files of even size, and writes each as the first base file of a new file group at the
clustering instant, returning its write stat. The driver then publishes `<t>.replacecommit` (operationType CLUSTER)
whose partitionToReplaceFileIds hides the input file groups; until then readers see the old files only.

Records keep their commit time and sequence number (`hoodie.clustering.preserve.commit.metadata`, Hudi's default):
clustering rewrites rows, it does not change them. A group is read whole into one task: its size is bounded by
`hoodie.clustering.plan.strategy.max.bytes.per.group`.
"""
from __future__ import annotations

import dataclasses
import json
import logging
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql import SparkSession

from storage.arrow_util import constant_array, row_numbers
from storage.config import HoodieConfig
from storage.fs_utils import join_path, make_base_file_name, make_write_token, new_file_id
from storage.table.partition_metadata import write_partition_metadata
from storage.io.base_file_writer import write_base_file
from storage.io.request_metrics import counted_in_task
from storage.layout.space_curve import LayoutOptimizationStrategy, sort_indices
from storage.meta_fields import COMMIT_SEQNO, COMMIT_TIME, FILE_NAME
from storage.read.file_slice_reader import FileSliceReadContext, read_file_slice
from storage.read.mor_scan import DESCRIPTOR_SCHEMA, file_slice_of, slice_descriptor
from storage.table.file_slice import FileSlice
from storage.table.meta_client import HoodieTableMetaClient
from storage.timeline.commit_metadata import NULL_COMMIT, HoodieWriteStat, RuntimeStats
from storage.write.handle import task_ids
from storage.write.merge_rows import null_meta_fields
from storage.write.markers import IOType, create_marker
from storage.engine.spark_partitioning import packed_frame
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


def read_group(slices: list[FileSlice], ctx: ClusteringTaskContext) -> pa.Table:
    schema = ctx.schema
    tables = [read_file_slice(s, schema, ctx.read) for s in slices]
    return pa.concat_tables(tables, promote_options="permissive") if tables else schema.empty_table()


def order_rows(table: pa.Table, ctx: ClusteringTaskContext) -> pa.Table:
    if not ctx.sort_columns or table.num_rows < 2:
        return table
    return table.take(sort_indices(table, list(ctx.sort_columns), ctx.layout))


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


def _restamp(table: pa.Table, ctx: ClusteringTaskContext, file_name: str, partition_id: int) -> pa.Table:
    n = table.num_rows
    if not ctx.preserve_commit_metadata:
        table = table.set_column(table.schema.get_field_index(COMMIT_TIME), COMMIT_TIME,
                                 constant_array(ctx.instant_time, n, pa.string()))
        seq = pc.binary_join_element_wise(pa.scalar(f"{ctx.instant_time}_{partition_id}"),
                                          pc.cast(row_numbers(n), pa.string()), "_")
        table = table.set_column(table.schema.get_field_index(COMMIT_SEQNO), COMMIT_SEQNO, seq)
    table = table.set_column(table.schema.get_field_index(FILE_NAME), FILE_NAME,
                             constant_array(file_name, n, pa.string()))
    return table if ctx.populate_meta_fields else null_meta_fields(table)


def cluster_group(slices: list[FileSlice], num_output_files: int, ctx: ClusteringTaskContext) -> list[HoodieWriteStat]:
    """One clustering group: its rows ordered and written as new file groups; their write stats."""
    started = time.time()
    rows = order_rows(read_group(slices, ctx), ctx)
    partition = slices[0].partition_path
    if rows.num_rows == 0:
        return []
    partition_id, stage_id, attempt_id = task_ids()
    token = make_write_token(partition_id, stage_id, attempt_id)
    storage = ctx.read.storage
    write_partition_metadata(storage, ctx.base_path, partition, ctx.instant_time)
    stats = []
    for index, (offset, length) in enumerate(_cuts(rows.num_rows, num_output_files)):
        file_id = new_file_id(index)
        file_name = make_base_file_name(file_id, token, ctx.instant_time)
        part = _restamp(rows.slice(offset, length), ctx, file_name, partition_id)
        create_marker(storage, ctx.marker_dir, partition, file_name, IOType.CREATE)
        size = write_base_file(storage, join_path(ctx.base_path, partition, file_name), part, ctx.bloom_settings,
                               ctx.compression, ctx.row_group_bytes, ctx.populate_meta_fields)
        stats.append(HoodieWriteStat(
            fileId=file_id, path=f"{partition}/{file_name}" if partition else file_name, prevCommit=NULL_COMMIT,
            numWrites=part.num_rows, numInserts=part.num_rows, totalWriteBytes=size, partitionPath=partition,
            fileSizeInBytes=size, runtimeStats=RuntimeStats(int((time.time() - started) * 1000), 0, 0)))
    return stats


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


def run_clustering_tasks(spark: SparkSession, groups: list[tuple[list[FileSlice], int]],
                         ctx: ClusteringTaskContext) -> list[HoodieWriteStat]:
    """The groups packed by size into a few Spark tasks (`packed_frame`)."""
    if not groups:
        return []
    rows = [(json.dumps([_descriptor(s) for s in slices]), outputs) for slices, outputs in groups]
    costs = [float(sum(s.total_size() for s in slices)) for slices, _ in groups]
    frame = packed_frame(spark, rows, costs, _GROUP_SCHEMA)
    out = frame.mapInArrow(_clustering_tasks(ctx), "stat string").collect()
    return [HoodieWriteStat.from_dict(json.loads(r[0])) for r in out]


def with_requests(ctx: ClusteringTaskContext, accumulator) -> ClusteringTaskContext:
    return dataclasses.replace(ctx, requests=accumulator)
