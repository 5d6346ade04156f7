"""Clean (Hudi's clean table service): removes file versions the retention policy no longer
needs, in three phases on the timeline.

Python API (`CALL run_clean` / `show_cleans` / `show_clean_plans` map onto it):

- ``schedule_clean(meta_client_or_path, config=HoodieConfig()) -> str | None``: plans
  (storage.table_service.clean_planner) and writes ``<t>.clean.requested`` (Avro HoodieCleanerPlan); None when
  nothing is to be cleaned.
- ``run_clean(spark, base_path, config=HoodieConfig(), force=True) -> str | None``: first finishes any pending
  clean (a clean that died re-executes its saved plan), then schedules and executes a new one (with
  ``force=False`` only when ``hoodie.clean.max.commits`` commits were made since the last clean). Returns the new
  clean instant.
- ``clean_table(...) -> CleanOutcome`` (``clean_loaded_table`` for a loaded meta client, e.g. the metadata
  table's): the same, telling the pending cleans it finished and, when no new clean
  deleted a file, why (logged at INFO too): the trigger is not reached, the planner's reason (no more commits
  than retained, no file version older than the retained ones, ...), a pending clean was finished instead, or an
  empty clean was recorded.
- ``show_cleans(base_path)`` / ``show_clean_plans(base_path)``: completed cleans / clean plans as dicts.

Execution: ``<t>.clean.inflight`` (the plan again), the deletes as Spark tasks (one task per group of
partitions, never a driver loop over the files), then ``<t>.clean`` (Avro HoodieCleanMetadata). Deleting is
idempotent (a file already gone counts as deleted), so re-executing a plan is safe.
"""
from __future__ import annotations

import logging
import time
from dataclasses import dataclass
from typing import Any, Iterator

from storage.avro.container import read_avro_container, write_avro_container
from storage.avro.models import HOODIE_CLEAN_METADATA, HOODIE_CLEANER_PLAN
from storage.config import ArchivalConfigKeys as AK
from storage.config import CleanConfigKeys as CK
from storage.config import HoodieConfig
from storage.engine.engine_context import engine_for_deletes
from storage.exception import HoodieCleanError, HoodieHeartbeatError
from storage.io.storage import HoodieStorage
from storage.io.storage_options import StorageOptions
from storage.table.meta_client import HoodieTableMetaClient
from storage.table_service.clean_planner import CleanPlanner, HoodieCleanerPlan, last_completed_clean
from storage.table_service.service_table import service_meta_client
from storage.testing.crash_points import crash_point
from storage.transaction.transaction_manager import TransactionManager
from storage.write.heartbeat import Heartbeat, HeartbeatSettings
from storage.timeline.instant import Action, HoodieInstant
from storage.timeline.instant_time import parse_instant
from storage.table.action_completion import ActionCompletion, complete_action

log = logging.getLogger(__name__)

CLEAN_METADATA_VERSION = 2  # CleanerUtils.LATEST_CLEAN_METADATA_VERSION


def check_clean_config(meta: HoodieTableMetaClient, config: HoodieConfig) -> None:
    """Check the cleaner options of `config` at once, so a bad policy or retention fails before anything is
    written."""
    from storage.table_service.clean_planner import HoodieCleaningPolicy

    HoodieCleaningPolicy.of(config.get(CK.POLICY))
    for prop in (CK.COMMITS_RETAINED, CK.FILE_VERSIONS_RETAINED, CK.HOURS_RETAINED, CK.MAX_COMMITS):
        if config.get(prop) < 1:
            raise HoodieCleanError(f"{prop.key} must be at least 1, got {config.get(prop)} (table {meta.base_path})")


@dataclass(frozen=True)
class CleanOutcome:
    """What `clean_table` did: the new clean (None when none was made), the pending cleans it finished first, and
    why no new clean deleted a file (None when one did)."""

    instant: str | None
    finished: tuple[str, ...] = ()
    reason: str | None = None


def needs_cleaning(meta: HoodieTableMetaClient, config: HoodieConfig) -> bool:
    """`hoodie.clean.trigger.strategy` NUM_COMMITS: at least `hoodie.clean.max.commits` commits since the last
    clean (scheduled or completed)."""
    return trigger_not_reached(meta, config) is None


