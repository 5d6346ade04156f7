"""Bounded-memory merges of merge-on-read slices (issue 42): a file slice whose log records are well over ten
times `hoodie.memory.compaction.max.size` reads as a snapshot and compacts through the spillable map
(storage/merge/spillable_map.py) with the same rows as hudi-rs and as the expected state, and its spill files are
gone afterwards.

How the memory bound is shown: the shared test SparkSession cannot take `spark.executor.pyspark.memory` (a
static setting, and its Python workers must stay usable by every other test), and Spark enforces that setting as
an address-space limit (RLIMIT_AS), which a Python worker with pyarrow needs ~500 MB of before it reads a row, so
it cannot be set below a slice kept small for a fast test. So:

- `test_merge_memory_is_bounded_in_the_python_worker` runs the slice merge (the `FileSliceMerge` that the
  snapshot read and compaction tasks run) inside a Spark Python worker of the shared session, once with a 64 KB
  budget and once with the default 1 GiB one, and measures in the worker the peak Arrow memory (a proxy memory
  pool installed as the worker's default for the merge) and the peak resident set growth (VmHWM after resetting
  it through /proc/self/clear_refs). It asserts the bounded merge's peaks stay below the slice's in-memory size
  and well below the unbounded merge's.
- `test_budget_from_pyspark_memory_in_own_session` runs a subprocess with its own small local Spark session with
  `spark.executor.pyspark.memory=1g` and no max size: the budget then comes from
  hoodie.memory.compaction.fraction x the worker's share of that memory (set tiny here to give ~64 KB), the
  merge spills in the worker, and the snapshot read there gives hudi-rs's rows.
"""
from __future__ import annotations

import json
import logging
import os
import shutil
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pyarrow as pa
import pytest

from hudi_oracle import apply_batch, arrow_rows, hudi_rs_read, rows, spark_rows
from quick_jvm import quick_jvm_env
from storage.config import HoodieConfig
from storage.read.file_slice_reader import FileSliceMerge, FileSliceReadContext
from storage.read.mor_scan import DESCRIPTOR_SCHEMA, file_slice_of, slice_descriptor
from storage.table.fs_view import FileSystemView
from storage.table.meta_client import HoodieTableMetaClient
from storage.table.schema_resolver import table_data_schema
from storage.table_service.compaction import run_compaction, schedule_compaction

SCHEMA = "id int, name string, price double, ts long, dt string"
COLS = ["id", "name", "price", "ts", "dt"]
BUDGET = 64 * 1024


def _opts(name):
    return {"hoodie.table.name": name, "hoodie.datasource.write.table.type": "MERGE_ON_READ",
            "hoodie.datasource.write.recordkey.field": "id", "hoodie.datasource.write.precombine.field": "ts",
            "hoodie.datasource.write.partitionpath.field": "dt",
            "hoodie.datasource.write.payload.class": "org.apache.hudi.common.model.DefaultHoodieRecordPayload",
            # one bucket: every insert, update and delete goes to the logs of the one file group
            "hoodie.index.type": "BUCKET", "hoodie.bucket.index.num.buckets": "1",
            "hoodie.logfile.data.block.max.size": str(16 * 1024)}


def _name(i: int, version: int) -> str:
    return f"name-{i:06d}-v{version}-" + "abcdefghij" * 14


def _build(spark, path) -> dict:
    """A base file, then two upserts (updates, new keys, and stale updates that must lose on ts) and deletes."""
    opts = _opts("spill")
    state: dict = {}
    stale = [(i, "stale", -1.0, 1, "2024-01-01") for i in range(1, 2000, 97)]
    batches = [([(i, _name(i, 0), float(i), 10, "2024-01-01") for i in range(2000)], "upsert"),
               ([(i, _name(i, 1), i + 0.1, 11, "2024-01-01") for i in range(2600)] + stale, "upsert"),
               ([(i, _name(i, 2), i + 0.2, 12, "2024-01-01") for i in range(1, 3000, 2)] + stale, "upsert"),
               ([(i, "x", 0.0, 99, "2024-01-01") for i in range(0, 3000, 13)], "delete")]
    for batch, op in batches:
        spark.createDataFrame(batch, SCHEMA).write.format("hudi").options(**opts) \
            .option("hoodie.datasource.write.operation", op).mode("append").save(str(path))
        apply_batch(state, batch, delete=op == "delete")
    return state


