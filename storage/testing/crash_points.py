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
    "write.before_commit": "a write's data files exist, its instant is inflight, the completed instant is not",
    "clean.after_plan": "a clean's plan is saved as <t>.clean.requested, nothing executed",
    "clean.after_inflight": "a clean is inflight, no file deleted yet",
    "clean.after_deletes": "a clean deleted its files, <t>.clean is not written",
    "archive.after_write": "archived instants are written to the archive file, none deleted from the active timeline",
    "archive.between_deletes": "archived instants' requested / inflight files are deleted, their completed ones not",
    "archive.merge_after_plan": "a merge of small archive files has its plan saved, no merged file yet",
    "archive.merge_after_write": "the merged archive file is written, the small files it replaces not deleted",
    "savepoint.after_inflight": "<t>.savepoint.inflight exists, the completed savepoint does not",
    "restore.after_plan": "a restore's plan is saved as <t>.restore.requested, nothing rolled back",
    "restore.between_rollbacks": "a restore rolled back its newest instant, the older ones not yet",
}


def crash_point(name: str) -> None:
    """Die here if the test environment names this point."""
    wanted = os.environ.get(ENV_VAR)
    if not wanted:
        return
    if name not in CRASH_POINTS:
        raise KeyError(f"undeclared crash point {name!r}: declare it in storage.testing.crash_points.CRASH_POINTS")
    if name in wanted.split(","):
        os._exit(CRASH_EXIT_CODE)


def crash_env(*names: str) -> dict[str, str]:
    """The environment entries that make a child process die at `names`."""
    unknown = [n for n in names if n not in CRASH_POINTS]
    if unknown:
        raise KeyError(f"undeclared crash points {unknown}; known: {sorted(CRASH_POINTS)}")
    return {ENV_VAR: ",".join(names)}
