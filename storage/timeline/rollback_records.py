"""The Avro records of a rollback - its plan (HoodieRollbackPlan) and its metadata (HoodieRollbackMetadata) - built
from typed requests, and of a restore (HoodieRestorePlan, HoodieRestoreMetadata): shared by the data table's
rollbacks and restores (storage.write.rollback, storage.table_service.restore) and the metadata table's
(storage.metadata.metadata_writer), which sits below the write path."""
from __future__ import annotations

from dataclasses import dataclass, field

from storage.timeline.instant import HoodieInstant


@dataclass
class RollbackRequest:
    partition_path: str
    file_id: str
    latest_base_instant: str
    files_to_delete: list[str] = field(default_factory=list)
    log_blocks_to_roll_back: dict[str, int] = field(default_factory=dict)  # log path -> size (merge-on-read)


def rollback_plan_record(instant: HoodieInstant, requests: list[RollbackRequest]) -> dict:
    return {
        "instantToRollback": {"commitTime": instant.timestamp, "action": instant.action},
        "RollbackRequests": [
            {
                "partitionPath": r.partition_path,
                "fileId": r.file_id,
                "latestBaseInstant": r.latest_base_instant,
                "filesToBeDeleted": r.files_to_delete,
                "logBlocksToBeDeleted": dict(r.log_blocks_to_roll_back),
            }
            for r in requests
        ],
        "version": 1,
    }


def rollback_metadata_record(start: str, took_ms: int, instant: HoodieInstant, deleted: dict[str, list[str]],
                             failed: dict[str, list[str]], rollback_logs: dict[str, dict[str, int]] | None = None,
                             failed_logs: dict[str, dict[str, int]] | None = None) -> dict:
    rollback_logs, failed_logs = rollback_logs or {}, failed_logs or {}
    partitions = sorted(set(deleted) | set(failed) | set(rollback_logs))
    return {
        "startRollbackTime": start,
        "timeTakenInMillis": took_ms,
        "totalFilesDeleted": sum(len(v) for v in deleted.values()),
        "commitsRollback": [instant.timestamp],
        "partitionMetadata": {
            p: {
                "partitionPath": p,
                "successDeleteFiles": deleted.get(p, []),
                "failedDeleteFiles": failed.get(p, []),
                "rollbackLogFiles": rollback_logs.get(p, {}),
                "logFilesFromFailedCommit": failed_logs.get(p, {}),
            }
            for p in partitions
        },
        "version": 1,
        "instantsRollback": [{"commitTime": instant.timestamp, "action": instant.action}],
    }


def requests_of_plan(plan: dict) -> list[RollbackRequest]:
    return [RollbackRequest(r["partitionPath"], r["fileId"], r["latestBaseInstant"], list(r["filesToBeDeleted"] or []),
                            dict(r["logBlocksToBeDeleted"] or {}))
            for r in plan.get("RollbackRequests") or []]


RESTORE_PLAN_VERSION = 2


def restore_plan_record(later: list[HoodieInstant], target: str) -> dict:
    """The plan restoring to `target`: `later` (the instants after it) rolled back newest first; the plan always
    names the instant restored to, as Hudi's RestorePlanActionExecutor writes it."""
    return {"instantsToRollback": [{"commitTime": i.timestamp, "action": i.action}
                                   for i in sorted(later, key=HoodieInstant.sort_key, reverse=True)],
            "version": RESTORE_PLAN_VERSION, "savepointToRestoreTimestamp": target}


def restore_metadata_record(start: str, took_ms: int, plan: dict, rolled: dict[str, list]) -> dict:
    """A completed restore of `plan`: `rolled` maps each instant rolled back to its rollback metadata records."""
    planned = list(plan.get("instantsToRollback") or [])
    return {"startRestoreTime": start, "timeTakenInMillis": took_ms,
            "instantsToRollback": [t["commitTime"] for t in planned], "hoodieRestoreMetadata": rolled,
            "version": 1, "restoreInstantInfo": planned, "extraMetadata": None}
