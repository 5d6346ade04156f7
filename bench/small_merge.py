"""A 10-row change to a 200k-row table (issue 41): SQL `MERGE INTO ... USING (VALUES ...)`, the DataFrame upsert of
the same rows, and deltalake's merge of them, one after another in one process.

    python -m bench.small_merge [--rows 200000] [--changes 10] [--runs 7]

Prints the medians (the first run of each is a warm-up, not counted) and writes bench/results/small-merge-<time>.json.
Ours is the copy-on-write table of bench/workloads' data, Hive sync off, default engine choice (in process for
inputs this small: storage/write/local)."""
from __future__ import annotations

import argparse
import json
import logging
import os
import shutil
import statistics
import tempfile
import time

import numpy as np
import pyarrow as pa

log = logging.getLogger("bench.small_merge")


def _literal(value) -> str:
    return "'" + value.replace("'", "''") + "'" if isinstance(value, str) else repr(value)


def _merge_sql(path: str, rows: pa.Table) -> str:
    cols = rows.schema.names
    values = ", ".join("(" + ", ".join(_literal(r[c]) for c in cols) + ")" for r in rows.to_pylist())
    return (f"MERGE INTO hudi.`{path}` t USING (SELECT * FROM VALUES {values} AS s({', '.join(cols)})) s "
            "ON t.id = s.id WHEN MATCHED THEN UPDATE SET * WHEN NOT MATCHED THEN INSERT *")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=200_000)
    parser.add_argument("--changes", type=int, default=10)
    parser.add_argument("--runs", type=int, default=7)
    parser.add_argument("--results", default=os.path.join(os.path.dirname(__file__), "results"))
    args = parser.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s: %(message)s")

    import deltalake

    import sqlext
    from bench.measure import save_result
    from bench.engines.ours import OursDataFrame, SparkInput
    from bench.workloads import DataSet

    spark = sqlext.session(master="local[2]", conf={"spark.ui.showConsoleProgress": "false",
                                                    "hoodie.datasource.hive_sync.enable": "false"})
    base = DataSet(args.rows, args.changes).base()
    work = tempfile.mkdtemp(prefix="small-merge-")
    try:
        inputs = SparkInput(spark, work)
        ours = OursDataFrame(spark, inputs, "cow")
        path, delta_path = os.path.join(work, "ours"), os.path.join(work, "delta")
        ours.load(path, inputs.frame(base, "base"))
        deltalake.write_deltalake(delta_path, base, partition_by=["dt"])
        rng = np.random.default_rng(7)
        times: dict[str, list[float]] = {"sql_merge": [], "dataframe_upsert": [], "deltalake_merge": []}
        for run in range(args.runs):
            ids = pa.array(rng.choice(args.rows, args.changes, replace=False))
            rows = base.take(ids).set_column(base.schema.get_field_index("ts"), "ts",
                                             pa.array(np.full(args.changes, 1000 + run), pa.int64()))
            sql = _merge_sql(path, rows)
            started = time.perf_counter()
            spark.sql(sql)
            times["sql_merge"].append(time.perf_counter() - started)
            frame = spark.createDataFrame(rows.to_pandas())
            started = time.perf_counter()
            ours.upsert(path, frame)
            times["dataframe_upsert"].append(time.perf_counter() - started)
            started = time.perf_counter()
            (deltalake.DeltaTable(delta_path).merge(rows, "t.id = s.id", source_alias="s", target_alias="t")
             .when_matched_update_all().when_not_matched_insert_all().execute())
            times["deltalake_merge"].append(time.perf_counter() - started)
        medians = {k: round(statistics.median(v[1:] or v), 4) for k, v in times.items()}
        delta = medians["deltalake_merge"]
        report = {"rows": args.rows, "changes": args.changes, "runs": args.runs, "median_s": medians,
                  "sql_merge_over_deltalake": round(medians["sql_merge"] / delta, 2),
                  "dataframe_upsert_over_deltalake": round(medians["dataframe_upsert"] / delta, 2),
                  "sql_merge_over_dataframe_upsert": round(medians["sql_merge"] / medians["dataframe_upsert"], 2),
                  # each run's statement over the upsert right after it: the table grows (and its services run)
                  # between runs, so pairs compare like with like
                  "sql_merge_over_dataframe_upsert_paired": round(statistics.median(
                      s / d for s, d in zip(times["sql_merge"][1:], times["dataframe_upsert"][1:])), 2),
                  "times_s": {k: [round(x, 4) for x in v] for k, v in times.items()}}
        print(json.dumps(report, indent=1))
        log.info("wrote %s", save_result(report, args.results, "small-merge"))
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
