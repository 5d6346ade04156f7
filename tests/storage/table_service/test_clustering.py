"""Clustering on copy-on-write and merge-on-read tables we write: many small file groups become a few sorted ones
published as a CLUSTER replacecommit; the rows do not change (our reader and hudi-rs, before and after); writers
and a pending clustering (reject / allow updates); triggers; bad input changes nothing."""
from __future__ import annotations

import datetime
import os

import pyarrow.parquet as pq
import pytest

from service_helpers import data_files, expected, options, ours, theirs, write
from hudi_oracle import apply_batch
from storage.avro.container import read_avro_container
from storage.config import HoodieConfig
from storage.exception import HoodieClusteringError, HoodieClusteringUpdateError, HoodieConfigError
from storage.table.fs_view import FileSystemView
from storage.table.meta_client import HoodieTableMetaClient
from storage.table_service.clustering import run_clustering, schedule_clustering, show_clustering
from storage.table_service.clustering.plan import ClusteringPlanConfig, build_groups, filter_partitions
from storage.table_service.clustering.executor import _cuts


def _cfg(**opts) -> ClusteringPlanConfig:
    return ClusteringPlanConfig.of(HoodieConfig.of({}, {k.replace("_", "."): str(v) for k, v in opts.items()}))


def _small_file_table(spark, path, table_type="COPY_ON_WRITE", commits=8):
    """`commits` bulk inserts of 6 rows each: every one adds a file group per partition."""
    opts = options(path.name, table_type)
    state: dict = {}
    for n in range(commits):
        data = [(n * 10 + i, f"v{n}", (n * 37 + i * 11) % 50, f"p{i % 2}") for i in range(6)]
        write(spark, path, data, opts, "bulk_insert")
        apply_batch(state, data, ordering=2)
    return opts, state


def _file_groups(path) -> int:
    return len(FileSystemView(HoodieTableMetaClient.load(str(path))).file_groups())


SORTED = {"hoodie.clustering.plan.strategy.sort.columns": "ts"}


# -- planning (no Spark) -----------------------------------------------------------------------------------------
def test_partition_filter_modes():
    parts = [f"2024-01-{d:02d}" for d in range(1, 11)]
    assert filter_partitions(parts, _cfg()) == parts
    recent = _cfg(**{"hoodie.clustering.plan.partition.filter.mode": "RECENT_DAYS",
                     "hoodie.clustering.plan.strategy.skip.partitions.from.latest": 1,
                     "hoodie.clustering.plan.strategy.daybased.lookback.partitions": 3})
    assert filter_partitions(parts, recent) == ["2024-01-07", "2024-01-08", "2024-01-09"]
    selected = _cfg(**{"hoodie.clustering.plan.partition.filter.mode": "SELECTED_PARTITIONS",
                       "hoodie.clustering.plan.strategy.cluster.begin.partition": "2024-01-03",
                       "hoodie.clustering.plan.strategy.cluster.end.partition": "2024-01-05"})
    assert filter_partitions(parts, selected) == ["2024-01-03", "2024-01-04", "2024-01-05"]
    rolling = _cfg(**{"hoodie.clustering.plan.partition.filter.mode": "DAY_ROLLING"})
    hours = [f"h{i}" for i in range(30)]
    assert filter_partitions(hours, rolling, now=datetime.datetime(2024, 1, 1, 5)) == ["h5", "h29"]
    listed = _cfg(**{"hoodie.clustering.plan.strategy.partition.selected": "2024-01-02,2024-01-09"})
    assert filter_partitions(parts, listed) == ["2024-01-02", "2024-01-09"]
    regex = _cfg(**{"hoodie.clustering.plan.strategy.partition.regex.pattern": "2024-01-0[12]"})
    assert filter_partitions(parts, regex) == ["2024-01-01", "2024-01-02"]
    with pytest.raises(HoodieClusteringError, match="cluster.begin.partition"):
        filter_partitions(parts, _cfg(**{"hoodie.clustering.plan.partition.filter.mode": "SELECTED_PARTITIONS"}))
    with pytest.raises(HoodieConfigError, match="hoodie.clustering.plan.partition.filter.mode"):
        _cfg(**{"hoodie.clustering.plan.partition.filter.mode": "SOMETIMES"})


