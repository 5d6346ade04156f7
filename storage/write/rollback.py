"""Rollback (Hudi's BaseRollbackActionExecutor), run by a writer before it starts and by restores.

A pending commit whose writer is gone is rolled back: a `<t>.rollback.requested` plan (Avro
HoodieRollbackPlan) lists the files its markers name, they are deleted, `<t>.rollback` (Avro
HoodieRollbackMetadata) completes the rollback, and the failed instant's files leave the timeline.
A restore's plan is executed here too (`execute_restore`: a restore is rollbacks in order), so that a writer
finishes a restore that died half-way without reaching up to the table services that plan restores.
"""
from __future__ import annotations

import logging
import time

from storage.avro.container import read_avro_container, write_avro_container
from storage.avro.models import HOODIE_RESTORE_METADATA
from storage.fs_utils import file_id_of, join_path, parse_log_file_name
from storage.metadata.metadata_writer import discard_metadata_deltacommit
from storage.table.meta_client import HoodieTableMetaClient
from storage.timeline.instant import Action, HoodieInstant, State
from storage.exception import HoodieRollbackError
from storage.testing.crash_points import crash_point
from storage.write.heartbeat import HeartbeatSettings, heartbeat_path, is_writer_alive
from storage.write.markers import IOType, create_marker, delete_marker_dir, list_markers
from storage.table.action_completion import ActionCompletion, complete_action
from storage.table.table_version import HoodieTableVersion
from storage.timeline.rollback_records import (
    RollbackRequest,
    requests_of_plan,
    restore_metadata_record,
    rollback_metadata_record,
    rollback_plan_record,
)

log = logging.getLogger(__name__)


def failed_writes(meta_client: HoodieTableMetaClient,
                  heartbeat: HeartbeatSettings | None = None) -> list[HoodieInstant]:
    """Pending commit/deltacommit/replacecommit instants whose writer no longer runs (and that no pending
    rollback already targets: those are resumed instead); pending clusterings are not failed writes."""
    from storage.table.pending_plans import is_pending_clustering

    targeted = {target for _, target, _ in pending_rollbacks(meta_client)}
    pending = meta_client.timeline.pending().of_actions(Action.WRITE_ACTIONS)
    # a pending clustering is a table service's plan, not a failed write: its next execution undoes a dead attempt
    return [i for i in pending if i.timestamp not in targeted
            and not is_writer_alive(meta_client.storage, meta_client.meta_path, i.timestamp, heartbeat)
            and not (i.action == Action.REPLACE_COMMIT and is_pending_clustering(meta_client, i))]


def pending_rollbacks(meta_client: HoodieTableMetaClient) -> list[tuple[HoodieInstant, str, dict]]:
    """(rollback instant, target instant time, plan record) of every rollback that started and did not finish."""
    from storage.avro.container import read_avro_container

    out = []
    for instant in meta_client.timeline.pending().of_actions([Action.ROLLBACK]):
        requested = meta_client.active_timeline.requested_of(instant)
        try:
            plan = read_avro_container(meta_client.active_timeline.read_bytes(requested))
        except Exception as exc:
            raise HoodieRollbackError(f"cannot resume rollback {instant.timestamp} of {meta_client.base_path}: its "
                                      f"plan is unreadable ({exc})") from exc
        out.append((instant, plan["instantToRollback"]["commitTime"], plan))
    return out


def plan_rollback(meta_client: HoodieTableMetaClient, instant: HoodieInstant) -> list[RollbackRequest]:
    """One request per file group touched by the failed instant, listing the files its markers name."""
    by_group: dict[tuple[str, str], RollbackRequest] = {}
    # table version 8+: the failed write's log files are its own and are deleted like its base files
    own_logs = HoodieTableVersion.of(meta_client).log_file_per_write
    for marker in list_markers(meta_client.storage, meta_client.marker_dir(instant.timestamp)):
        file_id = file_id_of(marker.file_name) or ""
        path = join_path(meta_client.base_path, marker.partition_path, marker.file_name)
        if marker.io_type == IOType.APPEND and not own_logs:
            # log appends are undone by a rollback command block (merge-on-read, spec §6.4)
            parsed = parse_log_file_name(marker.file_name)
            req = by_group.setdefault((marker.partition_path, file_id), RollbackRequest(
                marker.partition_path, file_id, parsed.instant_time if parsed else instant.timestamp))
            if meta_client.storage.exists(path):
                req.log_blocks_to_roll_back[path] = meta_client.storage.size(path)
            continue
        req = by_group.setdefault((marker.partition_path, file_id),
                                  RollbackRequest(marker.partition_path, file_id, instant.timestamp))
        req.files_to_delete.append(path)
    return list(by_group.values())


