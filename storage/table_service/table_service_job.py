"""A table-service process beside the writers (`sqlext services run`), as Hudi runs HoodieCompactor,
HoodieClusteringJob and HoodieCleaner in continuous mode: every round schedules what the triggers allow, executes
every pending compaction and clustering plan, then cleans and archives; rounds repeat every
`min_sync_interval_s` until stopped.

Writers keep writing meanwhile: each plan is scheduled and committed under the table lock with optimistic
concurrency control (a writer whose file groups a new plan took loses with a conflict, never an update), so the
process refuses to start without a lock that other processes see. A plan another live process is executing
(its heartbeat) is left to it; a failed service is logged and retried in the next round.
"""
from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from storage.config import ClusteringConfigKeys as CLK
from storage.config import HoodieConfig
from storage.config import LockConfigKeys as LK
from storage.config import WriteConfigKeys as WK
from storage.exception import HoodieError, HoodieHeartbeatError, HoodieWriteError
from storage.table.meta_client import HoodieTableMetaClient
from storage.timeline.instant import Action

log = logging.getLogger(__name__)

IN_PROCESS_LOCK = "InProcessLockProvider"


@dataclass(frozen=True)
class TableServices:
    """Which services the process runs."""

    compaction: bool = True
    clustering: bool = True
    clean: bool = True
    archive: bool = True

    def names(self) -> list[str]:
        return [n for n in ("compaction", "clustering", "clean", "archive") if getattr(self, n)]


@dataclass
class ServiceRound:
    """What one round did."""

    scheduled: list[str] = field(default_factory=list)   # "compaction 2026..." / "clustering 2026..."
    completed: list[str] = field(default_factory=list)
    cleaned: list[str] = field(default_factory=list)     # clean instants
    archived: int = 0
    errors: list[str] = field(default_factory=list)

    def summary(self) -> str:
        return (f"scheduled {len(self.scheduled)}, completed {len(self.completed)}, cleaned {len(self.cleaned)}, "
                f"archived {self.archived}, errors {len(self.errors)}")


def check_concurrency_config(config: HoodieConfig, base_path: str) -> None:
    """A service process is a second writer: Hudi requires optimistic concurrency control and a lock provider
    that other processes see."""
    mode = str(config.get(WK.WRITE_CONCURRENCY_MODE)).lower()
    provider = str(config.get(LK.PROVIDER))
    if mode != "optimistic_concurrency_control":
        raise HoodieWriteError(
            f"table services of {base_path} running beside writers need {WK.WRITE_CONCURRENCY_MODE.key}="
            f"optimistic_concurrency_control (got {mode!r}) and a {LK.PROVIDER.key} shared by every writer")
    if provider.rsplit(".", 1)[-1] == IN_PROCESS_LOCK:
        raise HoodieWriteError(f"{LK.PROVIDER.key}={provider} locks only inside one process; the service process of "
                               f"{base_path} needs a lock the writers see (file system, ZooKeeper, DynamoDB, "
                               "storage-based or Hive Metastore)")


def run_round(spark, base_path: str, services: TableServices, config: HoodieConfig) -> ServiceRound:
    """One round of every service asked for."""
    result = ServiceRound()
    meta = HoodieTableMetaClient.load_in_session(spark, base_path, config)
    steps: list[tuple[str, Callable[[], None]]] = []
    if services.compaction and meta.table_config.is_mor:
        steps.append(("compaction", lambda: _compaction(spark, meta, config, result)))
    if services.clustering:
        steps.append(("clustering", lambda: _clustering(spark, meta, config, result)))
    if services.clean:
        steps.append(("clean", lambda: _clean(spark, meta, config, result)))
    if services.archive:
        steps.append(("archive", lambda: _archive(meta, config, result)))
    for name, step in steps:
        try:
            step()
        except HoodieError as exc:  # retried next round; the writers are not affected
            log.warning("%s of %s failed this round: %s", name, base_path, exc)
            result.errors.append(f"{name}: {exc}")
        meta.reload()
    log.info("table services of %s: %s", base_path, result.summary())
    return result


