"""Compaction of merge-on-read tables (Hudi's compaction table service).

Python API (stable; `CALL run_compaction` / `CALL show_compaction` map onto it):

- ``schedule_compaction(meta_client_or_path, config=HoodieConfig()) -> str | None``
  Picks file slices with log files by the configured strategy (``hoodie.compaction.strategy``: log-file-size
  based by default, bounded by ``hoodie.compaction.target.io`` MB; or UnBoundedCompactionStrategy) and writes
  ``<t>.compaction.requested`` holding an Avro HoodieCompactionPlan (spec §4.3). Returns the instant time, or
  None when there is nothing to compact. The slices of a pending compaction are excluded from new plans.
- ``run_compaction(spark, base_path, instant=None, config=HoodieConfig()) -> list[str]``
  Executes the given pending compaction (or all pending ones, oldest first) and returns the completed instants.
- ``should_schedule_inline(meta_client, config) -> bool``
  The inline trigger (``hoodie.compact.inline.trigger.strategy`` NUM_COMMITS / TIME_ELAPSED / NUM_AND_TIME /
  NUM_OR_TIME with ``hoodie.compact.inline.max.delta.commits`` / ``hoodie.compact.inline.max.delta.seconds``),
  counted from the last completed or pending compaction (or the first instant of the table).
- ``show_compaction(base_path) -> list[dict]``
  One dict per compaction instant on the active timeline: instant, state, action, operation_size (number of
  operations in the plan), total_log_files, total_log_size.

Execution is in storage/table_service/compactor.py: one Spark task per plan operation, published as
``<t>.commit`` (operationType COMPACT); commit callbacks (e.g. Hive sync) fire after it.
"""
from __future__ import annotations

import logging
from typing import Any

from storage.avro.container import write_avro_container
from storage.avro.models import HOODIE_COMPACTION_PLAN
from storage.config import CompactionConfigKeys as CK
from storage.config import HoodieConfig
from storage.metadata.metadata_writer import prepare_metadata_table
from storage.table.file_slice import FileSlice
from storage.table.fs_view import FileSystemView
from storage.table.meta_client import HoodieTableMetaClient
from storage.table.pending_plans import pending_compaction_operations, read_compaction_plan as read_plan  # noqa: F401
from storage.table_service.compaction_strategy import metrics_of, select_slices
from storage.timeline.instant import Action
from storage.write.commit_callback import CommitEvent, fire_commit_callbacks
from storage.exception import HoodieCompactionError
from storage.testing.crash_points import crash_point
from storage.transaction.transaction_manager import NEVER, TransactionManager, failed_writes_policy, is_multi_writer
from storage.write.heartbeat import HeartbeatSettings
from storage.write.rollback import rollback_failed_writes

log = logging.getLogger(__name__)

PLAN_VERSION = 2  # CompactionPlanMigrator.LATEST_COMPACTION_METADATA_VERSION


def _meta_client(meta_client_or_path: HoodieTableMetaClient | str) -> HoodieTableMetaClient:
    if isinstance(meta_client_or_path, HoodieTableMetaClient):
        return meta_client_or_path.reload()
    return HoodieTableMetaClient.load(meta_client_or_path)


def _operation(fs: FileSlice) -> dict[str, Any]:
    # Hudi stores file names (relative to the partition), not absolute paths.
    return {
        "baseInstantTime": fs.base_instant,
        "deltaFilePaths": [lf.name for lf in fs.sorted_log_files()],
        "dataFilePath": fs.base_file.name if fs.base_file else None,
        "fileId": fs.file_id,
        "partitionPath": fs.partition_path,
        "metrics": metrics_of(fs).as_map(),
        "bootstrapFilePath": None,
    }


def build_plan(slices: list[FileSlice], strategy: str) -> dict[str, Any]:
    return {
        "operations": [_operation(s) for s in slices],
        "extraMetadata": None,
        "version": PLAN_VERSION,
        "strategy": None,
        "preserveHoodieMetadata": False,
        "missingSchedulePartitions": None,
    }


def _pending_compaction_file_groups(meta_client: HoodieTableMetaClient) -> set[tuple[str, str]]:
    return set(pending_compaction_operations(meta_client))


def schedule_compaction(meta_client_or_path: HoodieTableMetaClient | str,
                        config: HoodieConfig = HoodieConfig()) -> str | None:
    """Write `<t>.compaction.requested` with a plan; the instant time, or None if nothing needs compaction."""
    mc = _meta_client(meta_client_or_path)
    if not mc.table_config.is_mor:
        raise HoodieCompactionError(f"compaction needs a MERGE_ON_READ table; {mc.base_path} is {mc.table_config.table_type}")
    with TransactionManager.for_table(mc, config).transaction("schedule compaction"):
        mc.reload()
        if failed_writes_policy(config) != NEVER:  # a dead write must not block scheduling forever
            rollback_failed_writes(mc, HeartbeatSettings.of(config))
        instant_time = _schedule_locked(mc, config)
    if instant_time is not None:
        crash_point("compaction.after_schedule")
    return instant_time


def _check_no_inflight_writes(mc: HoodieTableMetaClient, config: HoodieConfig) -> None:
    """As Hudi, a single writer never schedules a compaction while a write is pending: the write planned its log
    appends against the slice the compaction would rewrite. With optimistic concurrency control the write's
    conflict check at commit catches that instead (it fails if the compaction touched its file groups)."""
    if is_multi_writer(config):
        return
    pending = mc.timeline.pending().of_actions(Action.WRITE_ACTIONS).first()
    if pending is not None:
        raise HoodieCompactionError(f"cannot schedule a compaction of {mc.base_path} while write {pending} is pending "
                                    "(the earliest inflight write must be later than the compaction); retry when "
                                    "it has completed or been rolled back")


