"""Clean, archival, savepoint and restore procedures (Hudi's RunCleanProcedure, ShowCleansProcedure,
ShowCleansPlanProcedure, ArchiveCommitsProcedure, ShowArchivedCommitsProcedure, CreateSavepointProcedure,
ShowSavepointsProcedure, DeleteSavepointProcedure, RollbackToSavepointProcedure), over
storage.table_service (imported when called).

`run_clean` answers Hudi's columns plus `reason`: one row per clean the call completed, and when no new clean
deleted a file the reason is on every row, or on a row of its own (no clean time, 0 files deleted) when the call
completed no clean at all. Hudi's procedure answers no rows then, which tells a SQL user nothing: whether the
table has no more commits than retained, the trigger (`trigger_max_commits`) is not reached, no file version is
older than the retained ones, or a pending clean was finished instead. The reason is logged at INFO as well."""
from __future__ import annotations

import logging

from sqlext.sql.procedures._timeline import files_inserted, files_updated, newest_first, state_transition_time, total
from sqlext.sql.procedures.registry import optional, procedure, required
from storage.config import ArchivalConfigKeys as AK, CleanConfigKeys as CLK, HoodieConfig

log = logging.getLogger(__name__)

_TABLE = [optional("table", "string"), optional("path", "string")]


def _service_config(call, meta, given: dict, text: str | None) -> HoodieConfig:
    """What a table service procedure runs with: the table's properties, then the procedure's arguments (`given`,
    None: not given), then its `options` argument ('k1=v1,k2=v2'), each winning over the ones before."""
    from sqlext.sql.procedures.compaction import procedure_options

    return meta.table_config.with_options(HoodieConfig.of(given, procedure_options(call, text)))


@procedure("run_clean",
           _TABLE + [optional("schedule_in_line", "boolean", True), optional("clean_policy", "string"),
                     optional("retain_commits", "int"), optional("hours_retained", "int"),
                     optional("file_versions_retained", "int"), optional("trigger_strategy", "string"),
                     optional("trigger_max_commits", "int"), optional("options", "string")],
           "start_clean_time string, time_taken_in_millis long, total_files_deleted int, "
           "earliest_commit_to_retain string, last_completed_commit_timestamp string, version int, reason string",
           "clean old file versions now (finishes a pending clean first); a row per clean completed, and `reason` "
           "says why no new clean deleted a file (NULL when one did)")
def run_clean(call, args):
    from storage.table_service.clean import clean_table, show_cleans

    ref = call.table_ref(args.get("table"), args.get("path"))
    meta = call.meta_client(args)
    given = {CLK.POLICY.key: args.get("clean_policy"),
             CLK.COMMITS_RETAINED.key: args.get("retain_commits"),
             CLK.HOURS_RETAINED.key: args.get("hours_retained"),
             CLK.FILE_VERSIONS_RETAINED.key: args.get("file_versions_retained"),
             CLK.TRIGGER_STRATEGY.key: args.get("trigger_strategy"),
             CLK.MAX_COMMITS.key: args.get("trigger_max_commits")}
    config = _service_config(call, meta, given, args.get("options"))
    outcome = call.run(clean_table, call.spark, ref.path, config, force=args.get("trigger_max_commits") is None)
    call.resolver.refresh(ref)
    made = {outcome.instant, *outcome.finished}
    rows = [(c["startCleanTime"], c["timeTakenInMillis"], c["totalFilesDeleted"], c["earliestCommitToRetain"],
             c["lastCompletedCommitTimestamp"], c["version"], outcome.reason)
            for c in show_cleans(ref.path) if c["instant"].timestamp in made]
    return rows or [(None, None, 0, None, None, None, outcome.reason)]


@procedure("show_cleans", _TABLE + [optional("limit", "int", 10)],
           "clean_time string, state_transition_time string, action string, start_clean_time string, "
           "time_taken_in_millis long, total_files_deleted int, earliest_commit_to_retain string, "
           "last_completed_commit_timestamp string, version int",
           "completed cleans, newest first")
def show_cleans(call, args):
    from storage.table_service.clean import show_cleans as cleans

    meta = call.meta_client(args)
    rows = []
    for c in sorted(cleans(meta.base_path), key=lambda c: c["instant"].timestamp, reverse=True):
        i = c["instant"]
        rows.append((i.timestamp, state_transition_time(meta, i), i.action, c["startCleanTime"],
                     c["timeTakenInMillis"], c["totalFilesDeleted"], c["earliestCommitToRetain"],
                     c["lastCompletedCommitTimestamp"], c["version"]))
    return rows[: max(args["limit"], 0)]


