"""One write (insert, upsert, bulk_insert, delete, insert_overwrite[_table]) from a Spark DataFrame to a table,
as a two-phase commit, holding that write's state from start to end: prepare -> locate -> write -> commit.

- prepare: the input checked against the table, keyed and combined (storage.write.prepare);
- locate: the table created if new, failed writes rolled back, each record's file group found by the index and
  the buckets planned (storage.write.locate, storage.write.bucketing);
- write: under the table lock an instant time and its requested instant (the heartbeat first), then the inflight
  instant, then one Spark task per bucket writes one file in Arrow and returns its write stat
  (storage.write.handle);
- commit: files of failed task attempts removed (reconcile against markers), then under the table lock: the
  instant checked still inflight, conflicts resolved against the instants this write did not see
  (storage.transaction), and the stats published as the completed instant (storage.write.commit).
Nothing is visible to readers before the completed instant exists; a failure before it leaves the table as it
was (the write's files and instant files are removed), and nothing after it can undo the commit.
"""
from __future__ import annotations

import dataclasses
import json
import logging
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Iterator

import pyarrow as pa
from pyspark.sql import DataFrame, SparkSession

from storage.config import HoodieConfig, validate_options
from storage.config import WriteConfigKeys as WK
from storage.exception import HoodieDuplicateKeyError, HoodieTableStateError, HoodieWriteConflictError
from storage.index.hoodie_index import LOCATION_COLUMNS, FrameCache
from storage.index.index_factory import is_global_index
from storage.io.request_metrics import RequestTally
from storage.io.storage import HoodieStorage
from storage.keygen import KeyGenerator, arrow_keys
from storage.merge.record_merger import combine_records
from storage.meta_fields import PARTITION_PATH, RECORD_KEY
from storage.table.fs_view import FileSystemView
from storage.table.meta_client import SUPPORTED_WRITE_VERSIONS, HoodieTableMetaClient
from storage.metadata.metadata_writer import prepare_metadata_table, refuse_overwrite_with_secondary_indexes
from storage.write.update_strategy import check_updates as check_clustering_updates
from storage.testing.crash_points import crash_point
from storage.timeline.commit_metadata import HoodieCommitMetadata, HoodieWriteStat
from storage.timeline.instant import Action, HoodieInstant
from storage.transaction.concurrent_operation import ConcurrentOperation
from storage.transaction.conflict_resolution import TimelineSnapshot, check_strategy, resolve_conflicts
from storage.transaction.transaction_manager import NEVER, TransactionManager, failed_writes_policy
from storage.write.bucketing import FileSizing, assign_buckets, file_sizing, plan_write
from storage.write.commit import (
    TableServices,
    commit_metadata,
    inflight_content,
    post_commit,
    requested_content,
)
from storage.write.bulk_insert_handle import RollingLayout, rolling_layout, rolling_write_udf
from storage.write.bulk_insert_sort import BulkInsertSortMode, key_rank_position, shuffle_parallelism, sort_mode
from storage.write.commit_callback import CommitEvent
from storage.write.handle import BUCKET_COLUMN, STAT_SCHEMA_DDL, write_bucket_udf
from storage.write.heartbeat import Heartbeat, HeartbeatSettings
from storage.engine.engine_context import EngineContext, LocalEngineContext, SparkEngineContext
from storage.engine.spark_partitioning import max_packed_tasks
from storage.write.local import locate as local_locate
from storage.write.local import prepare as local_prepare
from storage.write.local.choice import runs_in_process
from storage.write.local.input import arrow_schema, to_arrow
from storage.write.local.tasks import run_write_tasks
from storage.write.locate import (
    deletes_by_matches,
    is_bucketed,
    lookup_needs_partitions,
    lookup_counts,
    matches_profile,
    stale_locations,
    tag_location,
    workload_profile,
)
from storage.write.markers import delete_marker_dir, reconcile_against_markers
from storage.write.operation import WriteOperationType
from storage.write.partitioner import BucketPlan, WorkloadProfile
from storage.write.prepare import (
    KEY_COUNT,
    BatchChecks,
    check_missing_columns,
    combine_before_write,
    combine_ordering,
    combines_in_tasks,
    dedup,
    key_records,
    partition_counts,
    plain_error,
    target_schema,
    validate_input,
    with_input_order,
)
from storage.write.rollback import abort_write, rollback_failed_writes
from storage.table.schema_resolver import table_data_schema
from storage.write.table_settings import (
    TableSettings,
    resolve_table_settings,
    table_config_for,
)
from storage.write.task_context import OP_COLUMN, WriteTaskContext, build_task_context
from storage.table.action_completion import ActionCompletion, complete_action