def test_groups_are_bounded_by_bytes_and_sized_by_target():
    from storage.table.file_slice import FileSlice, HoodieBaseFile, HoodieFileGroupId

    def sl(i, size):
        name = f"f{i:02d}-0_0-1-1_20240101000000000.parquet"
        return FileSlice(HoodieFileGroupId("p", f"f{i:02d}-0"), "20240101000000000", HoodieBaseFile.of(f"/t/p/{name}", size), [])

    cfg = _cfg(**{"hoodie.clustering.plan.strategy.max.bytes.per.group": 100,
                  "hoodie.clustering.plan.strategy.target.file.max.bytes": 40})
    groups = build_groups([sl(i, s) for i, s in enumerate([30, 50, 20, 60, 10])], cfg)
    assert [[s.base_file.size for s in g.slices] for g in groups] == [[60], [50, 30, 20], [10]]
    assert [g.num_output_file_groups for g in groups] == [2, 3, 1]
    lone = _cfg(**{"hoodie.clustering.plan.strategy.max.bytes.per.group": 100,
                   "hoodie.clustering.plan.strategy.single.group.clustering.enabled": "false"})
    assert [len(g.slices) for g in build_groups([sl(0, 60), sl(1, 50)], lone)] == []
    assert _cuts(10, 3) == [(0, 4), (4, 3), (7, 3)] and _cuts(2, 5) == [(0, 1), (1, 1)]


# -- execution ---------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("table_type", ["COPY_ON_WRITE", "MERGE_ON_READ"])
def test_clustering_merges_small_files_and_keeps_the_rows(spark, tmp_path, table_type):
    path = tmp_path / f"cl_{table_type[:3].lower()}"
    opts, state = _small_file_table(spark, path, table_type)
    if table_type == "MERGE_ON_READ":  # logs to merge: updates and a delete
        upd = [(0, "u", 99, "p0"), (11, "u", 98, "p1"), (23, "u", 97, "p1")]
        write(spark, path, upd, opts)
        apply_batch(state, upd, ordering=2)
        write(spark, path, [(10, "x", 100, "p0")], opts, "delete")
        apply_batch(state, [(10, "x", 100, "p0")], delete=True, ordering=2)
    before = ours(spark, path)
    assert before == expected(state) == theirs(path)
    groups_before = _file_groups(path)
    assert groups_before == 16

    instant = schedule_clustering(str(path), HoodieConfig.of(SORTED))
    meta = HoodieTableMetaClient.load(str(path))
    requested = read_avro_container((path / ".hoodie" / f"{instant}.replacecommit.requested").read_bytes())
    assert requested["operationType"] == "CLUSTER"
    plan = requested["clusteringPlan"]
    assert sum(len(g["slices"]) for g in plan["inputGroups"]) == 16
    assert plan["strategy"]["strategyParams"]["hoodie.clustering.plan.strategy.sort.columns"] == "ts"
    assert ours(spark, path) == before  # a plan changes nothing a reader sees
    assert show_clustering(str(path))[0] == {"timestamp": instant, "input_group_size": 2, "state": "REQUESTED",
                                             "involved_partitions": "p0,p1"}

    assert run_clustering(spark, str(path)) == [instant]
    meta = HoodieTableMetaClient.load(str(path))
    done = meta.timeline.completed().find(instant)
    assert done.action == "replacecommit"
    md = meta.active_timeline.commit_metadata(done)
    assert md.operationType == "CLUSTER"
    assert sum(map(len, md.partitionToReplaceFileIds.values())) == 16
    assert _file_groups(path) == 2
    assert ours(spark, path) == before == theirs(path)
    # records keep their commit times; each new file is sorted by the sort column
    for stat in md.write_stats():
        table = pq.read_table(str(path / stat.path))
        ts = table.column("ts").to_pylist()
        assert ts == sorted(ts)
        assert set(table.column("_hoodie_commit_time").to_pylist()) < {i.timestamp for i in meta.timeline}
    assert show_clustering(str(path))[0]["state"] == "COMPLETED"
    # time travel to before the clustering still reads the old files
    last_write = [i for i in meta.timeline.completed() if i.timestamp < instant][-1].timestamp
    assert ours(spark, path, **{"as.of.instant": last_write}) == before


