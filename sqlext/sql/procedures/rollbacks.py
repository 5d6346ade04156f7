"""show_rollbacks and rollback_to_instant."""
from __future__ import annotations

import logging

from sqlext.sql.procedures._timeline import COMMIT_ACTIONS, newest_first, state_transition_time
from sqlext.sql.procedures.registry import optional, procedure, required
from storage.timeline.instant import Action

log = logging.getLogger(__name__)

_TIME_RANGE = [optional("limit", "int", 10), optional("show_archived", "boolean", False),
               optional("filter", "string", ""), optional("start_time", "string", ""),
               optional("end_time", "string", "")]


@procedure("show_rollbacks", [optional("table", "string"), optional("path", "string")] + _TIME_RANGE,
           "rollback_time string, state_transition_time string, state string, action string, timeline_type string, "
           "start_rollback_time string, partition_path string, rollback_instant string, deleted_file string, "
           "succeeded boolean, total_files_deleted int, time_taken_in_millis long, total_partitions int, version int",
           "rollbacks on the timeline, one row per deleted file (pending ones from their plan)")
def show_rollbacks(call, args):
    from storage.avro.container import read_avro_container

    meta = call.meta_client(args)
    archived = _archived(meta, args["show_archived"])
    instants = [i for i in meta.timeline.of_actions([Action.ROLLBACK]) if _in_range(i.timestamp, args)]
    instants += [i for i in archived.completed().of_actions([Action.ROLLBACK]) if _in_range(i.timestamp, args)]
    bounded = bool(args["start_time"] and args["end_time"])
    instants = newest_first(instants) if bounded else newest_first(instants)[: max(args["limit"], 0)]
    rows = []
    for instant in instants:
        if archived.metadata(instant) is not None and not meta.timeline.contains_timestamp(instant.timestamp):
            head = (instant.timestamp, None, instant.state.value, instant.action, "ARCHIVED")
            rows.extend(_completed_rows(head, archived.metadata(instant)))
            continue
        head = (instant.timestamp, state_transition_time(meta, instant), instant.state.value, instant.action, "ACTIVE")
        try:
            if instant.is_completed:
                md = read_avro_container(meta.active_timeline.read_bytes(instant))
                rows.extend(_completed_rows(head, md))
            else:
                plan = read_avro_container(meta.active_timeline.read_bytes(meta.active_timeline.requested_of(instant)))
                rows.extend(_pending_rows(head, plan))
        except Exception as exc:  # a damaged rollback file must not hide the others
            log.warning("cannot read rollback %s: %s", instant, exc)
            rows.append(head + (None,) * 9)
    if not bounded:
        rows = rows[: max(args["limit"], 0)]
    return call.filtered(call.to_frame(rows), args["filter"])


def _archived(meta, show_archived: bool):
    """The archived timeline when asked for, else an empty one."""
    from storage.timeline.archived_timeline import HoodieArchivedTimeline

    return HoodieArchivedTimeline(meta, load=bool(show_archived))


def _in_range(ts: str, args) -> bool:
    return (not args["start_time"] or ts >= args["start_time"]) and (not args["end_time"] or ts <= args["end_time"])


def _completed_rows(head: tuple, md: dict) -> list[tuple]:
    partitions = md.get("partitionMetadata") or {}
    rolled = "[" + ", ".join(md.get("commitsRollback") or []) + "]"
    tail = (md.get("totalFilesDeleted"), md.get("timeTakenInMillis"), len(partitions), md.get("version"))
    rows = []
    for partition, pm in partitions.items():
        for path in pm.get("successDeleteFiles") or []:
            rows.append(head + (md.get("startRollbackTime"), partition, rolled, path, True) + tail)
        for path in pm.get("failedDeleteFiles") or []:
            rows.append(head + (md.get("startRollbackTime"), partition, rolled, path, False) + tail)
        if not (pm.get("successDeleteFiles") or pm.get("failedDeleteFiles")):
            # undone by rollback blocks appended to log files (merge-on-read): nothing deleted, still shown
            rows.append(head + (md.get("startRollbackTime"), partition, rolled, None, True) + tail)
    if not partitions:
        rows.append(head + (md.get("startRollbackTime"), None, rolled, None, None) + tail)
    return rows


def _pending_rows(head: tuple, plan: dict) -> list[tuple]:
    requests = plan.get("RollbackRequests") or []
    target = plan.get("instantToRollback") or {}
    rolled = f"[{target.get('commitTime', '')}]"
    partitions = sorted({r.get("partitionPath") for r in requests})
    files = sum(len(r.get("filesToBeDeleted") or []) for r in requests)
    return [head + (None, p, rolled, None, None, files, None, len(partitions), plan.get("version"))
            for p in partitions] or [head + (None, None, rolled, None, None, 0, None, 0, plan.get("version"))]


@procedure("rollback_to_instant", [required("table", "string"), required("instant_time", "string")],
           "rollback_result boolean",
           "roll back a commit; an older completed commit is rolled back with every later one (a restore)")
def rollback_to_instant(call, args):
    """As Hudi's rollback of a completed instant: write markers for the files the commit's metadata names,
    unpublish the commit (its completed file goes, the inflight stays), then the storage rollback deletes
    those files (or appends rollback blocks to log files) and completes a rollback instant. A crash in
    between leaves a pending write with markers, which the next writer rolls back the same way."""
    from storage.table.meta_client import HoodieTableMetaClient
    from storage.write.rollback import rollback, rollback_completed

    ref = call.table_ref(args["table"])
    meta = HoodieTableMetaClient.load(ref.path)
    if meta.table_config.timeline_layout_version >= 2:
        raise call.error(f"{ref.qualified_name} has table version {meta.table_config.version}: rollback writes "
                         "table version 6 only")
    ts = args["instant_time"].strip()
    commits = list(meta.timeline.of_actions(COMMIT_ACTIONS))
    target = next((i for i in commits if i.timestamp == ts), None)
    if target is None:
        raise call.error(f"commit {ts} not found in the commits of {ref.qualified_name} (commits: "
                         f"{', '.join(i.timestamp for i in newest_first(commits)[:5]) or 'none'})")
    later = [i.timestamp for i in commits if i.timestamp > ts]
    if later:
        done = _restore_before(call, meta, target)
    else:
        done = rollback_completed(meta, target) if target.is_completed else rollback(meta, target)
    meta.reload()
    log.info("rolled back %s of %s as %s", target, ref.qualified_name, done)
    call.resolver.refresh(ref)
    return [(True,)]


def _restore_before(call, meta, target):
    """Roll back `target` and every later instant: a restore to the completed commit before it."""
    from storage.table_service.restore import restore_to_instant

    earlier = [i.timestamp for i in meta.timeline.completed().write_timeline() if i.timestamp < target.timestamp]
    if not earlier:
        raise call.error(f"commit {target.timestamp} is the first commit of the active timeline: nothing to restore to")
    return call.run(restore_to_instant, meta, earlier[-1])
