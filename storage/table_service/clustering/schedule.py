"""Scheduling a clustering: the plan (storage.table_service.clustering.plan) saved as `<t>.replacecommit.requested`
under the table lock, and the inline / async trigger (`hoodie.clustering.inline.max.commits`,
`hoodie.clustering.async.max.commits`: completed commits since the last clustering)."""
from __future__ import annotations

import logging

from storage.config import ClusteringConfigKeys as CK
from storage.config import HoodieConfig
from storage.config import WriteConfigKeys as WK
from storage.exception import HoodieClusteringError
from storage.layout.space_curve import LayoutOptimizationStrategy
from storage.meta_fields import META_COLUMNS
from storage.table.fs_view import FileSystemView
from storage.table.meta_client import HoodieTableMetaClient
from storage.table.schema_resolver import table_data_schema
from storage.table_service.clustering.plan import (
    ClusteringPlanConfig,
    clustering_plan_of,
    eligible_slices,
    encode_plan,
    filter_partitions,
    pending_clustering_file_groups,
    plan_groups,
    plan_record,
)
from storage.table_service.service_table import service_meta_client
from storage.testing.crash_points import crash_point
from storage.timeline.instant import Action
from storage.transaction.transaction_manager import NEVER, TransactionManager, failed_writes_policy
from storage.write.heartbeat import HeartbeatSettings
from storage.write.rollback import rollback_failed_writes
from storage.table.table_version import HoodieTableVersion

log = logging.getLogger(__name__)


def check_sort_columns(meta: HoodieTableMetaClient, columns: tuple[str, ...]) -> None:
    """Every sort column must be a column of the table (before anything is written)."""
    if not columns:
        return
    schema = table_data_schema(meta)
    known = list(META_COLUMNS) + (schema.names if schema is not None else [])
    unknown = [c for c in columns if c not in known]
    if unknown:
        raise HoodieClusteringError(
            f"unknown sort column(s) {', '.join(unknown)} for clustering {meta.base_path} "
            f"({CK.SORT_COLUMNS.key}); the table's columns: {', '.join(schema.names if schema is not None else [])}")


def schedule_clustering(table: HoodieTableMetaClient | str, config: HoodieConfig = HoodieConfig(),
                        spark=None) -> str | None:
    """Write `<t>.replacecommit.requested` with a clustering plan; the instant time, or None when no file slice
    qualifies. Bad sort columns / layout strategy / partition settings fail with nothing written."""
    meta = service_meta_client(table, "clustering", spark, config)
    _refuse_bucket_tables(meta)
    cfg = ClusteringPlanConfig.of(config)
    LayoutOptimizationStrategy.of(cfg.layout)  # a bad strategy fails here, naming the key
    check_sort_columns(meta, cfg.sort_columns)
    with TransactionManager.for_table(meta, config).transaction("schedule clustering"):
        meta.reload()
        if failed_writes_policy(config) != NEVER:
            rollback_failed_writes(meta, HeartbeatSettings.of(config))
        instant_time = _schedule_locked(meta, cfg)
    if instant_time is not None:
        crash_point("clustering.after_schedule")
    return instant_time


def _refuse_bucket_tables(meta: HoodieTableMetaClient) -> None:
    """A simple-bucket table's file groups are its buckets (file ids carry the bucket number): clustering would
    break that layout, so it is refused, as Hudi does for the simple bucket index."""
    from storage.index.bucket_index import is_bucket_index

    if is_bucket_index(meta.table_config.with_options()):
        raise HoodieClusteringError(f"clustering refused on {meta.base_path}: it uses the BUCKET index "
                                    f"({WK.INDEX_TYPE.key}=BUCKET, SIMPLE engine), whose file groups are fixed buckets")


def _excluded_file_groups(meta: HoodieTableMetaClient) -> set[tuple[str, str]]:
    from storage.table_service.compaction import pending_compaction_operations

    return set(pending_compaction_operations(meta)) | set(pending_clustering_file_groups(meta))


def _schedule_locked(meta: HoodieTableMetaClient, cfg: ClusteringPlanConfig) -> str | None:
    view = FileSystemView(meta)
    partitions = filter_partitions(view.partitions(), cfg)
    slices = eligible_slices(view.latest_file_slices(partitions), cfg, _excluded_file_groups(meta))
    groups = plan_groups(slices, cfg)
    if not groups:
        log.info("nothing to cluster in %s (%d partitions considered)", meta.base_path, len(partitions))
        return None
    instant_time = meta.active_timeline.new_instant_time()
    meta.active_timeline.create_requested(HoodieTableVersion.of(meta).clustering_action, instant_time,
                                          encode_plan(plan_record(groups, cfg), meta.table_config.version))
    log.info("scheduled clustering %s of %s: %d groups, %d file slices", instant_time, meta.base_path, len(groups),
             sum(len(g.slices) for g in groups))
    return instant_time


def commits_since_last_clustering(meta: HoodieTableMetaClient) -> int:
    """Completed commits / deltacommits after the newest clustering (pending or completed)."""
    last = None
    for instant in meta.timeline.of_actions([Action.REPLACE_COMMIT, Action.CLUSTERING]):
        if clustering_plan_of(meta, instant) is not None:
            last = instant.timestamp
    commits = meta.timeline.completed().of_actions([Action.COMMIT, Action.DELTA_COMMIT])
    return sum(1 for i in commits if last is None or i.timestamp > last)


def should_schedule(meta: HoodieTableMetaClient, max_commits: int) -> bool:
    return commits_since_last_clustering(meta) >= max_commits
