"""Clean on tables we write: what each policy keeps on disk (counted), the timeline and Avro files of the three
phases, reads (ours and hudi-rs) unchanged, time travel to retained instants, savepoints protected, bad input."""
from __future__ import annotations

import os

import pytest

from service_helpers import (data_files, expected, options, ours, theirs, timeline_files, versions_per_group,
                             write, write_commits)
from storage.avro.container import read_avro_container
from storage.config import HoodieConfig
from storage.exception import HoodieCleanError, HoodieReadError, HoodieTableNotFoundError, HoodieTableServiceError
from storage.table.meta_client import HoodieTableMetaClient
from storage.table_service.clean import run_clean, show_clean_plans, show_cleans
from storage.table_service.savepoint import create_savepoint

OFF = {"hoodie.clean.automatic": "false", "hoodie.archive.automatic": "false"}


@pytest.mark.parametrize("engine", ["AUTO", "SPARK"])  # the deletes from this process (a small clean), in Spark tasks
def test_keep_latest_commits_inline(spark, tmp_path, engine):
    """Every commit rewrites both file groups; with 2 commits retained each group keeps its latest version and
    the version before the earliest retained commit: 3 versions, the older ones are deleted."""
    path = tmp_path / "t"
    opts = options("t", **{"hoodie.cleaner.commits.retained": 2, "hoodie.keep.min.commits": 20,
                           "hoodie.sqlext.engine": engine})
    state = write_commits(spark, path, opts, range(6))
    assert sorted(versions_per_group(path).values()) == [3, 3]
    meta = HoodieTableMetaClient.load(str(path))
    commits = [i.timestamp for i in meta.timeline.completed().write_timeline()]
    cleans = show_cleans(str(path))
    assert cleans and cleans[-1]["earliestCommitToRetain"] == commits[-2]
    assert cleans[-1]["totalFilesDeleted"] >= 1
    names = timeline_files(path)
    last = cleans[-1]["instant"].timestamp
    assert {f"{last}.clean.requested", f"{last}.clean.inflight", f"{last}.clean"} <= set(names)
    plan = read_avro_container((path / ".hoodie" / f"{last}.clean.requested").read_bytes())
    assert plan["policy"] == "KEEP_LATEST_COMMITS" and plan["earliestInstantToRetain"]["timestamp"] == commits[-2]
    deleted = [f for p in plan["filePathsToBeDeletedPerPartition"].values() for f in p]
    assert deleted and not any(os.path.exists(f["filePath"]) for f in deleted)
    assert ours(spark, path) == expected(state) == theirs(path)
    # time travel to every retained commit answers; before the retained window it says the data was cleaned
    for ts in commits[-2:]:
        assert ours(spark, path, **{"as.of.instant": ts}) == theirs(path, as_of=ts)
    with pytest.raises(HoodieReadError, match="cleaned"):
        ours(spark, path, **{"as.of.instant": commits[0]})


def test_file_versions_policy_savepoint_and_incremental_mode(spark, tmp_path):
    path = tmp_path / "v"
    opts = options("v", **OFF)
    state = write_commits(spark, path, opts, range(4))
    meta = HoodieTableMetaClient.load(str(path))
    commits = [i.timestamp for i in meta.timeline.completed().write_timeline()]
    create_savepoint(str(path), commits[1])
    kept = {os.path.basename(f) for f in data_files(path) if f"_{commits[1]}." in f}
    versions = HoodieConfig.of({"hoodie.cleaner.policy": "KEEP_LATEST_FILE_VERSIONS",
                                "hoodie.cleaner.fileversions.retained": "1"})
    assert run_clean(spark, str(path), versions) is not None
    names = {os.path.basename(f) for f in data_files(path)}
    assert kept <= names  # the savepoint's files survive
    assert sorted(versions_per_group(path).values()) == [2, 2]  # latest + savepointed
    assert ours(spark, path) == expected(state) == theirs(path)
    assert ours(spark, path, **{"as.of.instant": commits[1]}) == theirs(path, as_of=commits[1])
    # nothing left to clean: no new instant
    assert run_clean(spark, str(path), versions) is None
    assert [p["policy"] for p in show_clean_plans(str(path))] == ["KEEP_LATEST_FILE_VERSIONS"]


def test_replaced_file_groups_are_cleaned(spark, tmp_path):
    path = tmp_path / "o"
    opts = options("o", **OFF)
    write_commits(spark, path, opts, range(2))
    replaced = set(versions_per_group(path))
    data = [(1, "x", 9, "p1"), (2, "y", 9, "p0")]
    write(spark, path, data, opts, "insert_overwrite_table")
    write_commits(spark, path, opts, range(10, 12), state={})
    run_clean(spark, str(path), HoodieConfig.of({"hoodie.cleaner.commits.retained": "1"}))
    assert not replaced & set(versions_per_group(path))  # the replaced groups are gone whole
    assert ours(spark, path) == theirs(path)


