"""Execution of a scheduled compaction (Hudi's HoodieCompactor).

`<t>.compaction.requested` holds the plan; execution moves it to `<t>.compaction.inflight`, runs one Spark task
per operation (each merges its file slice's base file and log files with `FileSliceMerge`, within the merge
memory budget hoodie.memory.compaction.max.size, spilling beyond it, and writes a new base file
`<fileId>_<writeToken>_<t>.parquet`, returning its write stat as the commit message), and publishes
everything at once as `<t>.commit` with operationType COMPACT. Until then readers do not see the new base files
(their instant is not completed), so a compaction that dies half-way changes nothing a reader sees; the next
run undoes its files (through its markers) and executes the plan again.

Records keep the meta columns they were written with (commit time and sequence number of the deltacommit that
wrote them); only `_hoodie_file_name` changes, as in Hudi.
"""
from __future__ import annotations

import dataclasses
import json
import logging
import time
from dataclasses import dataclass
from typing import Any, Iterator

import pyarrow as pa
from pyspark.sql import SparkSession

from storage.arrow_util import constant_array
from storage.config import HoodieConfig
from storage.fs_utils import join_path, make_base_file_name, make_write_token
from storage.table.partition_metadata import write_partition_metadata
from storage.io.base_file_writer import BaseFileWriter
from storage.io.request_metrics import RequestTally, counted_in_task
from storage.meta_fields import FILE_NAME
from storage.read.file_slice_reader import FileSliceMerge, FileSliceReadContext
from storage.read.mor_scan import DESCRIPTOR_SCHEMA, file_slice_of, slice_descriptor
from storage.table.file_slice import FileSlice, HoodieBaseFile, HoodieFileGroupId, HoodieLogFile
from storage.table.meta_client import HoodieTableMetaClient
from storage.table.schema_resolver import table_data_schema
from storage.timeline.commit_metadata import HoodieCommitMetadata, HoodieWriteStat, RuntimeStats
from storage.timeline.instant import Action
from storage.write.handle import task_ids
from storage.write.merge_rows import null_meta_fields
from storage.testing.crash_points import crash_point
from storage.table_service.service_execution import finish_execution, service_commit_metadata, start_execution
from storage.write.markers import IOType, create_marker
from storage.engine.engine_context import EngineContext, engine_for
from storage.exception import HoodieCompactionExecutionError
from storage.table.action_completion import ActionCompletion, complete_action
from storage.transaction.transaction_manager import TransactionManager
from storage.write.task_context import BaseFileTaskSettings

log = logging.getLogger(__name__)

COMPACT_OPERATION = "COMPACT"  # WriteOperationType.COMPACT, as recorded in the commit metadata


@dataclass(frozen=True, kw_only=True)
class CompactionTaskContext(BaseFileTaskSettings):
    """What every compaction task needs (`schema_ipc`: the data schema, no meta columns); small and picklable."""

    read: FileSliceReadContext


def operation_slices(meta: HoodieTableMetaClient, operations: list[dict[str, Any]]) -> list[FileSlice]:
    """The file slices the plan's operations name (plans store file names relative to the partition), with
    their sizes from one listing per partition."""
    sizes: dict[str, dict[str, int]] = {}
    for partition in {op.get("partitionPath") or "" for op in operations}:
        directory = join_path(meta.base_path, partition) if partition else meta.base_path
        sizes[partition] = {f.name: f.size for f in meta.storage.list_dir(directory) if not f.is_dir}
    return [_operation_slice(meta.base_path, op, sizes[op.get("partitionPath") or ""]) for op in operations]


def _operation_slice(base_path: str, operation: dict[str, Any], sizes: dict[str, int]) -> FileSlice:
    partition = operation.get("partitionPath") or ""
    directory = join_path(base_path, partition) if partition else base_path

    def size(name: str) -> int:
        if name not in sizes:
            raise HoodieCompactionExecutionError(f"compaction plan names {join_path(directory, name)}, "
                                                 "which does not exist")
        return sizes[name]

    base_name = operation.get("dataFilePath")
    base = HoodieBaseFile.of(join_path(directory, base_name), size(base_name)) if base_name else None
    logs = [HoodieLogFile.of(join_path(directory, n), size(n)) for n in operation.get("deltaFilePaths") or []]
    return FileSlice(HoodieFileGroupId(partition, operation["fileId"]), operation["baseInstantTime"], base, logs)


