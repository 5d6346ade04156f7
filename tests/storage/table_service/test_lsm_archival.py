"""Archival of table versions 8/9 into the LSM timeline (`.hoodie/timeline/history/`), on copies of Java-written
fixtures grown with more completed instants (copies of their last write): what is archived, how each action is
stored, that the table still reads (here and in hudi-rs) and lists its archived instants with their metadata, layer
merges over several archivals, and archival dying between its steps."""
from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from fixture_tables import copy_fixture
from hudi_oracle import arrow_rows, hudi_rs_read, spark_rows

import storage.table_service.archival as archival
from storage.config import HoodieConfig
from storage.table.meta_client import HoodieTableMetaClient
from storage.table_service.archival import archive, archived_actions, lsm_timeline_instant
from storage.timeline.archived_timeline import HoodieArchivedTimeline
from storage.timeline.commit_metadata import HoodieCommitMetadata
from storage.timeline.instant import Action
from storage.timeline.lsm_timeline import VERSION_FILE, LSMTimeline

COW_V9 = "sample_cow_v9_txns_simple_meta"
MOR_V8 = "trips_mor_avro_v8_trips_8i3u1d"
# the commits of the v9 fixture archival may take: the ones before its first replacecommit, which stays until a
# clean removed the file groups it replaced (none ran)
COW_V9_ARCHIVABLE = ["20260307162434124", "20260307162440672", "20260307162442820", "20260307162444563",
                     "20260307162446287", "20260307162447985", "20260307162449244"]
# the commits these tests add are copied instant files the fixtures' metadata tables never saw: archival runs without
# them (it would otherwise wait for their compaction, tests/storage/metadata/test_metadata_table_services.py)
KEEP = {"hoodie.keep.min.commits": "2", "hoodie.keep.max.commits": "3", "hoodie.cleaner.commits.retained": "1",
        "hoodie.metadata.enable": "false"}


class _Died(BaseException):
    pass


def _timeline_dir(base: Path) -> Path:
    return base / ".hoodie" / "timeline"


def _add_commits(base: Path, count: int, first: int = 1) -> list[str]:
    """`count` more completed instants (after every fixture instant) copying the table's last completed commit or
    deltacommit with its requested and inflight files; their request times."""
    meta = HoodieTableMetaClient.load(str(base))
    last = meta.timeline.completed().of_actions([Action.COMMIT, Action.DELTA_COMMIT]).last()
    files = [Path(p) for i, p in meta.active_timeline.all_files().items() if i.timestamp == last.timestamp]
    added = []
    for n in range(first, first + count):
        request, completion = f"20270101{10 * n:09d}", f"20270101{10 * n + 5:09d}"
        for path in files:
            name = path.name.replace(f"{last.timestamp}_{last.completion_time}", f"{request}_{completion}")
            shutil.copy(path, path.with_name(name.replace(last.timestamp, request)))
        added.append(request)
    return added


@pytest.fixture
def cow_v9(fixtures_cache, tmp_path) -> Path:
    base = copy_fixture(COW_V9, fixtures_cache, tmp_path)
    _add_commits(base, 12)
    return base


def _archived_files(base: Path, timestamps: list[str]) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in _timeline_dir(base).iterdir()
            if p.is_file() and p.name[:17] in timestamps}


