"""Measurement: wall time, peak RSS (this process; the Spark JVM and its Python workers), files/bytes written."""
from __future__ import annotations

import os
import threading
import time
from dataclasses import dataclass

import psutil

SAMPLE_S = 0.05


@dataclass
class Sample:
    seconds: float
    py_rss_mb: float            # peak RSS of this process during the operation
    py_growth_mb: float         # that peak minus the RSS when the operation started (what the operation added)
    jvm_rss_mb: float | None    # peak RSS of the Spark JVM + its Python workers (Spark engines only)
    files_written: int
    bytes_written: int


def dir_state(root: str) -> dict[str, tuple[int, int]]:
    """path -> (size, mtime_ns) of every file under root (hidden files included: logs, timelines)."""
    out: dict[str, tuple[int, int]] = {}
    for dirpath, _, names in os.walk(root):
        for name in names:
            p = os.path.join(dirpath, name)
            try:
                st = os.stat(p)
            except FileNotFoundError:  # removed while listing (e.g. a marker)
                continue
            out[p] = (st.st_size, st.st_mtime_ns)
    return out


def written(before: dict[str, tuple[int, int]], after: dict[str, tuple[int, int]]) -> tuple[int, int]:
    """(files, bytes) new or changed between two dir_state()s."""
    changed = [p for p, v in after.items() if before.get(p) != v]
    return len(changed), sum(after[p][0] for p in changed)


class RssSampler:
    """Peak RSS over a block, sampled every 50 ms in a thread: the Python process, and the JVM with its
    children (PySpark's Python workers) when a JVM pid is given."""

    def __init__(self, jvm_pid: int | None = None):
        self.me = psutil.Process()
        self.jvm = psutil.Process(jvm_pid) if jvm_pid else None
        self.py_peak = 0
        self.py_start = self.me.memory_info().rss
        self.jvm_peak = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True)

    def _jvm_rss(self) -> int:
        total = self.jvm.memory_info().rss
        for child in self.jvm.children(recursive=True):
            try:
                total += child.memory_info().rss
            except psutil.Error:
                pass
        return total

    def _sample(self) -> None:
        self.py_peak = max(self.py_peak, self.me.memory_info().rss)
        if self.jvm is not None:
            try:
                self.jvm_peak = max(self.jvm_peak, self._jvm_rss())
            except psutil.Error:
                pass

    def _loop(self) -> None:
        while not self._stop.wait(SAMPLE_S):
            self._sample()

    def __enter__(self) -> "RssSampler":
        self._sample()
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join()
        self._sample()


def measure(fn, watch_dir: str | None, jvm_pid: int | None):
    """Run fn() once; (its result, Sample)."""
    before = dir_state(watch_dir) if watch_dir else {}
    with RssSampler(jvm_pid) as rss:
        t0 = time.perf_counter()
        result = fn()
        seconds = time.perf_counter() - t0
    files, nbytes = written(before, dir_state(watch_dir)) if watch_dir else (0, 0)
    mb = 1 << 20
    return result, Sample(seconds, rss.py_peak / mb, (rss.py_peak - rss.py_start) / mb,
                          rss.jvm_peak / mb if jvm_pid else None, files, nbytes)


def median_seconds(fn, runs: int) -> tuple[float, object]:
    """The median wall seconds of `runs` calls of `fn`, and the last call's result."""
    import statistics

    times, result = [], None
    for _ in range(runs):
        started = time.perf_counter()
        result = fn()
        times.append(time.perf_counter() - started)
    return round(statistics.median(times), 4), result


def bench_session():
    """The warm `local[2]` session a workload script measures in: the SQL front end, no metastore (tables live in
    temporary directories; a catalog would keep their names from run to run)."""
    import sqlext

    spark = sqlext.session(master="local[2]", metastore=False,
                           conf={"spark.ui.enabled": "false", "spark.sql.shuffle.partitions": "4",
                                 "spark.ui.showConsoleProgress": "false"})
    spark.sparkContext.setLogLevel("ERROR")
    return spark


def save_result(doc: dict, out_dir: str, workload: str) -> str:
    """`doc` as bench/results/<workload>-<UTC time>.json; its path."""
    import json

    os.makedirs(out_dir, exist_ok=True)
    out = os.path.join(out_dir, f"{workload}-{time.strftime('%Y%m%dT%H%M%SZ', time.gmtime())}.json")
    with open(out, "w") as f:
        json.dump(doc, f, indent=2)
    return out


def table_types(parser, text: str) -> tuple[str, ...]:
    """`--types` (cow, mor or cow,mor) as a tuple; a usage error otherwise."""
    types = tuple(t.strip() for t in text.split(",") if t.strip())
    if not types or not set(types) <= {"cow", "mor"}:
        parser.error(f"--types: cow and/or mor, not {text}")
    return types


def run_workload(workload: str, cfg, out_dir: str, run, table_lines, log) -> int:
    """A workload script's main: `run(cfg, spark, workdir)` in the bench session and a temporary directory, its
    document saved under `out_dir` and printed as `table_lines(doc)`."""
    import logging
    import tempfile

    logging.basicConfig(level=logging.WARNING, format="%(asctime)s %(name)s %(message)s")
    log.setLevel(logging.INFO)
    spark = bench_session()
    with tempfile.TemporaryDirectory(prefix=f"bench-{workload}-") as work:
        doc = run(cfg, spark, work)
    out = save_result(doc, out_dir, workload)
    print("\n".join(table_lines(doc)))
    print(f"written {out}")
    return 0