log = logging.getLogger(__name__)

_PROFILED = (WriteOperationType.UPSERT, WriteOperationType.DELETE, WriteOperationType.INSERT)


@dataclass
class WriteResult:
    """What a write did: its instant and commit metadata (None when there was nothing to commit and empty commits
    are off), and the commit callbacks that failed (the commit stands regardless)."""

    instant_time: str | None = None
    action: str | None = None
    metadata: HoodieCommitMetadata | None = None
    callback_failures: list[tuple[str, Exception]] = field(default_factory=list)


@dataclass
class Prepared:
    """The input of a write, keyed and combined, with its per-partition counts; or, when the counting is left to
    the workload profile (`checks`), without them."""

    settings: TableSettings
    schema: pa.Schema  # the table's data schema after this write
    records: DataFrame | pa.Table  # a table: the write runs in this process (storage.write.local)
    counts: dict[str, int] | None  # records per partition (counted before any combining in the write tasks)
    checks: BatchChecks | None = None
    combine_by: tuple[str, ...] = ()  # set: the write tasks combine the records of a key by these columns

    @property
    def partitions(self) -> list[str] | None:
        return sorted(self.counts) if self.counts is not None else None

    @property
    def num_records(self) -> int | None:
        return sum(self.counts.values()) if self.counts is not None else None


@dataclass
class Located:
    """Where the records go: the table, its file-system view, the tagged records and the bucket plan."""

    meta: HoodieTableMetaClient
    fs_view: FileSystemView
    tagged: DataFrame | pa.Table
    profile: WorkloadProfile | None
    plan: BucketPlan
    snapshot: TimelineSnapshot  # the timeline the write planned against (conflict resolution)
    txn: TransactionManager
    sizes: FileSizing
    rolling: RollingLayout | None = None  # a bulk insert whose tasks write their own files (bulk_insert_handle)