@pytest.fixture(scope="module")
def spill_table(spark, tmp_path_factory):
    path = tmp_path_factory.mktemp("spill") / "t"
    started = time.monotonic()
    state = _build(spark, path)
    logging.getLogger(__name__).info("spill table written in %.1f s", time.monotonic() - started)
    meta = HoodieTableMetaClient.load(str(path))
    [file_slice] = FileSystemView(meta).latest_merged_file_slices(None)
    log_bytes = sum(lf.size for lf in file_slice.log_files)
    assert file_slice.base_file is not None and log_bytes >= 10 * BUDGET, log_bytes
    return path, state, log_bytes


def _expected(state):
    return rows([dict(zip(COLS, r)) for r in state.values()], COLS)


def _memory_opts(spill_dir, budget=BUDGET):
    return {"hoodie.memory.compaction.max.size": str(budget), "hoodie.memory.spillable.map.path": str(spill_dir)}


def test_spilling_snapshot_read_and_compaction_match_hudi_rs(spark, spill_table, tmp_path, monkeypatch):
    path, state, log_bytes = spill_table
    work = tmp_path / "t"
    shutil.copytree(path, work)
    spill_dir = tmp_path / "spill"
    opts = _memory_opts(spill_dir)
    expected = _expected(state)

    # the merge spills: in the driver, the same FileSliceMerge the tasks run, with its statistics
    meta = HoodieTableMetaClient.load(str(work))
    [file_slice] = FileSystemView(meta).latest_merged_file_slices(None)
    ctx = FileSliceReadContext.for_table(meta, None, HoodieConfig.of(opts))
    schema = table_data_schema(meta, None, file_slice.base_file.path)
    merge = FileSliceMerge(file_slice, schema, ctx)
    pieces = list(merge)
    assert merge.spill.spills >= 10 and merge.spill.partitions >= 2 and len(pieces) >= 2
    assert merge.spill.largest_partition_bytes <= BUDGET
    assert arrow_rows(pa.concat_tables(pieces), COLS) == expected
    assert not os.listdir(spill_dir)  # the spill directory of the merge is gone

    # a merge that fails half-way (here: its second partition) leaves no spill files either
    from storage.read import file_slice_reader

    calls = []

    def failing_merge(*args, **kwargs):
        calls.append(1)
        if len(calls) == 2:
            assert os.listdir(spill_dir)  # spilled files exist while the merge runs
            raise RuntimeError("merge failed")
        return original_merge(*args, **kwargs)

    original_merge = file_slice_reader.merge_records
    monkeypatch.setattr(file_slice_reader, "merge_records", failing_merge)
    with pytest.raises(RuntimeError, match="merge failed"):
        list(FileSliceMerge(file_slice, schema, ctx))
    monkeypatch.undo()
    assert not os.listdir(spill_dir)

    # snapshot read in Spark tasks, spilling
    assert spark_rows(spark.read.format("hudi").options(**opts).load(str(work)), COLS) == expected \
        == arrow_rows(hudi_rs_read(str(work)), COLS)
    assert not os.listdir(spill_dir)

    # compaction, spilling, then every reader sees the same rows from the new base file
    instant = schedule_compaction(str(work))
    assert run_compaction(spark, str(work), instant, HoodieConfig.of(opts)) == [instant]
    assert not os.listdir(spill_dir)
    ro = spark.read.format("hudi").option("hoodie.datasource.query.type", "read_optimized").load(str(work))
    assert spark_rows(ro, COLS) == expected == arrow_rows(hudi_rs_read(str(work)), COLS)
    metadata = HoodieTableMetaClient.load(str(work)).active_timeline.commit_metadata(
        HoodieTableMetaClient.load(str(work)).timeline.completed().find(instant))
    [stat] = metadata.write_stats()
    assert stat.numWrites == len(expected) and stat.totalLogSizeCompacted == log_bytes


