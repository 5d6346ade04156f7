"""python -m bench.w10 [--commits 1000] [--rows 1000] [--writers 2] [--dir DIR] — W10: a month of micro-batches.

`--commits` upserts of `--rows` rows each (80% updates of keys the table has, 20% new keys) into one merge-on-read
table by `--writers` writer processes at once (optimistic concurrency control, file-system lock), each with its
own local Spark session. Writer 0 runs the table services as a streaming writer does: async compaction
(`hoodie.datasource.compaction.async.enable`), async clustering, async clean and archival; the others clean and
archive after their own commits too (Hudi's default for every writer).
A write that loses a declared conflict (HoodieWriteConflictError) is retried with the same batch, as is one that
Hudi's default update strategy refuses while a clustering of its file groups is pending
(HoodieClusteringUpdateError).

Reports (one JSON line, and bench/results/w10-<UTC time>.json):
- the active timeline's size (instants) at every sample and its maximum, against hoodie.keep.max.commits +
  pending;
- data files (base + log) on disk at every sample: bounded, not growing after the first cycles;
- commit latency: mean of the last 100 commits over the mean of the first 100 (target <= 1.2);
- peak RSS of each writer's Python driver, its JVM and its Python workers, per sample (flat);
- conflicts (declared, retried) and errors (anything else: must be 0).
"""
from __future__ import annotations

import argparse
import json
import logging
import multiprocessing
import os
import statistics
import tempfile
import time
import traceback
from dataclasses import asdict, dataclass, field

log = logging.getLogger("bench.w10")

KEEP_MIN, KEEP_MAX = 20, 30
LOCK = {"hoodie.write.concurrency.mode": "optimistic_concurrency_control",
        "hoodie.write.lock.provider": "org.apache.hudi.client.transaction.lock.FileSystemBasedLockProvider",
        "hoodie.write.lock.wait_time_ms": "120000", "hoodie.client.heartbeat.interval_in_ms": "10000"}
SERVICES = {
    "hoodie.compact.inline": "false", "hoodie.datasource.compaction.async.enable": "true",
    "hoodie.compact.inline.max.delta.commits": "10",
    # below keep.min.commits: the trigger counts the commits after the last clustering on the active timeline
    "hoodie.clustering.async.enabled": "true", "hoodie.clustering.async.max.commits": "15",
    "hoodie.clean.automatic": "true", "hoodie.clean.async": "true", "hoodie.cleaner.commits.retained": "10",
    "hoodie.archive.automatic": "true", "hoodie.archive.async": "true",
    "hoodie.keep.min.commits": str(KEEP_MIN), "hoodie.keep.max.commits": str(KEEP_MAX),
    # archive as soon as the rules allow (the default waits for 10 archivable instants)
    "hoodie.commits.archival.batch": "1",
}
# the other writers keep Hudi's defaults for clean and archival (each writer cleans and archives after its own
# commits, async here); only writer 0 schedules compaction and clustering. With clean and archival in writer 0 alone,
# a stretch in which writer 0 loses every conflict leaves nobody to clean or archive, and the timeline grows
# (an excursion to 55 commits in w10-20261129T055541Z.json)
CLEAN_AND_ARCHIVE = ("hoodie.clean.automatic", "hoodie.clean.async", "hoodie.cleaner.commits.retained",
                     "hoodie.archive.automatic", "hoodie.archive.async", "hoodie.keep.min.commits",
                     "hoodie.keep.max.commits", "hoodie.commits.archival.batch")
WRITER_ONLY = {k: SERVICES[k] for k in CLEAN_AND_ARCHIVE}
PARTITIONS = 4
SAMPLE_EVERY = 20


@dataclass
class Sample:
    commit: int
    active_instants: int  # every instant on the active timeline (commits, cleans, rollbacks, pending ones)
    active_commits: int  # completed commits, deltacommits and replacecommits (what keep.max.commits bounds)
    pending_instants: int
    pending: list[str]  # "<action>@<instant>" of each pending instant (what holds archival back)
    held_commits: int  # completed commits after the oldest pending instant: archival may not pass it (Hudi's rule)
    data_files: int
    data_bytes: int
    rss_mb: dict[str, float]


@dataclass
class WriterReport:
    writer: int
    latencies: list[float] = field(default_factory=list)
    conflicts: int = 0
    refused_by_clustering: int = 0
    errors: list[str] = field(default_factory=list)
    samples: list[Sample] = field(default_factory=list)


def options(writer: int) -> dict[str, str]:
    base = {"hoodie.table.name": "w10", "hoodie.datasource.write.table.type": "MERGE_ON_READ",
            "hoodie.datasource.write.recordkey.field": "id", "hoodie.datasource.write.precombine.field": "ts",
            "hoodie.datasource.write.partitionpath.field": "dt", "hoodie.datasource.write.operation": "upsert",
            **LOCK}
    return {**base, **(SERVICES if writer == 0 else WRITER_ONLY)}