@dataclass
class WriteOperation:
    """One write to the table at `base_path`; `run` it once."""

    spark: SparkSession
    storage: HoodieStorage
    base_path: str
    config: HoodieConfig
    operation: WriteOperationType
    require_unique_keys: bool = False  # reject a batch that repeats a key instead of combining (SQL MERGE)
    services: TableServices | None = None  # what the write client runs around the write (none: the write alone)
    known_locations: bool = False  # the records carry their stored locations (`storage.write.locate.tag_location`)
    _engine: EngineContext | None = field(default=None, init=False, repr=False)  # chosen by `run`

    def run(self, df: DataFrame | pa.Table) -> WriteResult:
        """Write `df`: a Spark DataFrame, or an Arrow table (which Spark reads only if the write runs there)."""
        meta = self._load_table()
        # unknown / unparsable options fail (or warn) before anything is written; the table's own properties
        # (merged into the options by the SQL layer) are not the user's
        validate_options(self.config.props, f"{self.operation.value} to {self.base_path}",
                         meta.table_config.props if meta else None)
        if self.services is not None:
            self.services.check_options(self.config)  # a bad retention fails before anything is written
        tally = RequestTally(self.spark)
        failed_writes_policy(self.config)  # invalid concurrency settings fail before anything runs
        check_strategy(self.config)
        df = self._choose_engine(df, meta)
        with self._prepare(df, meta) as prepared, self._locate(prepared, meta) as located:
            if len(located.plan) == 0 and not self.config.get(WK.ALLOW_EMPTY_COMMIT):
                log.info("nothing to write to %s and %s=false: no commit", self.base_path, WK.ALLOW_EMPTY_COMMIT.key)
                return WriteResult()
            result = self._write_and_commit(prepared, located, tally)
        tally.report(f"{self.operation.value} {result.instant_time} of {self.base_path}")
        return result

    def _load_table(self) -> HoodieTableMetaClient | None:
        """The table, or None for a new one; a table version this engine does not write, or a non-empty
        directory that is not a Hudi table, is refused before anything is written."""
        if not HoodieTableMetaClient.exists(self.base_path, self.storage):
            entries = [e.name for e in self.storage.list_dir(self.base_path)]
            if entries:
                raise HoodieTableStateError(
                    f"{self.base_path} is not a Hudi table (no .hoodie/hoodie.properties) and is not empty "
                    f"({', '.join(sorted(entries)[:5])}): write to an empty or new directory")
            return None
        meta = HoodieTableMetaClient.load(self.base_path, self.storage)
        if meta.table_config.version not in SUPPORTED_WRITE_VERSIONS:
            raise HoodieTableStateError(f"table {self.base_path} has table version {meta.table_config.version}; this "
                                        f"engine writes versions {SUPPORTED_WRITE_VERSIONS} (it reads it)")
        return meta

    def _choose_engine(self, df: DataFrame | pa.Table, meta: HoodieTableMetaClient | None) -> DataFrame | pa.Table:
        """The input as the chosen engine takes it: an Arrow table in this process (storage.write.local) or a
        DataFrame for Spark (an Arrow table becomes one)."""
        settings = resolve_table_settings(self.config, meta.table_config if meta else None)
        what = f"{self.operation.value} to {self.base_path}"
        if runs_in_process(self.spark, df, self.operation, self.config, settings, meta, what):
            self._engine = LocalEngineContext()
            return to_arrow(df)
        self._engine = SparkEngineContext(self.spark)
        return self.spark.createDataFrame(df) if isinstance(df, pa.Table) else df

    @property
    def _local(self) -> bool:
        return isinstance(self._engine, LocalEngineContext)

    # -- prepare ---------------------------------------------------------------------------------------------
    @contextmanager
    def _prepare(self, df: DataFrame | pa.Table, meta: HoodieTableMetaClient | None) -> Iterator[Prepared]:
        op = self.operation
        settings = resolve_table_settings(self.config, meta.table_config if meta else None)
        carried = LOCATION_COLUMNS if self.known_locations else ()
        names = [c for c in (df.column_names if self._local else df.columns) if c not in carried]
        validate_input(names, settings, op)  # the locations ride along; they are not data
        if meta is not None:
            check_missing_columns(names, table_data_schema(meta), self.config, op, self.base_path)
        incoming = arrow_schema(df)
        schema = target_schema(pa.schema([incoming.field(n) for n in names]), meta, op)
        if self._local:
            yield self._prepare_local(df, settings, schema, carried)
            return
        records = key_records(df, settings, op, schema, carried)
        combine = combine_before_write(self.config, op)
        parallelism = shuffle_parallelism(self.config, op)
        is_global = is_global_index(self.config)
        combine_by: tuple[str, ...] = ()
        aggregated = False  # combined by a Spark aggregation: costly to compute again
        if combine and combines_in_tasks(op, is_global, self.require_unique_keys, parallelism):
            records, combine_by = with_input_order(records), combine_ordering(settings, schema)  # no shuffle
        elif combine or self.require_unique_keys:
            records = dedup(records, settings, is_global, count_keys=self.require_unique_keys, parallelism=parallelism)
            aggregated = True
        elif parallelism and op is WriteOperationType.BULK_INSERT:
            records = records.repartition(parallelism)  # Hudi's bulk insert input parallelism
        # read by the counts, the index lookup and the write tasks: the dedup and key expressions run once.
        # Bulk inserts and overwrites only count, then write: caching would cost more than a second scan. An input
        # the session caches already is not cached a second time when only key expressions were added to it
        reread = (op.uses_index or combine) and (aggregated or not _is_cached(df))
        with _persisted(records, reread) as records:
            precombine = self._checked_ordering(settings)
            if self._profile_counts(meta, settings):  # one job fewer: the profile counts and checks the batch
                yield Prepared(settings, schema, records, None, BatchChecks(precombine), combine_by)
                return
            counts = partition_counts(records, precombine, settings.keygen)
            yield Prepared(settings, schema, records.drop(KEY_COUNT), counts, combine_by=combine_by)

    def _prepare_local(self, table: pa.Table, settings: TableSettings, schema: pa.Schema,
                       carried: tuple[str, ...]) -> Prepared:
        """`_prepare` in this process (storage.write.local.prepare): the write tasks combine a key's records, or, under
        a global index (a key's records may name different partitions, so different buckets), the batch is combined
        before the lookup as the Spark path's dedup does."""
        op = self.operation
        records = local_prepare.key_records(table, settings, op, schema, carried)
        is_global = is_global_index(self.config)
        combine_by: tuple[str, ...] = ()
        if combine_before_write(self.config, op):
            records, combine_by = local_prepare.with_input_order(records), combine_ordering(settings, schema)
            if is_global and not self.require_unique_keys:  # a unique batch's repeats are refused below instead
                records, combine_by = combine_records(records, list(combine_by)), ()
        counts = local_prepare.partition_counts(records, self._checked_ordering(settings), self.require_unique_keys,
                                                by_partition=bool(settings.partition_fields) and not is_global)
        return Prepared(settings, schema, records, counts, combine_by=combine_by)

    def _checked_ordering(self, settings: TableSettings) -> str | None:
        """The ordering field whose null values are refused, where it decides between records; a SQL MERGE (unique
        keys) and OverwriteWithLatestAvroPayload (the SQL DML writes: the statement decides) let it be null."""
        latest_wins = str(self.config.get(WK.PAYLOAD_CLASS) or "").endswith("OverwriteWithLatestAvroPayload")
        checks_ordering = self.operation is not WriteOperationType.DELETE and not (self.require_unique_keys
                                                                                   or latest_wins)
        return settings.precombine if checks_ordering else None

    def _profile_counts(self, meta: HoodieTableMetaClient | None, settings: TableSettings) -> bool:
        """Whether the batch's counts and checks can wait for the workload profile: an existing table (nothing is
        created before the checks), an operation that is profiled, an index lookup that does not need the
        batch's partitions first, and no unique-key check (that compares the batch's count with the profile's)."""
        op = self.operation
        return (meta is not None and op in _PROFILED and not self.require_unique_keys
                and not (op.uses_index and lookup_needs_partitions(self.config, settings, meta)))

    # -- locate ----------------------------------------------------------------------------------------------
    @contextmanager
    def _locate(self, prepared: Prepared, meta: HoodieTableMetaClient | None) -> Iterator[Located]:
        op, settings = self.operation, prepared.settings
        if meta is None:
            meta = HoodieTableMetaClient.init_table(self.base_path,
                                                    table_config_for(settings, self.config, prepared.schema),
                                                    self.storage)
        # the batch passed its checks: the write goes ahead, with the metadata table kept in step or removed
        if prepare_metadata_table(meta, self.config, f"{op.value} write") and op.is_overwrite:
            refuse_overwrite_with_secondary_indexes(meta, op.name)
        txn = TransactionManager.for_table(meta, self.config)
        self._rollback_failed_writes(meta, txn)
        snapshot = TimelineSnapshot.of(meta.timeline)
        fs_view = FileSystemView(meta)
        # the index lookup feeds both the workload profile and the write tasks: computed once. A lookup that
        # cached its (broadcast) matches leaves a join of two cached frames, recomputed in the JVM by each reader;
        # otherwise the tagged records are cached. A bucket index plans every operation from the profile (one file
        # group per bucket)
        with FrameCache() as cache:
            tagged, profile = self._tag(prepared, fs_view, cache, self.known_locations)
            stale = stale_locations(profile, fs_view) if self.known_locations and profile is not None else []
            if stale:
                log.info("%d file groups of the batch's known locations were replaced since they were read (%s): "
                         "looking the records up again", len(stale), ", ".join(f"{p}/{f}" for p, f in stale[:3]))
                cache.release()
                tagged, profile = self._tag(prepared, fs_view, cache, False)
            bucketed = is_bucketed(tagged)
            if self.require_unique_keys and op is WriteOperationType.UPSERT and \
                    profile.written > prepared.num_records:
                raise HoodieDuplicateKeyError("a record key of the batch is stored in more than one partition: "
                                              "the index lookup matched it more than once")
            sizes = file_sizing(meta, self.config)
            plan = plan_write(meta, self.config, settings.is_mor, profile, fs_view, prepared.counts, sizes)
            check_clustering_updates(meta, self.config, plan.update_bucket_of())
            rolling = self._rolling_layout(sizes, bucketed, prepared.counts)
            yield Located(meta, fs_view, tagged, profile, plan, snapshot, txn, sizes, rolling)

    def _tag(self, prepared: Prepared, fs_view: FileSystemView, cache: FrameCache,
             known_locations: bool) -> tuple[DataFrame | pa.Table, WorkloadProfile | None]:
        """The tagged records, cached in `cache` when read more than once, and the workload profile."""
        op, config = self.operation, self.config
        if self._local:
            return self._tag_local(prepared, fs_view, known_locations)
        records = prepared.records if known_locations or not self.known_locations else \
            prepared.records.drop(*LOCATION_COLUMNS)
        tagged = tag_location(self.spark, config, records, prepared.settings, op, fs_view, prepared.partitions,
                              prepared.num_records, cache, lookup_counts(op, config, prepared.checks),
                              known_locations)
        bucketed = is_bucketed(tagged)
        if (op.uses_index or bucketed) and not cache.holds_lookup:
            tagged = cache.persist(tagged)
        if cache.counted or (cache.holds_lookup and deletes_by_matches(op, bucketed)):
            # a delete's from the keys found; an upsert's from what the lookup counted on the way
            return tagged, matches_profile(cache.lookup, prepared.checks if op is WriteOperationType.UPSERT else None)
        if op in _PROFILED or bucketed:
            return tagged, workload_profile(tagged, prepared.checks)
        return tagged, None

    def _tag_local(self, prepared: Prepared, fs_view: FileSystemView,
                   known_locations: bool) -> tuple[pa.Table, WorkloadProfile | None]:
        """`_tag` in this process (storage.write.local.locate)."""
        records = prepared.records
        if not known_locations and self.known_locations:
            records = records.drop_columns(list(LOCATION_COLUMNS))
        index = local_locate.table_index(self.config, fs_view, prepared.settings)
        tagged = local_locate.tag_location(index, records, self.operation, fs_view, prepared.partitions,
                                           self._engine, known_locations)
        if self.operation in _PROFILED or is_bucketed(tagged):
            return tagged, local_locate.workload_profile(tagged)
        return tagged, None

    def _rolling_layout(self, sizes: FileSizing, bucketed: bool,
                        counts: dict[str, int] | None) -> RollingLayout | None:
        """Whether (and how) the write tasks name their own new files, one pass over the batch without a shuffle:
        a bulk insert in input order (sort mode NONE) that no bucket layout places, unless that would scatter
        its records over many more files than the planned write (`rolling_layout`)."""
        op = self.operation
        in_input_order = sort_mode(self.config, op) is BulkInsertSortMode.NONE
        if op is not WriteOperationType.BULK_INSERT or bucketed or not in_input_order or self._local:
            return None
        return rolling_layout(counts, sizes.records_per_new_file, shuffle_parallelism(self.config, op) > 0)

    def _rollback_failed_writes(self, meta: HoodieTableMetaClient, txn: TransactionManager) -> None:
        """hoodie.cleaner.policy.failed.writes: EAGER and LAZY both roll back, before the write, the pending writes
        whose heartbeat is gone (a live writer's never), under the table lock so two writers never roll back the
        same instant; NEVER leaves them."""
        if failed_writes_policy(self.config) == NEVER:
            return
        with txn.transaction("rollback failed writes"):
            meta.reload()
            rollback_failed_writes(meta, HeartbeatSettings.of(self.config))

    # -- write and commit ------------------------------------------------------------------------------------
    def _write_and_commit(self, prepared: Prepared, located: Located, tally: RequestTally) -> WriteResult:
        op, meta, settings = self.operation, located.meta, prepared.settings
        action = Action.DELTA_COMMIT if settings.is_mor and op.commit_action == Action.COMMIT else op.commit_action
        # built before any instant file exists: a bad option fails the write with nothing to undo
        ctx = build_task_context(meta, self.config, settings, "0", prepared.schema, located.plan, located.fs_view,
                                 None if self._local else tally.accumulator,
                                 0 if self._local else max_packed_tasks(self.spark, len(located.plan)),
                                 located.sizes.avg_record_size)
        requested, heartbeat = self._start_commit(located, action)
        instant_time = requested.timestamp
        ctx = dataclasses.replace(ctx, instant_time=instant_time, marker_dir=meta.marker_dir(instant_time),
                                  sort_records=sort_mode(self.config, op).sorts_files,
                                  # bytes decide where files end; a record count only without auto split
                                  records_per_file=located.rolling.records_per_file
                                  if located.rolling and not located.sizes.config.auto_split else 0,
                                  task_keys=_task_keys(located.rolling, settings, prepared.schema),
                                  combine_by=prepared.combine_by)
        try:
            metadata = self._publish(located, prepared, ctx, requested)
        finally:
            heartbeat.stop()
        crash_point("write.after_commit")
        delete_marker_dir(meta.storage, meta.marker_dir(instant_time))
        meta.reload()
        event = CommitEvent(self.base_path, settings.name, instant_time, action, op.metadata_name, self.config,
                            metadata)
        failures = post_commit(self.spark, meta, self.config, event, self.services)
        return WriteResult(instant_time, action, metadata, failures)

    def _start_commit(self, located: Located, action: str) -> tuple[HoodieInstant, Heartbeat]:
        """Under the table lock: a fresh instant time (unique across writers), its heartbeat, then the requested
        instant. The heartbeat comes first: no one may take a pending instant without one for a dead write."""
        meta = located.meta
        with located.txn.transaction("start commit"):
            meta.check_version_unchanged()  # an upgrade in between moved the timeline: never write the old layout
            timeline = meta.active_timeline.reload()
            instant_time = timeline.new_instant_time()
            heartbeat = Heartbeat(meta.storage, meta.meta_path, instant_time, HeartbeatSettings.of(self.config)).start()
            try:
                requested = timeline.create_requested(action, instant_time, requested_content(self.operation,
                                                                                      meta.table_config.version))
            except BaseException:
                heartbeat.stop()
                raise
        crash_point("write.after_requested")
        return requested, heartbeat

    def _publish(self, located: Located, prepared: Prepared, ctx: WriteTaskContext,
                 requested: HoodieInstant) -> HoodieCommitMetadata:
        """inflight -> data files -> completed. Any failure before the completed instant exists removes this
        write's files and instants (the table is as it was); nothing after it does."""
        op, meta, instant_time = self.operation, located.meta, requested.timestamp
        timeline = meta.active_timeline
        try:
            # tasks that name their own files have no plan to record (Hudi's row writer leaves the inflight empty)
            workload = BucketPlan([]) if located.rolling else located.plan
            inflight = timeline.transition_to_inflight(requested,
                                                      inflight_content(op, workload, meta.table_config.version))
            crash_point("write.after_inflight")
            if self._local:
                placement = {b: k for k, b in ctx.placement.items()}
                stats = run_write_tasks(local_locate.assign_buckets(located.tagged, located.plan, placement), ctx,
                                        self._engine)
            elif located.rolling:
                stats = _run_rolling_writes(prepared.records, ctx, located.rolling.tasks)  # nothing to locate
            else:
                key_ordered = sort_mode(self.config, op) is BulkInsertSortMode.GLOBAL_SORT
                stats = _run_write_tasks(self.spark, located.tagged, located.plan, ctx, key_ordered)
            metadata = commit_metadata(op, stats, prepared.schema, prepared.settings, located.fs_view,
                                       prepared.partitions)
            crash_point("write.before_commit")
            removed = reconcile_against_markers(meta.storage, meta.base_path, ctx.marker_dir,
                                                {s.path for s in stats if s.path})
            if removed:
                log.info("write %s: removed %d files of failed task attempts: %s", instant_time, len(removed), removed)
            this = ConcurrentOperation.of_commit(instant_time, requested.action, metadata)

            def check() -> None:
                _check_still_inflight(meta, instant_time)
                resolve_conflicts(meta, this, located.snapshot)

            complete_action(ActionCompletion.of_commit(meta, inflight, metadata, op.metadata_name),
                            located.txn.transaction("commit"), check)
        except BaseException as exc:
            if not _is_published(meta, instant_time):
                if isinstance(exc, HoodieWriteConflictError):  # declared, and the caller retries: no traceback
                    log.warning("write %s lost a write conflict; undoing it", instant_time)
                else:
                    log.exception("write %s failed; undoing it", instant_time)
                abort_write(meta, instant_time)
            raise
        return metadata


