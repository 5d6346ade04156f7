"""The engine context (issue 41, first step): a table service's tasks run on Spark or in this process with the same
task function; both give the same table (rows through our reader and hudi-rs, file groups, write stats), and AUTO
picks the local engine for small plans, Spark for large ones."""
from __future__ import annotations

import shutil
import sys
from pathlib import Path

import pyarrow as pa
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "table_service"))
from service_helpers import expected, options, ours, theirs, write, write_commits  # noqa: E402
from storage.config import HoodieConfig  # noqa: E402
from storage.engine.engine_context import (  # noqa: E402
    LOCAL,
    SPARK,
    LocalEngineContext,
    SparkEngineContext,
    engine_for,
    engine_for_deletes,
)
from storage.table.fs_view import FileSystemView  # noqa: E402
from storage.table.meta_client import HoodieTableMetaClient  # noqa: E402
from storage.table_service.clustering import run_clustering, schedule_clustering  # noqa: E402
from storage.table_service.compaction import run_compaction, schedule_compaction  # noqa: E402


def _doubling():
    """A task function (a closure: Spark's workers get it by value, not by importing this test module)."""
    def double(batches):
        for batch in batches:
            rows = batch.to_pylist()
            yield pa.RecordBatch.from_pylist([{"k": r["k"], "v": r["v"] * 2} for r in rows],
                                             schema=pa.schema([("k", pa.string()), ("v", pa.int64())]))
    return double


def test_both_engines_run_the_same_task(spark):
    _double = _doubling()
    rows = [(f"k{i}", i) for i in range(23)]
    costs = [float(i % 5 + 1) for i in range(23)]
    local = LocalEngineContext(threads=3).map_packed(rows, costs, "k string, v long", _double, "k string, v long")
    on_spark = SparkEngineContext(spark).map_packed(rows, costs, "k string, v long", _double, "k string, v long")
    assert sorted(local) == sorted(on_spark) == [(k, 2 * v) for k, v in sorted(rows)]
    assert LocalEngineContext().map_packed([], [], "k string", _double, "k string") == []
    assert SparkEngineContext(spark).map_packed([], [], "k string", _double, "k string") == []


def test_engine_choice(spark):
    small, large = 1024, 1 << 40
    assert engine_for(spark, small, HoodieConfig()).name == LOCAL
    assert engine_for(spark, large, HoodieConfig()).name == SPARK
    assert engine_for(None, large, HoodieConfig()).name == LOCAL  # no session: in process
    assert engine_for(spark, small, HoodieConfig.of({"hoodie.sqlext.engine": "spark"})).name == SPARK
    assert engine_for(spark, large, HoodieConfig.of({"hoodie.sqlext.engine": "LOCAL"})).name == LOCAL
    assert engine_for(spark, 2048, HoodieConfig.of({"hoodie.sqlext.engine.local.max.bytes": "1000"})).name == SPARK
    with pytest.raises(Exception, match="hoodie.sqlext.engine"):
        engine_for(spark, small, HoodieConfig.of({"hoodie.sqlext.engine": "flink"}))


def test_delete_engine_choice_counts_files(spark):
    """A clean's deletes: in process up to hoodie.sqlext.engine.local.max.files files, else Spark tasks."""
    assert engine_for_deletes(spark, 1000, HoodieConfig()).name == LOCAL
    assert engine_for_deletes(spark, 1001, HoodieConfig()).name == SPARK
    assert engine_for_deletes(None, 10 ** 6, HoodieConfig()).name == LOCAL
    assert engine_for_deletes(spark, 3, HoodieConfig.of({"hoodie.sqlext.engine": "SPARK"})).name == SPARK
    assert engine_for_deletes(spark, 3, HoodieConfig.of({"hoodie.sqlext.engine.local.max.files": "2"})).name == SPARK


def _layout(path) -> list[tuple]:
    meta = HoodieTableMetaClient.load(str(path))
    return sorted((s.partition_path, bool(s.base_file), len(s.log_files))
                  for s in FileSystemView(meta).latest_merged_file_slices(None))


def _last_stats(path) -> list[tuple]:
    meta = HoodieTableMetaClient.load(str(path))
    md = meta.active_timeline.commit_metadata(meta.timeline.completed().last())
    return sorted((s.partitionPath, s.numWrites, s.numInserts, s.numUpdateWrites, s.numDeletes, s.totalLogRecords)
                  for s in md.write_stats())


@pytest.fixture(scope="module")
def mor_table(spark, tmp_path_factory):
    path = tmp_path_factory.mktemp("engines") / "t"
    opts = options("engines", "MERGE_ON_READ")
    state = write_commits(spark, path, opts, range(4))
    write(spark, path, [(0, "x", 9, "p0")], opts, "delete")
    state.pop(0, None)
    return path, state


@pytest.mark.parametrize("service", ["compaction", "clustering"])
def test_services_give_the_same_table_on_both_engines(spark, mor_table, tmp_path, service):
    path, state = mor_table
    results = {}
    for engine in (SPARK, LOCAL):
        work = tmp_path / engine
        shutil.copytree(path, work)
        config = HoodieConfig.of({"hoodie.sqlext.engine": engine,
                                  "hoodie.clustering.plan.strategy.sort.columns": "ts"})
        if service == "compaction":
            instant = schedule_compaction(str(work), config)
            assert run_compaction(spark, str(work), instant, config) == [instant]
        else:
            instant = schedule_clustering(str(work), config)
            assert run_clustering(spark, str(work), [instant], config) == [instant]
        assert ours(spark, work) == expected(state) == theirs(work)
        results[engine] = (_layout(work), _last_stats(work))
    assert results[SPARK] == results[LOCAL]