def _batch(writer: int, n: int, rows: int, next_key: int, rng):
    """`rows` rows: 80% updates of keys below `next_key` (this writer's), 20% new keys; the new next_key."""
    import numpy as np
    import pyarrow as pa

    inserts = rows // 5
    updates = rng.integers(0, max(next_key, 1), rows - inserts) if next_key else np.arange(0)
    keys = np.unique(np.concatenate([updates, np.arange(next_key, next_key + inserts)]))
    ids = keys * 10 + writer  # writers own disjoint keys; file groups (and conflicts) may still be shared
    table = pa.table({"id": ids, "ts": np.full(len(ids), n, dtype=np.int64), "dt": [f"d{k % PARTITIONS}" for k in keys],
                      "v": rng.random(len(ids))})
    return table, next_key + inserts


def _rss_mb() -> dict[str, float]:
    import psutil

    me = psutil.Process()
    out = {"driver": me.memory_info().rss / 2**20, "jvm": 0.0, "python_workers": 0.0}
    for child in me.children(recursive=True):
        try:
            name = " ".join(child.cmdline())
            rss = child.memory_info().rss / 2**20
        except psutil.Error:
            continue
        if "java" in child.name():
            out["jvm"] += rss
        elif "pyspark" in name or "python" in child.name():
            out["python_workers"] += rss
    return out


def _sample(path: str, commit: int) -> Sample:
    from storage.table.meta_client import HoodieTableMetaClient

    meta = HoodieTableMetaClient.load(path)
    files = size = 0
    for root, dirs, names in os.walk(path):
        dirs[:] = [d for d in dirs if d != ".hoodie"]
        for name in names:
            if name.endswith(".parquet") or ".log." in name:
                files += 1
                size += os.path.getsize(os.path.join(root, name))
    timeline = meta.timeline
    pending = list(timeline.pending())
    commits = list(timeline.completed().write_timeline())
    held = sum(1 for c in commits if pending and c.timestamp > pending[0].timestamp)
    return Sample(commit, len(list(timeline)), len(commits), len(pending),
                  [f"{i.action}@{i.timestamp}" for i in pending], held, files, size, _rss_mb())


def writer_main(writer: int, path: str, commits: int, rows: int, barrier, queue) -> None:
    report = WriterReport(writer)
    try:
        _write_commits(report, path, commits, rows, barrier)
    except BaseException as exc:  # noqa: BLE001 - the parent must get a report, never wait forever
        report.errors.append(f"writer {writer} stopped: {type(exc).__name__}: {str(exc)[:300]}")
        barrier.abort()
    queue.put(asdict(report))


def _write_commits(report: WriterReport, path: str, commits: int, rows: int, barrier) -> None:
    import numpy as np

    import sqlext
    from storage.exception import HoodieClusteringUpdateError, HoodieWriteConflictError

    logging.basicConfig(level=logging.WARNING)
    if report.writer == 0 and os.environ.get("W10_TRACE_SERVICES"):
        # the services' rounds and the lock's waits, timestamped, for diagnosing a timeline that grows
        trace = logging.FileHandler(os.path.join(os.path.dirname(path), "writer-0-services.log"))
        trace.setFormatter(logging.Formatter("%(asctime)s %(threadName)s %(name)s: %(message)s"))
        for name, level in (("storage.table_service.archival", logging.DEBUG), ("storage.table_service.clean", logging.INFO),
                            ("storage.transaction", logging.DEBUG)):
            logging.getLogger(name).setLevel(level)
            logging.getLogger(name).addHandler(trace)
    writer = report.writer
    # the hudi data source of a plain local session; no metastore (the table is written by path)
    spark = sqlext.session(master="local[1]", warehouse=os.path.join(os.path.dirname(path), f"warehouse-{writer}"),
                           conf={"spark.ui.enabled": "false", "spark.sql.shuffle.partitions": "2",
                                 "spark.ui.showConsoleProgress": "false"}, metastore=False)
    spark.sparkContext.setLogLevel("ERROR")
    rng, next_key, opts = np.random.default_rng(42 + writer), 0, options(writer)
    if writer != 0:
        barrier.wait()  # writer 0's first commit creates the table; then all write at once
    for n in range(commits):
        if writer == 0 and n == 1:
            barrier.wait()
        table, next_key = _batch(writer, n, rows, next_key, rng)
        frame = spark.createDataFrame(table.to_pandas())
        while True:
            started = time.perf_counter()
            try:
                frame.write.format("hudi").options(**opts).mode("append").save(path)
                report.latencies.append(time.perf_counter() - started)
                break
            except HoodieWriteConflictError:
                report.conflicts += 1
            except HoodieClusteringUpdateError:
                # declared: Hudi's default update strategy refuses writes to file groups a pending clustering
                # rewrites; a streaming writer retries the batch once the clustering completed
                report.refused_by_clustering += 1
                time.sleep(0.5)
            except Exception as exc:  # noqa: BLE001 - counted and reported: the target is none
                ours = [f for f in traceback.extract_tb(exc.__traceback__) if "/storage/" in f.filename]
                where = " <- ".join(f"{f.filename.rsplit('/storage/', 1)[-1]}:{f.name}:{f.lineno}"
                                    for f in reversed(ours[-8:]))
                report.errors.append(f"commit {n}: {type(exc).__name__}: {str(exc)[:300]} at {where}")
                break
        if writer == 0 and (n + 1) % SAMPLE_EVERY == 0:
            report.samples.append(_sample(path, n + 1))
    if writer == 0 and commits <= 1:
        barrier.wait()
    if writer == 0:
        from storage.table_service.clustering import wait_for_async_clustering
        from storage.table_service.table_services import wait_for_async_services

        wait_for_async_services(path)
        wait_for_async_clustering(path)
        report.samples.append(_sample(path, commits))
    spark.stop()


