"""python -m bench.s3 [--rows N] [--batch B] [--runs R] — W2 (upsert) and W5 (scan) on an S3 endpoint: ours (COW
and MOR, DataFrame API) and deltalake against the same moto server on loopback, with the wall time and the S3
requests each operation made (counted by the server, from its request log, by kind: LIST, GET, HEAD, PUT, POST,
DELETE). W1 (the load) runs untimed first, per table. Writes bench/results/s3-<time>.json and prints a table."""
from __future__ import annotations

import argparse
import json
import logging
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from collections import Counter
from dataclasses import dataclass, field

import pyarrow as pa
import pyarrow.compute as pc

from bench.workloads import KEY, PARTITION, SUM_COLUMN, DataSet

log = logging.getLogger("bench.s3")

ACCESS_KEY, SECRET_KEY, REGION = "bench-key", "bench-secret", "us-east-1"
_REQUEST = re.compile(r'"(?:\x1b\[[0-9;]*m)*(GET|PUT|POST|HEAD|DELETE) (\S+) HTTP')


@dataclass
class MotoServer:
    """moto's S3 server on a free loopback port; its request log tells what each operation cost."""

    port: int = 0
    proc: subprocess.Popen | None = None
    log_path: str = ""

    def start(self, workdir: str) -> "MotoServer":
        import socket

        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            self.port = s.getsockname()[1]
        self.log_path = os.path.join(workdir, "moto.log")
        exe = os.path.join(os.path.dirname(sys.executable), "moto_server")
        with open(self.log_path, "ab") as out:
            self.proc = subprocess.Popen([exe, "-H", "127.0.0.1", "-p", str(self.port)], stdout=out,
                                         stderr=subprocess.STDOUT)
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=0.5).close()
                return self
            except OSError:
                time.sleep(0.2)
        raise RuntimeError("moto_server did not start")

    def stop(self) -> None:
        if self.proc:
            self.proc.terminate()
            self.proc.wait(timeout=10)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def new_bucket(self) -> str:
        import boto3

        name = f"bench-{uuid.uuid4().hex[:10]}"
        boto3.client("s3", endpoint_url=self.url, aws_access_key_id=ACCESS_KEY, aws_secret_access_key=SECRET_KEY,
                     region_name=REGION).create_bucket(Bucket=name)
        return name

    def mark(self) -> int:
        with open(self.log_path, "rb") as f:
            return len(f.read())

    def requests_since(self, mark: int) -> Counter:
        with open(self.log_path, "rb") as f:
            f.seek(mark)
            text = f.read().decode("utf-8", "replace")
        counts: Counter = Counter()
        for method, target in _REQUEST.findall(text):
            kind = "LIST" if method == "GET" and ("list-type" in target or "prefix=" in target
                                                  or target.rstrip("/").count("/") <= 1) else method
            counts[kind] += 1
        return counts


@dataclass
class Measured:
    seconds: list[float] = field(default_factory=list)
    requests: list[dict] = field(default_factory=list)
    result: list = field(default_factory=list)


class Ours:
    def __init__(self, spark, inputs, table_type: str):
        from bench.engines.ours import OursDataFrame

        self.engine = OursDataFrame(spark, inputs, table_type)
        self.name = self.engine.name

    def prepare(self, data: pa.Table, tag: str):
        return self.engine.prepare(data, tag)

    def load(self, uri, data):
        self.engine.load(uri, data)

    def upsert(self, uri, batch):
        self.engine.upsert(uri, batch)

    def scan(self, uri):
        r = self.engine.scan(uri)
        return [r.count, round(r.total, 3)]


class Delta:
    name = "deltalake"

    def __init__(self, endpoint: str):
        self.options = {"AWS_ENDPOINT_URL": endpoint, "AWS_ACCESS_KEY_ID": ACCESS_KEY,
                        "AWS_SECRET_ACCESS_KEY": SECRET_KEY, "AWS_REGION": REGION, "AWS_ALLOW_HTTP": "true",
                        "AWS_S3_ALLOW_UNSAFE_RENAME": "true"}

    def prepare(self, data: pa.Table, tag: str):
        return data

    def load(self, uri, data):
        from deltalake import write_deltalake

        write_deltalake(uri, data, partition_by=[PARTITION], mode="overwrite", storage_options=self.options)

    def upsert(self, uri, batch):
        from deltalake import DeltaTable

        (DeltaTable(uri, storage_options=self.options)
         .merge(source=batch, predicate=f"t.{KEY} = s.{KEY}", source_alias="s", target_alias="t")
         .when_matched_update_all().when_not_matched_insert_all().execute())

    def scan(self, uri):
        from deltalake import DeltaTable

        t = DeltaTable(uri, storage_options=self.options).to_pyarrow_dataset().to_table(columns=[SUM_COLUMN])
        return [t.num_rows, round(pc.sum(t[SUM_COLUMN]).as_py(), 3)]