def compact_file_slice(file_slice: FileSlice, ctx: CompactionTaskContext) -> HoodieWriteStat:
    """One compaction operation: merge the slice and write its new base file at the compaction instant. The
    merge's pieces (one, or one per spill partition when the slice's records exceed the merge memory budget) are
    written as they come, so the task never holds more of the slice than the budget allows."""
    started = time.time()
    merge = FileSliceMerge(file_slice, ctx.schema, ctx.read)
    partition_id, stage_id, attempt_id = task_ids()
    file_name = make_base_file_name(file_slice.file_id, make_write_token(partition_id, stage_id, attempt_id),
                                    ctx.instant_time)
    storage = ctx.read.storage
    partition = file_slice.partition_path
    write_partition_metadata(storage, ctx.base_path, partition, ctx.instant_time)
    create_marker(storage, ctx.marker_dir, partition, file_name, IOType.CREATE)
    writer: BaseFileWriter | None = None
    pieces = iter(merge)
    try:
        for merged in pieces:  # at least one piece, possibly empty
            merged = merged.set_column(merged.schema.get_field_index(FILE_NAME), FILE_NAME,
                                       constant_array(file_name, merged.num_rows, pa.string()))
            if not ctx.populate_meta_fields:
                merged = null_meta_fields(merged)
            if writer is None:
                writer_schema = merged.schema
                writer = BaseFileWriter(storage, join_path(ctx.base_path, partition, file_name), writer_schema,
                                        ctx.bloom_settings, ctx.compression, ctx.row_group_bytes,
                                        ctx.populate_meta_fields)
            elif not merged.schema.equals(writer_schema):
                merged = merged.cast(writer_schema)
            writer.write(merged)
    except BaseException:
        pieces.close()  # the merge's spill files go now, not when the failed frame is collected
        if writer is not None:
            writer.abort()
        raise
    assert writer is not None
    size = writer.close()
    stats = merge.stats
    if merge.spill.spills:
        log.info("compaction %s of %s/%s spilled %d bytes in %d partitions (budget %d bytes, peak %d bytes held)",
                 ctx.instant_time, partition, file_slice.file_id, merge.spill.spilled_bytes, merge.spill.partitions,
                 ctx.read.memory.budget(), merge.spill.peak_in_memory_bytes)
    log_size = sum(lf.size for lf in file_slice.log_files)
    took = int((time.time() - started) * 1000)
    return HoodieWriteStat(
        fileId=file_slice.file_id,
        path=f"{partition}/{file_name}" if partition else file_name,
        prevCommit=file_slice.base_instant,
        numWrites=writer.num_rows,
        numDeletes=stats.deletes,
        numUpdateWrites=stats.records,
        totalWriteBytes=size,
        partitionPath=partition,
        totalLogRecords=stats.records + stats.deletes,
        totalLogFilesCompacted=len(file_slice.log_files),
        totalLogSizeCompacted=log_size,
        totalUpdatedRecordsCompacted=stats.records,
        totalLogBlocks=stats.blocks,
        totalCorruptLogBlock=stats.corrupt_blocks,
        totalRollbackBlocks=stats.command_blocks,
        fileSizeInBytes=size,
        runtimeStats=RuntimeStats(took, 0, 0),
    )


def _compaction_tasks(ctx: CompactionTaskContext):
    def run(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        for batch in batches:
            for row in batch.to_pylist():  # one row per operation (file slice), never per record
                with counted_in_task(ctx.requests):
                    stat = compact_file_slice(file_slice_of(row), ctx)
                yield pa.RecordBatch.from_pydict({"stat": [json.dumps(stat.to_json_dict())]})

    return run


def execute_compaction(spark: SparkSession, meta: HoodieTableMetaClient, instant_time: str, plan: dict[str, Any],
                       config: HoodieConfig = HoodieConfig()) -> HoodieCommitMetadata:
    """Run the plan of pending compaction `instant_time` and complete it as `<instant_time>.commit`."""
    operations = plan.get("operations") or []
    tally = RequestTally(spark)
    slices = operation_slices(meta, operations)
    engine = engine_for(spark, sum(s.total_size() for s in slices), config, f"compaction {instant_time}")
    ctx = dataclasses.replace(_task_context(meta, instant_time, slices, config),
                              requests=tally.accumulator if engine.accumulates else None)
    inflight, heartbeat = start_execution(meta, instant_time, Action.COMPACTION, "compaction", config,
                                          HoodieCompactionExecutionError)
    crash_point("compaction.after_inflight")
    try:
        stats = _run_tasks(engine, slices, ctx)
        crash_point("compaction.before_commit")
        metadata = service_commit_metadata(meta, COMPACT_OPERATION, stats, ctx.schema, ctx.marker_dir, compacted=True)
        # under the table lock, as Hudi's completeCompaction: the metadata table's deltacommit for it must not
        # interleave with a concurrent writer's
        complete_action(ActionCompletion.of_commit(meta, inflight, metadata, COMPACT_OPERATION),
                        TransactionManager.for_table(meta, config).transaction(f"commit compaction {instant_time}"))
    finally:
        heartbeat.stop()
    finish_execution(meta, "compaction", ctx.marker_dir)
    log.info("compaction %s of %s: %d file slices, %d records written", instant_time, meta.base_path,
             len(stats), sum(s.numWrites for s in stats))
    tally.report(f"compaction {instant_time} of {meta.base_path}")
    return metadata


def _task_context(meta: HoodieTableMetaClient, instant_time: str, slices: list[FileSlice],
                  config: HoodieConfig) -> CompactionTaskContext:
    sample = next((s.base_file.path for s in slices if s.base_file is not None), None)
    schema = table_data_schema(meta, None, sample)
    if schema is None:
        raise HoodieCompactionExecutionError(f"table {meta.base_path} has no schema to compact with")
    return CompactionTaskContext(
        **BaseFileTaskSettings.of_table(meta, meta.table_config.with_options(config), instant_time, schema,
                                        meta.table_config.populate_meta_fields),
        read=FileSliceReadContext.for_table(meta, None, config))


def _run_tasks(engine: EngineContext, slices: list[FileSlice], ctx: CompactionTaskContext) -> list[HoodieWriteStat]:
    rows = [slice_descriptor(s) for s in slices]
    out = engine.map_packed(rows, [float(s.total_size()) for s in slices], DESCRIPTOR_SCHEMA, _compaction_tasks(ctx),
                            "stat string")
    return [HoodieWriteStat.from_dict(json.loads(r[0])) for r in out]

