"""show_commits, show_commits_metadata, show_commit_files, show_commit_partitions, show_commit_write_stats
(Hudi's parameter names and output columns)."""
from __future__ import annotations

import math

from sqlext.sql.procedures._timeline import (
    commit_at, completed_commits, files_inserted, files_updated, newest_first, state_transition_time, total)
from sqlext.sql.procedures.registry import optional, procedure, required
from storage.timeline.commit_metadata import NULL_COMMIT

_TABLE_LIMIT = [required("table", "string"), optional("limit", "int", 10)]
_TABLE_LIMIT_INSTANT = _TABLE_LIMIT + [required("instant_time", "string")]


@procedure("show_commits", _TABLE_LIMIT + [optional("show_archived", "boolean", False)],
           "commit_time string, state_transition_time string, action string, total_bytes_written long, "
           "total_files_added long, total_files_updated long, total_partitions_written long, "
           "total_records_written long, total_update_records_written long, total_errors long",
           "completed commits of the table, newest first, with their write totals")
def show_commits(call, args):
    meta = call.meta_client(args)
    rows = []
    for instant, timeline in _commits_with_metadata(meta, args.get("show_archived"))[: max(args["limit"], 0)]:
        md = timeline.commit_metadata(instant)
        rows.append((instant.timestamp, state_transition_time(meta, instant), instant.action,
                     total(md, "totalWriteBytes"), files_inserted(md), files_updated(md),
                     len(md.partitionToWriteStats), total(md, "numWrites"), total(md, "numUpdateWrites"),
                     total(md, "totalWriteErrors")))
    return rows


def _commits_with_metadata(meta, show_archived: bool):
    """(instant, its timeline) newest first, archived commits after the active ones when asked for; each
    timeline answers `commit_metadata(instant)`."""
    active = [(i, meta.active_timeline) for i in completed_commits(meta)]
    if not show_archived:
        return active
    from storage.timeline.archived_timeline import HoodieArchivedTimeline

    archived = HoodieArchivedTimeline(meta)
    return active + [(i, archived) for i in newest_first(archived.completed().write_timeline())]


@procedure("show_commits_metadata", _TABLE_LIMIT,
           "commit_time string, state_transition_time string, action string, partition string, file_id string, "
           "previous_commit string, num_writes long, num_inserts long, num_deletes long, num_update_writes long, "
           "total_errors long, total_log_blocks long, total_corrupt_log_blocks long, total_rollback_blocks long, "
           "total_log_records long, total_updated_records_compacted long, total_bytes_written long",
           "completed commits, newest first, one row per file written")
def show_commits_metadata(call, args):
    meta = call.meta_client(args)
    rows, limit = [], max(args["limit"], 0)
    for instant in completed_commits(meta):
        if len(rows) >= limit:
            break
        md = meta.active_timeline.commit_metadata(instant)
        done = state_transition_time(meta, instant)
        for partition, stats in md.partitionToWriteStats.items():
            for s in stats:
                rows.append((instant.timestamp, done, instant.action, partition, s.fileId, s.prevCommit, s.numWrites,
                             s.numInserts, s.numDeletes, s.numUpdateWrites, s.totalWriteErrors, s.totalLogBlocks,
                             s.totalCorruptLogBlock, s.totalRollbackBlocks, s.totalLogRecords,
                             s.totalUpdatedRecordsCompacted, s.totalWriteBytes))
    return rows[:limit]


def _commit(call, args):
    meta = call.meta_client(args)
    instant = commit_at(meta, args["instant_time"])
    if instant is None:
        raise call.error(f"commit {args['instant_time']} not found in the completed commits of the table "
                         f"(latest: {', '.join(i.timestamp for i in completed_commits(meta)[:5]) or 'none'})")
    return instant, meta.active_timeline.commit_metadata(instant)


@procedure("show_commit_files", _TABLE_LIMIT_INSTANT,
           "action string, partition_path string, file_id string, previous_commit string, "
           "total_records_updated long, total_records_written long, total_bytes_written long, total_errors long, "
           "file_size long",
           "the files one commit wrote")
def show_commit_files(call, args):
    instant, md = _commit(call, args)
    rows = [(instant.action, partition, s.fileId, s.prevCommit, s.numUpdateWrites, s.numWrites, s.totalWriteBytes,
             s.totalWriteErrors, s.fileSizeInBytes)
            for partition, stats in md.partitionToWriteStats.items() for s in stats]
    return rows[: max(args["limit"], 0)]


@procedure("show_commit_partitions", _TABLE_LIMIT_INSTANT,
           "action string, partition_path string, total_files_added long, total_files_updated long, "
           "total_records_inserted long, total_records_updated long, total_bytes_written long, total_errors long",
           "per partition totals of one commit")
def show_commit_partitions(call, args):
    instant, md = _commit(call, args)
    rows = []
    for partition, stats in md.partitionToWriteStats.items():
        added = [s for s in stats if (s.prevCommit or "").lower() == NULL_COMMIT]
        updated = [s for s in stats if (s.prevCommit or "").lower() != NULL_COMMIT]
        rows.append((instant.action, partition, len(added), len(updated), sum(s.numInserts for s in stats),
                     sum(s.numUpdateWrites for s in updated), sum(s.totalWriteBytes for s in stats),
                     sum(s.totalWriteErrors for s in stats)))
    return rows[: max(args["limit"], 0)]


@procedure("show_commit_write_stats", _TABLE_LIMIT_INSTANT,
           "action string, total_bytes_written long, total_records_written long, avg_record_size long",
           "bytes, records and average record size of one commit")
def show_commit_write_stats(call, args):
    instant, md = _commit(call, args)
    written, records = total(md, "totalWriteBytes"), total(md, "numWrites")
    average = math.ceil(written / records) if records else None
    return [(instant.action, written, records, average)][: max(args["limit"], 0)]
