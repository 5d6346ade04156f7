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


def opts(name: str, mor: bool, extra: tuple[tuple[str, str], ...] = ()) -> dict[str, str]:
    return {"hoodie.table.name": name, "hoodie.datasource.write.recordkey.field": "id",
            "hoodie.datasource.write.precombine.field": "ts", "hoodie.datasource.write.partitionpath.field": "dt",
            "hoodie.datasource.write.table.type": "MERGE_ON_READ" if mor else "COPY_ON_WRITE", **dict(extra)}


# a version 9 table whose writers keep its metadata table (files, column_stats, partition_stats, record_index)
WITH_METADATA_TABLE = (("hoodie.write.table.version", "9"), ("hoodie.metadata.enable", "true"),
                       ("hoodie.metadata.index.column.stats.enable", "true"),
                       ("hoodie.metadata.index.partition.stats.enable", "true"),
                       ("hoodie.metadata.record.index.enable", "true"),
                       ("hoodie.metadata.record.index.min.filegroup.count", "2"),
                       ("hoodie.metadata.record.index.max.filegroup.count", "2"))


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
    # table services: the state read after a crash at a point (default: `committed` after the commit point),
    # the service run again in the test process (Python source, like `child`) and the state it leaves
    crashed: Callable[[str, dict], dict] | None = None
    rerun: str = ""
    recovered: Callable[[dict], dict] = field(default=lambda s: s)
    needs_spark: bool = True  # the services run without Spark in the child (deletes in a local pool): faster
    options: tuple[tuple[str, str], ...] = ()  # writer options beside opts()'s (WITH_METADATA_TABLE)

    @property
    def keeps_metadata_table(self) -> bool:
        return dict(self.options).get("hoodie.metadata.enable") == "true"

    def state_after_crash(self, point: str, state: dict) -> dict:
        if self.crashed is not None:
            return self.crashed(point, state)
        return self.committed(state) if "after_commit" in point else state


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
    # small writes run in process by default (storage.write.local): the same upsert with its tasks on Spark
    "upsert_mor_spark": Scenario("upsert_mor_spark", True, ((SEED, "upsert"),), _write_child(UPDATE, "upsert"),
                                 lambda s: apply(s, UPDATE, "upsert"), options=(("hoodie.sqlext.engine", "SPARK"),)),
}

# table services: clean (retain 1 commit) and archival (keep 2..3) over four commits, a savepoint of the first
# commit, a restore to it; with automatic services off so that only the child runs them
_OFF = "{**opts, 'hoodie.clean.automatic': 'false', 'hoodie.archive.automatic': 'false'}"
_KEEP = ("{**opts, 'hoodie.clean.automatic': 'false', 'hoodie.archive.automatic': 'false', "
         "'hoodie.keep.min.commits': '2', 'hoodie.keep.max.commits': '3', 'hoodie.cleaner.commits.retained': '1', "
         "'hoodie.commits.archival.batch': '1'}")
_FIRST = ("from storage.table.meta_client import HoodieTableMetaClient\n"
          "first = HoodieTableMetaClient.load(path).timeline.completed().write_timeline().timestamps()[0]\n")
_FOUR = ((SEED, "upsert"), (UPDATE, "upsert"), (DELETE, "delete"), (OVERWRITE, "upsert"))
_SIX = _FOUR + ((UPDATE, "upsert"), (OVERWRITE, "upsert"))
_CONFIG = "from storage.config import HoodieConfig\n"
_CLEAN = f"{_CONFIG}from storage.table_service.clean import run_clean\nrun_clean(spark, path, HoodieConfig.of({_KEEP}))"
_ARCHIVE = f"{_CONFIG}from storage.table_service.archival import archive\narchive(path, HoodieConfig.of({_KEEP}))"
_MERGE = ("{**opts, 'hoodie.clean.automatic': 'false', 'hoodie.archive.automatic': 'false', "
          "'hoodie.keep.min.commits': '2', 'hoodie.keep.max.commits': '3', 'hoodie.cleaner.commits.retained': '1', "
          "'hoodie.commits.archival.batch': '1', 'hoodie.archive.merge.enable': 'true', "
          "'hoodie.archive.merge.files.batch.size': '2'}")
# two small archive files to merge (six commits): archive down to 4 commits, copy the file as a second version (as object
# stores write one file per archival), then archive with merging on (the crashing call)
_ARCHIVE_MERGE = (f"import os, shutil\n{_CONFIG}from storage.table_service.archival import archive\n"
                  f"archive(path, HoodieConfig.of({_KEEP}, {{'hoodie.keep.min.commits': '4', "
                  "'hoodie.keep.max.commits': '5'}))\n"
                  "folder = os.path.join(path, '.hoodie', 'archived')\n"
                  "shutil.copy(os.path.join(folder, '.commits_.archive.1_1-0-1'), "
                  "os.path.join(folder, '.commits_.archive.2_1-0-1'))\n"
                  f"archive(path, HoodieConfig.of({_MERGE}))")
# archival's own crash points: without the metadata table, whose compaction would hold archival back (the bound is
# tested in tests/storage/metadata)
_TIMELINE_ONLY = (("hoodie.metadata.enable", "false"),)
_SAVEPOINT = _FIRST + "from storage.table_service.savepoint import create_savepoint\ncreate_savepoint(path, first)"
_RESTORE = _FIRST + "from storage.table_service.restore import restore_to_instant\nrestore_to_instant(path, first)"
_RESTORED = lambda s: apply({}, SEED, "upsert")  # noqa: E731 - the first commit's rows


