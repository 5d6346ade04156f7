"""Concurrent writer processes on one table (optimistic concurrency control), round by round.

    python -m bench.concurrent_writers --writers 4 --rounds 50 --lock fs [--mor] [--compactor] [--dir DIR]
                                       [--lock-option KEY=VALUE ...]

Each writer is a process with its own local Spark session. In every round all writers start an upsert at once
(a barrier), alternately
- disjoint rounds: each writer updates and inserts only in its own partition (its own file groups): all commit;
- overlapping rounds: every writer updates its key and inserts a new one in the one shared partition (the
  same file group): the writers that did not see another's commit lose with HoodieWriteConflictError.
With `--compactor` (merge-on-read) one more process schedules and runs a compaction in every round, then a
clean that keeps only the last two commits (old slices deleted while the writers append to the latest).
At the end the table read by this engine and by hudi-rs must equal the state built from the committed batches
only, in commit order. `--lock` picks the lock provider: fs (FileSystemBasedLockProvider), hms
(HiveMetastoreBasedLockProvider on HIVE_METASTORE_URIS), zk (ZookeeperBasedLockProvider: give
hoodie.write.lock.zookeeper.url with --lock-option), dynamodb (DynamoDBBasedLockProvider: the
hoodie.write.lock.dynamodb.* endpoint / region and hoodie.aws.* credentials as options, or AWS's defaults),
storage (StorageBasedLockProvider, a conditionally written lock file) or inprocess (wrong on purpose for processes).
`--lock-option` passes more hoodie.write.lock.* options to every writer.
Prints one JSON line of figures.
"""
from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import tempfile
import time
from dataclasses import asdict, dataclass, field

LOCKS = {
    "fs": "org.apache.hudi.client.transaction.lock.FileSystemBasedLockProvider",
    "hms": "org.apache.hudi.hive.transaction.lock.HiveMetastoreBasedLockProvider",
    "inprocess": "org.apache.hudi.client.transaction.lock.InProcessLockProvider",
    "zk": "org.apache.hudi.client.transaction.lock.ZookeeperBasedLockProvider",
    "dynamodb": "org.apache.hudi.aws.transaction.lock.DynamoDBBasedLockProvider",
    "storage": "org.apache.hudi.client.transaction.lock.StorageBasedLockProvider",
}
SCHEMA = "id long, writer int, round int, ts long, part string"
COLUMNS = ["id", "writer", "round", "ts", "part"]
SHARED = "shared"


@dataclass
class Outcome:
    round: int
    writer: int  # -1: the compactor
    status: str  # committed | conflict | error | nothing
    instant: str | None = None
    rows: list = field(default_factory=list)
    seconds: float = 0.0
    message: str = ""


def options(path: str, lock: str, mor: bool, lock_options: dict[str, str] | None = None,
            write_options: dict[str, str] | None = None) -> dict[str, str]:
    return {
        "hoodie.table.name": "concurrent", "hoodie.datasource.write.recordkey.field": "id",
        "hoodie.datasource.write.precombine.field": "ts", "hoodie.datasource.write.partitionpath.field": "part",
        "hoodie.datasource.write.table.type": "MERGE_ON_READ" if mor else "COPY_ON_WRITE",
        "hoodie.write.concurrency.mode": "optimistic_concurrency_control",
        "hoodie.write.lock.provider": LOCKS[lock], "hoodie.write.lock.hivemetastore.table": "concurrent_lock",
        "hoodie.write.lock.zookeeper.base_path": "/hudi_concurrent_writers",
        "hoodie.write.lock.wait_time_ms": "60000", "hoodie.write.lock.client.num_retries": "5",
        # with several writers a stale heartbeat must never count as dead while its writer is merely slow
        "hoodie.client.heartbeat.interval_in_ms": "5000",
        **(lock_options or {}), **(write_options or {}),
    }


