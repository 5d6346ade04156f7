"""python -m bench.w7 [--commits N] [--rows R] [--table-type COPY_ON_WRITE|MERGE_ON_READ] — W7: N small upserts
in a row into one table with the table services on (inline clean and archival; inline compaction on MOR), timing
every commit (the write and its post-commit services). Reports the mean time of the first and the last 10
commits (the table must not get slower as it ages: the timeline and the listing stay bounded), the bytes and
files on disk, and the instants on the active and the archived timeline. Writes bench/results/w7-<time>.json."""
from __future__ import annotations

import argparse
import json
import logging
import os
import statistics
import tempfile
import time

import numpy as np

from bench.workloads import make_rows

log = logging.getLogger("bench.w7")

SERVICE_OPTIONS = {
    "hoodie.clean.automatic": "true", "hoodie.archive.automatic": "true",
    "hoodie.cleaner.policy": "KEEP_LATEST_COMMITS", "hoodie.cleaner.commits.retained": "5",
    "hoodie.keep.min.commits": "10", "hoodie.keep.max.commits": "15", "hoodie.commits.archival.batch": "5",
    "hoodie.compact.inline": "true", "hoodie.compact.inline.max.delta.commits": "5",
}


def _disk(path: str) -> tuple[int, int]:
    """(bytes, files) under `path`, the timeline and archive included."""
    size = files = 0
    for root, _, names in os.walk(path):
        for name in names:
            size += os.path.getsize(os.path.join(root, name))
            files += 1
    return size, files


def run(spark, path: str, commits: int, rows: int, table_type: str) -> dict:
    from storage.table.meta_client import HoodieTableMetaClient
    from storage.timeline.archived_timeline import HoodieArchivedTimeline

    opts = {"hoodie.table.name": "w7", "hoodie.datasource.write.recordkey.field": "id",
            "hoodie.datasource.write.precombine.field": "ts", "hoodie.datasource.write.partitionpath.field": "dt",
            "hoodie.datasource.write.table.type": table_type, **SERVICE_OPTIONS}
    times = []
    for n in range(commits):
        # half updates of earlier keys, half new keys: every commit rewrites (COW) or logs (MOR) file groups
        half = rows // 2
        updates = np.random.default_rng(n).choice(n * half, size=min(half, n * half), replace=False)
        ids = np.unique(np.concatenate([np.arange(n * half, (n + 1) * half), updates])).astype(np.int64)
        df = spark.createDataFrame(make_rows(ids, n + 1, seed=n).to_pandas())
        started = time.perf_counter()
        df.write.format("hudi").options(**opts).mode("append").save(path)
        times.append(time.perf_counter() - started)
        log.info("commit %d: %.2fs", n + 1, times[-1])
    meta = HoodieTableMetaClient.load(path)
    size, files = _disk(path)
    first, last = statistics.mean(times[:10]), statistics.mean(times[-10:])
    return {
        "table_type": table_type, "commits": commits, "rows_per_commit": rows,
        "first10_mean_s": round(first, 3), "last10_mean_s": round(last, 3),
        "last_vs_first": round(last / first, 3), "median_s": round(statistics.median(times), 3),
        "bytes_on_disk": size, "files_on_disk": files,
        "active_completed_instants": len(meta.timeline.completed()),
        "archived_instants": len(HoodieArchivedTimeline(meta).completed()),
        "times_s": [round(t, 3) for t in times],
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.w7", description=__doc__.split("\n")[0])
    parser.add_argument("--commits", type=int, default=100)
    parser.add_argument("--rows", type=int, default=50)
    parser.add_argument("--table-type", action="append", choices=["COPY_ON_WRITE", "MERGE_ON_READ"])
    parser.add_argument("--out", default=os.path.join(os.path.dirname(__file__), "results"))
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(message)s")
    import sqlext

    # no metastore: the tables live in temporary directories (a catalog would keep their names from run to run)
    spark = sqlext.session(master="local[2]", metastore=False,
                           conf={"spark.ui.enabled": "false", "spark.sql.shuffle.partitions": "4"})
    results = []
    with tempfile.TemporaryDirectory(prefix="bench-w7-") as work:
        for table_type in args.table_type or ["COPY_ON_WRITE", "MERGE_ON_READ"]:
            results.append(run(spark, os.path.join(work, table_type.lower()), args.commits, args.rows, table_type))
    os.makedirs(args.out, exist_ok=True)
    out = os.path.join(args.out, f"w7-{time.strftime('%Y%m%dT%H%M%SZ', time.gmtime())}.json")
    with open(out, "w") as f:
        json.dump({"workload": "W7", "services": SERVICE_OPTIONS, "results": results}, f, indent=2)
    for r in results:
        print(f"{r['table_type']}: first 10 commits {r['first10_mean_s']}s, last 10 {r['last10_mean_s']}s "
              f"(x{r['last_vs_first']}), {r['bytes_on_disk']} bytes in {r['files_on_disk']} files, "
              f"{r['active_completed_instants']} active / {r['archived_instants']} archived instants")
    print(f"written {out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
