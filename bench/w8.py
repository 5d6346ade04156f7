"""python -m bench.w8 [--rows N] [--upserts 100] [--batch B] [--strategy z-order] [--types cow,mor] — W8: a table
of many small files after many small upserts is clustered; a range query and a point query on the sort columns
run before and after.

Set-up (untimed): a bulk insert of `--rows` rows, then `--upserts` upserts of `--batch` new random rows each
(`hoodie.parquet.small.file.limit=0`: every upsert starts a new file group). Rows: `id` (key), `x`, `y` uniform
doubles in [0, 1) (the sort columns), `ts`, `f1`.

Timed: `schedule_clustering` + `run_clustering` (sort columns x, y; `--strategy`; output files of
`--target-bytes`, row groups of `--row-group-bytes`), then before and after it, through
`spark.read.format("hudi").load(path).where(...)`, a range query (a box on x and y) and a point query (x and y of
one row): the median seconds of `--runs` collects, the files (and row groups) whose parquet statistics can match
the predicate (computed from the footers with pyarrow: what Spark's row-group pruning must read) against the
total, and Spark's own scan metrics (files in the scan, rows its parquet reader returned after row-group
pruning).

Peer: deltalake gets the same rows as the same number of small appends, `optimize.z_order(["x", "y"])` (timed,
same target file size), and the same queries through `to_pyarrow_dataset()` with files read counted from the add
actions' min/max stats. Writes bench/results/w8-<UTC time>.json and prints a table."""
from __future__ import annotations

import argparse
import logging
import os
import time
from dataclasses import asdict, dataclass

import numpy as np
import pyarrow as pa

from bench.measure import median_seconds, run_workload, table_types
import pyarrow.parquet as pq

log = logging.getLogger("bench.w8")

SORT = ("x", "y")
RANGE_BOX = ((0.40, 0.45), (0.40, 0.45))  # x, y: 0.25% of the square


@dataclass(frozen=True)
class W8Config:
    rows: int = 20_000
    upserts: int = 100
    batch: int = 500
    strategy: str = "z-order"
    types: tuple[str, ...] = ("cow",)
    target_bytes: int = 1024 * 1024
    row_group_bytes: int = 256 * 1024
    runs: int = 3
    deltalake: bool = True
    seed: int = 42


def make_batch(start: int, n: int, ts: int, seed: int) -> pa.Table:
    rng = np.random.default_rng(seed)
    return pa.table({"id": np.arange(start, start + n, dtype=np.int64), "x": rng.random(n), "y": rng.random(n),
                     "ts": np.full(n, ts, dtype=np.int64), "f1": rng.random(n)})


def batches(cfg: W8Config) -> list[pa.Table]:
    """The initial load and the upserts' new rows, deterministic."""
    out = [make_batch(0, cfg.rows, 0, cfg.seed)] if cfg.rows else []
    for n in range(cfg.upserts):
        out.append(make_batch(cfg.rows + n * cfg.batch, cfg.batch, n + 1, cfg.seed + 1 + n))
    return out


def hudi_options(table_type: str, batch: int) -> dict[str, str]:
    return {"hoodie.table.name": f"w8_{table_type}", "hoodie.datasource.write.recordkey.field": "id",
            "hoodie.datasource.write.precombine.field": "ts", "hoodie.datasource.write.partitionpath.field": "",
            "hoodie.datasource.write.keygenerator.class": "org.apache.hudi.keygen.NonpartitionedKeyGenerator",
            "hoodie.datasource.write.table.type": "MERGE_ON_READ" if table_type == "mor" else "COPY_ON_WRITE",
            "hoodie.parquet.small.file.limit": "0",
            # Hudi's default bloom filter (60000 entries, ~430 KB a footer) would outweigh a small file's rows
            "hoodie.index.bloom.num_entries": str(max(batch, 1000))}