def batch(round_no: int, writer: int, writers: int) -> list[tuple]:
    ts = round_no * 100 + writer
    if round_no % 2:  # overlapping: the shared partition
        return [(writer, writer, round_no, ts, SHARED), (10_000 + round_no * writers + writer, writer, round_no, ts, SHARED)]
    part = f"w{writer}"
    return [(1_000 + writer, writer, round_no, ts, part), (20_000 + round_no * writers + writer, writer, round_no, ts, part)]


def _session():
    import sqlext

    spark = sqlext.session(master="local[1]", conf={"spark.ui.enabled": "false", "spark.sql.shuffle.partitions": "1",
                                                    "spark.ui.showConsoleProgress": "false"})
    spark.sparkContext.setLogLevel("ERROR")
    return spark


def writer_process(writer: int, writers: int, rounds: int, path: str, opts: dict, barrier, results) -> None:
    from storage.exception import HoodieWriteConflictError
    from storage.client.write_client import HoodieWriteClient
    from storage.config import HoodieConfig

    spark = _session()
    for r in range(1, rounds + 1):
        rows = batch(r, writer, writers)
        df = spark.createDataFrame(rows, SCHEMA)
        barrier.wait(timeout=900)
        started = time.monotonic()
        try:
            result = HoodieWriteClient(spark, path, HoodieConfig.of(opts)).write(df, "upsert")
            out = Outcome(r, writer, "committed", result.instant_time, rows)
        except HoodieWriteConflictError as exc:
            out = Outcome(r, writer, "conflict", exc.instant_time, message=str(exc))
        except Exception as exc:  # reported, and fails the run
            out = Outcome(r, writer, "error", message=f"{type(exc).__name__}: {exc}")
        out.seconds = time.monotonic() - started
        results.put(asdict(out))
    spark.stop()


def compactor_process(rounds: int, path: str, opts: dict, barrier, results) -> None:
    from storage.config import HoodieConfig
    from storage.exception import HoodieError
    from storage.table_service.clean import run_clean
    from storage.table_service.compaction import run_compaction, schedule_compaction

    spark = _session()
    for r in range(1, rounds + 1):
        barrier.wait(timeout=900)
        started = time.monotonic()
        try:
            instant = schedule_compaction(path, HoodieConfig.of(opts))
            if instant:
                run_compaction(spark, path, instant, HoodieConfig.of(opts))
            run_clean(spark, path, HoodieConfig.of(opts, {"hoodie.cleaner.commits.retained": "2"}))
            out = Outcome(r, -1, "committed" if instant else "nothing", instant)
        except HoodieError as exc:
            out = Outcome(r, -1, "error", message=f"{type(exc).__name__}: {exc}")
        out.seconds = time.monotonic() - started
        results.put(asdict(out))
    spark.stop()


def expected_state(outcomes: list[dict], seed: list[tuple]) -> dict:
    """Committed batches applied in commit order (instant times are taken under the lock, so they order the
    commits of conflicting writes; disjoint ones commute)."""
    state = {r[0]: tuple(r) for r in seed}
    for o in sorted((o for o in outcomes if o["status"] == "committed" and o["writer"] >= 0), key=lambda o: o["instant"]):
        for row in o["rows"]:
            state[row[0]] = tuple(row)
    return state


