"""Load test of `sqlext serve` (issue 17): N concurrent clients x M queries (reads of shared Hudi tables and
of the client's own table, and small MERGEs into the client's own table) and one client fetching a 10M-row result, while the server's
memory (its Python process, the Spark JVM and Spark's Python workers) is sampled.

    python -m bench.server_load [--clients 50] [--queries 100] [--rows 10000000] [--out FILE]

Prints and writes a JSON report: errors, wall times, latency percentiles, peak RSS per phase.
"""
from __future__ import annotations

import argparse
import json
import os
import random
import re
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import psutil

READS = [
    "SELECT count(*) FROM {t}",
    "SELECT id, name, price FROM {t} WHERE id = {k}",
    "SELECT name, sum(price) AS total FROM {t} GROUP BY name ORDER BY name",
    "SELECT * FROM {t} ORDER BY id LIMIT 5",
    "SELECT max(ts), min(price) FROM {t}",
]


class RssMonitor:
    """Peak RSS of the server process tree (Python, JVM, Spark's Python workers), sampled every 0.2 s."""

    def __init__(self, pid: int):
        self.root = psutil.Process(pid)
        self.peak = {"total": 0.0, "python": 0.0, "jvm": 0.0}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def sample(self) -> dict[str, float]:
        py = self.root.memory_info().rss
        jvm = workers = 0
        for child in self.root.children(recursive=True):
            try:
                rss = child.memory_info().rss
                if "java" in child.name():
                    jvm += rss
                else:
                    workers += rss
            except psutil.Error:
                pass
        mb = 1 << 20
        return {"total": (py + jvm + workers) / mb, "python": py / mb, "jvm": jvm / mb}

    def _run(self):
        while not self._stop.wait(0.2):
            try:
                now = self.sample()
            except psutil.Error:
                return
            for key, value in now.items():
                self.peak[key] = max(self.peak[key], value)

    def __enter__(self):
        self.peak = {k: 0.0 for k in self.peak}
        self._stop.clear()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc):
        self._stop.set()
        self._thread.join()


def start_server(warehouse: Path, log_path: Path, code: str | None = None) -> tuple[subprocess.Popen, int]:
    """`sqlext serve` of `warehouse` from this checkout (or from the checkout `code`), and its binary port."""
    env = {**os.environ, "PYTHONPATH": str(Path(code).resolve() if code else Path(__file__).resolve().parents[1])}
    cmd = [sys.executable, "-m", "sqlext.cli", "serve", "--port", "0", "--http-port", "none", "--metastore", "none",
           "--warehouse", str(warehouse), "--master", "local[2]", "--conf", "spark.ui.enabled=false",
           "--conf", "spark.driver.memory=2g", "--conf", "spark.sql.shuffle.partitions=2"]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=open(log_path, "w"), text=True, env=env)
    for line in proc.stdout:
        found = re.search(r":(\d+) \(binary", line)
        if found:
            return proc, int(found.group(1))
    raise RuntimeError(f"server did not start: {log_path.read_text()[-3000:]}")


def connect(port: int):
    from pyhive import hive

    return hive.connect(host="127.0.0.1", port=port, auth="NOSASL", username="load").cursor()


def setup_tables(port: int, clients: int, shared: int) -> tuple[list[str], list[str]]:
    """`shared` tables of 200 rows that every client reads, and one empty table per client that only its
    MERGEs write (Hudi tables take one writer at a time) and that it reads too."""
    cur = connect(port)
    ddl = ("CREATE TABLE {} (id BIGINT, name STRING, price DOUBLE, ts BIGINT) USING hudi "
           "TBLPROPERTIES (primaryKey = 'id', preCombineField = 'ts')")
    shared_names = [f"shared_{i}" for i in range(shared)]
    for name in shared_names:
        cur.execute(ddl.format(name))
        cur.execute(f"INSERT INTO {name} SELECT id, concat('n', id % 7), id * 1.5, 1 FROM range(0, 200)")
    own = [f"client_{i}" for i in range(clients)]
    for name in own:
        cur.execute(ddl.format(name))
    return shared_names, own


def client(port: int, index: int, tables: tuple[list[str], list[str]], queries: int, merge_every: int) -> dict:
    rng = random.Random(index)
    own = tables[1][index]
    readable = tables[0] + [own]
    latencies, errors = [], []
    cur = connect(port)
    for q in range(queries):
        if q % merge_every == merge_every - 1:
            key = rng.randrange(0, 300)
            sql = (f"MERGE INTO {own} t USING (SELECT {key}L AS id, 'm{q}' AS name, {q}.5D AS price, {q + 2}L AS ts) s "
                   f"ON t.id = s.id WHEN MATCHED THEN UPDATE SET * WHEN NOT MATCHED THEN INSERT *")
        else:
            sql = rng.choice(READS).format(t=rng.choice(readable), k=rng.randrange(0, 200))
        started = time.perf_counter()
        try:
            cur.execute(sql)
            cur.fetchall()
        except Exception as exc:  # noqa: BLE001 - counted and reported
            errors.append(f"{sql[:60]}: {exc}"[:300])
        latencies.append(time.perf_counter() - started)
    return {"latencies": latencies, "errors": errors}