def test_nothing_to_clean_still_lets_archival_bound_the_timeline(spark, tmp_path):
    """Bulk inserts only: every commit makes new file groups, so there is never anything to clean. Archival never
    passes the last clean's earliestCommitToRetain; the cleaner publishes an empty clean (deleting nothing) when
    archival waits on it, so the active timeline stays bounded; hoodie.write.empty.clean.create.duration.ms (Hudi's
    empty clean) also publishes one when the last clean is older than it."""
    from storage.table_service.clean import records_empty_clean
    from storage.table_service.clean_planner import CleanPlanner
    from storage.config import HoodieConfig

    path = tmp_path / "append"
    opts = options("append", **{"hoodie.cleaner.commits.retained": 1, "hoodie.keep.min.commits": 2,
                                "hoodie.keep.max.commits": 3, "hoodie.commits.archival.batch": 1,
                                # the timeline's own rules: archival also waits for the metadata table's compaction
                                # (tests/storage/metadata/test_metadata_table_services.py)
                                "hoodie.metadata.enable": "false"})
    state = {}
    for n in range(8):
        state = _bulk_insert(spark, path, opts, n, state)
        meta = HoodieTableMetaClient.load(str(path))
        assert len(list(meta.timeline.completed().write_timeline())) <= 3
    cleans = [read_avro_container(meta.active_timeline.read_bytes(c))
              for c in meta.timeline.completed().of_actions(["clean"])]
    assert cleans and all(c["totalFilesDeleted"] == 0 for c in cleans)
    assert versions_per_group(path) and set(versions_per_group(path).values()) == {1}
    assert ours(spark, path) == expected(state) == theirs(path)
    _bulk_insert(spark, path, {**opts, **OFF}, 20, state)  # one more commit: the ECTR moves on
    meta = HoodieTableMetaClient.load(str(path))
    config = HoodieConfig.of(opts, {"hoodie.keep.max.commits": "10"})
    plan = CleanPlanner(meta, config).plan()
    assert plan.is_empty() and not records_empty_clean(meta, config, plan)  # archival does not wait: no clean
    assert records_empty_clean(meta, config.with_values({"hoodie.write.empty.clean.create.duration.ms": "0"}), plan)


def _bulk_insert(spark, path, opts, n, state):
    from hudi_oracle import apply_batch

    data = [(1000 + n * 10 + i, f"v{n}", n, f"p{i % 2}") for i in range(4)]
    write(spark, path, data, opts, operation="bulk_insert")
    apply_batch(state, data, ordering=2)
    return state


def test_bad_input_is_refused_with_nothing_changed(spark, tmp_path, fixture_table):
    path = tmp_path / "b"
    opts = options("b", **OFF)
    write_commits(spark, path, opts, range(1))
    before = (timeline_files(path), data_files(path))
    with pytest.raises(HoodieCleanError, match="hoodie.cleaner.policy"):
        run_clean(spark, str(path), HoodieConfig.of({"hoodie.cleaner.policy": "KEEP_SOME"}))
    with pytest.raises(HoodieCleanError, match="unknown cleaner policy"):
        write(spark, path, [(1, "z", 5, "p1")], {**opts, "hoodie.cleaner.policy": "nope"})
    with pytest.raises(HoodieTableServiceError, match="hoodie.keep.min.commits=3 to be greater than "
                                                       "hoodie.cleaner.commits.retained=5"):
        write(spark, path, [(1, "z", 5, "p1")], {**opts, "hoodie.keep.min.commits": "3",
                                                 "hoodie.keep.max.commits": "4", "hoodie.cleaner.commits.retained": "5"})
    with pytest.raises(HoodieTableServiceError, match="hoodie.keep.max.commits=5 to be greater than"):
        write(spark, path, [(1, "z", 5, "p1")], {**opts, "hoodie.keep.min.commits": "20",
                                                 "hoodie.keep.max.commits": "5"})
    from storage.exception import HoodieSavepointError

    with pytest.raises(HoodieSavepointError, match="no completed commit"):
        create_savepoint(str(path), "20200101000000000")
    assert (timeline_files(path), data_files(path)) == before
    with pytest.raises(HoodieTableNotFoundError, match="not a Hudi table"):
        run_clean(spark, str(tmp_path / "nothing"))


def test_mor_archival_keeps_only_the_deltacommits_compaction_counts(spark, tmp_path):
    """Merge-on-read whose compactions never find logs (every upsert rewrites its small file groups whole, as
    Hudi's delta-commit partitioner does for an index that cannot index logs): archival keeps only the last
    hoodie.compact.inline.max.delta.commits deltacommits for the compaction trigger (Hudi's
    getEarliestInstantToRetainForCompaction), so the active timeline stays bounded instead of growing forever."""
    path = tmp_path / "mor_small"
    opts = {**options("mor_small", "MERGE_ON_READ"), "hoodie.parquet.small.file.limit": str(100 * 1024 * 1024),
            "hoodie.compact.inline": "true", "hoodie.compact.inline.max.delta.commits": "3",
            "hoodie.cleaner.commits.retained": "2", "hoodie.keep.min.commits": "4", "hoodie.keep.max.commits": "5",
            "hoodie.commits.archival.batch": "1", "hoodie.metadata.enable": "false"}
    state = write_commits(spark, path, opts, range(9))
    meta = HoodieTableMetaClient.load(str(path))
    assert not meta.timeline.completed().of_actions(["commit"])  # no compaction had anything to do
    deltas = list(meta.timeline.completed().of_actions(["deltacommit"]))
    assert 3 <= len(deltas) <= 5, [d.timestamp for d in deltas]
    assert ours(spark, path) == expected(state) == theirs(path)