def _timed(server: MotoServer, fn):
    mark = server.mark()
    started = time.perf_counter()
    result = fn()
    seconds = time.perf_counter() - started
    time.sleep(0.2)  # the server writes its log line after answering
    return seconds, dict(server.requests_since(mark)), result


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench.s3", description=__doc__)
    p.add_argument("--rows", type=int, default=1_000_000)
    p.add_argument("--batch", type=int, default=100_000)
    p.add_argument("--runs", type=int, default=1)
    p.add_argument("--engines", default="ours_df/cow,ours_df/mor,deltalake")
    p.add_argument("--results", default=os.path.join(os.path.dirname(__file__), "results"))
    a = p.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    for noisy in ("py4j", "storage", "sqlext", "catalog"):
        logging.getLogger(noisy).setLevel(logging.WARNING)
    workdir = tempfile.mkdtemp(prefix="hudi-bench-s3-")
    server = MotoServer().start(workdir)
    wanted = [e.strip() for e in a.engines.split(",") if e.strip()]
    data = DataSet(a.rows, a.batch)
    base, batch = data.base(), data.uniform_batch()
    spark = None
    engines = []
    try:
        if any(e.startswith("ours") for e in wanted):
            import sqlext
            from bench.engines.ours import SparkInput

            conf = {"spark.hadoop.fs.s3a.endpoint": server.url, "spark.hadoop.fs.s3a.access.key": ACCESS_KEY,
                    "spark.hadoop.fs.s3a.secret.key": SECRET_KEY, "spark.hadoop.fs.s3a.path.style.access": "true",
                    "spark.ui.enabled": "false", "spark.ui.showConsoleProgress": "false",
                    "spark.driver.memory": "8g"}
            spark = sqlext.session(master="local[2]", metastore=False, app_name="hudi-bench-s3",
                                   warehouse=os.path.join(workdir, "wh"), conf=conf)
            spark.sparkContext.setLogLevel("ERROR")
            inputs = SparkInput(spark, workdir)
            engines += [Ours(spark, inputs, t) for t in ("cow", "mor") if f"ours_df/{t}" in wanted]
        if "deltalake" in wanted:
            engines.append(Delta(server.url))
        cells: dict[tuple[str, str], Measured] = {}
        for engine in engines:
            for run in range(a.runs):
                uri = f"s3://{server.new_bucket()}/t"
                base_in, batch_in = engine.prepare(base, "base"), engine.prepare(batch, "uniform")
                load_s, load_req, _ = _timed(server, lambda: engine.load(uri, base_in))
                log.info("W1 %-14s %.2f s (untimed set-up) %s", engine.name, load_s, load_req)
                for workload, fn in (("W2", lambda: engine.upsert(uri, batch_in)), ("W5", lambda: engine.scan(uri))):
                    seconds, requests, result = _timed(server, fn)
                    cell = cells.setdefault((workload, engine.name), Measured())
                    cell.seconds.append(seconds)
                    cell.requests.append(requests)
                    cell.result.append(result)
                    log.info("%s %-14s %.2f s  %d requests %s", workload, engine.name, seconds,
                             sum(requests.values()), requests)
        doc = {"rows": a.rows, "batch": a.batch, "runs": a.runs, "cells": [
            {"workload": w, "engine": e, "seconds": statistics.median(m.seconds),
             "requests": m.requests[len(m.requests) // 2], "result": m.result[-1]} for (w, e), m in cells.items()]}
        os.makedirs(a.results, exist_ok=True)
        path = os.path.join(a.results, f"s3-{time.strftime('%Y%m%dT%H%M%SZ', time.gmtime())}.json")
        with open(path, "w") as f:
            json.dump(doc, f, indent=1)
        print(f"\n{'workload':8} {'engine':14} {'seconds':>8} {'requests':>9}  by kind")
        for c in doc["cells"]:
            kinds = ", ".join(f"{k} {v}" for k, v in sorted(c["requests"].items()))
            print(f"{c['workload']:8} {c['engine']:14} {c['seconds']:8.2f} {sum(c['requests'].values()):9d}  {kinds}")
        print(f"\nresults: {path}")
    finally:
        if spark is not None:
            spark.stop()
        server.stop()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