# -- predicates -----------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Query:
    name: str
    lo: tuple[float, float]
    hi: tuple[float, float]

    def sql(self) -> str:
        if self.lo == self.hi:
            return " AND ".join(f"{c} = {v!r}" for c, v in zip(SORT, self.lo))
        return " AND ".join(f"{c} >= {lo!r} AND {c} <= {hi!r}" for c, lo, hi in zip(SORT, self.lo, self.hi))

    def column(self):
        from pyspark.sql import functions as F

        expr = None
        for c, lo, hi in zip(SORT, self.lo, self.hi):
            term = (F.col(c) == F.lit(lo)) if lo == hi else (F.col(c) >= F.lit(lo)) & (F.col(c) <= F.lit(hi))
            expr = term if expr is None else expr & term
        return expr

    def arrow(self):
        import pyarrow.compute as pc

        expr = None
        for c, lo, hi in zip(SORT, self.lo, self.hi):
            term = (pc.field(c) == lo) if lo == hi else (pc.field(c) >= lo) & (pc.field(c) <= hi)
            expr = term if expr is None else expr & term
        return expr

    def can_match(self, mins: np.ndarray, maxs: np.ndarray) -> np.ndarray:
        """Per (file or row group) min/max box, shape (n, 2): can a row inside match?"""
        return ((mins <= np.array(self.hi)) & (maxs >= np.array(self.lo))).all(axis=1)


