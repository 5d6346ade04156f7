"""Running a scheduled clustering to its `<t>.replacecommit`, and aborting one a write overtook.

Before the tasks run, every input file group must still have the file slice the plan named (a write allowed
by `SparkAllowUpdateStrategy`, or one that completed after the plan under optimistic concurrency control, changed
it: the clustering would drop that write, so it aborts instead). At commit, under the table lock, the same check
covers writes that completed while the tasks ran. An aborted clustering leaves the table as it was: its files and
its instant are removed, and the next schedule plans again."""
from __future__ import annotations

import logging
from typing import Any

from pyspark.sql import SparkSession

from storage.config import ClusteringConfigKeys as CK
from storage.config import HoodieConfig
from storage.exception import HoodieClusteringError
from storage.fs_utils import join_path
from storage.engine.engine_context import engine_for
from storage.io.request_metrics import RequestTally
from storage.layout.space_curve import LayoutOptimizationStrategy
from storage.table.file_slice import FileSlice
from storage.table.fs_view import FileSystemView
from storage.table.meta_client import HoodieTableMetaClient
from storage.table.schema_resolver import table_data_schema
from storage.table_service.clustering.executor import ClusteringTaskContext, run_clustering_tasks, with_requests
from storage.table_service.clustering.plan import (
    CLUSTER_OPERATION,
    LAYOUT_PARAM,
    SORT_COLUMNS_PARAM,
    pending_clustering_plans,
    plan_file_groups,
)
from storage.table_service.service_execution import finish_execution, service_commit_metadata, start_execution
from storage.table_service.service_table import service_meta_client
from storage.testing.crash_points import crash_point
from storage.timeline.commit_metadata import HoodieCommitMetadata
from storage.timeline.instant import Action
from storage.transaction.concurrent_operation import ConcurrentOperation
from storage.transaction.conflict_resolution import TimelineSnapshot, candidate_instants
from storage.transaction.transaction_manager import TransactionManager
from storage.write.commit_callback import CommitEvent, fire_commit_callbacks
from storage.write.markers import delete_marker_dir, list_markers
from storage.table.action_completion import ActionCompletion, complete_action
from storage.table.table_version import HoodieTableVersion

log = logging.getLogger(__name__)


def run_clustering(spark: SparkSession, table: HoodieTableMetaClient | str, instants: list[str] | None = None,
                   config: HoodieConfig = HoodieConfig()) -> list[str]:
    """Execute the pending clusterings `instants` (all pending ones when None), oldest first, with the options of
    `config`; the completed instants."""
    meta = service_meta_client(table, "clustering", spark, config)
    plans = pending_clustering_plans(meta)
    if instants:
        missing = [t for t in instants if t not in plans]
        if missing:
            raise HoodieClusteringError(f"no pending clustering {', '.join(missing)} in {meta.base_path}; pending "
                                        f"clusterings: {', '.join(plans) or 'none'}")
        plans = {t: plans[t] for t in instants}
    done = []
    for ts in sorted(plans):
        execute_clustering(spark, meta, ts, plans[ts], config)
        done.append(ts)
    return done


def _slice_signature(s: FileSlice | dict) -> tuple[str, tuple[str, ...]]:
    if isinstance(s, FileSlice):
        return (s.base_file.name if s.base_file else "", tuple(sorted(lf.name for lf in s.log_files)))
    return ((s.get("dataFilePath") or "").rsplit("/", 1)[-1],
            tuple(sorted(p.rsplit("/", 1)[-1] for p in s.get("deltaFilePaths") or [])))


def current_groups(meta: HoodieTableMetaClient, instant_time: str,
                   plan: dict[str, Any]) -> list[tuple[list[FileSlice], int]]:
    """The plan's groups as the table's latest file slices; aborts the clustering when one changed since."""
    partitions = sorted({p for p, _ in plan_file_groups(plan)})
    latest = {(s.partition_path, s.file_id): s for s in FileSystemView(meta, partitions=partitions).latest_file_slices()}
    groups, changed = [], []
    for group in plan.get("inputGroups") or []:
        slices = []
        for info in group.get("slices") or []:
            key = (info.get("partitionPath") or "", info.get("fileId") or "")
            current = latest.get(key)
            if current is None or _slice_signature(current) != _slice_signature(info):
                changed.append(key)
            else:
                slices.append(current)
        groups.append((slices, int(group.get("numOutputFileGroups") or 1)))
    if changed:
        shown = ", ".join(f"{p}/{f}" if p else f for p, f in changed[:5])
        abort_clustering(meta, instant_time, f"file groups {shown} changed since it was planned (a write updated "
                                             "them)")
    return groups


