"""Named crash points: places where a test can make a writer or a table service die like a killed process.

Production code calls `crash_point("write.before_commit")` at the moments that matter for recovery (files
written but not committed, a plan saved but not executed, ...). It does nothing unless the environment variable
`HOODIE_TEST_CRASH_POINT` names that point (a comma-separated list names several); then the process exits at
once with `CRASH_EXIT_CODE`, skipping every `finally` and atexit handler, as `kill -9` would. Tests run the
operation in a child process with the variable set, then check the table is readable and recoverable.

Every point is declared in `CRASH_POINTS` so a test matrix can enumerate them and a typo fails loudly.
"""
from __future__ import annotations

import os

ENV_VAR = "HOODIE_TEST_CRASH_POINT"
CRASH_EXIT_CODE = 17

CRASH_POINTS: dict[str, str] = {
    # a write (insert, upsert, delete, insert overwrite): storage/write/write_operation.py
    "write.after_requested": "a write's requested instant exists (and its heartbeat), nothing else",
    "write.after_inflight": "a write's instant is inflight, no data file is written yet",
    "write.before_commit": "a write's data files exist, its instant is inflight, the completed instant is not",
    "write.after_commit": "a write's completed instant exists; its markers and heartbeat are not yet removed",
    # compaction: storage/table_service/compaction.py (schedule) and compactor.py (execute)
    "compaction.after_schedule": "a compaction plan is requested, not executed",
    "compaction.after_inflight": "a compaction is inflight, no base file is written yet",
    "compaction.before_commit": "a compaction's new base files exist, the completed commit does not",
    "compaction.after_commit": "a compaction's commit exists; its markers and heartbeat are not yet removed",
    # clustering: storage/table_service/clustering/schedule.py and execute.py
    "clustering.after_schedule": "a clustering plan is requested (<t>.replacecommit.requested), not executed",
    "clustering.after_inflight": "a clustering is inflight, no new base file is written yet",
    "clustering.before_commit": "a clustering's new file groups exist, the completed replacecommit does not",
    "clustering.after_commit": "a clustering's replacecommit exists; its markers and heartbeat are not yet removed",
    # rollback of a failed write: storage/write/rollback.py
    "rollback.after_requested": "a rollback plan is requested; no file of the failed write is deleted yet",
    "rollback.after_inflight": "a rollback is inflight; no file of the failed write is deleted yet",
    "rollback.after_files_deleted": "a rollback deleted the failed write's files, its completed instant does not exist",
    "rollback.after_commit": "a rollback completed; the failed write's instant files and markers remain",
    "clean.after_plan": "a clean's plan is saved as <t>.clean.requested, nothing executed",
    "clean.after_inflight": "a clean is inflight, no file deleted yet",
    "clean.after_deletes": "a clean deleted its files, <t>.clean is not written",
    "archive.after_write": "archived instants are written to the archive file, none deleted from the active timeline",
    "archive.between_deletes": "archived instants' requested / inflight files are deleted, their completed ones not",
    "archive.merge_after_plan": "a merge of small archive files has its plan saved, no merged file yet",
    "archive.merge_after_write": "the merged archive file is written, the small files it replaces not deleted",
    # the metadata table's deltacommit of a data action, before the data instant completes:
    # storage/metadata/metadata_writer.py
    "metadata.before_commit": "an MDT deltacommit's log files exist, its instant is inflight, the data instant too",
    "metadata.after_commit": "the MDT deltacommit is complete, the data instant it belongs to is not",
    "savepoint.after_inflight": "<t>.savepoint.inflight exists, the completed savepoint does not",
    "restore.after_plan": "a restore's plan is saved as <t>.restore.requested, nothing rolled back",
    "restore.between_rollbacks": "a restore rolled back its newest instant, the older ones not yet",
    # table version upgrade (6 -> 8/9) and downgrade (8/9 -> 6): storage/table_service/upgrade_downgrade.py; the
    # table's hoodie.properties is the commit point (before it the old layout is whole, after it the new one)
    "upgrade.after_active_timeline": "the active instants are copied into .hoodie/timeline/, hoodie.properties still "
                                     "says version 6",
    "upgrade.after_archived_timeline": "the v6 archive is copied into the LSM history, hoodie.properties still says 6",
    "upgrade.after_properties": "hoodie.properties says the new version, the old instant files in .hoodie/ remain",
    "downgrade.after_log_renames": "log files are renamed by their slice's base instant (v6 naming), the table is "
                                   "still at version 8/9",
    "downgrade.after_active_timeline": "the active instants are copied into .hoodie/ in layout 1, hoodie.properties "
                                       "still says 8/9",
    "downgrade.after_archived_timeline": "the LSM history is copied into .hoodie/archived/, hoodie.properties still "
                                         "says 8/9",
    "downgrade.after_properties": "hoodie.properties says version 6, .hoodie/timeline/ remains",
}


def phase_of(name: str) -> str:
    """The operation a point belongs to: the part of its name before the first dot."""
    return name.split(".", 1)[0]


def points_by_phase() -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    for name in CRASH_POINTS:
        out.setdefault(phase_of(name), []).append(name)
    return out


def crash_point(name: str) -> None:
    """Die here if the test environment names this point."""
    wanted = os.environ.get(ENV_VAR)
    if not wanted:
        return
    if name not in CRASH_POINTS:
        raise KeyError(f"undeclared crash point {name!r}: declare it in storage.testing.crash_points.CRASH_POINTS")
    if name in wanted.split(","):
        os._exit(CRASH_EXIT_CODE)


TASK_FAILURE_ENV_VAR = "HOODIE_TEST_FAIL_TASK"

# points where a Spark task fails once (its first attempt, of its first partition) after doing its work, so that
# Spark retries it: a retried task leaves a second file for the same file group and instant
TASK_FAILURE_POINTS: dict[str, str] = {
    "write.task_after_file": "a write task's data or log file is complete, the task fails before returning its stat",
}


def fail_task_once(name: str) -> None:
    """Fail the first attempt of the first task here if the test environment names this point."""
    wanted = os.environ.get(TASK_FAILURE_ENV_VAR)
    if not wanted or name not in wanted.split(","):
        return
    from pyspark import TaskContext

    ctx = TaskContext.get()
    if ctx is not None and ctx.attemptNumber() == 0 and ctx.partitionId() == 0:
        raise RuntimeError(f"injected failure of task attempt 0 at {name}")


def crash_env(*names: str) -> dict[str, str]:
    """The environment entries that make a child process die at `names`."""
    unknown = [n for n in names if n not in CRASH_POINTS]
    if unknown:
        raise KeyError(f"undeclared crash points {unknown}; known: {sorted(CRASH_POINTS)}")
    return {ENV_VAR: ",".join(names)}
