"""run_compaction and show_compaction: the MOR compaction table service (storage.table_service.compaction,
imported when called)."""
from __future__ import annotations

import logging

from sqlext.sql.procedures._timeline import newest_first, state_transition_time
from sqlext.sql.procedures.registry import optional, procedure, required
from storage.config import HoodieConfig
from storage.timeline.instant import Action

log = logging.getLogger(__name__)

# op -> (schedule a new plan, execute plans), as Hudi's RunCompactionProcedure: `run` executes pending plans only
_OPS = {"schedule": (True, False), "run": (False, True), "execute": (False, True), "scheduleandexecute": (True, True)}


def _service(call):
    from storage.table_service import compaction

    return compaction


def procedure_options(call, text: str | None) -> dict[str, str]:
    """Hudi's `options` argument: 'k1=v1,k2=v2'."""
    out = {}
    for item in (text or "").split(","):
        if not item.strip():
            continue
        key, sep, value = item.partition("=")
        if not sep:
            raise call.error(f"options: '{item.strip()}' is not key=value")
        out[key.strip()] = value.strip()
    return out


@procedure("run_compaction",
           [required("op", "string"), optional("table", "string"), optional("path", "string"),
            optional("timestamp", "long"), optional("options", "string"), optional("instants", "string"),
            optional("limit", "int")],
           "timestamp string, operation_size int, state string",
           "schedule and/or execute compaction of a merge-on-read table (op: schedule, run, scheduleAndExecute)")
def run_compaction(call, args):
    service = _service(call)
    op = args["op"].strip().lower()
    if op not in _OPS:
        raise call.error(f"op '{args['op']}': expected schedule, execute, run or scheduleandexecute")
    ref = call.table_ref(args.get("table"), args.get("path"))
    from storage.table.meta_client import HoodieTableMetaClient

    meta = HoodieTableMetaClient.load(ref.path)
    if not meta.table_config.is_mor:
        raise call.error(f"{ref.qualified_name} is a copy-on-write table: compaction applies to merge-on-read tables")
    config = meta.table_config.with_options(HoodieConfig.of(procedure_options(call, args.get("options"))))
    instants = [t.strip() for t in (args.get("instants") or "").split(",") if t.strip()]
    schedule, execute = _OPS[op]
    if args.get("timestamp") is not None and not instants:
        instants, schedule, execute = [str(args["timestamp"])], False, True
    pending = sorted(i.timestamp for i in meta.timeline.pending().of_actions([Action.COMPACTION]))
    if instants:
        unknown = [t for t in instants if t not in pending]
        if unknown and not schedule:
            raise call.error(f"no pending compaction at {', '.join(unknown)} (pending: {', '.join(pending) or 'none'})")
        pending = [t for t in pending if t in instants]
    if args.get("limit") is not None:
        pending = pending[: args["limit"]]
    targets = pending
    if schedule:
        scheduled = service.schedule_compaction(meta, config)
        targets = [scheduled] if scheduled else ([] if op == "schedule" else pending)
    if execute:
        for instant in targets:
            service.run_compaction(call.spark, ref.path, instant, config)
        call.resolver.refresh(ref)
    meta = HoodieTableMetaClient.load(ref.path)
    rows = []
    for instant in newest_first(i for i in meta.timeline if i.timestamp in set(targets)):
        plan = service.read_plan(meta, instant.timestamp)
        rows.append((instant.timestamp, len(plan.get("operations") or []), instant.state.value))
    return rows


@procedure("show_compaction",
           [optional("table", "string"), optional("path", "string"), optional("limit", "int", 20),
            optional("show_archived", "boolean", False), optional("filter", "string", ""),
            optional("start_time", "string", ""), optional("end_time", "string", "")],
           "compaction_time string, state_transition_time string, state string, action string, timeline_type string, "
           "operation_size int, partition_path string, total_log_files_per_partition long, "
           "total_updated_records_compacted_per_partition long, total_log_size_compacted_per_partition long, "
           "total_write_bytes_per_partition long",
           "compactions of a merge-on-read table: completed ones per partition, pending ones from their plan")
def show_compaction(call, args):
    service = _service(call)
    meta = call.meta_client(args)
    if not meta.table_config.is_mor:
        raise call.error("cannot show compaction on a non merge-on-read table")
    from storage.timeline.archived_timeline import HoodieArchivedTimeline

    archived = HoodieArchivedTimeline(meta, load=bool(args["show_archived"]))
    compaction_ts = {i.timestamp for i in meta.active_timeline.all_files() if i.action == Action.COMPACTION}
    archived_ts = {e.instant.timestamp for e in archived.entries if e.instant.action == Action.COMPACTION}
    instants = [i for i in [*meta.timeline, *archived.completed()] if i.timestamp in compaction_ts | archived_ts
                and (not args["start_time"] or i.timestamp >= args["start_time"])
                and (not args["end_time"] or i.timestamp <= args["end_time"])]
    bounded = bool(args["start_time"] and args["end_time"])
    instants = newest_first(instants) if bounded else newest_first(instants)[: max(args["limit"], 0)]
    rows = []
    for instant in instants:
        state = instant.state.value
        is_archived = instant.timestamp not in compaction_ts
        head = (instant.timestamp, None if is_archived else state_transition_time(meta, instant), state,
                Action.COMPACTION, "ARCHIVED" if is_archived else "ACTIVE")
        try:
            plan = archived.compaction_plan(instant.timestamp) if is_archived else \
                service.read_plan(meta, instant.timestamp)
            operations = (plan or {}).get("operations") or []
        except Exception as exc:
            log.warning("cannot read the compaction plan of %s: %s", instant.timestamp, exc)
            rows.append(head + (None,) * 6)
            continue
        if instant.is_completed:
            md = (archived if is_archived else meta.active_timeline).commit_metadata(instant)
            for partition, stats in md.partitionToWriteStats.items():
                for s in stats:
                    rows.append(head + (len(operations), partition, s.totalLogFilesCompacted,
                                        s.totalUpdatedRecordsCompacted, s.totalLogSizeCompacted, s.totalWriteBytes))
            if not md.partitionToWriteStats:
                rows.append(head + (len(operations), None, 0, 0, 0, 0))
        else:
            for partition in sorted({o.get("partitionPath") for o in operations}):
                ops = [o for o in operations if o.get("partitionPath") == partition]
                rows.append(head + (len(ops), partition, sum(len(o.get("deltaFilePaths") or []) for o in ops),
                                    0, 0, 0))
    if not bounded:
        rows = rows[: max(args["limit"], 0)]
    return call.filtered(call.to_frame(rows), args["filter"])
