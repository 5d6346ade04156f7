"""The fixed costs of this design on this machine: `python -m bench.floors [--rows N] [--batch B] [--runs R]`.

A write here is Spark jobs whose data passes through Python tasks (Arrow), because the Hudi parts of a file (bloom
filter footers, log blocks) are written by our Python code. Each probe times one such building block with the
Python side doing nothing, over the same data the workloads use, next to deltalake's W1 write and W2 merge in the
same run. A workload whose target ratio lies below the sum of the blocks it cannot avoid is out of this design's
reach, however lean its own code:

- `spark_job`: a count per group, collected, over a cached frame of `batch`/2 rows (the shape of an index lookup's
  matches): the least a Spark aggregation costs, scheduling and planning included.
- `python_stage`: one `mapInArrow` task per core over two rows: a Spark stage with Python in it; `jvm_stage` the
  same job without the Python function (the difference is what a Python task costs to start and stop: the worker
  is reused, yet JVM and worker wait on each other ~45 ms a task before the first Arrow batch, as py-spy and jstack
  samples show).
- `transfer_load`: the W1 input (`rows` rows, cached in Spark) handed to Python tasks, one per core, by
  `mapInArrow` with a function that only counts: the JVM-to-Arrow floor of a bulk insert.
- `shuffle_batch`: the W2 batch shuffled into 30 groups (a W2 write's file groups) and handed to Python by
  `applyInArrow` with a function that only counts: the floor of any write that groups records by file group.
- `scan_load`: the W1 input scanned by Spark alone (a no-op sink), for scale.

Prints the medians and writes them to bench/results/floors-<time>.json."""
from __future__ import annotations

import argparse
import itertools
import json
import logging
import os
import shutil
import statistics
import tempfile
import time
from typing import Callable

import pyarrow as pa

from bench.engines.ours import SparkInput
from bench.engines.peers import DeltaLake
from bench.workloads import DataSet

log = logging.getLogger("bench.floors")
_GROUPS = 30


def _count_batches(batches):
    rows = 0
    for batch in batches:
        rows += batch.num_rows
    yield pa.RecordBatch.from_pydict({"n": [rows]})


def _count_group(table: pa.Table) -> pa.Table:
    return pa.table({"n": [table.num_rows]})


def probes(spark, inputs: SparkInput, data: DataSet) -> dict[str, Callable[[], object]]:
    """Name -> a function running the probe once (its inputs staged and cached before the clock starts)."""
    from pyspark.sql import functions as F

    cores = spark.sparkContext.defaultParallelism
    load, batch = inputs.frame(data.base(), "base"), inputs.frame(data.uniform_batch(), "w2")
    matches = spark.range(max(1, data.batch // 2)).select(
        F.col("id").cast("string").alias("key"), (F.col("id") % 10).cast("string").alias("partition"),
        (F.col("id") % 20).cast("string").alias("file")).cache()
    matches.count()
    grouped = batch.withColumn("_group", (F.abs(F.xxhash64(batch.columns[0])) % _GROUPS).cast("int"))
    tiny = spark.range(cores).repartition(cores)
    return {
        "spark_job": lambda: matches.groupBy("partition", "file").count().collect(),
        "python_stage": lambda: tiny.mapInArrow(_count_batches, "n long").collect(),
        "jvm_stage": lambda: tiny.collect(),
        "transfer_load": lambda: load.coalesce(cores).mapInArrow(_count_batches, "n long").collect(),
        "shuffle_batch": lambda: grouped.repartition(cores, "_group").groupBy("_group")
                                        .applyInArrow(_count_group, "n long").collect(),
        "scan_load": lambda: load.write.mode("overwrite").format("noop").save(),
    }


def _median(run: Callable[[], object], runs: int, before: Callable[[], None] | None = None) -> float:
    times = []
    for _ in range(runs + 1):  # the first run warms up (code generation, Python workers) and is dropped
        if before is not None:
            before()
        start = time.perf_counter()
        run()
        times.append(time.perf_counter() - start)
    return statistics.median(times[1:])


def deltalake_times(data: DataSet, workdir: str, runs: int) -> dict[str, float]:
    """deltalake's W1 write and W2 merge, each into a fresh copy, median of `runs`."""
    engine = DeltaLake()
    load, batch = engine.prepare(data.base(), "base"), engine.prepare(data.uniform_batch(), "w2")
    seed = os.path.join(workdir, "delta_seed")
    engine.load(seed, load)
    numbers = itertools.count()
    copies: list[str] = []  # the W2 merge's target: a copy of the seed made before each timed merge

    def fresh(name: str) -> str:
        return os.path.join(workdir, f"delta_{name}_{next(numbers)}")

    def copy() -> None:
        copies.append(shutil.copytree(seed, fresh("w2")))

    return {"deltalake_W1": _median(lambda: engine.load(fresh("w1"), load), runs),
            "deltalake_W2": _median(lambda: engine.upsert(copies[-1], batch), runs, copy)}


def measure(spark, data: DataSet, workdir: str, runs: int) -> dict[str, float]:
    """Median seconds of every probe and of deltalake's W1 / W2, in `spark` (a `local[2]` session for the figures)."""
    inputs = SparkInput(spark, workdir)
    try:
        results = {name: _median(run, runs) for name, run in probes(spark, inputs, data).items()}
    finally:
        inputs.release()
    results.update(deltalake_times(data, workdir, runs))
    return results


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench.floors")
    p.add_argument("--rows", type=int, default=2_000_000)
    p.add_argument("--batch", type=int, default=200_000)
    p.add_argument("--runs", type=int, default=5)
    p.add_argument("--driver-memory", default="8g")
    a = p.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    logging.getLogger("py4j").setLevel(logging.WARNING)
    import sqlext

    workdir = tempfile.mkdtemp(prefix="hudi-bench-floors-")
    spark = sqlext.session(master="local[2]", metastore=False, app_name="hudi-bench-floors", warehouse=workdir,
                           conf={"spark.ui.enabled": "false", "spark.ui.showConsoleProgress": "false",
                                 "spark.driver.memory": a.driver_memory})
    spark.sparkContext.setLogLevel("ERROR")
    try:
        results = measure(spark, DataSet(a.rows, a.batch), workdir, a.runs)
    finally:
        spark.stop()
        shutil.rmtree(workdir, ignore_errors=True)
    lines = [f"floors of this design (rows {a.rows:,}, batch {a.batch:,}, local[2], median of {a.runs})"]
    lines += [f"  {name:14s} {secs:6.3f} s" for name, secs in results.items()]
    print("\n".join(lines), flush=True)
    out = os.path.join(os.path.dirname(__file__), "results", time.strftime("floors-%Y%m%dT%H%M%SZ.json", time.gmtime()))
    with open(out, "w") as f:
        json.dump({"rows": a.rows, "batch": a.batch, "runs": a.runs, "seconds": results}, f, indent=1)
    log.info("written %s", out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