def _measure_in_worker(schema: pa.Schema, ctx: FileSliceReadContext):
    def run(batches):
        import gc
        import tracemalloc

        def status(field):
            with open("/proc/self/status") as f:
                return next(int(line.split()[1]) * 1024 for line in f if line.startswith(field + ":"))

        for batch in batches:
            for row in batch.to_pylist():
                gc.collect()
                previous = pa.default_memory_pool()
                pool = pa.proxy_memory_pool(previous)
                pa.set_memory_pool(pool)
                tracemalloc.start()
                try:
                    with open("/proc/self/clear_refs", "w") as f:
                        f.write("5")  # reset the peak resident set size to the current one
                    rss = status("VmRSS")
                    merge = FileSliceMerge(file_slice_of(row), schema, ctx)
                    n = sum(piece.num_rows for piece in merge)
                    hwm = status("VmHWM")
                    python_peak = tracemalloc.get_traced_memory()[1]
                finally:
                    tracemalloc.stop()
                    pa.set_memory_pool(previous)
                yield pa.RecordBatch.from_pylist([{
                    "rows": n, "arrow_peak": pool.max_memory(), "python_peak": python_peak,
                    "rss_growth": hwm - rss, "spills": merge.spill.spills,
                    "held_peak": merge.spill.peak_in_memory_bytes}])

    return run


def test_merge_memory_is_bounded_in_the_python_worker(spark, spill_table, tmp_path):
    path, state, _ = spill_table
    meta = HoodieTableMetaClient.load(str(path))
    [file_slice] = FileSystemView(meta).latest_merged_file_slices(None)
    schema = table_data_schema(meta, None, file_slice.base_file.path)
    descriptors = spark.createDataFrame([slice_descriptor(file_slice)], DESCRIPTOR_SCHEMA).coalesce(1)
    out = "rows long, arrow_peak long, python_peak long, rss_growth long, spills long, held_peak long"
    measured = {}
    # the first run warms the worker up (imports, codecs, allocator arenas) and is not measured
    for label, budget in (("warm-up", BUDGET), ("bounded", BUDGET), ("unbounded", None)):
        opts = _memory_opts(tmp_path / "spill", budget) if budget else {}
        ctx = FileSliceReadContext.for_table(meta, None, HoodieConfig.of(opts))
        [row] = descriptors.mapInArrow(_measure_in_worker(schema, ctx), out).collect()
        measured[label] = row.asDict()
    bounded, unbounded = measured["bounded"], measured["unbounded"]
    print_line = json.dumps(measured)
    assert bounded["rows"] == unbounded["rows"] == len(state), print_line
    assert unbounded["spills"] == 0 and bounded["spills"] >= 10, print_line
    in_memory = unbounded["held_peak"]  # the slice's records (base + logs) as Arrow, all held at once
    # the map never held more than the budget plus the one log block or base batch being put
    assert bounded["held_peak"] <= BUDGET + 64 * 1024 < in_memory / 4, print_line
    # the merge's memory at its peak (Arrow buffers: records held, partition merge, spill writes, base and log
    # decoding; plus every Python and numpy allocation, traced by tracemalloc) stays below the slice's records
    # held in memory, and far below the unbounded merge's peak. (The resident set growth is reported, not
    # asserted: allocator retention and lazily mapped library pages make it noisy at this scale.)
    peak = {k: v["arrow_peak"] + v["python_peak"] for k, v in measured.items()}
    assert peak["bounded"] < in_memory, print_line
    assert bounded["arrow_peak"] * 4 < unbounded["arrow_peak"], print_line
    assert peak["bounded"] * 3 < peak["unbounded"], print_line
    assert not os.path.exists(tmp_path / "spill") or not os.listdir(tmp_path / "spill")
    logging.getLogger(__name__).info("worker merge memory: %s", print_line)


