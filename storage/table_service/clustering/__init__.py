"""Clustering (Hudi's clustering table service): small file groups rewritten into fewer,
larger ones whose rows are ordered for the queries people run, published as a `replacecommit` while writers go on.

Python API (`CALL run_clustering` / `CALL show_clustering` map onto it):

- ``schedule_clustering(table, config=HoodieConfig(), spark=None) -> str | None``: a plan (plan.py) as
  `<t>.replacecommit.requested`; None when nothing qualifies.
- ``run_clustering(spark, table, instants=None, config=HoodieConfig()) -> list[str]``: execute pending plans
  (execute.py, executor.py); a plan whose execution died half-way is undone and run again.
- ``show_clustering(table, limit=None) -> list[dict]``: clustering instants, newest first.
- ``maybe_cluster_after_commit(spark, meta, config)``: the inline / async triggers after a write's commit.

Writers and a pending clustering (storage.write.update_strategy): `hoodie.clustering.updates.strategy` =
SparkRejectUpdateStrategy (Hudi's default) fails a write that would update or append to a file group under
pending clustering, naming the groups and the clustering; SparkAllowUpdateStrategy lets the write win and the
clustering aborts when it finds the file group changed. Inserts never go to such file groups.
"""
from __future__ import annotations

import logging
from typing import Any

from storage.config import ClusteringConfigKeys as CK
from storage.config import HoodieConfig
from storage.exception import HoodieClusteringError
from storage.table.meta_client import HoodieTableMetaClient
from storage.table_service.clustering.execute import run_clustering
from storage.table_service.clustering.plan import (
    clustering_plan_of,
    pending_clustering_file_groups,
    pending_clustering_plans,
)
from storage.table_service.clustering.schedule import schedule_clustering, should_schedule
from storage.timeline.instant import Action

__all__ = ["schedule_clustering", "run_clustering", "show_clustering", "maybe_cluster_after_commit",
           "pending_clustering_file_groups", "pending_clustering_plans_of", "wait_for_async_clustering"]


def pending_clustering_plans_of(table: HoodieTableMetaClient | str) -> dict[str, dict[str, Any]]:
    """Instant time -> plan of every pending clustering of `table`."""
    meta = table.reload() if isinstance(table, HoodieTableMetaClient) else HoodieTableMetaClient.load(table)
    return pending_clustering_plans(meta)

log = logging.getLogger(__name__)


def show_clustering(table: HoodieTableMetaClient | str, limit: int | None = None) -> list[dict[str, Any]]:
    """One dict per clustering on the active timeline, newest first: timestamp, input_group_size, state,
    involved_partitions."""
    meta = table.reload() if isinstance(table, HoodieTableMetaClient) else HoodieTableMetaClient.load(table)
    out = []
    for instant in reversed(list(meta.timeline.of_actions([Action.REPLACE_COMMIT, Action.CLUSTERING]))):
        plan = clustering_plan_of(meta, instant)
        if plan is None:
            continue
        groups = plan.get("inputGroups") or []
        partitions = sorted({s.get("partitionPath") or "" for g in groups for s in g.get("slices") or []})
        out.append({"timestamp": instant.timestamp, "input_group_size": len(groups), "state": instant.state.name,
                    "involved_partitions": ",".join(partitions)})
        if limit is not None and len(out) >= limit:
            break
    return out


def wait_for_async_clustering(base_path: str | None = None, timeout: float | None = None) -> None:
    from storage.table_service.async_service import wait_for_background

    wait_for_background("clustering", base_path, timeout)


def maybe_cluster_after_commit(spark, meta: HoodieTableMetaClient, config: HoodieConfig) -> str | None:
    """`hoodie.clustering.inline`: schedule and execute every `inline.max.commits` commits;
    `hoodie.clustering.schedule.inline`: schedule only; `hoodie.clustering.async.enabled`: schedule every
    `async.max.commits` commits and execute in a background thread. The scheduled instant, if any. A clustering
    that fails never undoes the commit that triggered it."""
    inline, schedule_only, run_async = (config.get(CK.INLINE), config.get(CK.SCHEDULE_INLINE),
                                        config.get(CK.ASYNC_ENABLED))
    if not (inline or schedule_only or run_async):
        return None
    max_commits = config.get(CK.ASYNC_MAX_COMMITS) if run_async and not inline else config.get(CK.INLINE_MAX_COMMITS)
    if not should_schedule(meta.reload(), max_commits):
        return None
    try:
        instant = schedule_clustering(meta, config, spark)
        if instant is None:
            return None
        if inline:
            run_clustering(spark, meta, [instant], config)
        elif run_async:
            _start_async(spark, meta.base_path, instant, config)
    except HoodieClusteringError as exc:
        log.warning("inline clustering of %s did not complete: %s", meta.base_path, exc)
        return None
    return instant


def _start_async(spark, base_path: str, instant: str, config: HoodieConfig) -> None:
    """The plan executes in a background thread of the writer; a failure is logged and a later run retries it."""
    from storage.table_service.async_service import run_in_background

    run_in_background("clustering", base_path, lambda: run_clustering(spark, base_path, [instant], config))