def _restore_crashed(point: str, state: dict) -> dict:
    # between rollbacks: the newest commit (OVERWRITE's upsert) is rolled back, the older ones not yet
    return {k: v for k, v in state.items() if k != OVERWRITE[0][0]} if point == "restore.between_rollbacks" else state


_SERVICE_SCENARIOS = {
    "clean": Scenario("clean_cow", False, _FOUR, _CLEAN, rerun=_CLEAN, needs_spark=False),
    "archive": Scenario("archive_cow", False, _FOUR, _ARCHIVE, rerun=_ARCHIVE, needs_spark=False,
                        options=_TIMELINE_ONLY),
    "savepoint": Scenario("savepoint_cow", False, _FOUR, _SAVEPOINT, rerun=_SAVEPOINT, needs_spark=False),
    "restore": Scenario("restore_cow", False, _FOUR, _RESTORE, crashed=_restore_crashed, needs_spark=False,
                        rerun="from storage.table_service.restore import finish_pending_restores\n"
                              "from storage.table.meta_client import HoodieTableMetaClient\n"
                              "finish_pending_restores(HoodieTableMetaClient.load(path))",
                        recovered=_RESTORED),
}

# clustering of a merge-on-read table whose slices have logs (the rows must not change at any point)
_CLUSTER = (f"{_CONFIG}from storage.table_service.clustering import schedule_clustering, run_clustering\n"
            "t = schedule_clustering(path, HoodieConfig.of({'hoodie.clustering.plan.strategy.sort.columns': 'ts,id'}), "
            "spark)\n"
            "run_clustering(spark, path, [t])")
# run again: the plan (requested, or inflight with a dead executor) completes; exactly one CLUSTER replacecommit
_CLUSTER_RERUN = ("from storage.table_service.clustering import run_clustering, show_clustering\n"
                  "run_clustering(spark, path)\n"
                  "assert [r['state'] for r in show_clustering(path)] == ['COMPLETED'], show_clustering(path)")

# table version upgrade 6 -> 9 and downgrade 9 -> 6 of a merge-on-read table with logs (rows never change); the
# downgrade child upgrades first with its crash point unset
_UD = "from storage.table_service.upgrade_downgrade import upgrade_table, downgrade_table\n"
_UPGRADE = _UD + "upgrade_table(path, 9)"
_DOWNGRADE = _UD + "downgrade_table(path, 6)"
_UP_THEN_DOWN = ("import os\n" + _UD + "points = os.environ.pop('HOODIE_TEST_CRASH_POINT')\nupgrade_table(path, 9)\n"
                 "os.environ['HOODIE_TEST_CRASH_POINT'] = points\ndowngrade_table(path, 6)")

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
    "clustering": {
        "*": [Scenario("clustering_mor", True, ((SEED, "upsert"), (UPDATE, "upsert"), (DELETE, "delete")), _CLUSTER,
                       rerun=_CLUSTER_RERUN)],
    },
    "rollback": {
        # a writer died before its commit; the child's write starts by rolling it back, and dies in the rollback
        "*": [Scenario("rollback_mor", True, ((SEED, "upsert"),), _write_child(DELETE, "delete"),
                       failed_write_first=True)],
    },
    **{phase: {"*": [scenario]} for phase, scenario in _SERVICE_SCENARIOS.items()},
    # killed in the metadata table's deltacommit of an upsert (before or after it completes): the data instant never
    # completed, so the table reads its seed and the MDT lists exactly the seed's files; the next write rolls back
    "metadata": {"*": [Scenario("upsert_mdt_cow", False, ((SEED, "upsert"),), _write_child(UPDATE, "upsert"),
                                lambda s: apply(s, UPDATE, "upsert"), crashed=lambda point, s: s,
                                options=WITH_METADATA_TABLE)]},
    "upgrade": {"*": [Scenario("upgrade_mor", True, ((SEED, "upsert"), (UPDATE, "upsert")), _UPGRADE,
                               rerun=_UPGRADE, needs_spark=False)]},
    "downgrade": {"*": [Scenario("downgrade_mor", True, ((SEED, "upsert"), (UPDATE, "upsert")), _UP_THEN_DOWN,
                                 rerun=_DOWNGRADE, needs_spark=False)]},
    "archive": {"*": [_SERVICE_SCENARIOS["archive"]],
                **dict.fromkeys(("archive.merge_after_plan", "archive.merge_after_write"),
                                [Scenario("archive_merge_cow", False, _SIX, _ARCHIVE_MERGE, needs_spark=False,
                                          options=_TIMELINE_ONLY,
                                          rerun=f"{_CONFIG}from storage.table_service.archival import archive\n"
                                                f"archive(path, HoodieConfig.of({_MERGE}))")])},
}


def scenarios_for(point: str) -> list[Scenario]:
    phase = point.split(".", 1)[0]
    if phase not in SCENARIOS:
        raise LookupError(f"crash point {point!r}: phase {phase!r} has no crash scenario; add one to SCENARIOS in "
                          f"{__file__}")
    by_point = SCENARIOS[phase]
    return by_point.get(point) or by_point["*"]
