"""Shared helpers of the table-service tests: small tables written through the DataFrame API, file counts,
the expected state and the two readers (ours and hudi-rs)."""
from __future__ import annotations

import os
from pathlib import Path

from hudi_oracle import apply_batch, arrow_rows, hudi_rs_read, rows, spark_rows

SCHEMA = "id int, name string, ts long, dt string"
COLS = ["id", "name", "ts", "dt"]


def options(name: str, table_type: str = "COPY_ON_WRITE", **extra) -> dict[str, str]:
    # merge-on-read without small-file handling: these batches mix updates and inserts, which would otherwise
    # merge every small log-free slice into a new base file (Hudi's rule) and leave the services no logs
    mor = {"hoodie.parquet.small.file.limit": "0"} if table_type == "MERGE_ON_READ" else {}
    return {"hoodie.table.name": name, "hoodie.datasource.write.table.type": table_type,
            "hoodie.datasource.write.recordkey.field": "id", "hoodie.datasource.write.precombine.field": "ts",
            "hoodie.datasource.write.partitionpath.field": "dt", **mor, **{k: str(v) for k, v in extra.items()}}


def batch(n: int, size: int = 6) -> list[tuple]:
    """Commit n: `size` rows, half of them updates of keys 0..size/2 (two partitions fixed by key)."""
    keys = list(range(size // 2)) + list(range(100 + n * size, 100 + n * size + size // 2))
    return [(k, f"v{n}", n, f"p{k % 2}") for k in keys]


def write(spark, path, data, opts, operation="upsert") -> None:
    spark.createDataFrame(data, SCHEMA).write.format("hudi").options(**opts) \
        .option("hoodie.datasource.write.operation", operation).mode("append").save(str(path))


def write_commits(spark, path, opts, commits: range, state: dict | None = None) -> dict:
    state = {} if state is None else state
    for n in commits:
        data = batch(n)
        write(spark, path, data, opts)
        apply_batch(state, data, ordering=2)
    return state


def expected(state: dict) -> list:
    return rows([dict(zip(COLS, r)) for r in state.values()], COLS)


def ours(spark, path, **read_opts) -> list:
    return spark_rows(spark.read.format("hudi").options(**read_opts).load(str(path)), COLS)


def theirs(path, as_of: str | None = None) -> list:
    return arrow_rows(hudi_rs_read(str(path), as_of=as_of), COLS)


def data_files(path) -> list[str]:
    """Base and log files of the table (not under .hoodie)."""
    out = []
    for root, dirs, names in os.walk(path):
        dirs[:] = [d for d in dirs if not d.startswith(".hoodie")]
        out += [os.path.join(root, n) for n in names if n.endswith(".parquet") or ".log." in n]
    return sorted(out)


def timeline_files(path) -> list[str]:
    return sorted(n for n in os.listdir(Path(path) / ".hoodie") if n[:1].isdigit())


def versions_per_group(path) -> dict[str, int]:
    """file id -> number of base files on disk."""
    out: dict[str, int] = {}
    for f in data_files(path):
        name = os.path.basename(f)
        if name.endswith(".parquet"):
            fid = name.split("_")[0]
            out[fid] = out.get(fid, 0) + 1
    return out
