"""How the crash matrix drives each phase of CRASH_POINTS (storage/testing/crash_points.py).

A scenario prepares a small table in the test process, names the operation a child process runs (and dies in,
at the crash point), what the table must read after the crash, and how the next run recovers. The matrix
(test_crash_matrix.py) runs every declared point through the scenarios of its phase; a phase with no scenario
fails the matrix, so a new phase's points are never silently skipped: add its scenarios to SCENARIOS here.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

SCHEMA = "id int, name string, ts long, dt string"
COLS = ["id", "name", "ts", "dt"]


def opts(name: str, mor: bool) -> dict[str, str]:
    return {"hoodie.table.name": name, "hoodie.datasource.write.recordkey.field": "id",
            "hoodie.datasource.write.precombine.field": "ts", "hoodie.datasource.write.partitionpath.field": "dt",
            "hoodie.datasource.write.table.type": "MERGE_ON_READ" if mor else "COPY_ON_WRITE"}


SEED = [(i, f"v{i}", 1, "p1" if i % 2 else "p2") for i in range(6)]
UPDATE = [(1, "u1", 2, "p1"), (2, "u2", 2, "p2"), (10, "new", 2, "p1")]
DELETE = [(3, "x", 3, "p1"), (4, "x", 3, "p2")]
OVERWRITE = [(20, "ow", 4, "p1")]
RECOVERY = [(5, "r5", 9, "p1"), (30, "r30", 9, "p2")]


def apply(state: dict, batch: list[tuple], operation: str) -> dict:
    out = dict(state)
    if operation == "delete":
        for r in batch:
            out.pop(r[0], None)
    elif operation == "insert_overwrite":
        parts = {r[3] for r in batch}
        out = {k: v for k, v in out.items() if v[3] not in parts}
        out.update({r[0]: r for r in batch})
    else:
        out.update({r[0]: r for r in batch})
    return out


@dataclass(frozen=True)
class Scenario:
    """`child`: the operation of the child process (Python source; `spark`, `path`, `opts` are defined);
    `committed`: the table state if the crash came after the operation's commit point; `recover`: what the
    test process runs next ('write' = an upsert of RECOVERY, 'compaction' = run pending compactions, then the write)."""

    name: str
    mor: bool
    seed_ops: tuple[tuple[list, str], ...]
    child: str
    committed: Callable[[dict], dict] = field(default=lambda s: s)
    recover: str = "write"
    failed_write_first: bool = False  # leave a crashed write behind before the child runs (rollback phase)


def _write_child(batch, operation):
    return (f"spark.createDataFrame({batch!r}, {SCHEMA!r}).write.format('hudi').options(**opts)"
            f".option('hoodie.datasource.write.operation', {operation!r}).mode('append').save(path)")


_COMPACT_CHILD = ("from storage.table_service.compaction import schedule_compaction, run_compaction\n"
                  "t = schedule_compaction(path)\nrun_compaction(spark, path, t)")

_WRITE_VARIANTS = {
    "upsert_mor": Scenario("upsert_mor", True, ((SEED, "upsert"),), _write_child(UPDATE, "upsert"),
                           lambda s: apply(s, UPDATE, "upsert")),
    "delete_cow": Scenario("delete_cow", False, ((SEED, "upsert"),), _write_child(DELETE, "delete"),
                           lambda s: apply(s, DELETE, "delete")),
    "insert_overwrite_cow": Scenario("insert_overwrite_cow", False, ((SEED, "upsert"),),
                                     _write_child(OVERWRITE, "insert_overwrite"),
                                     lambda s: apply(s, OVERWRITE, "insert_overwrite")),
}

# phase -> point -> scenarios (points not listed use the phase's "*" entry)
SCENARIOS: dict[str, dict[str, list[Scenario]]] = {
    "write": {
        "*": [_WRITE_VARIANTS["upsert_mor"]],
        "write.before_commit": list(_WRITE_VARIANTS.values()),
        "write.after_commit": list(_WRITE_VARIANTS.values()),
    },
    "compaction": {
        "*": [Scenario("compaction_mor", True, ((SEED, "upsert"), (UPDATE, "upsert")), _COMPACT_CHILD,
                       recover="compaction")],
    },
    "rollback": {
        # a writer died before its commit; the child's write starts by rolling it back, and dies in the rollback
        "*": [Scenario("rollback_mor", True, ((SEED, "upsert"),), _write_child(DELETE, "delete"),
                       failed_write_first=True)],
    },
}


def scenarios_for(point: str) -> list[Scenario]:
    phase = point.split(".", 1)[0]
    if phase not in SCENARIOS:
        raise LookupError(f"crash point {point!r}: phase {phase!r} has no crash scenario; add one to SCENARIOS in "
                          f"{__file__}")
    by_point = SCENARIOS[phase]
    return by_point.get(point) or by_point["*"]