def trigger_not_reached(meta: HoodieTableMetaClient, config: HoodieConfig) -> str | None:
    """Why the trigger strategy does not clean yet; None when it does (see `needs_cleaning`)."""
    strategy = str(config.get(CK.TRIGGER_STRATEGY)).upper()
    if strategy != "NUM_COMMITS":
        raise HoodieCleanError(f"unknown {CK.TRIGGER_STRATEGY.key} {strategy!r}; use NUM_COMMITS")
    last = meta.timeline.of_actions([Action.CLEAN]).last()
    commits = meta.timeline.completed().write_timeline()
    since = [c for c in commits if last is None or c.timestamp > last.timestamp]
    wanted = config.get(CK.MAX_COMMITS)
    if len(since) >= wanted:
        return None
    after = f"since the last clean ({last.timestamp})" if last is not None else "and no clean yet"
    return (f"{len(since)} commit{'' if len(since) == 1 else 's'} {after}: {CK.TRIGGER_STRATEGY.key}=NUM_COMMITS "
            f"cleans after {CK.MAX_COMMITS.key}={wanted}")


def schedule_clean(meta_client_or_path: HoodieTableMetaClient | str, config: HoodieConfig = HoodieConfig(),
                   spark=None) -> str | None:
    """Plan a clean and save it as `<t>.clean.requested`; the instant time, or None if nothing is to clean."""
    meta = service_meta_client(meta_client_or_path, "clean", spark, config)
    check_clean_config(meta, config)
    instant_time, plan = _schedule(meta, config)
    if instant_time is None:
        log.info("nothing to clean in %s: %s", meta.base_path, plan.reason)
    return instant_time


def _schedule(meta: HoodieTableMetaClient, config: HoodieConfig,
              instant_time: str | None = None) -> tuple[str | None, HoodieCleanerPlan]:
    """(the clean instant saved, or None when nothing is to clean; the plan, which says why)."""
    # planned under the table lock: a writer cannot start (take an instant time) between the planner's look at
    # the pending writes and the plan's publication, so no file a live writer reads is planned for deletion
    with TransactionManager.for_table(meta, config).transaction("schedule clean"):
        meta.reload()
        plan = CleanPlanner(meta, config).plan()
        if plan.is_empty() and not records_empty_clean(meta, config, plan):
            return None, plan
        instant_time = instant_time or meta.active_timeline.new_instant_time()
        meta.active_timeline.create_requested(Action.CLEAN, instant_time,
                                              write_avro_container(HOODIE_CLEANER_PLAN, plan.to_record()))
    crash_point("clean.after_plan")
    return instant_time, plan


def records_empty_clean(meta: HoodieTableMetaClient, config: HoodieConfig, plan: HoodieCleanerPlan,
                        now: float | None = None) -> bool:
    """Whether a plan that deletes nothing is still published (an empty clean) because it moves the earliest
    commit to retain forward, and either archival waits on it or the last clean is older than
    `hoodie.write.empty.clean.create.duration.ms` (Hudi's empty clean). Archival never passes the last clean's
    earliestCommitToRetain: without this, a table with nothing to clean for a long time (inserts only, or a
    merge-on-read table whose old slices a savepoint keeps) would grow its active timeline without bound."""
    ectr = plan.earliest_instant_to_retain
    if ectr is None:
        return False
    last = last_completed_clean(meta)
    previous = (last[1].get("earliestCommitToRetain") or None) if last else None
    if previous is not None and ectr.timestamp <= previous:
        return False
    duration_ms = config.get(CK.EMPTY_CLEAN_CREATE_DURATION_MS)
    if duration_ms >= 0 and (last is None or _age_ms(last[0].timestamp, now) > duration_ms):
        return True
    commits = len(meta.timeline.completed().write_timeline())
    return commits > config.get(AK.MAX_COMMITS_TO_KEEP)


def _age_ms(instant_time: str, now: float | None) -> float:
    return ((now if now is not None else time.time()) - parse_instant(instant_time).timestamp()) * 1000


def run_clean(spark, base_path: HoodieTableMetaClient | str, config: HoodieConfig = HoodieConfig(),
              force: bool = True) -> str | None:
    """Finish pending cleans, then schedule and execute a new clean; the new clean's instant time or None."""
    return clean_table(spark, base_path, config, force).instant