def fetch_big(port: int, rows: int) -> dict:
    """One client fetching `rows` rows with the largest batches the server gives (10,000)."""
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "sqlext" / "thrift_server"))
    from clients import Raw

    raw = Raw(port)
    started = time.perf_counter()
    op = raw.execute("SELECT id, s, v FROM big")
    count, checksum = 0, 0
    while True:
        batch, more = raw.fetch(op, 10000)
        if not batch:
            break
        count += len(batch)
        checksum += sum(r[0] for r in batch)
    return {"rows": count, "checksum_ok": checksum == rows * (rows - 1) // 2,
            "seconds": round(time.perf_counter() - started, 1)}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.server_load")
    parser.add_argument("--clients", type=int, default=50)
    parser.add_argument("--queries", type=int, default=100)
    parser.add_argument("--merge-every", type=int, default=20, help="every k-th query of a client is a MERGE")
    parser.add_argument("--shared-tables", type=int, default=5, help="tables of 200 rows all clients read")
    parser.add_argument("--rows", type=int, default=10_000_000)
    parser.add_argument("--out", default=None)
    args = parser.parse_args(argv)
    work = Path(tempfile.mkdtemp(prefix="server-load-"))
    proc, port = start_server(work / "warehouse", work / "server.log")
    print(f"server on 127.0.0.1:{port} (log {work / 'server.log'})", file=sys.stderr, flush=True)
    monitor = RssMonitor(proc.pid)
    report = {"clients": args.clients, "queries_per_client": args.queries, "merge_every": args.merge_every,
              "rss_idle_mb": monitor.sample()}
    try:
        t0 = time.perf_counter()
        with monitor:
            tables = setup_tables(port, args.clients, args.shared_tables)
        report["setup"] = {"tables": len(tables[0]) + len(tables[1]), "seconds": round(time.perf_counter() - t0, 1),
                           "peak_rss_mb": dict(monitor.peak)}
        t0 = time.perf_counter()
        with monitor, ThreadPoolExecutor(args.clients) as pool:
            results = list(pool.map(lambda i: client(port, i, tables, args.queries, args.merge_every),
                                    range(args.clients)))
        latencies = sorted(x for r in results for x in r["latencies"])
        errors = [e for r in results for e in r["errors"]]
        report["concurrent"] = {
            "queries": len(latencies), "errors": len(errors), "first_errors": errors[:5],
            "seconds": round(time.perf_counter() - t0, 1),
            "latency_s": {"p50": round(statistics.median(latencies), 3),
                          "p95": round(latencies[int(0.95 * (len(latencies) - 1))], 3),
                          "max": round(latencies[-1], 3)},
            "peak_rss_mb": dict(monitor.peak), "rss_after_mb": monitor.sample()}
        cur = connect(port)
        t0 = time.perf_counter()
        cur.execute("CREATE TABLE big (id BIGINT, s STRING, v DOUBLE) USING hudi TBLPROPERTIES (primaryKey = 'id')")
        cur.execute("SET hoodie.datasource.write.operation=bulk_insert")
        cur.execute(f"INSERT INTO big SELECT id, CAST(id AS STRING), id * 0.5D FROM range(0, {args.rows}, 1, 8)")
        report["big_table_seconds"] = round(time.perf_counter() - t0, 1)
        before = monitor.sample()
        with monitor:
            report["fetch"] = fetch_big(port, args.rows)
        report["fetch"].update({"rss_before_mb": before, "peak_rss_mb": dict(monitor.peak)})
    except Exception as exc:
        report["failed"] = f"{type(exc).__name__}: {exc}"  # the phases measured so far are still reported
        raise
    finally:
        proc.terminate()
        proc.wait(60)
        text = json.dumps(report, indent=1)
        print(text)
        out = Path(args.out) if args.out else Path(__file__).resolve().parent / "results" / \
            f"server_load-{time.strftime('%Y%m%dT%H%M%SZ', time.gmtime())}.json"
        out.write_text(text + "\n")
    return 0 if not report["concurrent"]["errors"] and report["fetch"]["checksum_ok"] else 1


if __name__ == "__main__":
    sys.exit(main())
