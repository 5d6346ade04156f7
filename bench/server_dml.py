"""Latency of single-row DML through `sqlext serve` (issue 41): a PyHive client runs single-row INSERT, UPDATE,
MERGE and DELETE statements, one at a time, against a copy-on-write table of 200k rows, with the writes on Spark
(`SET hoodie.sqlext.engine=SPARK`: the path every write took before issue 41) and with the default engine choice
(AUTO: small writes in process), on one server.

    python -m bench.server_dml [--rows 200000] [--runs 20] [--engines SPARK,AUTO] [--code DIR]

`--code DIR` runs the server from another checkout (e.g. a worktree of the commit before issue 41; the engine
setting is then ignored by code that does not know it). Prints p50 / p95 / mean per statement and engine and writes
bench/results/server-dml-<time>.json.
"""
from __future__ import annotations

import argparse
import json
import logging
import os
import shutil
import statistics
import tempfile
import time
from pathlib import Path

from bench.measure import save_result
from bench.server_load import connect, start_server

log = logging.getLogger("bench.server_dml")

DDL = ("CREATE TABLE t (id BIGINT, name STRING, price DOUBLE, ts BIGINT, dt STRING) USING hudi "
       "PARTITIONED BY (dt) TBLPROPERTIES (primaryKey = 'id', preCombineField = 'ts')")
LOAD = ("INSERT INTO t SELECT id, concat('n', id % 7), id * 1.5D, 1L, concat('2024-01-', lpad(id % 10 + 1, 2, '0')) "
        "FROM range(0, {rows})")
STATEMENTS = {
    "insert": "INSERT INTO t VALUES ({new}, 'i{run}', 2.5D, {ts}L, '2024-01-{day:02d}')",
    "update": "UPDATE t SET price = price + 1, ts = {ts}L WHERE id = {key}",
    "merge": ("MERGE INTO t USING (SELECT {key}L AS id, 'm{run}' AS name, 3.5D AS price, {ts}L AS ts, "
              "'2024-01-{day:02d}' AS dt) s ON t.id = s.id AND t.dt = s.dt "
              "WHEN MATCHED THEN UPDATE SET * WHEN NOT MATCHED THEN INSERT *"),
    "delete": "DELETE FROM t WHERE id = {new}",  # the row this run's INSERT added
}


def _latencies(cur, engine: str, rows: int, runs: int, offset: int) -> dict[str, list[float]]:
    cur.execute(f"SET hoodie.sqlext.engine={engine}")
    out: dict[str, list[float]] = {name: [] for name in STATEMENTS}
    for run in range(runs + 1):  # the first of each is a warm-up, not counted
        for name, template in STATEMENTS.items():
            key = (run * 7919 + offset) % rows
            sql = template.format(new=rows + offset + run, key=key, run=run, ts=offset + run + 2, day=key % 10 + 1)
            started = time.perf_counter()
            cur.execute(sql)
            cur.fetchall()
            if run:
                out[name].append(time.perf_counter() - started)
    return out


def _summary(values: list[float]) -> dict[str, float]:
    ordered = sorted(values)
    return {"p50": round(statistics.median(ordered), 3), "p95": round(ordered[int(0.95 * (len(ordered) - 1))], 3),
            "mean": round(statistics.fmean(ordered), 3)}


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.server_dml", description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=200_000)
    parser.add_argument("--runs", type=int, default=20)
    parser.add_argument("--engines", default="SPARK,AUTO")
    parser.add_argument("--code", default=None, help="a checkout to run the server from")
    parser.add_argument("--results", default=os.path.join(os.path.dirname(__file__), "results"))
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s: %(message)s")
    work = Path(tempfile.mkdtemp(prefix="server-dml-"))
    proc, port = start_server(work / "warehouse", work / "server.log", code=args.code)
    report: dict = {"rows": args.rows, "runs": args.runs, "code": args.code or "this checkout", "latency_s": {}}
    try:
        cur = connect(port)
        cur.execute(DDL)
        cur.execute(LOAD.format(rows=args.rows))
        for i, engine in enumerate(args.engines.split(",")):
            times = _latencies(cur, engine, args.rows, args.runs, offset=1000 * (i + 1))
            report["latency_s"][engine] = {name: _summary(v) for name, v in times.items()}
            log.info("%s: %s", engine, report["latency_s"][engine])
    finally:
        proc.terminate()
        proc.wait(timeout=60)
        shutil.rmtree(work, ignore_errors=True)
    print(json.dumps(report, indent=1))
    log.info("wrote %s", save_result(report, args.results, "server-dml"))


if __name__ == "__main__":
    main()