def _check_still_inflight(meta: HoodieTableMetaClient, instant_time: str) -> None:
    """A write whose heartbeat was taken for dead may have been rolled back by another writer while it ran:
    then its files are gone and it must not publish."""
    instant = meta.timeline.find(instant_time)
    if instant is None or not instant.is_inflight:
        raise HoodieTableStateError(
            f"instant {instant_time} of {meta.base_path} is no longer inflight ({instant or 'rolled back'}): another "
            "writer rolled it back (its heartbeat expired); the write is not committed")


def _is_published(meta: HoodieTableMetaClient, instant_time: str) -> bool:
    try:
        instant = meta.active_timeline.reload().timeline.find(instant_time)
    except Exception:  # cannot tell: never delete what may be a published commit's files
        return True
    return instant is not None and instant.is_completed


def _run_write_tasks(spark: SparkSession, tagged: DataFrame, plan: BucketPlan, ctx: WriteTaskContext,
                     key_ordered: bool = False) -> list[HoodieWriteStat]:
    """One group per bucket, each writing one file and returning its write stat, in the `ctx.tasks` tasks the
    buckets were packed into. `key_ordered`: a partition's new files take contiguous record key ranges
    (GLOBAL_SORT) instead of uniform hash shares."""
    if len(plan) == 0:
        return []
    keys = {b: k for k, b in ctx.placement.items()}
    position = key_rank_position() if key_ordered else None
    assigned = assign_buckets(spark, tagged, plan, keys, position).repartition(ctx.tasks, BUCKET_COLUMN)
    rows = assigned.groupBy(BUCKET_COLUMN).applyInArrow(write_bucket_udf(ctx), STAT_SCHEMA_DDL).collect()
    return [HoodieWriteStat.from_dict(json.loads(r[0])) for r in rows]