def rollback(meta_client: HoodieTableMetaClient, instant: HoodieInstant) -> HoodieInstant:
    """Roll back one pending write instant; returns the completed rollback instant. A rollback of `instant`
    that started earlier and died is resumed with its own plan instead of planning a new one."""
    from storage.avro.container import write_avro_container
    from storage.avro.models import HOODIE_ROLLBACK_PLAN

    for rollback_instant, target, plan in pending_rollbacks(meta_client):
        if target == instant.timestamp:
            return resume_rollback(meta_client, rollback_instant, plan)
    done = _completed_rollback_of(meta_client, instant.timestamp)
    if done is not None:  # the rollback completed and died before removing the failed instant's files
        _remove_rolled_back(meta_client, instant.timestamp)
        return done
    timeline = meta_client.active_timeline
    rollback_time = timeline.new_instant_time()
    requests = plan_rollback(meta_client, instant)
    plan = write_avro_container(HOODIE_ROLLBACK_PLAN, rollback_plan_record(instant, requests))
    requested = timeline.create_requested(Action.ROLLBACK, rollback_time, plan)
    crash_point("rollback.after_requested")
    return _execute_rollback(meta_client, requested, instant, requests)


def resume_rollback(meta_client: HoodieTableMetaClient, rollback_instant: HoodieInstant, plan: dict) -> HoodieInstant:
    """Finish a rollback that died half-way, with the plan it recorded (deleting a file twice is harmless)."""
    target = plan["instantToRollback"]
    instant = HoodieInstant(State.INFLIGHT, target["action"], target["commitTime"])
    log.info("resuming rollback %s of %s", rollback_instant.timestamp, instant)
    return _execute_rollback(meta_client, rollback_instant, instant, requests_of_plan(plan))


def _execute_rollback(meta_client: HoodieTableMetaClient, rollback_instant: HoodieInstant, instant: HoodieInstant,
                      requests: list[RollbackRequest]) -> HoodieInstant:
    from storage.avro.container import write_avro_container
    from storage.avro.models import HOODIE_ROLLBACK_METADATA

    timeline = meta_client.active_timeline
    started = time.time()
    rollback_time = rollback_instant.timestamp
    inflight = rollback_instant if rollback_instant.is_inflight else timeline.transition_to_inflight(rollback_instant)
    crash_point("rollback.after_inflight")
    deleted: dict[str, list[str]] = {}
    failed: dict[str, list[str]] = {}
    rollback_logs: dict[str, dict[str, int]] = {}
    failed_logs: dict[str, dict[str, int]] = {}
    for req in requests:
        for path in req.files_to_delete:
            ok = meta_client.storage.delete(path) or not meta_client.storage.exists(path)
            (deleted if ok else failed).setdefault(req.partition_path, []).append(path)
        if req.log_blocks_to_roll_back:
            written = _append_rollback_block(meta_client, req, rollback_time, instant.timestamp)
            rollback_logs.setdefault(req.partition_path, {}).update(written)
            failed_logs.setdefault(req.partition_path, {}).update(req.log_blocks_to_roll_back)
    crash_point("rollback.after_files_deleted")
    took = int((time.time() - started) * 1000)
    record = rollback_metadata_record(rollback_time, took, instant, deleted, failed, rollback_logs, failed_logs)
    completed = complete_action(ActionCompletion(meta_client, inflight,
                                                 write_avro_container(HOODIE_ROLLBACK_METADATA, record), record,
                                                 "rollback"))
    crash_point("rollback.after_commit")
    _remove_rolled_back(meta_client, instant.timestamp)
    log.info("rolled back failed write %s (%d files deleted) as %s", instant, sum(map(len, deleted.values())), completed)
    return completed