def summarize(reports: list[dict], commits: int, rows: int, writers: int, seconds: float) -> dict:
    errors = [e for r in reports for e in r["errors"]]
    if not all(r["latencies"] for r in reports) or not any(r["samples"] for r in reports):
        return {"workload": "W10", "commits": commits, "errors": errors, "seconds": round(seconds, 1)}
    latencies = [x for r in sorted(reports, key=lambda r: r["writer"]) for x in r["latencies"]]
    per_writer = [r["latencies"] for r in reports]
    first = [x for lat in per_writer for x in lat[:100 // len(per_writer)]]
    last = [x for lat in per_writer for x in lat[-(100 // len(per_writer)):]]
    samples = next(r["samples"] for r in reports if r["writer"] == 0)
    half = samples[len(samples) // 2:]
    return {
        "workload": "W10", "commits": commits, "rows_per_commit": rows, "writers": writers,
        "seconds": round(seconds, 1), "commits_done": len(latencies),
        "latency_first_100_s": round(statistics.mean(first), 3), "latency_last_100_s": round(statistics.mean(last), 3),
        "latency_ratio_last_first": round(statistics.mean(last) / statistics.mean(first), 3),
        "active_timeline_max": max(s["active_instants"] for s in samples),
        "active_commits_max": max(s["active_commits"] for s in samples),
        "active_commits_not_held_max": max(s["active_commits"] - s["held_commits"] for s in samples),
        "active_commits_bound": f"keep.max.commits {KEEP_MAX} + the commits after a pending instant",
        "pending_max": max(s["pending_instants"] for s in samples),
        "data_files_first_half_max": max(s["data_files"] for s in samples[:len(samples) // 2] or samples),
        "data_files_second_half_max": max(s["data_files"] for s in half),
        "data_files_last": samples[-1]["data_files"],
        "rss_mb_peak_first_half": _peak_rss(samples[:len(samples) // 2] or samples),
        "rss_mb_peak_second_half": _peak_rss(half),
        "conflicts": sum(r["conflicts"] for r in reports),
        "refused_by_clustering": sum(r["refused_by_clustering"] for r in reports), "errors": errors,
        "samples": samples,
    }


def _peak_rss(samples: list[dict]) -> dict[str, float]:
    return {k: round(max(s["rss_mb"][k] for s in samples), 1) for k in samples[0]["rss_mb"]}


def run(path: str, commits: int, rows: int, writers: int) -> dict:
    ctx = multiprocessing.get_context("spawn")
    barrier, queue = ctx.Barrier(writers), ctx.Queue()
    share = [commits // writers + (1 if w < commits % writers else 0) for w in range(writers)]
    procs = [ctx.Process(target=writer_main, args=(w, path, share[w], rows, barrier, queue)) for w in range(writers)]
    started = time.perf_counter()
    for p in procs:
        p.start()
    reports = [queue.get() for _ in procs]
    for p in procs:
        p.join()
    return summarize(reports, commits, rows, writers, time.perf_counter() - started)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.w10", description=__doc__.splitlines()[0])
    parser.add_argument("--commits", type=int, default=1000)
    parser.add_argument("--rows", type=int, default=1000)
    parser.add_argument("--writers", type=int, default=2)
    parser.add_argument("--dir", help="where the table goes (default: a new temporary directory)")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s: %(message)s")
    path = os.path.join(args.dir or tempfile.mkdtemp(prefix="w10-"), "w10")
    result = run(path, args.commits, args.rows, args.writers)
    out_dir = os.path.join(os.path.dirname(__file__), "results")
    os.makedirs(out_dir, exist_ok=True)
    out = os.path.join(out_dir, time.strftime("w10-%Y%m%dT%H%M%SZ.json", time.gmtime()))
    with open(out, "w") as fh:
        json.dump(result, fh, indent=1)
    print(json.dumps({k: v for k, v in result.items() if k != "samples"}))
    log.info("wrote %s", out)
    return 0 if not result["errors"] else 1


if __name__ == "__main__":
    raise SystemExit(main())
