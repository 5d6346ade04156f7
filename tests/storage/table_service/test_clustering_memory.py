"""Clustering a group larger than the task's merge memory (issue 42): the executor reads each slice a piece at a
time and sorts out of core (storage/layout/external_sort.py), so what a task holds is bounded by
`hoodie.memory.compaction.max.size`, not by the group; the files it writes hold the same rows in the same order
as the in-memory clustering, and hudi-rs reads the table alike.

The memory bound is measured in this process around the executor's own steps (`sorted_group` and the ordered
tables it yields), with a proxy Arrow memory pool and tracemalloc, as test_spilling_merge does for slice merges."""
from __future__ import annotations

import gc
import json
import shutil
import tracemalloc

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from hudi_oracle import apply_batch, arrow_rows, hudi_rs_read, rows
from storage.config import HoodieConfig
from storage.table.fs_view import FileSystemView
from storage.table.meta_client import HoodieTableMetaClient
from storage.table.schema_resolver import table_data_schema
from storage.layout.space_curve import LayoutOptimizationStrategy
from storage.table_service.clustering import run_clustering, schedule_clustering
from storage.table_service.clustering.executor import ClusteringTaskContext, sorted_group

SCHEMA = "id int, name string, price double, ts long, dt string"
COLS = ["id", "name", "price", "ts", "dt"]
BUDGET = 48 * 1024
CLUSTER = {"hoodie.clustering.plan.strategy.sort.columns": "price,id",
           "hoodie.layout.optimize.strategy": "z-order",
           "hoodie.clustering.plan.strategy.target.file.max.bytes": str(120 * 1024),
           "hoodie.clustering.plan.strategy.small.file.limit": str(10 * 1024 * 1024)}


def _opts():
    return {"hoodie.table.name": "clmem", "hoodie.datasource.write.table.type": "MERGE_ON_READ",
            "hoodie.datasource.write.recordkey.field": "id", "hoodie.datasource.write.precombine.field": "ts",
            "hoodie.datasource.write.partitionpath.field": "dt", "hoodie.parquet.small.file.limit": "0"}


def _row(i: int, version: int) -> tuple:
    return (i, f"name-{i:05d}-v{version}-" + "abcdefgh" * 12, float((i * 7919) % 3001) + version / 10, version,
            "2024-01-01")


@pytest.fixture(scope="module")
def group_table(spark, tmp_path_factory):
    """Four bulk inserts of 1,200 rows (four small file groups of one partition), then updates and deletes in
    logs."""
    path = tmp_path_factory.mktemp("clmem") / "t"
    state: dict = {}
    batches = [([_row(i, 0) for i in range(n * 1200, (n + 1) * 1200)], "bulk_insert") for n in range(4)]
    batches += [([_row(i, 1) for i in range(0, 4800, 5)], "upsert"), ([_row(i, 2) for i in range(3, 4800, 17)],
                                                                         "delete")]
    for batch, op in batches:
        spark.createDataFrame(batch, SCHEMA).write.format("hudi").options(**_opts()) \
            .option("hoodie.datasource.write.operation", op).mode("append").save(str(path))
        apply_batch(state, batch, delete=op == "delete", ordering=3)
    return path, rows([dict(zip(COLS, r)) for r in state.values()], COLS)


def _cluster(spark, source, target, memory: dict) -> list[list[int]]:
    shutil.copytree(source, target)
    config = HoodieConfig.of({**CLUSTER, **memory})
    instant = schedule_clustering(str(target), config)
    assert run_clustering(spark, str(target), [instant], config) == [instant]
    meta = HoodieTableMetaClient.load(str(target))
    stats = meta.active_timeline.commit_metadata(meta.timeline.completed().find(instant)).write_stats()
    assert len(stats) >= 3  # the group is cut into several files
    return sorted(pq.read_table(str(target / s.path), columns=["id"])["id"].to_pylist() for s in stats)


def test_group_larger_than_memory_clusters_like_the_in_memory_run(spark, group_table, tmp_path):
    path, expected = group_table
    spill = tmp_path / "spill"
    bounded = _cluster(spark, path, tmp_path / "bounded",
                       {"hoodie.memory.compaction.max.size": str(BUDGET),
                        "hoodie.memory.spillable.map.path": str(spill)})
    unbounded = _cluster(spark, path, tmp_path / "unbounded", {})
    assert bounded == unbounded  # the same files: same rows, same order
    assert not spill.exists() or not list(spill.iterdir())  # spill files gone
    assert arrow_rows(hudi_rs_read(str(tmp_path / "bounded")), COLS) == expected


_POOLS: list = []  # a proxy pool must outlive every buffer allocated through it (caches may keep some)


def _measure(slices, ctx) -> dict:
    gc.collect()
    previous = pa.default_memory_pool()
    pool = pa.proxy_memory_pool(previous)
    _POOLS.append(pool)
    pa.set_memory_pool(pool)
    tracemalloc.start()
    try:
        with sorted_group(slices, ctx) as sorter:
            n = sum(t.num_rows for t in sorter.sorted_tables())
            spilled, stats = sorter.spilled, sorter.stats
        python_peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
        pa.set_memory_pool(previous)
    return {"rows": n, "spilled": spilled, "arrow_peak": pool.max_memory(), "python_peak": python_peak,
            "held_peak": stats.peak_held_bytes}


def test_clustering_task_memory_is_bounded(group_table, tmp_path):
    path, expected = group_table
    meta = HoodieTableMetaClient.load(str(path))
    slices = FileSystemView(meta).latest_merged_file_slices(None)
    assert len(slices) == 4 and all(s.log_files for s in slices[:1])
    schema = table_data_schema(meta, None, slices[0].base_file.path)

    def ctx(memory: dict) -> ClusteringTaskContext:
        config = HoodieConfig.of(memory)
        return ClusteringTaskContext.of(meta, "20990101000000000", schema, ("price", "id"),
                                        LayoutOptimizationStrategy.ZORDER, config, True, config)

    bounded_opts = {"hoodie.memory.compaction.max.size": str(BUDGET),
                    "hoodie.memory.spillable.map.path": str(tmp_path / "spill")}
    _measure(slices, ctx(bounded_opts))  # warm-up: imports, codecs, allocator
    bounded = _measure(slices, ctx(bounded_opts))
    unbounded = _measure(slices, ctx({}))
    line = json.dumps({"bounded": bounded, "unbounded": unbounded})
    assert bounded["rows"] == unbounded["rows"] == len(expected), line
    assert bounded["spilled"] and not unbounded["spilled"], line
    in_memory = unbounded["held_peak"]  # the group's rows, all held at once
    assert in_memory > 10 * BUDGET, line
    assert bounded["held_peak"] <= 2 * BUDGET, line
    # Arrow buffers at the peak (rows held, a bucket and its sorted copy, parquet and log decoding): well below
    # the group held whole, and the unbounded run's; Python's own allocations do not grow with the rows held
    assert bounded["arrow_peak"] < in_memory / 3, line
    assert bounded["arrow_peak"] * 4 < unbounded["arrow_peak"], line
    assert bounded["python_peak"] < 1.5 * unbounded["python_peak"] + 256 * 1024, line