def test_archival_moves_the_oldest_actions_into_one_layer_zero_file(cow_v9):
    before = _archived_files(cow_v9, COW_V9_ARCHIVABLE)
    expected_rs = hudi_rs_read(cow_v9)
    done = archive(str(cow_v9), HoodieConfig.of(KEEP))
    assert [i.timestamp for i in done] == COW_V9_ARCHIVABLE

    history = _timeline_dir(cow_v9) / "history"
    name = f"{COW_V9_ARCHIVABLE[0]}_{COW_V9_ARCHIVABLE[-1]}_0.parquet"
    assert sorted(p.name for p in history.iterdir()) == [name, VERSION_FILE, "manifest_1"]
    assert (history / VERSION_FILE).read_text() == "1"
    assert _archived_files(cow_v9, COW_V9_ARCHIVABLE) == {}  # requested, inflight and completed files gone

    meta = HoodieTableMetaClient.load(str(cow_v9))
    rows = LSMTimeline.for_table(meta).instants()
    assert [(r.instant_time, r.action, r.version, r.plan) for r in rows] == \
        [(ts, Action.COMMIT, 1, None) for ts in COW_V9_ARCHIVABLE]
    for row in rows:  # the completed file's bytes, as they were
        assert before[f"{row.instant_time}_{row.completion_time}.commit"] == row.metadata

    archived = HoodieArchivedTimeline(meta)
    assert [(i.timestamp, i.completion_time) for i in archived.completed()] == \
        [(r.instant_time, r.completion_time) for r in rows]
    first = archived.completed().first()
    md = archived.commit_metadata(first)
    assert md == HoodieCommitMetadata.from_bytes(before[f"{first.timestamp}_{first.completion_time}.commit"])
    assert md.write_stats() and archived.metadata(first)["operationType"] == md.operationType
    assert HoodieArchivedTimeline(meta, start=COW_V9_ARCHIVABLE[2], end=COW_V9_ARCHIVABLE[3]).completed().timestamps() \
        == COW_V9_ARCHIVABLE[2:4]

    assert arrow_rows(hudi_rs_read(cow_v9), ["txn_id", "amount"]) == arrow_rows(expected_rs, ["txn_id", "amount"])
    assert archive(str(cow_v9), HoodieConfig.of(KEEP)) == []  # the replacecommit holds the rest back
    assert LSMTimeline.for_table(HoodieTableMetaClient.load(str(cow_v9))).latest_version() == 1


def test_each_action_stores_its_completed_file_and_plan(fixture_table):
    """MetadataConversionUtils.createLSMTimelineInstant, on the fixture's own replacecommits (not archived)."""
    meta = HoodieTableMetaClient.load(str(fixture_table(COW_V9)))
    files = meta.active_timeline.all_files()
    actions = {g[-1].timestamp: g for g in archived_actions(sorted(files, key=lambda i: i.sort_key()))}
    read = {i: Path(p).read_bytes() for i, p in files.items()}

    overwrite = lsm_timeline_instant(meta, actions["20260307162450901"])  # insert overwrite: inflight metadata
    by_state = {i.state.value: read[i] for i in actions["20260307162450901"]}
    assert overwrite.action == Action.REPLACE_COMMIT and overwrite.completion_time == "20260307162451860"
    assert overwrite.metadata == by_state["COMPLETED"] and overwrite.plan == by_state["INFLIGHT"]
    assert overwrite.pending_instant().action == Action.REPLACE_COMMIT

    clustering = lsm_timeline_instant(meta, actions["20260307162454799"])  # empty inflight: the requested plan
    by_state = {i.state.value: read[i] for i in actions["20260307162454799"]}
    assert by_state["INFLIGHT"] == b"" and clustering.plan == by_state["REQUESTED"]
    assert clustering.pending_instant().action == Action.CLUSTERING

    commit = lsm_timeline_instant(meta, actions["20260307162434124"])
    assert commit.plan is None and commit.metadata and commit.pending_instant() is None