def clean_table(spark, base_path: HoodieTableMetaClient | str, config: HoodieConfig = HoodieConfig(),
                force: bool = True) -> CleanOutcome:
    """`run_clean`, telling what it did and, when no new clean deleted a file, why."""
    return clean_loaded_table(spark, service_meta_client(base_path, "clean", spark, config), config, force)


def clean_loaded_table(spark, meta: HoodieTableMetaClient, config: HoodieConfig = HoodieConfig(),
                       force: bool = True, instant_time: str | None = None) -> CleanOutcome:
    """`clean_table` of a table its caller loaded and prepared (the metadata table's writer cleans the metadata
    table with it, storage.table_service.metadata_table_services); `spark` None deletes from the driver;
    `instant_time`: the new clean's (default: a fresh one)."""
    check_clean_config(meta, config)
    finished = []
    for pending in list(meta.timeline.pending().of_actions([Action.CLEAN])):
        if _execute_claimed(spark, meta, config, pending.timestamp):
            log.info("finished the pending clean %s of %s", pending.timestamp, meta.base_path)
            finished.append(pending.timestamp)
    waiting = None if force else trigger_not_reached(meta, config)
    if waiting is not None:
        return _no_new_clean(meta, finished, waiting)
    instant_time, plan = _schedule(meta, config, instant_time)
    if instant_time is None:
        return _no_new_clean(meta, finished, plan.reason)
    if not _execute_claimed(spark, meta, config, instant_time):
        return CleanOutcome(instant_time, tuple(finished), f"the clean {instant_time} is run by another live process")
    if not plan.is_empty():
        return CleanOutcome(instant_time, tuple(finished))
    ectr = plan.earliest_instant_to_retain.timestamp
    reason = (f"an empty clean was recorded to move the earliest commit to retain to {ectr}, so that archival can "
              f"pass it; it deleted nothing: {plan.reason}")
    log.info("clean %s of %s: %s", instant_time, meta.base_path, reason)
    return CleanOutcome(instant_time, tuple(finished), reason)


def _no_new_clean(meta: HoodieTableMetaClient, finished: list[str], reason: str) -> CleanOutcome:
    if finished:  # the pending clean did the work a new one would have done
        reason = (f"the pending clean {', '.join(finished)} (planned earlier, not completed) was finished instead; "
                  f"nothing more to clean: {reason}")
    log.info("no new clean of %s: %s", meta.base_path, reason)
    return CleanOutcome(None, tuple(finished), reason)


def _execute_claimed(spark, meta: HoodieTableMetaClient, config: HoodieConfig, instant_time: str) -> bool:
    """Execute a pending clean unless another live process runs it: claimed under the table lock by a heartbeat
    (as a compaction), so two writers' post-commit cleans never execute and complete the same plan."""
    settings = HeartbeatSettings.of(config)
    with TransactionManager.for_table(meta, config).transaction(f"claim clean {instant_time}"):
        pending = meta.reload().timeline.pending().of_actions([Action.CLEAN]).find(instant_time)
        if pending is None:
            return False
        try:
            heartbeat = Heartbeat(meta.storage, meta.meta_path, instant_time, settings).start()
        except HoodieHeartbeatError:
            log.info("clean %s of %s is run by another live process", instant_time, meta.base_path)
            return False
    try:
        execute_clean(spark, meta, pending, config.get(CK.PARALLELISM), config)
    finally:
        heartbeat.stop()
    return True


def execute_clean(spark, meta: HoodieTableMetaClient, instant: HoodieInstant,
                  parallelism: int = CK.PARALLELISM.default, config: HoodieConfig = HoodieConfig()) -> HoodieInstant:
    """requested -> inflight -> deletes (`delete_files`) -> completed `<t>.clean` with HoodieCleanMetadata, under
    the table lock of `config` (as Hudi's CleanActionExecutor: the metadata table's deltacommit for the clean
    must not interleave with a concurrent writer's)."""
    timeline = meta.active_timeline
    started = time.time()
    plan_bytes = timeline.read_bytes(timeline.requested_of(instant))
    plan = HoodieCleanerPlan.from_bytes(plan_bytes, meta.base_path)
    inflight = instant if instant.is_inflight else timeline.transition_to_inflight(instant, plan_bytes)
    crash_point("clean.after_inflight")
    results = delete_files(spark, meta.storage, plan.files_per_partition, parallelism, config)
    crash_point("clean.after_deletes")
    record = clean_metadata_record(instant.timestamp, int((time.time() - started) * 1000), plan, results)
    completed = complete_action(ActionCompletion(meta, inflight, write_avro_container(HOODIE_CLEAN_METADATA, record),
                                                 record, "clean"),
                                TransactionManager.for_table(meta, config).transaction(f"commit clean {instant.timestamp}"))
    meta.reload()
    log.info("clean %s of %s deleted %d files", instant.timestamp, meta.base_path, record["totalFilesDeleted"])
    return completed