def _remove_rolled_back(meta_client: HoodieTableMetaClient, instant_time: str) -> None:
    meta_client.active_timeline.delete_instant_files(instant_time)
    delete_marker_dir(meta_client.storage, meta_client.marker_dir(instant_time))
    meta_client.storage.delete(heartbeat_path(meta_client.meta_path, instant_time))  # its dead writer's


def _completed_rollback_of(meta_client: HoodieTableMetaClient, instant_time: str) -> HoodieInstant | None:
    """The completed rollback whose metadata names `instant_time`, newest first (read only when a failed write
    is found, so the cost does not fall on every write)."""
    from storage.avro.container import read_avro_container

    for instant in reversed(list(meta_client.timeline.completed().of_actions([Action.ROLLBACK]))):
        if instant.timestamp < instant_time:
            break
        try:
            record = read_avro_container(meta_client.active_timeline.read_bytes(instant))
        except Exception:  # an unreadable old rollback never blocks a new one
            continue
        if instant_time in (record.get("commitsRollback") or []):
            return instant
    return None


def _append_rollback_block(meta_client: HoodieTableMetaClient, req: RollbackRequest, rollback_time: str,
                           target: str) -> dict[str, int]:
    """A rollback COMMAND_BLOCK (TARGET_INSTANT_TIME = the failed instant) in the next log version of the slice
    the failed instant appended to; readers then skip that instant's blocks. Returns {log path: size}."""
    from storage.file_group.log_block import CommandBlock
    from storage.file_group.log_format import create_new_log_file

    storage = meta_client.storage
    directory = join_path(meta_client.base_path, req.partition_path) if req.partition_path else meta_client.base_path
    versions = [p.version for p in (parse_log_file_name(f.name) for f in storage.list_dir(directory))
                if p is not None and p.file_id == req.file_id and p.instant_time == req.latest_base_instant]
    created = create_new_log_file(storage, directory, req.file_id, req.latest_base_instant,
                                  max(versions, default=0) + 1, "0-0-0", [CommandBlock.rollback(rollback_time, target)])
    storage.fsync(directory)
    return {join_path(directory, created.name): created.size}


def rollback_failed_writes(meta_client: HoodieTableMetaClient,
                           heartbeat: HeartbeatSettings | None = None) -> list[HoodieInstant]:
    """Finish the rollbacks and restores that died half-way, then roll back every pending write whose writer is
    gone. Callers with concurrent writers run it under the table lock (storage.transaction)."""
    done = [resume_rollback(meta_client, r, plan) for r, _, plan in pending_rollbacks(meta_client)]
    if meta_client.timeline.pending().of_actions([Action.RESTORE]):
        done += finish_pending_restores(meta_client)  # a restore that died half-way is finished before any write
    if done:
        meta_client.reload()
    done += [rollback(meta_client, instant) for instant in failed_writes(meta_client, heartbeat)]
    if done:
        meta_client.reload()
    remove_completed_leftovers(meta_client)
    return done


def remove_completed_leftovers(meta_client: HoodieTableMetaClient) -> None:
    """Markers and heartbeats of completed instants, left by a writer that died right after publishing
    (they would otherwise stay forever; nothing reads them once the instant is complete)."""
    from storage.write.heartbeat import HEARTBEAT_FOLDER

    completed = {i.timestamp for i in meta_client.timeline.completed()}
    storage = meta_client.storage
    for entry in storage.list_dir(meta_client.temp_path):
        if entry.name in completed:
            delete_marker_dir(storage, entry.path)
    for entry in storage.list_dir(f"{meta_client.meta_path}/{HEARTBEAT_FOLDER}"):
        if entry.name in completed:
            storage.delete(entry.path)


def abort_write(meta_client: HoodieTableMetaClient, instant_time: str) -> None:
    """Undo a write of this process that failed before its commit: nothing was published, so its files and
    instant files are removed and the table is exactly as it was."""
    storage = meta_client.storage
    discard_metadata_deltacommit(meta_client, instant_time)
    for marker in list_markers(meta_client.storage, meta_client.marker_dir(instant_time)):
        # log files are new per write (never appended to across instants), so an unpublished one goes whole
        storage.delete(join_path(meta_client.base_path, marker.partition_path, marker.file_name))
    delete_marker_dir(storage, meta_client.marker_dir(instant_time))
    meta_client.active_timeline.reload().delete_instant_files(instant_time)


