"""Writes while a clustering is pending (Hudi's UpdateStrategy, `hoodie.clustering.updates.strategy`).

SparkRejectUpdateStrategy (default, as Hudi): a write that would update (copy-on-write) or append to (merge-on-read)
a file group a pending clustering rewrites fails before anything is written, naming the file groups and the
clustering; the user finishes the clustering (`CALL run_clustering(op => 'execute')`) or retries later.
SparkAllowUpdateStrategy: the write goes ahead and wins; the clustering then finds the file group changed and
aborts (storage.table_service.clustering.execute). A write's check, so it lives with the write path. Inserts are never routed to such file groups (small-file
bucketing skips them), so insert-only writes never conflict."""
from __future__ import annotations

from collections.abc import Iterable

from storage.config import ClusteringConfigKeys as CK
from storage.config import HoodieConfig
from storage.exception import HoodieClusteringUpdateError, HoodieConfigError
from storage.table.meta_client import HoodieTableMetaClient
from storage.table.pending_plans import pending_clustering_file_groups

REJECT = "SparkRejectUpdateStrategy"
ALLOW = "SparkAllowUpdateStrategy"


def update_strategy(config: HoodieConfig) -> str:
    name = str(config.get(CK.UPDATES_STRATEGY)).rsplit(".", 1)[-1]
    if name not in (REJECT, ALLOW):
        raise HoodieConfigError(f"unknown {CK.UPDATES_STRATEGY.key} {name!r}: use "
                                f"org.apache.hudi.client.clustering.update.strategy.{REJECT} or ...{ALLOW}")
    return name


def check_updates(meta: HoodieTableMetaClient, config: HoodieConfig, updated: Iterable[tuple[str, str]]) -> None:
    """Raise when `updated` file groups are under pending clustering and the strategy rejects updates."""
    if update_strategy(config) == ALLOW:
        return
    pending = pending_clustering_file_groups(meta)
    hit = sorted(fg for fg in set(updated) if fg in pending)
    if not hit:
        return
    shown = ", ".join(f"{p}/{f}" if p else f for p, f in hit[:5])
    more = f" and {len(hit) - 5} more" if len(hit) > 5 else ""
    instants = ", ".join(sorted({pending[fg] for fg in hit}))
    raise HoodieClusteringUpdateError(
        f"write to {meta.base_path} refused: it updates file groups {shown}{more} that pending clustering "
        f"{instants} rewrites ({CK.UPDATES_STRATEGY.key}={REJECT}); run the clustering first "
        f"(CALL run_clustering(op => 'execute')) or set {CK.UPDATES_STRATEGY.key}="
        f"org.apache.hudi.client.clustering.update.strategy.{ALLOW} to let updates win over it")