def test_mor_v8_archivals_merge_layers_and_keep_compaction_plans(fixtures_cache, tmp_path):
    base = copy_fixture(MOR_V8, fixtures_cache, tmp_path)
    expected_rs = hudi_rs_read(base)
    config = HoodieConfig.of({**KEEP, "hoodie.timeline.compaction.batch.size": "2",
                              "hoodie.compact.inline.trigger.strategy": "TIME_ELAPSED"})
    archived_now = []
    added = _add_commits(base, 3)
    for round_ in range(4):
        archived_now += [i.timestamp for i in archive(str(base), config)]
        added += _add_commits(base, 2, first=len(added) + 1)
    meta = HoodieTableMetaClient.load(str(base))
    lsm = LSMTimeline.for_table(meta)
    layers = sorted(name.rsplit("_", 1)[-1] for name in lsm.manifest().file_names())
    assert layers == ["2.parquet"]  # 4 archivals: L0 pairs merged into L1 twice, the L1 pair into L2
    assert len(lsm.all_versions()) <= 3 + 2  # cleaned: retained manifests plus the last round's merges
    listed = {n for v in lsm.all_versions() for n in lsm.manifest(v).file_names()}
    assert {p.name for p in (_timeline_dir(base) / "history").glob("*.parquet")} == listed

    archived = HoodieArchivedTimeline(meta)
    assert archived.completed().timestamps() == archived_now == sorted(archived_now)
    assert not set(archived_now) & set(meta.timeline.timestamps())
    compaction = "20251220210129235"
    assert archived.completed().find(compaction).action == Action.COMMIT
    plan = archived.compaction_plan(compaction)
    assert plan["operations"] and archived.commit_metadata(archived.completed().find(compaction)).compacted
    assert [e.instant.state.value for e in archived.entries if e.instant.timestamp == compaction] == \
        ["REQUESTED", "COMPLETED"]
    assert arrow_rows(hudi_rs_read(base), ["rider", "fare"]) == arrow_rows(expected_rs, ["rider", "fare"])


@pytest.mark.parametrize("point", ["archive.after_write", "archive.between_deletes"])
def test_archival_dying_between_steps_is_finished_by_the_next(cow_v9, monkeypatch, point):
    def die(name):
        if name == point:
            raise _Died()

    with monkeypatch.context() as m:
        m.setattr(archival, "crash_point", die)
        with pytest.raises(_Died):
            archive(str(cow_v9), HoodieConfig.of(KEEP))
    meta = HoodieTableMetaClient.load(str(cow_v9))
    assert LSMTimeline.for_table(meta).latest_version() == 1
    still_active = set(meta.timeline.completed().timestamps()) & set(COW_V9_ARCHIVABLE)
    assert still_active == set(COW_V9_ARCHIVABLE)  # completed files are deleted only after the pending ones
    # an instant in both places belongs to the active timeline
    assert HoodieArchivedTimeline(meta).completed().timestamps() == []
    expected = arrow_rows(hudi_rs_read(cow_v9), ["txn_id", "amount"])

    assert [i.timestamp for i in archive(str(cow_v9), HoodieConfig.of(KEEP))] == COW_V9_ARCHIVABLE
    meta = HoodieTableMetaClient.load(str(cow_v9))
    assert LSMTimeline.for_table(meta).latest_version() == 1  # the published file was kept, not written again
    assert HoodieArchivedTimeline(meta).completed().timestamps() == COW_V9_ARCHIVABLE
    assert _archived_files(cow_v9, COW_V9_ARCHIVABLE) == {}
    assert arrow_rows(hudi_rs_read(cow_v9), ["txn_id", "amount"]) == expected


def test_reads_time_travel_and_procedures_after_archival(spark, cow_v9, fixture_table):
    original = fixture_table(COW_V9)
    archive(str(cow_v9), HoodieConfig.of(KEEP))
    columns = ["txn_id", "amount", "region"]
    assert spark_rows(spark.read.format("hudi").load(str(cow_v9)), columns) == \
        arrow_rows(hudi_rs_read(original), columns)
    meta = HoodieTableMetaClient.load(str(cow_v9))
    at = HoodieArchivedTimeline(meta).completed().find(COW_V9_ARCHIVABLE[-2]).completion_time
    travelled = spark.read.format("hudi").option("as.of.instant", at).load(str(cow_v9))
    assert spark_rows(travelled, columns) == arrow_rows(hudi_rs_read(original, as_of=at), columns)

    listed = spark.sql(f"CALL show_archived_commits(path => '{cow_v9}', limit => 100)").collect()
    assert [r.commit_time for r in listed] == COW_V9_ARCHIVABLE[::-1]
    first = HoodieArchivedTimeline(meta).completed().first()
    written = sum(s.numWrites for s in HoodieArchivedTimeline(meta).commit_metadata(first).write_stats())
    assert listed[-1].total_records_written == written > 0