def run(writers: int, rounds: int, lock: str, mor: bool = False, compactor: bool = False,
        directory: str | None = None, spark=None, lock_options: dict[str, str] | None = None,
        write_options: dict[str, str] | None = None) -> dict:
    """Run the rounds; returns the figures and the outcomes (raises AssertionError when the table is wrong).
    `spark`: the session that seeds and checks the table (a local one by default); `lock_options`: more options
    of the lock provider (its endpoint, timeouts) for every writer; `write_options`: any other writer options."""
    directory = directory or tempfile.mkdtemp(prefix="concurrent-writers-")
    path = os.path.join(directory, "table")
    opts = options(path, lock, mor, lock_options, write_options)
    seed = [(w, w, 0, 0, SHARED) for w in range(writers)] + [(1_000 + w, w, 0, 0, f"w{w}") for w in range(writers)]
    spark = spark or _session()
    from storage.client.write_client import HoodieWriteClient
    from storage.config import HoodieConfig

    HoodieWriteClient(spark, path, HoodieConfig.of(opts)).write(spark.createDataFrame(seed, SCHEMA), "upsert")
    ctx = multiprocessing.get_context("spawn")
    parties = writers + (1 if compactor else 0)
    barrier, results = ctx.Barrier(parties), ctx.Queue()
    procs = [ctx.Process(target=writer_process, args=(w, writers, rounds, path, opts, barrier, results))
             for w in range(writers)]
    if compactor:
        procs.append(ctx.Process(target=compactor_process, args=(rounds, path, opts, barrier, results)))
    started = time.monotonic()
    for p in procs:
        p.start()
    outcomes = [results.get(timeout=1800) for _ in range(parties * rounds)]
    for p in procs:
        p.join(120)
    took = time.monotonic() - started
    figures = check(spark, path, outcomes, seed, writers)
    figures.update(writers=writers, rounds=rounds, lock=lock, table_type="MOR" if mor else "COW",
                   compactor=compactor, seconds=round(took, 1))
    return {"figures": figures, "outcomes": outcomes, "path": path}


def check(spark, path: str, outcomes: list[dict], seed: list[tuple], writers: int) -> dict:
    from hudi import HudiReadOptions, HudiTableBuilder

    errors = [o for o in outcomes if o["status"] == "error"]
    assert not errors, f"writers failed with errors other than conflicts: {errors}"
    disjoint = [o for o in outcomes if o["round"] % 2 == 0 and o["writer"] >= 0]
    assert all(o["status"] == "committed" for o in disjoint), [o for o in disjoint if o["status"] != "committed"]
    for r in {o["round"] for o in outcomes if o["round"] % 2}:
        in_round = [o for o in outcomes if o["round"] == r and o["writer"] >= 0]
        assert any(o["status"] == "committed" for o in in_round), f"round {r}: no writer committed"
    want = sorted(expected_state(outcomes, seed).values())
    ours = sorted(tuple(row[c] for c in COLUMNS) for row in spark.read.format("hudi").load(path).collect())
    rs = HudiTableBuilder.from_base_uri(path).build().read(HudiReadOptions())
    import pyarrow as pa

    rs_rows = sorted(tuple(d[c] for c in COLUMNS) for d in pa.Table.from_batches(rs).to_pylist()) if rs else []
    assert ours == want, f"our reader: {len(ours)} rows, expected {len(want)}: {sorted(set(ours) ^ set(want))[:10]}"
    assert rs_rows == want, f"hudi-rs: {len(rs_rows)} rows, expected {len(want)}"
    overlap = [o for o in outcomes if o["round"] % 2 and o["writer"] >= 0]
    write_secs = sorted(o["seconds"] for o in outcomes if o["writer"] >= 0)
    return {
        "disjoint_commits": sum(o["status"] == "committed" for o in disjoint), "disjoint_writes": len(disjoint),
        "overlap_commits": sum(o["status"] == "committed" for o in overlap),
        "overlap_conflicts": sum(o["status"] == "conflict" for o in overlap), "overlap_writes": len(overlap),
        "compactions": sum(o["status"] == "committed" for o in outcomes if o["writer"] < 0),
        "rows": len(want), "write_seconds_median": write_secs[len(write_secs) // 2] if write_secs else 0,
    }


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--writers", type=int, default=2)
    parser.add_argument("--rounds", type=int, default=50)
    parser.add_argument("--lock", choices=sorted(LOCKS), default="fs")
    parser.add_argument("--mor", action="store_true")
    parser.add_argument("--compactor", action="store_true")
    parser.add_argument("--dir")
    parser.add_argument("--lock-option", action="append", default=[], metavar="KEY=VALUE",
                        help="an option of the lock provider, e.g. hoodie.write.lock.zookeeper.url=host:2181")
    args = parser.parse_args(argv)
    lock_options = dict(o.split("=", 1) for o in args.lock_option)
    result = run(args.writers, args.rounds, args.lock, args.mor, args.compactor, args.dir, lock_options=lock_options)
    print(json.dumps(result["figures"]))


if __name__ == "__main__":
    main()
