"""Where our upsert time goes: `python -m bench.profile [--rows N] [--batch B] [--types cow,mor]
[--engines ours_df,ours_sql] [--workload W2|W3]`.

Loads a table (untimed), then runs the upsert (W2 uniform, W3 newest partition only) once under cProfile and prints, per table type:
the wall time, the Spark jobs the write ran (duration and the Python line that started each, from Spark's
status store), and the driver-side functions of storage/ by cumulative time. Writes the same text to
bench/results/profile-<time>.txt."""
from __future__ import annotations

import argparse
import cProfile
import io
import logging
import os
import pstats
import shutil
import tempfile
import time

from bench.engines.ours import OursDataFrame, OursSql, SparkInput
from bench.workloads import DataSet

log = logging.getLogger("bench.profile")


def _max_job_id(sc) -> int:
    jobs = sc._jsc.sc().statusStore().jobsList(None)
    return max((jobs.apply(i).jobId() for i in range(jobs.size())), default=-1)


def spark_jobs(sc, after: int) -> list[tuple[int, float, str, int]]:
    """(job id, seconds, call site, tasks) of the jobs after job id `after`, from Spark's status store."""
    jobs = sc._jsc.sc().statusStore().jobsList(None)
    out = []
    for i in range(jobs.size()):
        j = jobs.apply(i)
        if j.jobId() <= after:
            continue
        sub, done = j.submissionTime(), j.completionTime()
        secs = (done.get().getTime() - sub.get().getTime()) / 1000 if sub.isDefined() and done.isDefined() else float("nan")
        out.append((j.jobId(), secs, j.name(), j.numTasks()))
    return sorted(out)


ENGINES = {"ours_df": OursDataFrame, "ours_sql": OursSql}
BATCHES = {"W2": DataSet.uniform_batch, "W3": DataSet.skewed_batch}


def profile_upsert(spark, engine, path: str, batch, top: int, workload: str = "W2") -> str:
    sc = spark.sparkContext
    before = _max_job_id(sc)
    prof = cProfile.Profile()
    t0 = time.perf_counter()
    prof.enable()
    engine.upsert(path, batch)
    prof.disable()
    wall = time.perf_counter() - t0
    lines = [f"== {workload} upsert on {engine.name}: {wall:.2f} s wall", "-- Spark jobs (seconds, tasks, started at):"]
    jobs = spark_jobs(sc, before)
    for job_id, secs, name, tasks in jobs:
        lines.append(f"  job {job_id:4d} {secs:7.2f} s {tasks:4d} tasks  {name}")
    lines.append(f"  sum of job times {sum(j[1] for j in jobs):.2f} s; driver-only time ~{wall - sum(j[1] for j in jobs):.2f} s")
    s = io.StringIO()
    pstats.Stats(prof, stream=s).sort_stats("cumulative").print_stats(r"(storage|sqlext|bench)/", top)
    lines.append("-- driver functions (cumulative):")
    lines.append(s.getvalue().split("\n\n", 1)[-1] if "ncalls" in s.getvalue() else s.getvalue())
    return "\n".join(lines)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench.profile")
    p.add_argument("--rows", type=int, default=2_000_000)
    p.add_argument("--batch", type=int, default=200_000)
    p.add_argument("--types", default="cow,mor")
    p.add_argument("--engines", default="ours_df", help="ours_df (DataFrame API), ours_sql (MERGE INTO)")
    p.add_argument("--workload", default="W2", choices=sorted(BATCHES))
    p.add_argument("--top", type=int, default=30)
    p.add_argument("--driver-memory", default="8g")
    a = p.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    for noisy in ("py4j", "storage", "sqlext", "catalog"):
        logging.getLogger(noisy).setLevel(logging.WARNING)
    import sqlext

    workdir = tempfile.mkdtemp(prefix="hudi-bench-profile-")
    spark = sqlext.session(master="local[2]", metastore=False, app_name="hudi-bench-profile", warehouse=workdir,
                           conf={"spark.ui.enabled": "false", "spark.ui.showConsoleProgress": "false",
                                 "spark.driver.memory": a.driver_memory})
    spark.sparkContext.setLogLevel("ERROR")
    data = DataSet(a.rows, a.batch)
    inputs = SparkInput(spark, workdir)
    reports = [f"profile of {a.workload} (rows {a.rows:,}, batch {a.batch:,}), local[2]"]
    try:
        base, batch = inputs.frame(data.base(), "base"), inputs.frame(BATCHES[a.workload](data), a.workload)
        for t, name in [(t, e) for t in a.types.split(",") for e in a.engines.split(",")]:
            engine = ENGINES[name](spark, inputs, t)
            engine.start(workdir)
            path = os.path.join(workdir, f"t_{t}_{name}")
            log.info("loading %s", path)
            engine.load(path, base)
            log.info("profiling the upsert on %s", engine.name)
            reports.append(profile_upsert(spark, engine, path, batch, a.top, a.workload))
            print(reports[-1], flush=True)
    finally:
        inputs.release()
        shutil.rmtree(workdir, ignore_errors=True)
        spark.stop()
    out = os.path.join(os.path.dirname(__file__), "results", time.strftime("profile-%Y%m%dT%H%M%SZ.txt", time.gmtime()))
    with open(out, "w") as f:
        f.write("\n\n".join(reports) + "\n")
    log.info("written %s", out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
