"""Drives the engines through the workloads, `runs` times each from a fresh table, and collects the samples.

A lane is one writer engine on one table: W1 load, W2 upsert, W5/W5L scans (and the readers of our table),
for our MOR tables C compaction and W5C, then W3 and W4. W6 loads a table per size (untimed) and times the W2
batch into it. W1 and W2 run as set-up whenever a later workload of the lane is selected."""
from __future__ import annotations

import gc
import logging
import os
import shutil
import statistics
import tempfile
import time
from dataclasses import asdict, dataclass, field

from bench.engines.base import Engine, ScanResult, Unsupported
from bench.measure import Sample, measure
from bench.workloads import ORDER, WORKLOADS, DataSet, expected_after_w2

log = logging.getLogger("bench")

ALL_ENGINES = ["ours_df", "ours_sql", "deltalake", "pyiceberg", "hudi_rs", "spark_parquet", "floor"]
SPARK_ENGINES = {"ours_df", "ours_sql", "spark_parquet"}
SCANS = {"W5", "W5L", "W5C"}
AFTER_W2 = {"W5", "W5L", "C", "W5C", "W3", "W4"}


@dataclass
class BenchConfig:
    rows: int = 2_000_000
    batch: int = 200_000
    runs: int = 3
    only: list[str] = field(default_factory=lambda: list(ORDER))
    engines: list[str] = field(default_factory=lambda: list(ALL_ENGINES))
    table_types: list[str] = field(default_factory=lambda: ["cow", "mor"])
    workdir: str | None = None       # tables go here (a temp dir by default, removed at the end)
    results_dir: str = os.path.join(os.path.dirname(__file__), "results")
    seed: int = 42
    chart: bool = True
    warmup: bool = True              # a tiny untimed write/read per Spark engine first


@dataclass
class Cell:
    samples: list[Sample] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    results: list[dict] = field(default_factory=list)  # scan results, per run