_SUBPROCESS = textwrap.dedent("""
    import json, os, sys
    from pyspark.sql import SparkSession
    import sqlext.datasource
    spark = (SparkSession.builder.master("local[1]").config("spark.ui.enabled", "false")
             .config("spark.sql.adaptive.enabled", "false")
             .config("spark.executor.pyspark.memory", "1g").config("spark.sql.shuffle.partitions", "1")
             .config("spark.ui.showConsoleProgress", "false").getOrCreate())
    spark.sparkContext.setLogLevel("ERROR")
    sqlext.datasource.register(spark)
    from storage.config import HoodieConfig
    from storage.read.file_slice_reader import FileSliceMerge, FileSliceReadContext
    from storage.read.mor_scan import DESCRIPTOR_SCHEMA, file_slice_of, slice_descriptor
    from storage.table.fs_view import FileSystemView
    from storage.table.meta_client import HoodieTableMetaClient
    from storage.table.schema_resolver import table_data_schema
    import pyarrow as pa

    path, spill_dir = sys.argv[1], sys.argv[2]
    opts = {"hoodie.memory.compaction.fraction": "0.00006", "hoodie.memory.spillable.map.path": spill_dir}
    meta = HoodieTableMetaClient.load(path)
    [fs] = FileSystemView(meta).latest_merged_file_slices(None)
    ctx = FileSliceReadContext.for_table(meta, None, HoodieConfig.of(opts))
    schema = table_data_schema(meta, None, fs.base_file.path)

    def probe(batches):
        for batch in batches:
            for row in batch.to_pylist():
                merge = FileSliceMerge(file_slice_of(row), schema, ctx)
                n = sum(p.num_rows for p in merge)
                yield pa.RecordBatch.from_pylist([{"rows": n, "budget": ctx.memory.budget(),
                    "spills": merge.spill.spills, "env": os.environ.get("PYSPARK_EXECUTOR_MEMORY_MB", "")}])

    [probed] = spark.createDataFrame([slice_descriptor(fs)], DESCRIPTOR_SCHEMA).mapInArrow(
        probe, "rows long, budget long, spills long, env string").collect()
    snapshot = [r.asDict() for r in spark.read.format("hudi").options(**opts).load(path)
                .select("id", "name", "price", "ts", "dt").collect()]
    print("RESULT " + json.dumps({"probe": probed.asDict(), "snapshot": snapshot}))
    spark.stop()
""")


@pytest.mark.multiprocess
def test_budget_from_pyspark_memory_in_own_session(spill_table, tmp_path):
    path, state, _ = spill_table
    work = path  # only read there
    spill_dir = tmp_path / "spill"
    repo = Path(__file__).resolve().parents[3]
    env = quick_jvm_env(PYSPARK_PYTHON=sys.executable, PYSPARK_DRIVER_PYTHON=sys.executable,
                        PYTHONPATH=os.pathsep.join([str(repo), os.environ.get("PYTHONPATH", "")]))
    env.pop("HIVE_METASTORE_URIS", None)
    done = subprocess.run([sys.executable, "-c", _SUBPROCESS, str(work), str(spill_dir)], env=env, cwd=str(repo),
                          capture_output=True, text=True, timeout=240)
    assert done.returncode == 0, done.stderr[-3000:]
    result = json.loads(next(line for line in done.stdout.splitlines() if line.startswith("RESULT "))[7:])
    probe = result["probe"]
    worker_memory = int(probe["env"]) * 1024 * 1024  # spark.executor.pyspark.memory / executor cores
    assert worker_memory > 0 and probe["budget"] == int(worker_memory * 0.00006) < 2 * BUDGET
    assert probe["spills"] >= 5 and probe["rows"] == len(state)
    expected = _expected(state)
    assert rows(result["snapshot"], COLS) == expected == arrow_rows(hudi_rs_read(str(work)), COLS)
    assert not os.path.exists(spill_dir) or not os.listdir(spill_dir)
