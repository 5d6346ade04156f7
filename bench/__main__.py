"""python -m bench [--rows N] [--batch B] [--only W2,W5] [--runs R] [--engines ours_df,deltalake,...]"""
from __future__ import annotations

import argparse
import logging
import shutil
import tempfile
import time

from bench.engines.ours import EXTRA_OPTIONS
from bench.runner import ALL_ENGINES, BenchConfig, run
from bench.workloads import ORDER, WORKLOADS

log = logging.getLogger("bench")


def _list(value: str) -> list[str]:
    return [v.strip() for v in value.split(",") if v.strip()]


def parse(argv: list[str] | None = None) -> BenchConfig:
    p = argparse.ArgumentParser(prog="python -m bench", description="Benchmark our Hudi engine against its peers "
                                "and the physical floor; prints a table, writes bench/results/<time>.json and .png.",
                                epilog="workloads: " + "; ".join(f"{k} {v}" for k, v in WORKLOADS.items()))
    p.add_argument("--rows", type=int, default=2_000_000, help="rows of the W1 load (default 2M)")
    p.add_argument("--batch", type=int, default=200_000, help="rows of an upsert batch (default 200k)")
    p.add_argument("--runs", type=int, default=3, help="runs per cell, each from a fresh table; the median is reported")
    p.add_argument("--only", type=_list, default=list(ORDER), help=f"workloads, from {','.join(ORDER)}")
    p.add_argument("--engines", type=_list, default=list(ALL_ENGINES), help=f"from {','.join(ALL_ENGINES)}")
    p.add_argument("--types", type=_list, default=["cow", "mor"], help="our table types (cow,mor)")
    p.add_argument("--workdir", default=None, help="where tables are written (default: a temp dir, removed)")
    p.add_argument("--results", default=None, help="results directory (default bench/results)")
    p.add_argument("--driver-memory", default="8g", help="Spark driver memory (local mode: the whole JVM)")
    p.add_argument("--hoodie", action="append", default=[], metavar="KEY=VALUE",
                   help="an extra hoodie.* write option of the ours_df lane (repeatable)")
    p.add_argument("--no-chart", action="store_true")
    a = p.parse_args(argv)
    bad = set(a.only) - set(ORDER)
    if bad:
        p.error(f"unknown workloads {sorted(bad)}; choose from {ORDER}")
    cfg = BenchConfig(rows=a.rows, batch=a.batch, runs=a.runs, only=a.only, engines=a.engines, table_types=a.types,
                      workdir=a.workdir, chart=not a.no_chart)
    if a.results:
        cfg.results_dir = a.results
    for item in a.hoodie:
        key, sep, value = item.partition("=")
        if not sep or not key.startswith("hoodie."):
            p.error(f"--hoodie {item!r}: expected hoodie.KEY=VALUE")
        EXTRA_OPTIONS[key.strip()] = value.strip()
    cfg.driver_memory = a.driver_memory  # type: ignore[attr-defined]  (session option, not a result field)
    return cfg


def main(argv: list[str] | None = None) -> int:
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    for noisy in ("py4j", "storage", "sqlext", "catalog", "pyiceberg", "matplotlib"):
        logging.getLogger(noisy).setLevel(logging.WARNING)
    cfg = parse(argv)
    spark, startup, warehouse = None, None, None
    if {"ours_df", "ours_sql", "spark_parquet"} & set(cfg.engines):
        import sqlext

        warehouse = tempfile.mkdtemp(prefix="hudi-bench-warehouse-")  # the SQL lane's table names live here
        t0 = time.perf_counter()
        spark = sqlext.session(master="local[2]", metastore=False, app_name="hudi-bench", warehouse=warehouse,
                               conf={"spark.ui.enabled": "false", "spark.ui.showConsoleProgress": "false",
                                     "spark.driver.memory": cfg.driver_memory})
        spark.sparkContext.setLogLevel("ERROR")
        startup = time.perf_counter() - t0
        log.info("Spark session started in %.1f s", startup)
    try:
        doc = run(cfg, spark, startup)
    finally:
        if spark is not None:
            spark.stop()
        if warehouse:
            shutil.rmtree(warehouse, ignore_errors=True)
    log.info("results: %s %s", doc["json_path"], doc["png_path"] or "")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
