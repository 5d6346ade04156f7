"""The two read routes of `spark.read.format("hudi")` on the same tables, and the write route.

- native (sqlext sessions, or after `sqlext.datasource.register(spark)`): storage.read.read_table on the
  driver — Spark's parquet reader for base-only slices, log merging in Arrow tasks;
- Python data source (`spark.dataSource.register(HoodieDataSource)` only): the JVM plans through the data
  source; every file slice is read as Arrow batches in a Python worker.

Writes have one route (the write client on the driver): a Python data source writer cannot start the Spark
jobs a Hudi write is made of (see sqlext/datasource/hoodie_data_source.py).

    python -m bench.datasource [--rows 1000000] [--runs 3]
"""
from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time
from datetime import datetime, timezone
from pathlib import Path

from pyspark.sql import functions as F
from pyspark.sql.readwriter import DataFrameReader

RESULTS = Path(__file__).resolve().parent / "results"


def _frame(spark, rows: int, start: int = 0):
    return (spark.range(start, start + rows)
            .select(F.col("id"), F.lit(1).cast("long").alias("ts"), (F.col("id") % 10).cast("string").alias("dt"),
                    (F.col("id") * 0.5).alias("f1"), F.sha1(F.col("id").cast("string")).alias("s1")))


def _timed(fn, runs: int) -> float:
    times = []
    for _ in range(runs):
        started = time.perf_counter()
        fn()
        times.append(time.perf_counter() - started)
    return statistics.median(times)


def _scan(df) -> None:
    df.agg(F.count("*"), F.sum("f1")).collect()


def main(argv=None) -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args(argv)
    import sqlext

    spark = sqlext.session(master="local[2]", metastore=False,
                           conf={"spark.ui.enabled": "false", "spark.sql.shuffle.partitions": "8"})
    spark.sparkContext.setLogLevel("ERROR")
    result = {"rows": args.rows, "runs": args.runs, "when": datetime.now(timezone.utc).isoformat(), "cells": {}}
    with tempfile.TemporaryDirectory() as tmp:
        for table_type in ("COPY_ON_WRITE", "MERGE_ON_READ"):
            path = f"{tmp}/{table_type.lower()}"
            opts = {"hoodie.table.name": "bench_ds", "hoodie.datasource.write.recordkey.field": "id",
                    "hoodie.datasource.write.precombine.field": "ts",
                    "hoodie.datasource.write.partitionpath.field": "dt",
                    "hoodie.datasource.write.table.type": table_type}
            started = time.perf_counter()
            _frame(spark, args.rows).write.format("hudi").options(**opts) \
                .option("hoodie.datasource.write.operation", "bulk_insert").mode("append").save(path)
            load_s = time.perf_counter() - started
            started = time.perf_counter()
            _frame(spark, args.rows // 10, args.rows // 2).write.format("hudi").options(**opts).mode("append").save(path)
            upsert_s = time.perf_counter() - started
            native = _timed(lambda: _scan(spark.read.format("hudi").load(path)), args.runs)
            python_ds = _timed(lambda: _scan(DataFrameReader.load.__wrapped__(spark.read.format("hudi"), path)),
                               args.runs)
            result["cells"][table_type] = {"bulk_insert_s": round(load_s, 2), "upsert_10pct_s": round(upsert_s, 2),
                                           "scan_native_s": round(native, 2), "scan_python_ds_s": round(python_ds, 2)}
            print(table_type, result["cells"][table_type], flush=True)
    spark.stop()
    RESULTS.mkdir(exist_ok=True)
    out = RESULTS / f"datasource-{datetime.now(timezone.utc):%Y%m%dT%H%M%SZ}.json"
    out.write_text(json.dumps(result, indent=2))
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
