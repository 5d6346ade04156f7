"""python -m bench.secondary_index [--rows N] [--files 100] [--runs 3] — a secondary-index lookup against a full
scan (issue 40).

Set-up (untimed): a version 9 COW table with the record index, written by one `bulk_insert` into `--files` files
(rows in random order, so every file holds every part of the value range), then `CREATE INDEX by_merchant ON t
(merchant)`: `merchant` holds rows/2 distinct values, two rows each, spread over the files.

Timed, through `spark.sql` on the path form, the median of `--runs` collects: `count(*), sum(f1)` of the rows of
one merchant, with data skipping on (the secondary index gives the record keys, the record index their files)
and with `SET hoodie.enable.data.skipping=false` (every file scanned). Reported (and written to
bench/results/si-<UTC time>.json): seconds on / off and the files the plan keeps."""
from __future__ import annotations

import argparse
import logging
import os
import shutil
import tempfile
import time

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from bench.measure import median_seconds

log = logging.getLogger("bench.secondary_index")


def _table(rows: int, seed: int) -> pa.Table:
    rng = np.random.default_rng(seed)
    order = rng.permutation(rows)
    return pa.table({"id": order.astype(np.int64), "ts": np.zeros(rows, np.int64),
                     "merchant": pa.array([f"m{i // 2:08d}" for i in order]), "f1": rng.random(rows)})


def run(rows: int, files: int, runs: int, seed: int = 42) -> dict:
    import sqlext

    work = tempfile.mkdtemp(prefix="bench-si-")
    spark = sqlext.session(master="local[2]", metastore=False, app_name="bench-si", warehouse=f"{work}/wh")
    source, path = f"{work}/source.parquet", f"{work}/t"
    pq.write_table(_table(rows, seed), source)
    opts = {"hoodie.table.name": "si", "hoodie.datasource.write.recordkey.field": "id",
            "hoodie.datasource.write.precombine.field": "ts", "hoodie.write.table.version": "9",
            "hoodie.metadata.record.index.enable": "true", "hoodie.bulkinsert.shuffle.parallelism": str(files),
            "hoodie.datasource.write.operation": "bulk_insert"}
    started = time.monotonic()
    spark.read.parquet(source).repartition(files).write.format("hudi").options(**opts).mode("append").save(path)
    spark.sql(f"CREATE INDEX by_merchant ON hudi.`{path}` (merchant)")
    log.info("set-up: %d rows in %s s", rows, round(time.monotonic() - started, 1))
    needle = f"m{rows // 4:08d}"
    query = f"SELECT count(*), sum(f1) FROM hudi.`{path}` WHERE merchant = '{needle}'"
    out = {}
    kept = _KeptSlices()
    logging.getLogger("storage.read.data_skipping").addHandler(kept)
    logging.getLogger("storage.read.data_skipping").setLevel(logging.INFO)
    for skipping in ("true", "false"):
        spark.sql(f"SET hoodie.enable.data.skipping={skipping}")
        got = spark.sql(query).collect()[0]
        assert got[0] == 2, got
        out[skipping] = median_seconds(lambda: spark.sql(query).collect(), runs)[0]
    spark.sql("SET hoodie.enable.data.skipping=true")
    shutil.rmtree(work, ignore_errors=True)
    return {"rows": rows, "files": files, "on_s": out["true"], "off_s": out["false"],
            "ratio": out["false"] / out["true"], "kept": kept.last}


class _KeptSlices(logging.Handler):
    """The last "k of n file slices may match" the data skipping logged."""

    def __init__(self) -> None:
        super().__init__(logging.INFO)
        self.last = None

    def emit(self, record: logging.LogRecord) -> None:
        message = record.getMessage()
        if "file slices may match" in message:
            self.last = message


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--rows", type=int, default=2_000_000)
    p.add_argument("--files", type=int, default=100)
    p.add_argument("--runs", type=int, default=3)
    a = p.parse_args()
    logging.basicConfig(level=os.environ.get("LOGLEVEL", "INFO"), format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    result = run(a.rows, a.files, a.runs)
    import json
    from pathlib import Path

    out = Path(__file__).parent / "results" / f"si-{time.strftime('%Y%m%dT%H%M%SZ', time.gmtime())}.json"
    out.write_text(json.dumps(result, indent=2))
    log.info("results: %s", out)
    log.info("secondary-index lookup, %d rows in %d files: on %.3f s, off %.3f s (%.1fx); file slices kept: %s",
             result["rows"], result["files"], result["on_s"], result["off_s"], result["ratio"], result["kept"])


if __name__ == "__main__":
    main()