def _schedule_locked(mc: HoodieTableMetaClient, config: HoodieConfig) -> str | None:
    _check_no_inflight_writes(mc, config)
    pending = _pending_compaction_file_groups(mc)
    view = FileSystemView(mc)
    slices = [s for s in view.latest_file_slices() if (s.partition_path, s.file_id) not in pending]
    chosen = select_slices(slices, config.get(CK.STRATEGY), config.get(CK.TARGET_IO),
                           config.get(CK.LOGFILE_SIZE_THRESHOLD))
    if not chosen:
        log.info("nothing to compact in %s", mc.base_path)
        return None
    instant_time = mc.active_timeline.new_instant_time()
    plan = write_avro_container(HOODIE_COMPACTION_PLAN, build_plan(chosen, config.get(CK.STRATEGY)))
    mc.active_timeline.create_requested(Action.COMPACTION, instant_time, plan)
    log.info("scheduled compaction %s with %d operations on %s", instant_time, len(chosen), mc.base_path)
    return instant_time


def _delta_commits_since_last_compaction(mc: HoodieTableMetaClient) -> tuple[int, str | None]:
    """(completed deltacommits after the last compaction, the instant time counting starts from)."""
    compactions = [i.timestamp for i in mc.active_timeline.all_files() if i.action == Action.COMPACTION]
    last = max(compactions, default=None)
    deltas = [i for i in mc.timeline.completed().of_actions([Action.DELTA_COMMIT])
              if last is None or i.timestamp > last]
    start = last if last is not None else (deltas[0].timestamp if deltas else None)
    return len(deltas), start


def should_schedule_inline(meta_client: HoodieTableMetaClient, config: HoodieConfig = HoodieConfig(),
                           now: float | None = None) -> bool:
    import time

    from storage.timeline.instant_time import parse_instant

    strategy = str(config.get(CK.INLINE_TRIGGER_STRATEGY)).upper()
    count, start = _delta_commits_since_last_compaction(meta_client.reload())
    num_ok = count >= config.get(CK.INLINE_MAX_DELTA_COMMITS)
    elapsed = 0.0
    if start is not None:
        elapsed = (now if now is not None else time.time()) - parse_instant(start).timestamp()
    time_ok = start is not None and elapsed >= config.get(CK.INLINE_MAX_DELTA_SECONDS)
    if strategy == "NUM_COMMITS":
        return num_ok
    if strategy == "TIME_ELAPSED":
        return time_ok
    if strategy == "NUM_AND_TIME":
        return num_ok and time_ok
    if strategy == "NUM_OR_TIME":
        return num_ok or time_ok
    raise HoodieCompactionError(f"unknown {CK.INLINE_TRIGGER_STRATEGY.key} {strategy!r}; use NUM_COMMITS, "
                          "TIME_ELAPSED, NUM_AND_TIME or NUM_OR_TIME")


def show_compaction(base_path: str) -> list[dict[str, Any]]:
    mc = HoodieTableMetaClient.load(base_path)
    out = []
    for inst in mc.timeline:
        if inst.action == Action.COMPACTION:
            state = inst.state.name
        elif inst.action == Action.COMMIT and _is_compaction_commit(mc, inst.timestamp):
            state = "COMPLETED"
        else:
            continue
        ops = read_plan(mc, inst.timestamp).get("operations") or []
        out.append({
            "instant": inst.timestamp,
            "state": state,
            "action": Action.COMPACTION,
            "operation_size": len(ops),
            "total_log_files": sum(len(o.get("deltaFilePaths") or []) for o in ops),
            "total_log_size": int(sum((o.get("metrics") or {}).get("TOTAL_LOG_FILES_SIZE", 0) for o in ops)),
        })
    return out


def _is_compaction_commit(mc: HoodieTableMetaClient, ts: str) -> bool:
    return any(i.timestamp == ts and i.action == Action.COMPACTION for i in mc.active_timeline.all_files())


def run_compaction(spark, base_path: str, instant: str | None = None,
                   config: HoodieConfig = HoodieConfig()) -> list[str]:
    """Execute pending compaction `instant` (or every pending one, oldest first); the completed instants."""
    from storage.table_service.compactor import execute_compaction

    mc = HoodieTableMetaClient.load_in_session(spark, base_path, config)
    pending = [i.timestamp for i in mc.timeline.pending().of_actions([Action.COMPACTION])]
    if instant is not None:
        if instant not in pending:
            done = any(i.timestamp == instant for i in mc.timeline.completed())
            state = "already completed" if done else "not a pending compaction"
            raise HoodieCompactionError(f"compaction {instant} of {base_path} is {state}; pending compactions: "
                                  f"{', '.join(pending) or 'none'}")
        pending = [instant]
    if pending:  # the metadata table is kept in step by this compaction, or removed (as every service does)
        prepare_metadata_table(mc, config, "compaction")
    completed = []
    for ts in sorted(pending):
        execute_compaction(spark, mc, ts, read_plan(mc, ts), config)
        fire_commit_callbacks(CommitEvent(mc.base_path, mc.table_config.name, ts, Action.COMMIT, "COMPACT", config))
        completed.append(ts)
    return completed