def test_update_of_a_file_group_under_pending_clustering(spark, tmp_path):
    path = tmp_path / "cl_reject"
    opts, state = _small_file_table(spark, path, commits=3)
    instant = schedule_clustering(str(path), HoodieConfig.of(SORTED))
    timeline = sorted(os.listdir(path / ".hoodie"))
    files = data_files(path)
    with pytest.raises(HoodieClusteringUpdateError, match=f"pending clustering {instant}"):
        write(spark, path, [(0, "upd", 90, "p0")], opts)
    assert sorted(os.listdir(path / ".hoodie")) == timeline and data_files(path) == files
    # inserts go elsewhere: never into a file group being clustered
    write(spark, path, [(500, "new", 1, "p0")], opts)
    apply_batch(state, [(500, "new", 1, "p0")], ordering=2)
    assert run_clustering(spark, str(path)) == [instant]
    assert ours(spark, path) == expected(state) == theirs(path)

    # allow: the update wins, the clustering aborts and leaves nothing behind
    allow = {"hoodie.clustering.updates.strategy":
             "org.apache.hudi.client.clustering.update.strategy.SparkAllowUpdateStrategy"}
    write(spark, path, [(600 + i, "more", i, f"p{i % 2}") for i in range(4)], opts, "bulk_insert")
    apply_batch(state, [(600 + i, "more", i, f"p{i % 2}") for i in range(4)], ordering=2)
    second = schedule_clustering(str(path), HoodieConfig.of(SORTED))
    write(spark, path, [(600, "upd", 91, "p0")], {**opts, **allow})
    apply_batch(state, [(600, "upd", 91, "p0")], ordering=2)
    with pytest.raises(HoodieClusteringError, match="aborted"):
        run_clustering(spark, str(path), [second], HoodieConfig.of(allow))
    meta = HoodieTableMetaClient.load(str(path))
    assert meta.timeline.find(second) is None
    assert ours(spark, path) == expected(state) == theirs(path)


def test_bad_input_changes_nothing(spark, tmp_path):
    path = tmp_path / "cl_bad"
    _small_file_table(spark, path, commits=2)
    timeline = sorted(os.listdir(path / ".hoodie"))
    with pytest.raises(HoodieClusteringError, match="unknown sort column.*nope.*id, name, ts, dt"):
        schedule_clustering(str(path), HoodieConfig.of({"hoodie.clustering.plan.strategy.sort.columns": "ts,nope"}))
    with pytest.raises(HoodieConfigError, match="hoodie.layout.optimize.strategy"):
        schedule_clustering(str(path), HoodieConfig.of(SORTED, {"hoodie.layout.optimize.strategy": "spiral"}))
    with pytest.raises(HoodieClusteringError, match="no pending clustering 1234"):
        run_clustering(spark, str(path), ["1234"])
    assert sorted(os.listdir(path / ".hoodie")) == timeline


def test_inline_clustering_every_n_commits(spark, tmp_path):
    path = tmp_path / "cl_inline"
    opts = options("cl_inline", **{"hoodie.clustering.inline": "true", "hoodie.clustering.inline.max.commits": 3,
                                   **SORTED})
    state: dict = {}
    for n in range(4):
        data = [(n * 10 + i, f"v{n}", i, f"p{i % 2}") for i in range(4)]
        write(spark, path, data, opts, "bulk_insert")
        apply_batch(state, data, ordering=2)
    meta = HoodieTableMetaClient.load(str(path))
    replaces = [i for i in meta.timeline.completed() if i.action == "replacecommit"]
    assert len(replaces) == 1  # after the third commit; the fourth starts counting again
    assert ours(spark, path) == expected(state) == theirs(path)
    assert _file_groups(path) == 4  # 2 clustered + 2 of the fourth commit