class Bench:
    def __init__(self, cfg: BenchConfig, spark=None):
        self.cfg = cfg
        self.spark = spark
        self.data = DataSet(cfg.rows, cfg.batch, cfg.seed)
        self.cells: dict[tuple[str, str], Cell] = {}
        self.jvm_pid = _jvm_pid(spark)
        self.inputs = None
        self.writers: list[Engine] = []
        self.readers: list[Engine] = []
        self._arrow: dict[str, object] = {}

    # ---- engines
    def build(self) -> None:
        cfg, spark = self.cfg, self.spark
        unknown = set(cfg.engines) - set(ALL_ENGINES)
        if unknown:
            raise ValueError(f"unknown engines {sorted(unknown)}; choose from {ALL_ENGINES}")
        if SPARK_ENGINES & set(cfg.engines) and spark is None:
            raise ValueError(f"engines {sorted(SPARK_ENGINES & set(cfg.engines))} need a SparkSession")
        from bench.engines.floor import Floor, HudiRs, SparkParquet
        from bench.engines.ours import OursDataFrame, OursSql, SparkInput
        from bench.engines.peers import DeltaLake, PyIceberg

        if spark is not None:
            self.inputs = SparkInput(spark, self.workdir)
        for t in cfg.table_types:
            if "ours_df" in cfg.engines:
                self.writers.append(OursDataFrame(spark, self.inputs, t))
            if "ours_sql" in cfg.engines:
                self.writers.append(OursSql(spark, self.inputs, t))
        if "deltalake" in cfg.engines:
            self.writers.append(DeltaLake())
        if "pyiceberg" in cfg.engines:
            self.writers.append(PyIceberg())
        for t in cfg.table_types:
            if "floor" in cfg.engines:
                self.writers.append(Floor(t))
            if "hudi_rs" in cfg.engines:
                self.readers.append(HudiRs(t))
            if "spark_parquet" in cfg.engines:
                self.readers.append(SparkParquet(spark, t))

    # ---- data, prepared per engine before the clock starts
    def _table(self, tag: str):
        if tag not in self._arrow:
            d = self.data
            if tag == "base":
                self._arrow[tag] = d.base()
            elif tag == "uniform":
                self._arrow[tag] = d.uniform_batch()
            elif tag == "skewed":
                self._arrow[tag] = d.skewed_batch()
            elif tag == "delete":
                self._arrow[tag] = d.delete_keys()
            elif tag.startswith("base@"):
                self._arrow[tag] = d.base(int(tag[5:]))
            elif tag.startswith("uniform@"):
                self._arrow[tag] = d.uniform_batch(int(tag[8:]))
        return self._arrow[tag]

    def _input(self, engine: Engine, tag: str):
        return engine.prepare(self._table(tag), tag)

    # ---- one measured step
    def step(self, workload: str, engine: Engine, path: str, fn, record: bool) -> bool:
        """Run fn, record it under (workload, engine) if `record`; False if it failed (the lane stops)."""
        gc.collect()
        watch = engine.watch_dir(path) if engine.writes else None
        try:
            result, sample = measure(fn, watch, self.jvm_pid if engine.uses_spark else None)
        except Unsupported:
            return True
        except Exception as exc:  # recorded as "n/a" with the error; the lane's later steps depend on this one
            log.warning("%s %s failed: %s: %s", workload, engine.name, type(exc).__name__, exc)
            if record:
                self.cells.setdefault((workload, engine.name), Cell()).errors.append(f"{type(exc).__name__}: {exc}")
            return False
        if record:
            cell = self.cells.setdefault((workload, engine.name), Cell())
            cell.samples.append(sample)
            if isinstance(result, ScanResult):
                cell.results.append(asdict(result))
            log.info("%-4s %-18s %8.3f s  py %6.0f MB (+%.0f)  jvm %s MB  %d files %.1f MB", workload, engine.name,
                     sample.seconds, sample.py_rss_mb, sample.py_growth_mb, f"{sample.jvm_rss_mb:6.0f}" if sample.jvm_rss_mb else "   -",
                     sample.files_written, sample.bytes_written / 1e6)
        return True

    def _scans(self, workload: str, engine: Engine, path: str, keys: list[int]) -> None:
        if workload == "W5C":
            self.step("W5C", engine, path, lambda: engine.scan(path), True)
            return
        if "W5" in self.cfg.only:
            self.step("W5", engine, path, lambda: engine.scan(path), True)
        if "W5L" in self.cfg.only:
            self.step("W5L", engine, path, lambda: engine.lookup(path, keys), True)

    def _readers_of(self, engine: Engine, path: str, workload: str, keys: list[int]) -> None:
        if not engine.name.startswith("ours_df/"):
            return
        for reader in self.readers:
            if reader.table_type == engine.table_type:
                reader.before_read(path)
                self._scans(workload, reader, path, keys)

    def lane(self, engine: Engine, run_dir: str) -> None:
        only = set(self.cfg.only)
        path = os.path.join(run_dir, engine.name.replace("/", "_"))
        keys = self.data.lookup_keys()
        if only & ({"W1", "W2"} | AFTER_W2):
            log.info("lane %s: %s", engine.name, path)
            data = self._input(engine, "base")
            if not self.step("W1", engine, path, lambda: engine.load(path, data), "W1" in only):
                return
            if only & ({"W2"} | AFTER_W2):
                batch = self._input(engine, "uniform")
                if not self.step("W2", engine, path, lambda: engine.upsert(path, batch), "W2" in only):
                    return
            if only & {"W5", "W5L"}:
                self._scans("W5", engine, path, keys)
                self._readers_of(engine, path, "W5", keys)
            if engine.family == "ours" and engine.table_type == "mor" and only & {"C", "W5C"}:
                if self.step("C", engine, path, lambda: engine.compact(path), True) and "W5C" in only:
                    self._scans("W5C", engine, path, keys)
                    self._readers_of(engine, path, "W5C", keys)
            if "W3" in only:
                batch = self._input(engine, "skewed")
                self.step("W3", engine, path, lambda: engine.upsert(path, batch), True)
            if "W4" in only:
                rows = self._input(engine, "delete")
                self.step("W4", engine, path, lambda: engine.delete(path, rows), True)
        if "W6" in only:
            for size in self.data.growth_sizes():
                gpath = f"{path}_w6_{size}"
                data = self._input(engine, f"base@{size}")
                if self.step(f"W6@{size}", engine, gpath, lambda: engine.load(gpath, data), False):
                    batch = self._input(engine, f"uniform@{size}")
                    self.step(f"W6@{size}", engine, gpath, lambda: engine.upsert(gpath, batch), True)
                shutil.rmtree(gpath, ignore_errors=True)
        shutil.rmtree(path, ignore_errors=True)

    def run(self) -> dict:
        cfg = self.cfg
        own_dir = cfg.workdir is None
        self.workdir = cfg.workdir or tempfile.mkdtemp(prefix="hudi-bench-")
        started = time.time()
        try:
            self.build()
            for engine in self.writers + self.readers:
                if self.cfg.warmup or engine.family != "ours":
                    engine.start(self.workdir)
            for r in range(cfg.runs):
                run_dir = os.path.join(self.workdir, f"run{r}")
                for i, engine in enumerate(self.writers, 1):
                    log.info("run %d/%d, engine %d/%d: %s", r + 1, cfg.runs, i, len(self.writers), engine.name)
                    self.lane(engine, run_dir)
                shutil.rmtree(run_dir, ignore_errors=True)
        finally:
            if self.inputs is not None:
                self.inputs.release()
            if own_dir:
                shutil.rmtree(self.workdir, ignore_errors=True)
        return self.document(time.time() - started)

    # ---- results
    def document(self, elapsed: float) -> dict:
        from bench.report import ratios

        cells = {}
        for (w, e), cell in self.cells.items():
            secs = [s.seconds for s in cell.samples]
            cells.setdefault(w, {})[e] = {
                "median_s": statistics.median(secs) if secs else None,
                "runs_s": secs,
                "py_peak_mb": max((s.py_rss_mb for s in cell.samples), default=None),
                "py_growth_mb": max((s.py_growth_mb for s in cell.samples), default=None),
                "jvm_peak_mb": max((s.jvm_rss_mb for s in cell.samples if s.jvm_rss_mb), default=None),
                "files_written": statistics.median([s.files_written for s in cell.samples]) if secs else None,
                "bytes_written": statistics.median([s.bytes_written for s in cell.samples]) if secs else None,
                "results": cell.results,
                "errors": cell.errors,
            }
        count, total = expected_after_w2(self.data) if {"W5"} & set(self.cfg.only) else (None, None)
        return {
            "config": {k: v for k, v in asdict(self.cfg).items() if k not in ("workdir", "results_dir", "chart", "warmup")},
            "workloads": {w: WORKLOADS[w.split("@")[0]] for w in cells},
            "cells": cells,
            "ratios": ratios(cells),
            "expected_after_w2": {"count": count, "sum": total},
            "elapsed_s": elapsed,
        }


def _jvm_pid(spark) -> int | None:
    if spark is None:
        return None
    try:
        return int(spark.sparkContext._jvm.java.lang.ProcessHandle.current().pid())
    except Exception:  # no py4j gateway (e.g. Spark Connect): JVM memory is not reported
        return None


def run(cfg: BenchConfig, spark=None, startup_s: float | None = None) -> dict:
    """Run the suite; write bench/results/<timestamp>.json (+ .png) and return the document."""
    from bench import report

    doc = Bench(cfg, spark).run()
    doc["spark_startup_s"] = startup_s
    doc["machine"] = report.machine()
    doc["json_path"], doc["png_path"] = report.save(doc, cfg.results_dir, chart=cfg.chart)
    print(report.table(doc))
    return doc