def queries(data: list[pa.Table]) -> list[Query]:
    last = data[-1]
    point = (float(last.column("x")[len(last) // 2].as_py()), float(last.column("y")[len(last) // 2].as_py()))
    return [Query("range", tuple(b[0] for b in RANGE_BOX), tuple(b[1] for b in RANGE_BOX)),
            Query("point", point, point)]


def expected_count(data: list[pa.Table], q: Query) -> int:
    return sum(t.filter(q.arrow()).num_rows for t in data)


# -- files read -----------------------------------------------------------------------------------------------
def row_group_boxes(paths: list[str]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(file index, mins, maxs) of every row group of `paths`, from the footers' statistics of x and y."""
    files, mins, maxs = [], [], []
    for i, p in enumerate(paths):
        md = pq.ParquetFile(p).metadata
        index = {md.schema.column(j).name: j for j in range(md.num_columns)}
        for rg in range(md.num_row_groups):
            stats = [md.row_group(rg).column(index[c]).statistics for c in SORT]
            files.append(i)
            mins.append([s.min for s in stats])
            maxs.append([s.max for s in stats])
    return np.array(files), np.array(mins, dtype=float).reshape(-1, 2), np.array(maxs, dtype=float).reshape(-1, 2)


def pruning(paths: list[str], q: Query) -> dict[str, int]:
    files, mins, maxs = row_group_boxes(paths)
    hit = q.can_match(mins, maxs)
    return {"files_total": len(paths), "files_read": len(set(files[hit].tolist())),
            "row_groups_total": len(files), "row_groups_read": int(hit.sum())}


def spark_scan_metrics(df) -> dict[str, int]:
    """Spark's scan metrics of the collected DataFrame `df`: files in the parquet scan and the rows its reader
    returned (after row-group pruning). Empty when the scan is not Spark's parquet reader (a MOR merge)."""
    out: dict[str, int] = {}

    def walk(plan) -> None:
        if plan.nodeName().startswith("Scan parquet"):
            metrics = plan.metrics()
            for name, key in (("numFiles", "spark_files"), ("numOutputRows", "spark_scan_rows")):
                if metrics.contains(name):
                    out[key] = out.get(key, 0) + int(metrics.apply(name).value())
        children = plan.children().iterator()
        while children.hasNext():
            walk(children.next())

    plan = df._jdf.queryExecution().executedPlan()
    if plan.nodeName() == "AdaptiveSparkPlan":
        plan = plan.executedPlan()
    walk(plan)
    return out


# -- ours -----------------------------------------------------------------------------------------------------
def latest_base_paths(path: str) -> list[str]:
    from storage.table.fs_view import FileSystemView
    from storage.table.meta_client import HoodieTableMetaClient

    return [bf.path for bf in FileSystemView(HoodieTableMetaClient.load(path)).latest_base_files()]


def query_ours(spark, path: str, qs: list[Query], data: list[pa.Table], runs: int) -> dict[str, dict]:
    out = {}
    paths = latest_base_paths(path)
    for q in qs:
        holder: dict = {}

        def run(q: Query = q, holder: dict = holder) -> int:
            holder["df"] = spark.read.format("hudi").load(path).where(q.column())
            return len(holder["df"].collect())

        seconds, count = median_seconds(run, runs)
        assert count == expected_count(data, q), (q.name, count, expected_count(data, q))
        out[q.name] = {"seconds": seconds, "rows": count, **pruning(paths, q), **spark_scan_metrics(holder["df"])}
    return out


def run_ours(spark, workdir: str, table_type: str, cfg: W8Config, data: list[pa.Table],
             qs: list[Query]) -> dict:
    from storage.config import HoodieConfig
    from storage.table_service.clustering import run_clustering, schedule_clustering

    path = os.path.join(workdir, f"hudi_{table_type}")
    opts = hudi_options(table_type, cfg.batch)
    started = time.perf_counter()
    for n, batch in enumerate(data):
        operation = "bulk_insert" if n == 0 and cfg.rows else "upsert"
        spark.createDataFrame(batch.to_pandas()).write.format("hudi").options(**opts) \
            .option("hoodie.datasource.write.operation", operation).mode("append").save(path)
    setup = time.perf_counter() - started
    log.info("%s: %d writes in %.1fs", table_type, len(data), setup)
    before = query_ours(spark, path, qs, data, cfg.runs)
    cluster = {**opts, "hoodie.clustering.plan.strategy.sort.columns": ",".join(SORT),
               "hoodie.layout.optimize.strategy": cfg.strategy,
               "hoodie.clustering.plan.strategy.target.file.max.bytes": str(cfg.target_bytes),
               "hoodie.clustering.plan.strategy.max.num.groups": "1000",
               "hoodie.parquet.block.size": str(cfg.row_group_bytes)}
    started = time.perf_counter()
    instant = schedule_clustering(path, HoodieConfig.of(cluster), spark)
    run_clustering(spark, path, [instant], HoodieConfig.of(cluster))
    cluster_seconds = time.perf_counter() - started
    after = query_ours(spark, path, qs, data, cfg.runs)
    return {"engine": f"ours/{table_type}", "setup_seconds": round(setup, 2), "optimize_seconds": round(cluster_seconds, 3),
            "file_bytes_after": sorted(os.path.getsize(p) for p in latest_base_paths(path)),
            "before": before, "after": after}


# -- deltalake ------------------------------------------------------------------------------------------------
def _delta_pruning(dt, q: Query) -> dict[str, int]:
    adds = dt.get_add_actions(flatten=True)
    adds = pa.table(adds) if not isinstance(adds, pa.Table) else adds
    mins = np.column_stack([adds.column(f"min.{c}").to_numpy(zero_copy_only=False) for c in SORT])
    maxs = np.column_stack([adds.column(f"max.{c}").to_numpy(zero_copy_only=False) for c in SORT])
    return {"files_total": adds.num_rows, "files_read": int(q.can_match(mins, maxs).sum())}


def query_delta(path: str, qs: list[Query], data: list[pa.Table], runs: int) -> dict[str, dict]:
    from deltalake import DeltaTable

    out = {}
    dt = DeltaTable(path)
    for q in qs:
        def run(q: Query = q) -> int:
            return DeltaTable(path).to_pyarrow_dataset().to_table(filter=q.arrow()).num_rows

        seconds, count = median_seconds(run, runs)
        assert count == expected_count(data, q), (q.name, count)
        out[q.name] = {"seconds": seconds, "rows": count, **_delta_pruning(dt, q)}
    return out


def run_delta(workdir: str, cfg: W8Config, data: list[pa.Table], qs: list[Query]) -> dict:
    from deltalake import DeltaTable, write_deltalake

    path = os.path.join(workdir, "delta")
    started = time.perf_counter()
    for batch in data:
        write_deltalake(path, batch, mode="append")
    setup = time.perf_counter() - started
    before = query_delta(path, qs, data, cfg.runs)
    started = time.perf_counter()
    DeltaTable(path).optimize.z_order(list(SORT), target_size=cfg.target_bytes)
    seconds = time.perf_counter() - started
    after = query_delta(path, qs, data, cfg.runs)
    return {"engine": "deltalake", "setup_seconds": round(setup, 2), "optimize_seconds": round(seconds, 3),
            "before": before, "after": after}


# -- the run --------------------------------------------------------------------------------------------------
def run(cfg: W8Config, spark, workdir: str) -> dict:
    data = batches(cfg)
    qs = queries(data)
    results = []
    for table_type in cfg.types:
        results.append(run_ours(spark, workdir, table_type, cfg, data, qs))
    if cfg.deltalake:
        try:
            results.append(run_delta(workdir, cfg, data, qs))
        except Exception as exc:  # noqa: BLE001 - the peer is a comparison, never a reason to lose our figures
            log.warning("deltalake comparison skipped: %s", exc)
    return {"workload": "W8", "config": asdict(cfg), "queries": {q.name: q.sql() for q in qs}, "results": results}


def table_lines(doc: dict) -> list[str]:
    head = (f"{'engine':<12} {'optimize s':>10} {'query':<6} {'s before':>9} {'s after':>8} "
            f"{'files read before':>18} {'files read after':>17} {'row groups after':>17} {'spark rows b/a':>16}")
    lines = [head, "-" * len(head)]
    for r in doc["results"]:
        for q in ("range", "point"):
            b, a = r["before"][q], r["after"][q]
            rg = f"{a['row_groups_read']}/{a['row_groups_total']}" if "row_groups_total" in a else "-"
            spark_rows = (f"{b['spark_scan_rows']}/{a['spark_scan_rows']}"
                          if "spark_scan_rows" in b and "spark_scan_rows" in a else "-")
            lines.append(f"{r['engine']:<12} {r['optimize_seconds']:>10} {q:<6} {b['seconds']:>9} {a['seconds']:>8} "
                         f"{b['files_read']:>8}/{b['files_total']:<9} {a['files_read']:>8}/{a['files_total']:<8} "
                         f"{rg:>17} {spark_rows:>16}")
    return lines


def parse(argv: list[str] | None) -> tuple[W8Config, str]:
    parser = argparse.ArgumentParser(prog="python -m bench.w8", description=__doc__.split("\n")[0])
    d = W8Config()
    parser.add_argument("--rows", type=int, default=d.rows, help="rows of the initial bulk insert")
    parser.add_argument("--upserts", type=int, default=d.upserts)
    parser.add_argument("--batch", type=int, default=d.batch, help="new rows per upsert")
    parser.add_argument("--strategy", default=d.strategy, choices=["linear", "z-order", "hilbert"])
    parser.add_argument("--types", default=",".join(d.types), help="cow, mor or cow,mor")
    parser.add_argument("--target-bytes", type=int, default=d.target_bytes)
    parser.add_argument("--row-group-bytes", type=int, default=d.row_group_bytes)
    parser.add_argument("--runs", type=int, default=d.runs)
    parser.add_argument("--no-deltalake", action="store_true")
    parser.add_argument("--out", default=os.path.join(os.path.dirname(__file__), "results"))
    a = parser.parse_args(argv)
    types = table_types(parser, a.types)
    return W8Config(a.rows, a.upserts, a.batch, a.strategy, types, a.target_bytes, a.row_group_bytes, a.runs,
                    not a.no_deltalake), a.out


def main(argv: list[str] | None = None) -> int:
    cfg, out_dir = parse(argv)
    return run_workload("w8", cfg, out_dir, run, table_lines, log)


if __name__ == "__main__":
    raise SystemExit(main())