def abort_clustering(meta: HoodieTableMetaClient, instant_time: str, why: str) -> None:
    """Remove what the clustering wrote and its instant; raise the error that says why."""
    storage = meta.storage
    marker_dir = meta.marker_dir(instant_time)
    for marker in list_markers(storage, marker_dir):
        storage.delete(join_path(meta.base_path, marker.partition_path, marker.file_name))
    delete_marker_dir(storage, marker_dir)
    meta.active_timeline.reload().delete_instant_files(instant_time)
    meta.reload()
    raise HoodieClusteringError(f"clustering {instant_time} of {meta.base_path} aborted: {why}; nothing of it was "
                                "kept (schedule a new clustering)")


def _layout_of(plan: dict[str, Any], config: HoodieConfig) -> tuple[tuple[str, ...], LayoutOptimizationStrategy]:
    params = (plan.get("strategy") or {}).get("strategyParams") or {}
    columns = CK.SORT_COLUMNS.parse(params.get(SORT_COLUMNS_PARAM)) or config.get(CK.SORT_COLUMNS) or []
    layout = params.get(LAYOUT_PARAM) or config.get(CK.LAYOUT_OPTIMIZE_STRATEGY)
    return tuple(columns), LayoutOptimizationStrategy.of(layout)


def _check_conflicts(meta: HoodieTableMetaClient, instant_time: str, plan: dict[str, Any],
                     snapshot: TimelineSnapshot) -> None:
    inputs = set(plan_file_groups(plan))
    for instant in candidate_instants(meta, snapshot, instant_time):
        if not instant.is_completed:
            continue
        overlap = inputs & ConcurrentOperation.of_instant(meta, instant).file_groups
        if overlap:
            p, f = sorted(overlap)[0]
            abort_clustering(meta, instant_time, f"{instant.action} {instant.timestamp} changed file group "
                                                 f"{p + '/' if p else ''}{f} (and {len(overlap) - 1} more) while it ran")


def execute_clustering(spark: SparkSession, meta: HoodieTableMetaClient, instant_time: str, plan: dict[str, Any],
                       config: HoodieConfig = HoodieConfig()) -> HoodieCommitMetadata:
    """Run the plan of pending clustering `instant_time` with the table's properties layered with the options of
    `config`, and complete it as `<instant_time>.replacecommit`."""
    layered = meta.table_config.with_options(config)
    sort_columns, layout = _layout_of(plan, layered)
    schema = table_data_schema(meta)
    if schema is None:
        raise HoodieClusteringError(f"table {meta.base_path} has no schema to cluster with")
    snapshot = TimelineSnapshot.of(meta.reload().timeline)
    groups = [(slices, n) for slices, n in current_groups(meta, instant_time, plan) if slices]
    tally = RequestTally(spark)
    engine = engine_for(spark, sum(s.total_size() for slices, _ in groups for s in slices), layered,
                        f"clustering {instant_time}")
    ctx = with_requests(ClusteringTaskContext.of(meta, instant_time, schema, sort_columns, layout, layered,
                                                 layered.get(CK.PRESERVE_COMMIT_METADATA), config),
                        tally.accumulator if engine.accumulates else None)
    action = HoodieTableVersion.of(meta).clustering_action
    inflight, heartbeat = start_execution(meta, instant_time, action, "clustering", layered,
                                          HoodieClusteringError)
    crash_point("clustering.after_inflight")
    try:
        stats = run_clustering_tasks(engine, groups, ctx)
        crash_point("clustering.before_commit")
        replaced: dict[str, list[str]] = {}
        for p, f in plan_file_groups(plan):
            replaced.setdefault(p, []).append(f)
        metadata = service_commit_metadata(meta, CLUSTER_OPERATION, stats, schema, ctx.marker_dir,
                                           partitionToReplaceFileIds=replaced)
        # the check sees the timeline complete_action has just listed again under the lock
        complete_action(ActionCompletion.of_commit(meta, inflight, metadata, CLUSTER_OPERATION),
                        TransactionManager.for_table(meta, layered).transaction(f"commit clustering {instant_time}"),
                        lambda: _check_conflicts(meta, instant_time, plan, snapshot))
    finally:
        heartbeat.stop()
    finish_execution(meta, "clustering", ctx.marker_dir)
    log.info("clustering %s of %s: %d file groups into %d files (%d records)", instant_time, meta.base_path,
             sum(len(s) for s, _ in groups), len(stats), sum(s.numWrites for s in stats))
    tally.report(f"clustering {instant_time} of {meta.base_path}")
    fire_commit_callbacks(CommitEvent(meta.base_path, meta.table_config.name, instant_time, Action.REPLACE_COMMIT,
                                      CLUSTER_OPERATION, config, metadata))
    return metadata