def test_incremental_reads_clean_and_async_clustering(spark, tmp_path):
    """Clustered rows keep their commit times, so an incremental read across the clustering returns only what
    writes changed; the cleaner removes the replaced file groups once outside retention; async clustering runs in a
    background thread of the writer."""
    from storage.table_service.clean import run_clean
    from storage.table_service.clustering import wait_for_async_clustering

    path = tmp_path / "cl_incr"
    opts, state = _small_file_table(spark, path, "MERGE_ON_READ", commits=4)
    last_write = HoodieTableMetaClient.load(str(path)).timeline.completed().last().timestamp
    instant = schedule_clustering(str(path), HoodieConfig.of(SORTED))
    run_clustering(spark, str(path))
    write(spark, path, [(1, "after", 70, "p1")], opts)
    apply_batch(state, [(1, "after", 70, "p1")], ordering=2)
    incr = spark.read.format("hudi").option("hoodie.datasource.query.type", "incremental") \
        .option("hoodie.datasource.read.begin.instanttime", last_write).load(str(path))
    assert [(r.id, r.name) for r in incr.collect()] == [(1, "after")]
    meta = HoodieTableMetaClient.load(str(path))
    replaced = meta.active_timeline.commit_metadata(meta.timeline.find(instant)).replaced_file_ids()
    assert len(replaced) == 8
    run_clean(spark, str(path), HoodieConfig.of({"hoodie.cleaner.commits.retained": "1"}))
    left = {os.path.basename(f) for f in data_files(path)}
    assert not [n for n in left if any(fid in n for _, fid in replaced)], "replaced file groups must be cleaned"
    assert ours(spark, path) == expected(state) == theirs(path)

    async_opts = {**opts, "hoodie.clustering.async.enabled": "true", "hoodie.clustering.async.max.commits": "2",
                  **SORTED}
    for n in range(2):
        data = [(900 + n * 10 + i, "a", i, f"p{i % 2}") for i in range(4)]
        write(spark, path, data, async_opts, "bulk_insert")
        apply_batch(state, data, ordering=2)
    wait_for_async_clustering(str(path))
    shown = show_clustering(str(path))
    assert [r["state"] for r in shown] == ["COMPLETED", "COMPLETED"]
    assert ours(spark, path) == expected(state) == theirs(path)


def test_schedule_inline_only_plans(spark, tmp_path):
    path = tmp_path / "cl_sched"
    opts = options("cl_sched", **{"hoodie.clustering.schedule.inline": "true",
                                  "hoodie.clustering.inline.max.commits": 2, **SORTED})
    for n in range(2):
        write(spark, path, [(n * 10 + i, "s", i, f"p{i % 2}") for i in range(4)], opts, "bulk_insert")
    shown = show_clustering(str(path))
    assert [r["state"] for r in shown] == ["REQUESTED"]
    assert _file_groups(path) == 4  # planned, not executed
    assert run_clustering(spark, str(path)) == [shown[0]["timestamp"]]
    assert _file_groups(path) == 2


def test_bucket_index_tables_are_not_clustered(spark, tmp_path):
    path = tmp_path / "cl_bucket"
    opts = options("cl_bucket", **{"hoodie.index.type": "BUCKET", "hoodie.bucket.index.num.buckets": 2})
    write(spark, path, [(i, "b", i, f"p{i % 2}") for i in range(6)], opts)
    timeline = sorted(os.listdir(path / ".hoodie"))
    with pytest.raises(HoodieClusteringError, match="BUCKET index"):
        schedule_clustering(str(path), HoodieConfig.of(SORTED))
    assert sorted(os.listdir(path / ".hoodie")) == timeline
