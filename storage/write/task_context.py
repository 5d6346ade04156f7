"""What a write task receives: the columns it reads, the target of each bucket and the write's settings,
planned on the driver and shipped to executors with the task closure (small and picklable)."""
from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa

from storage.avro.schema_converter import arrow_to_avro_schema
from storage.config import HoodieConfig
from storage.config import WriteConfigKeys as WK
from storage.exception import HoodieWriteError
from storage.file_group.log_format import DATA_BLOCK_FORMAT, DATA_BLOCK_MAX_SIZE, LOG_FILE_MAX_SIZE
from storage.bloom import BloomFilterSettings
from storage.io.storage import HoodieStorage
from storage.io.storage_options import StorageOptions
from storage.keygen import KeyGenerator
from storage.meta_fields import with_meta_columns
from storage.table.file_slice import FileSlice
from storage.table.fs_view import FileSystemView
from storage.table.meta_client import HoodieTableMetaClient
from storage.table.pending_plans import pending_compaction_instants
from storage.write.partitioner import BucketPlan, BucketType
from storage.engine.spark_partitioning import pack_tasks, placement_keys_for
from storage.merge.merge_resolver import MergeSpec, resolve_merge_spec
from storage.merge.record_merger import RecordMergeMode
from storage.table.table_version import HoodieTableVersion
from storage.write.table_settings import TableSettings

BUCKET_COLUMN = "_hoodie_bucket"
OP_COLUMN = "_hoodie_write_op"  # 0 = write, 1 = delete
OP_WRITE, OP_DELETE = 0, 1


@dataclass(frozen=True)
class LogTarget:
    """Merge-on-read append target: the instant the log file is named by and the log version to create (table
    version 6: the file slice's base instant, the slice's next version; 8+: None - the writing instant, known
    only when the write starts - and version 1)."""

    base_instant: str | None
    version: int

    def named_by(self, instant_time: str) -> str:
        """The instant in the log file's name, for a write at `instant_time`."""
        return self.base_instant or instant_time


@dataclass(frozen=True)
class BucketTarget:
    bucket_type: BucketType
    partition_path: str
    file_id: str
    base_file_path: str | None  # latest base file of the group, for UPDATE buckets
    prev_commit: str
    log: LogTarget | None = None  # set for merge-on-read UPDATE buckets: append to logs instead of merging


@dataclass(frozen=True, kw_only=True)
class BaseFileTaskSettings:
    """What every task writing base files needs, whichever action it serves (a write, a compaction, a
    clustering): where, for which instant, with which schema and parquet / bloom filter settings. The action's
    task context extends it."""

    base_path: str
    instant_time: str
    marker_dir: str
    schema_ipc: bytes  # the schema files are written with, as Arrow IPC (survives pickling exactly)
    bloom_settings: BloomFilterSettings = BloomFilterSettings()
    compression: str = "snappy"
    row_group_bytes: int = 128 * 1024 * 1024
    populate_meta_fields: bool = True
    requests: Any = None  # accumulator of the tasks' storage requests (storage.io.request_metrics)

    @property
    def schema(self) -> pa.Schema:
        return pa.ipc.read_schema(pa.py_buffer(self.schema_ipc))

    @staticmethod
    def of_table(meta: HoodieTableMetaClient, config: HoodieConfig, instant_time: str, schema: pa.Schema,
                 populate_meta_fields: bool) -> dict[str, Any]:
        """The shared fields for a task context of `meta`'s table, as keyword arguments."""
        return dict(base_path=meta.base_path, instant_time=instant_time, marker_dir=meta.marker_dir(instant_time),
                    schema_ipc=serialize_schema(schema), bloom_settings=BloomFilterSettings.of(config),
                    compression=config.get(WK.PARQUET_COMPRESSION_CODEC),
                    row_group_bytes=config.get(WK.PARQUET_BLOCK_SIZE), populate_meta_fields=populate_meta_fields)


@dataclass(frozen=True, kw_only=True)
class WriteTaskContext(BaseFileTaskSettings):
    """Everything a write task needs (`schema_ipc`: the target schema, meta and data columns)."""

    targets: dict[int, BucketTarget]
    placement: dict[int, int]  # placement key -> bucket id
    tasks: int = 0  # Spark tasks writing the buckets (each placement key hashes into its bucket's task)
    merge: MergeSpec = MergeSpec(RecordMergeMode.COMMIT_TIME_ORDERING, None)  # how stored and incoming records merge
    avro_schema_json: str | None = None  # table Avro schema with meta fields (merge-on-read log blocks)
    data_block_max_size: int = 256 * 1024 * 1024
    record_key_fields: tuple[str, ...] = ()  # tables without meta fields: keys of stored rows come from these
    complex_keys: bool = False  # ComplexKeyGenerator spelling (`f:v,...`) even for one key field
    data_block_format: str = "avro"  # hoodie.logfile.data.block.format: avro | parquet
    storage_options: StorageOptions = field(default_factory=StorageOptions)  # how tasks reach the table
    sort_records: bool = False  # hoodie.bulkinsert.sort.mode GLOBAL_SORT / PARTITION_SORT: new files sorted by key
    merge_max_size: int = WK.MERGE_MAX_SIZE.default  # hoodie.memory.merge.max.size: larger base files merge streamed
    records_per_file: int = 0  # a bulk insert without a plan (storage.write.bulk_insert_handle): rolls over here
    max_file_size: int = WK.PARQUET_MAX_FILE_SIZE.default  # base files roll over at this size (rolling_files)
    avg_record_size: int = 1024  # the table's bytes per record (recent commits): a new file's first guess
    log_file_max_size: int = LOG_FILE_MAX_SIZE.default  # hoodie.logfile.max.size: appends roll to the next version
    task_keys: KeyGenerator | None = None  # set: the tasks compute record keys and partition paths in Arrow
    combine_by: tuple[str, ...] = ()  # set: the tasks combine a key's records, the greatest of these columns wins

    @property
    def storage(self) -> HoodieStorage:
        return HoodieStorage.for_path(self.base_path, self.storage_options)


