"""The plans of pending table services, as facts of the timeline (Hudi's CompactionUtils / ClusteringUtils): which
file groups a requested compaction or clustering will rewrite. Writers, readers, the conflict check and the
services themselves all ask; the services that make the plans live above (storage.table_service)."""
from __future__ import annotations

from typing import Any

from storage.avro.container import read_avro_container
from storage.exception import HoodieCompactionError
from storage.table.meta_client import HoodieTableMetaClient
from storage.timeline.instant import Action, HoodieInstant


def read_compaction_plan(meta_client: HoodieTableMetaClient, instant_time: str) -> dict[str, Any]:
    timeline = meta_client.active_timeline
    requested = next((i for i in timeline.all_files()
                      if i.timestamp == instant_time and i.action == Action.COMPACTION and i.is_requested), None)
    if requested is None:
        raise HoodieCompactionError(f"no requested compaction {instant_time} in table {meta_client.base_path}")
    data = timeline.read_bytes(requested)
    return read_avro_container(data) if data else {"operations": []}


def pending_compaction_operations(meta_client: HoodieTableMetaClient) -> dict[tuple[str, str], str]:
    """(partition, file id) -> base instant of the slice each pending compaction compacts."""
    out = {}
    for inst in meta_client.timeline.pending().of_actions([Action.COMPACTION]):
        for op in read_compaction_plan(meta_client, inst.timestamp).get("operations") or []:
            out[(op.get("partitionPath") or "", op["fileId"])] = op.get("baseInstantTime") or ""
    return out


def pending_compaction_instants(meta_client: HoodieTableMetaClient) -> dict[tuple[str, str], str]:
    """(partition, file id) -> instant of the pending compaction whose plan holds the file group: where the file
    group's next file slice starts."""
    out = {}
    for inst in meta_client.timeline.pending().of_actions([Action.COMPACTION]):
        for op in read_compaction_plan(meta_client, inst.timestamp).get("operations") or []:
            out[(op.get("partitionPath") or "", op["fileId"])] = inst.timestamp
    return out


def requested_replace_metadata(meta: HoodieTableMetaClient, instant: HoodieInstant) -> dict[str, Any]:
    data = meta.active_timeline.read_bytes(meta.active_timeline.requested_of(instant))
    return read_avro_container(data) if data else {}


def clustering_plan_of(meta: HoodieTableMetaClient, instant: HoodieInstant) -> dict[str, Any] | None:
    """The clustering plan of a replacecommit / clustering instant; None for other replacecommits (insert
    overwrite, delete partition), as Hudi's ClusteringUtils.getClusteringPlan."""
    if instant.action not in (Action.REPLACE_COMMIT, Action.CLUSTERING):
        return None
    try:
        return requested_replace_metadata(meta, instant).get("clusteringPlan")
    except OSError:  # a completed replacecommit whose requested file was archived or removed
        return None


def pending_clustering_plans(meta: HoodieTableMetaClient) -> dict[str, dict[str, Any]]:
    """Instant time -> plan of every pending clustering, oldest first."""
    out = {}
    for instant in meta.timeline.pending().of_actions([Action.REPLACE_COMMIT, Action.CLUSTERING]):
        plan = clustering_plan_of(meta, instant)
        if plan is not None:
            out[instant.timestamp] = plan
    return out


def plan_file_groups(plan: dict[str, Any]) -> list[tuple[str, str]]:
    return [(s.get("partitionPath") or "", s.get("fileId") or "")
            for g in plan.get("inputGroups") or [] for s in g.get("slices") or []]


def pending_clustering_file_groups(meta: HoodieTableMetaClient) -> dict[tuple[str, str], str]:
    """(partition, file id) -> the pending clustering instant that rewrites it."""
    return {fg: ts for ts, plan in pending_clustering_plans(meta).items() for fg in plan_file_groups(plan)}


def is_pending_clustering(meta: HoodieTableMetaClient, instant: HoodieInstant) -> bool:
    return not instant.is_completed and clustering_plan_of(meta, instant) is not None