@procedure("show_clean_plans", _TABLE + [optional("limit", "int", 10)],
           "plan_time string, state string, action string, earliest_instant_to_retain string, "
           "last_completed_commit_timestamp string, policy string, version int, total_files_to_delete int",
           "clean plans (pending and completed cleans), newest first")
def show_clean_plans(call, args):
    from storage.table_service.clean import show_clean_plans as plans

    meta = call.meta_client(args)
    rows = []
    for p in sorted(plans(meta.base_path), key=lambda p: p["instant"].timestamp, reverse=True):
        i, ectr = p["instant"], p.get("earliestInstantToRetain") or {}
        files = sum(len(v or []) for v in (p.get("filePathsToBeDeletedPerPartition") or {}).values())
        rows.append((i.timestamp, i.state.value, i.action, ectr.get("timestamp"), p.get("lastCompletedCommitTimestamp"),
                     p.get("policy"), p.get("version"), files))
    return rows[: max(args["limit"], 0)]


@procedure("archive_commits",
           _TABLE + [optional("min_commits", "int"), optional("max_commits", "int"), optional("retain_commits", "int"),
                     optional("options", "string")],
           "result int", "archive old instants now (0 = archived, as Hudi's procedure answers)")
def archive_commits(call, args):
    from storage.table_service.archival import archive

    meta = call.meta_client(args)
    given = {AK.MIN_COMMITS_TO_KEEP.key: args.get("min_commits"), AK.MAX_COMMITS_TO_KEEP.key: args.get("max_commits"),
             CLK.COMMITS_RETAINED.key: args.get("retain_commits")}
    call.run(archive, meta, _service_config(call, meta, given, args.get("options")))
    return [(0,)]


@procedure("show_archived_commits",
           _TABLE + [optional("limit", "int", 10), optional("start_ts", "string", ""), optional("end_ts", "string", "")],
           "commit_time string, action string, total_bytes_written long, total_files_added long, "
           "total_files_updated long, total_partitions_written long, total_records_written long, "
           "total_update_records_written long, total_errors long",
           "completed commits of the archived timeline between start_ts and end_ts, newest first")
def show_archived_commits(call, args):
    from storage.timeline.archived_timeline import HoodieArchivedTimeline

    meta = call.meta_client(args)
    archived = HoodieArchivedTimeline(meta, args["start_ts"] or None, args["end_ts"] or None)
    bounded = bool(args["start_ts"] and args["end_ts"])
    commits = newest_first(archived.completed().write_timeline())
    rows = []
    for instant in commits if bounded else commits[: max(args["limit"], 0)]:
        md = archived.commit_metadata(instant)
        rows.append((instant.timestamp, instant.action, total(md, "totalWriteBytes"), files_inserted(md),
                     files_updated(md), len(md.partitionToWriteStats), total(md, "numWrites"),
                     total(md, "numUpdateWrites"), total(md, "totalWriteErrors")))
    return rows


@procedure("create_savepoint",
           _TABLE + [required("commit_time", "string"), optional("user", "string", ""),
                     optional("comments", "string", "")],
           "create_savepoint_result boolean", "savepoint a completed commit (clean and archival keep its files)")
def create_savepoint(call, args):
    from storage.table_service.savepoint import create_savepoint as create

    meta = call.meta_client(args)
    call.run(create, meta, str(args["commit_time"]).strip(), args["user"] or None, args["comments"],
         config=call.writer_config(meta))
    return [(True,)]


@procedure("show_savepoints", _TABLE, "savepoint_time string", "savepoints of the table, newest first")
def show_savepoints(call, args):
    from storage.table_service.savepoint import savepoint_instants

    return [(i.timestamp,) for i in newest_first(savepoint_instants(call.meta_client(args)))]


@procedure("delete_savepoint", _TABLE + [required("instant_time", "string")],
           "delete_savepoint_result boolean", "remove a savepoint")
def delete_savepoint(call, args):
    from storage.table_service.savepoint import delete_savepoint as delete

    call.run(delete, call.meta_client(args), str(args["instant_time"]).strip())
    return [(True,)]


@procedure("rollback_to_savepoint", _TABLE + [required("instant_time", "string")],
           "rollback_savepoint_result boolean",
           "restore the table to a savepoint: every later instant rolled back (a <t>.restore instant)")
def rollback_to_savepoint(call, args):
    from storage.table_service.restore import restore_to_savepoint

    ref = call.table_ref(args.get("table"), args.get("path"))
    meta = call.meta_client(args)
    call.run(restore_to_savepoint, meta, str(args["instant_time"]).strip(), config=call.writer_config(meta))
    call.resolver.refresh(ref)
    return [(True,)]