def serialize_schema(schema: pa.Schema) -> bytes:
    return schema.serialize().to_pybytes()


def build_task_context(meta: HoodieTableMetaClient, config: HoodieConfig, settings: TableSettings,
                       instant_time: str, schema: pa.Schema, plan: BucketPlan,
                       fs_view: FileSystemView, requests: Any = None, max_tasks: int = 0,
                       avg_record_size: int = 1024) -> WriteTaskContext:
    """`max_tasks` > 0: the buckets are packed into at most that many tasks (by their estimated bytes to write,
    `avg_record_size` per record); 0: one task per bucket."""
    targets = bucket_targets(meta, plan, fs_view, settings.is_mor)
    costs = bucket_costs(plan, fs_view, settings.is_mor, avg_record_size)
    tasks, task_of = pack_tasks(costs, max_tasks) if max_tasks > 0 else (len(plan), list(range(len(plan))))
    keys = placement_keys_for(task_of, tasks)
    return WriteTaskContext(
        **BaseFileTaskSettings.of_table(meta, config, instant_time, with_meta_columns(schema),
                                        settings.populate_meta_fields),
        targets=targets,
        placement={keys[b]: b for b in range(len(plan))}, tasks=tasks,
        merge=resolve_merge_spec(meta.table_config, settings.precombine, config),
        avro_schema_json=json.dumps(arrow_to_avro_schema(with_meta_columns(schema), settings.name),
                                    separators=(",", ":")) if settings.is_mor else None,
        data_block_max_size=int(config.get(DATA_BLOCK_MAX_SIZE)),
        data_block_format=_data_block_format(config.get(DATA_BLOCK_FORMAT)),
        record_key_fields=tuple(settings.record_keys),
        complex_keys=settings.keygen.keygen_type == "COMPLEX",
        storage_options=meta.storage_options,
        requests=requests,
        merge_max_size=config.get(WK.MERGE_MAX_SIZE),
        max_file_size=config.get(WK.PARQUET_MAX_FILE_SIZE),
        avg_record_size=max(1, int(avg_record_size)),
        log_file_max_size=int(config.get(LOG_FILE_MAX_SIZE)),
    )


def bucket_targets(meta: HoodieTableMetaClient, plan: BucketPlan, fs_view: FileSystemView,
                   is_mor: bool) -> dict[int, BucketTarget]:
    """Per bucket: the file group it writes, its latest base file and (merge-on-read updates) the log to create;
    a merge-on-read small file that takes inserts is merged into a new base file instead (`rewrites_base`)."""
    latest = {(s.partition_path, s.file_id): s for s in fs_view.latest_file_slices()}
    own_logs = HoodieTableVersion.of(meta).log_file_per_write
    pending = pending_compaction_instants(meta) if is_mor and not own_logs else {}
    targets = {}
    for b in plan.buckets:
        slice_ = latest.get((b.partition_path, b.file_id)) if b.bucket_type is BucketType.UPDATE else None
        base = slice_.base_file if slice_ else None
        log = None
        if is_mor and slice_ is not None and not b.rewrites_base:
            # table version 8+: the log is the write's own; the file slice it joins follows from its completion time
            log = LogTarget(None, 1) if own_logs else _log_target(slice_, pending.get((b.partition_path,
                                                                                                 b.file_id)))
        targets[b.bucket_id] = BucketTarget(b.bucket_type, b.partition_path, b.file_id,
                                            base.path if base else None, base.instant_time if base else "null", log)
    return targets


def bucket_costs(plan: BucketPlan, fs_view: FileSystemView, is_mor: bool, avg_record_size: int) -> list[float]:
    """Estimated bytes each bucket writes: its records, plus (copy-on-write updates) the base file it rewrites."""
    sizes = {(s.partition_path, s.file_id): s.base_file.size for s in fs_view.latest_file_slices() if s.base_file}
    costs = []
    for b in plan.buckets:
        rewrites = b.bucket_type is BucketType.UPDATE and (not is_mor or b.rewrites_base)
        rewritten = sizes.get((b.partition_path, b.file_id), 0) if rewrites else 0
        costs.append(float(rewritten + (b.expected_updates + b.expected_inserts) * avg_record_size))
    return costs


def _log_target(slice_: FileSlice, pending_compaction: str | None) -> LogTarget:
    """Where an append goes: the next log version of the latest slice, or (while a compaction of the group is
    pending) a new slice that starts at the compaction instant, as Hudi's file-system view does."""
    if pending_compaction is not None and pending_compaction > slice_.base_instant:
        return LogTarget(pending_compaction, 1)
    versions = [lf.parsed.version for lf in slice_.log_files]
    return LogTarget(slice_.base_instant, max(versions, default=0) + 1)


def _data_block_format(value: str) -> str:
    fmt = str(value).strip().lower()
    if fmt not in ("avro", "parquet"):
        raise HoodieWriteError(f"unsupported {DATA_BLOCK_FORMAT.key} {value!r}: use avro or parquet")
    return fmt