def delete_files(spark, storage: HoodieStorage, files_per_partition: dict[str, list[str]],
                 parallelism: int = CK.PARALLELISM.default,
                 config: HoodieConfig = HoodieConfig()) -> dict[str, tuple[list[str], list[str]]]:
    """Delete the files, per partition the names deleted (or already gone) and the names that could not be
    deleted. A clean of many files deletes them in Spark tasks, partitions spread over at most `parallelism` tasks;
    a small one (or one without a session: `spark` None) from this process, a partition per thread
    (storage.engine.engine_context.engine_for_deletes)."""
    groups = [(p, files) for p, files in sorted(files_per_partition.items()) if files]
    results: dict[str, tuple[list[str], list[str]]] = {p: ([], []) for p, _ in groups}
    if not groups:
        return results
    options = storage.options  # how the tasks reach the table (picklable)
    engine = engine_for_deletes(spark, sum(len(files) for _, files in groups), config, "clean")
    deleted = engine.map_each(lambda group: list(_delete_task(group, options)), groups, parallelism)
    for partition, name, ok in (row for rows in deleted for row in rows):
        results[partition][0 if ok else 1].append(name)
    return results


def _delete_task(group: tuple[str, list[str]], options: StorageOptions) -> Iterator[tuple[str, str, bool]]:
    """(partition, file name, deleted or already gone) of each file of one partition's group."""
    partition, files = group
    storage = None
    for path in files:
        storage = storage or HoodieStorage.for_path(path, options)
        ok = storage.delete(path) or not storage.exists(path)
        yield partition, path.rsplit("/", 1)[-1], ok


def clean_metadata_record(clean_time: str, took_ms: int, plan: HoodieCleanerPlan,
                          results: dict[str, tuple[list[str], list[str]]]) -> dict[str, Any]:
    ectr = plan.earliest_instant_to_retain
    return {
        "startCleanTime": clean_time,
        "timeTakenInMillis": took_ms,
        "totalFilesDeleted": sum(len(ok) for ok, _ in results.values()),
        "earliestCommitToRetain": ectr.timestamp if ectr else "",
        "lastCompletedCommitTimestamp": plan.last_completed_commit,
        "partitionMetadata": {
            p: {"partitionPath": p, "policy": plan.policy.value,
                "deletePathPatterns": [f.rsplit("/", 1)[-1] for f in plan.files_per_partition.get(p, [])],
                "successDeleteFiles": ok, "failedDeleteFiles": failed, "isPartitionDeleted": False}
            for p, (ok, failed) in sorted(results.items())},
        "version": CLEAN_METADATA_VERSION,
        "bootstrapPartitionMetadata": {},
        "extraMetadata": None,
    }


def show_cleans(base_path: str) -> list[dict[str, Any]]:
    """Completed cleans of the active timeline, oldest first, with their metadata's totals."""
    meta = HoodieTableMetaClient.load(base_path)
    out = []
    for instant in meta.timeline.completed().of_actions([Action.CLEAN]):
        md = read_avro_container(meta.active_timeline.read_bytes(instant))
        out.append({"instant": instant, **md})
    return out


def show_clean_plans(base_path: str) -> list[dict[str, Any]]:
    """Every clean instant (any state) with its plan, oldest first."""
    meta = HoodieTableMetaClient.load(base_path)
    out = []
    for instant in meta.timeline.of_actions([Action.CLEAN]):
        plan = read_avro_container(meta.active_timeline.read_bytes(meta.active_timeline.requested_of(instant)))
        out.append({"instant": instant, **plan})
    return out