def _task_keys(rolling: RollingLayout | None, settings: TableSettings, schema: pa.Schema) -> KeyGenerator | None:
    """The key generator a bulk insert's tasks apply themselves (storage.keygen.arrow_keys), or None: Spark
    computes the keys. Only tasks that name their own files receive the records as they came."""
    return settings.keygen if rolling is not None and arrow_keys.supports(settings.keygen, schema) else None


def _run_rolling_writes(records: DataFrame, ctx: WriteTaskContext, tasks: int) -> list[HoodieWriteStat]:
    """Each task of `records` writes its own new files (storage.write.bulk_insert_handle); one pass, no shuffle.
    The input runs in at most `tasks` tasks (0: as it is): each task writes at least one file per partition it
    holds, so a batch spread over many input partitions would otherwise leave small files (Hudi's row writer does;
    a coalesce costs no shuffle). `records` are the prepared ones, without (empty) index locations. Columns the
    tasks do not read are not shipped to them (each costs the JVM's Arrow conversion per record): the keys they
    compute, and the operation column, every record of a bulk insert being a write."""
    records = records.drop(OP_COLUMN)
    if ctx.task_keys is not None:
        records = records.drop(RECORD_KEY, PARTITION_PATH)
    # only ever fewer tasks: Spark's optimizer would drop a coalesce of the caller's that it finds right below ours
    if 0 < tasks < records.rdd.getNumPartitions():
        records = records.coalesce(tasks)
    try:
        rows = records.mapInArrow(rolling_write_udf(ctx), STAT_SCHEMA_DDL).collect()
    except Exception as exc:  # a key the task could not compute: the project's error, not the worker's trace
        raise plain_error(exc) from None
    return [HoodieWriteStat.from_dict(json.loads(r[0])) for r in rows]


def _is_cached(df: DataFrame) -> bool:
    """Whether the session caches `df` (its plan is served from Spark's cache manager)."""
    try:
        level = df.storageLevel
    except Exception:  # noqa: BLE001 - a session without a cache manager: treat as not cached
        return False
    return bool(level.useMemory or level.useDisk)


@contextmanager
def _persisted(df: DataFrame, enabled: bool) -> Iterator[DataFrame]:
    """`df` cached for the duration of the block when it is read more than once."""
    with FrameCache() as cache:
        yield cache.persist(df) if enabled else df