def rollback_completed(meta_client: HoodieTableMetaClient, instant: HoodieInstant) -> HoodieInstant:
    """Roll back a completed commit (`rollback_to_instant`), as Hudi does: markers for the files its metadata
    names, the commit turned back into an inflight one, then the ordinary rollback of a failed write (files
    deleted, rollback blocks appended to logs, a rollback instant). A crash in between leaves a pending write
    with markers, which the next writer rolls back the same way."""
    _write_markers(meta_client, instant)
    return rollback(meta_client, _unpublish(meta_client, instant))


def _write_markers(meta_client: HoodieTableMetaClient, instant: HoodieInstant) -> None:
    """The commit's markers were removed when it completed; its metadata names the same files."""
    md = meta_client.active_timeline.commit_metadata(instant)
    for stat in md.write_stats():
        names = {n.rsplit("/", 1)[-1] for n in [stat.path, *(stat.logFiles or [])] if n}
        for file_name in names:
            if file_name.startswith(".") and ".log." in file_name:
                io_type = IOType.APPEND
            else:
                io_type = IOType.CREATE if (stat.prevCommit or "").lower() == "null" else IOType.MERGE
            create_marker(meta_client.storage, meta_client.marker_dir(instant.timestamp), stat.partitionPath, file_name, io_type)


def _unpublish(meta_client: HoodieTableMetaClient, instant: HoodieInstant) -> HoodieInstant:
    """Hudi's revertToInflight: remove the completed instant file; the pending (inflight) instant remains."""
    timeline = meta_client.active_timeline
    files = timeline.all_files()
    pending = [i for i in files if i.timestamp == instant.timestamp and not i.is_completed]
    if not any(i.is_inflight for i in pending):
        action = next((i.action for i in pending), instant.action)
        meta_client.storage.create(f"{timeline.path}/{HoodieInstant(State.INFLIGHT, action, instant.timestamp).file_name(1)}")
    meta_client.storage.delete(files[instant])
    timeline.reload()
    reverted = timeline.timeline.find(instant.timestamp)
    if reverted is None or reverted.is_completed:
        raise RuntimeError(f"could not unpublish {instant} of {meta_client.base_path}")
    return reverted


def finish_pending_restores(meta: HoodieTableMetaClient) -> list[HoodieInstant]:
    """Complete every restore that died half-way (its plan says what is left to roll back)."""
    done = [execute_restore(meta, i) for i in list(meta.timeline.pending().of_actions([Action.RESTORE]))]
    return done


def execute_restore(meta: HoodieTableMetaClient, instant: HoodieInstant) -> HoodieInstant:
    """Roll back what the restore's plan names, newest first (those rolled back before a crash are skipped), then
    complete it with each rollback's metadata (Hudi's RestoreActionExecutor)."""
    timeline = meta.active_timeline
    started = time.time()
    plan = read_avro_container(timeline.read_bytes(timeline.requested_of(instant)))
    inflight = instant if instant.is_inflight else timeline.transition_to_inflight(instant)
    rolled: dict[str, list] = {}
    for n, target in enumerate(plan.get("instantsToRollback") or []):
        current = meta.reload().timeline.find(target["commitTime"])
        if current is None:
            continue  # rolled back before a crash
        done = rollback_completed(meta, current) if current.is_completed else rollback(meta, current)
        rolled[target["commitTime"]] = [read_avro_container(meta.active_timeline.read_bytes(done))]
        if n == 0:
            crash_point("restore.between_rollbacks")
    record = restore_metadata_record(instant.timestamp, int((time.time() - started) * 1000), plan, rolled)
    completed = complete_action(ActionCompletion(meta, inflight, write_avro_container(HOODIE_RESTORE_METADATA, record),
                                                 record, "restore"))
    meta.reload()
    log.info("restored %s: rolled back %d instants as %s", meta.base_path, len(rolled), completed)
    return completed