def run_continuously(spark, base_path: str, services: TableServices, config: HoodieConfig,
                     min_sync_interval_s: float = 60.0, max_rounds: int | None = None,
                     stop: threading.Event | None = None) -> list[ServiceRound]:
    """Rounds every `min_sync_interval_s` (measured from each round's start) until `stop` is set or `max_rounds`
    ran; the rounds' results."""
    check_concurrency_config(config, base_path)
    stop = stop or threading.Event()
    rounds: list[ServiceRound] = []
    while not stop.is_set() and (max_rounds is None or len(rounds) < max_rounds):
        started = time.monotonic()
        rounds.append(run_round(spark, base_path, services, config))
        if max_rounds is not None and len(rounds) >= max_rounds:
            break
        stop.wait(max(0.0, min_sync_interval_s - (time.monotonic() - started)))
    return rounds


# ----------------------------------------------------------------------------------------------- services


def _compaction(spark, meta: HoodieTableMetaClient, config: HoodieConfig, result: ServiceRound) -> None:
    from storage.table_service.compaction import run_compaction, schedule_compaction, should_schedule_inline

    if should_schedule_inline(meta, config):
        instant = schedule_compaction(meta, config)
        if instant:
            result.scheduled.append(f"compaction {instant}")
    for instant in _pending(meta.reload(), Action.COMPACTION):
        result.completed += [f"compaction {i}" for i in _execute(
            "compaction", instant, meta, lambda: run_compaction(spark, meta.base_path, instant, config), result)]


def _clustering(spark, meta: HoodieTableMetaClient, config: HoodieConfig, result: ServiceRound) -> None:
    from storage.table_service.clustering import run_clustering, schedule_clustering
    from storage.table_service.clustering.schedule import should_schedule
    from storage.table.pending_plans import pending_clustering_plans

    if should_schedule(meta, config.get(CLK.ASYNC_MAX_COMMITS)):
        instant = schedule_clustering(meta, config, spark)
        if instant:
            result.scheduled.append(f"clustering {instant}")
    for instant in sorted(pending_clustering_plans(meta.reload())):
        result.completed += [f"clustering {i}" for i in _execute(
            "clustering", instant, meta, lambda: run_clustering(spark, meta.base_path, [instant], config), result)]


def _clean(spark, meta: HoodieTableMetaClient, config: HoodieConfig, result: ServiceRound) -> None:
    from storage.table_service.clean import run_clean

    before = {i.timestamp for i in meta.reload().timeline.completed().of_actions([Action.CLEAN])}
    run_clean(spark, meta, config, force=False)
    after = {i.timestamp for i in meta.reload().timeline.completed().of_actions([Action.CLEAN])}
    result.cleaned += sorted(after - before)


def _archive(meta: HoodieTableMetaClient, config: HoodieConfig, result: ServiceRound) -> None:
    from storage.table_service.archival import archive

    result.archived += len(archive(meta, config))


def _pending(meta: HoodieTableMetaClient, action: str) -> list[str]:
    return sorted(i.timestamp for i in meta.timeline.pending().of_actions([action]))


def _execute(service: str, instant: str, meta: HoodieTableMetaClient, run: Callable[[], list[str]],
             result: ServiceRound) -> list[str]:
    """Execute one pending plan; one that another live process runs (or that fails) is left for a later round."""
    try:
        return run()
    except HoodieError as exc:
        if isinstance(exc.__cause__, HoodieHeartbeatError):  # another live process executes it: not a failure
            log.info("%s %s of %s is being executed by another process", service, instant, meta.base_path)
        else:
            log.warning("%s %s of %s not executed this round: %s", service, instant, meta.base_path, exc)
            result.errors.append(f"{service} {instant}: {exc}")
        return []
