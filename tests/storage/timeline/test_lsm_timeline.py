"""The LSM archived timeline of table versions 8/9 (storage.timeline.lsm_timeline and lsm_timeline_writer): names,
manifests, data files, reading hand-made snapshots, layer compaction, clean, and a writer dying between steps."""
from __future__ import annotations

import json

import pyarrow.parquet as pq
import pytest

from storage.avro.models import HOODIE_LSM_TIMELINE_INSTANT
from storage.io.storage import HoodieStorage
from storage.timeline.instant import Action, HoodieInstant, State
from storage.timeline.lsm_timeline import (
    AVRO_SCHEMA_KEY,
    VERSION_FILE,
    LSMFileEntry,
    LSMFileName,
    LSMManifest,
    LSMTimeline,
    LSMTimelineInstant,
    manifest_file_name,
    manifest_version,
    rows_from_parquet,
    rows_to_parquet,
)
from storage.timeline.lsm_timeline_writer import LSMTimelineWriter


class _Died(Exception):
    pass


def _row(ts: str, action: str = Action.COMMIT, metadata: bytes | None = b"md", plan: bytes | None = None):
    return LSMTimelineInstant(ts, f"{ts[:-3]}999", action, metadata, plan)


def _ts(i: int) -> str:
    return f"20260101{i:09d}"


@pytest.fixture
def timeline(tmp_path) -> LSMTimeline:
    path = str(tmp_path / "history")
    return LSMTimeline(HoodieStorage.for_path(path), path)


def _names(timeline: LSMTimeline) -> list[str]:
    return sorted(i.name for i in timeline.list_files())


def _publish_by_hand(timeline: LSMTimeline, version: int, files: dict[str, list[LSMTimelineInstant]],
                     set_version: bool = True) -> None:
    timeline.storage.mkdirs(timeline.path)
    entries = []
    for name, rows in files.items():
        data = rows_to_parquet(rows)
        timeline.storage.write_atomic(timeline.file_path(name), data)
        entries.append(LSMFileEntry(name, len(data)))
    text = LSMManifest(tuple(entries)).to_json()
    timeline.storage.write_atomic(timeline.file_path(manifest_file_name(version)), text.encode())
    if set_version:
        timeline.storage.write_atomic(timeline.file_path(VERSION_FILE), str(version).encode())


# ----------------------------------------------------------------------------------------------- names


def test_data_file_names():
    name = LSMFileName.parse("20260101000000001_20260101000000009_0.parquet")
    assert name == LSMFileName("20260101000000001", "20260101000000009", 0)
    assert name.name == "20260101000000001_20260101000000009_0.parquet"
    assert LSMFileName.parse("manifest_1") is None and LSMFileName.parse("a_b_0.parquet") is None
    assert LSMFileName.parse("1_2_10.parquet") is None  # the layer is one digit, as Hudi's pattern
    assert name.overlaps(None, None) and name.overlaps("20260101000000009", None)
    assert not name.overlaps("20260101000000010", None) and not name.overlaps(None, "20260101000000000")
    merged = LSMFileName.covering(["3_4_0.parquet", "1_2_0.parquet", "5_9_0.parquet"], 1)
    assert merged.name == "1_9_1.parquet"
    assert manifest_file_name(12) == "manifest_12" and manifest_version("manifest_12") == 12
    assert manifest_version("manifest_") is None and manifest_version(VERSION_FILE) is None


# ----------------------------------------------------------------------------------------------- manifest


def test_manifest_is_pretty_printed_as_jackson_does():
    manifest = LSMManifest((LSMFileEntry("1_2_0.parquet", 100), LSMFileEntry("3_4_0.parquet", 2048)))
    assert manifest.to_json() == (
        '{\n  "files" : [ {\n    "fileName" : "1_2_0.parquet",\n    "fileLen" : 100\n  }, {\n'
        '    "fileName" : "3_4_0.parquet",\n    "fileLen" : 2048\n  } ]\n}')
    assert LSMManifest().to_json() == '{\n  "files" : [ ]\n}'
    assert LSMManifest.from_json(manifest.to_json()) == manifest
    # compact JSON, unknown properties and an empty file read too (Hudi's mapper ignores unknown properties)
    compact = json.dumps({"files": [{"fileName": "1_2_0.parquet", "fileLen": 100, "x": 1}], "version": 3})
    assert LSMManifest.from_json(compact).files == (LSMFileEntry("1_2_0.parquet", 100),)
    assert LSMManifest.from_json("") == LSMManifest()


def test_manifest_changes_and_layers():
    manifest = LSMManifest((LSMFileEntry("5_6_0.parquet", 1), LSMFileEntry("1_4_1.parquet", 2),
                            LSMFileEntry("1_2_0.parquet", 3)))
    assert [f.file_name for f in manifest.in_layer(0)] == ["1_2_0.parquet", "5_6_0.parquet"]
    changed = manifest.without(["5_6_0.parquet", "1_2_0.parquet"]).with_file(LSMFileEntry("7_8_0.parquet", 4))
    assert changed.file_names() == ["1_4_1.parquet", "7_8_0.parquet"]


# ----------------------------------------------------------------------------------------------- data files


def test_data_file_as_parquet_avro_writes_it(tmp_path):
    rows = [_row(_ts(1), plan=b"\x00plan"), LSMTimelineInstant(_ts(2), None, Action.CLEAN, None, None)]
    data = rows_to_parquet(rows)
    path = tmp_path / "f.parquet"
    path.write_bytes(data)
    meta = pq.ParquetFile(path).metadata
    kv = {k.decode(): v.decode() for k, v in meta.metadata.items()}
    assert kv["writer.model.name"] == "avro"
    avro = json.loads(kv[AVRO_SCHEMA_KEY])
    assert avro["name"] == "HoodieLSMTimelineInstant" and avro["namespace"] == "org.apache.hudi.avro.model"
    assert [f["name"] for f in avro["fields"]] == [f["name"] for f in HOODIE_LSM_TIMELINE_INSTANT["fields"]]
    columns = {c.name: c for c in pq.ParquetFile(path).schema}
    assert columns["instantTime"].logical_type.type == "STRING" and columns["metadata"].physical_type == "BYTE_ARRAY"
    assert columns["version"].physical_type == "INT32" and columns["version"].max_definition_level == 0  # required
    assert rows_from_parquet(data) == rows
    assert rows[0].instant == HoodieInstant(State.COMPLETED, Action.COMMIT, _ts(1), rows[0].completion_time)


def test_pending_instant_of_a_plan():
    assert _row(_ts(1), Action.COMMIT, plan=b"p").pending_instant() == \
        HoodieInstant(State.REQUESTED, Action.COMPACTION, _ts(1))
    assert _row(_ts(1), Action.DELTA_COMMIT, plan=b"p").pending_instant().action == Action.LOG_COMPACTION
    assert _row(_ts(1), Action.CLEAN, plan=b"p").pending_instant().action == Action.CLEAN
    assert _row(_ts(1), Action.COMMIT).pending_instant() is None
    assert _row(_ts(1), Action.ROLLBACK, plan=b"p").pending_instant() is None
    clustering = _row(_ts(1), Action.REPLACE_COMMIT, plan=json.dumps({"operationType": "CLUSTER"}).encode())
    overwrite = _row(_ts(1), Action.REPLACE_COMMIT, plan=json.dumps({"operationType": "INSERT_OVERWRITE"}).encode())
    assert clustering.pending_instant().action == Action.CLUSTERING
    assert overwrite.pending_instant().action == Action.REPLACE_COMMIT


# ----------------------------------------------------------------------------------------------- reading


def test_empty_or_missing_history_reads_empty(timeline):
    assert timeline.latest_version() == -1 and timeline.manifest() == LSMManifest() and timeline.instants() == []
    timeline.storage.mkdirs(timeline.path)
    assert timeline.instants() == []


def test_reader_reads_the_published_snapshot_only(timeline):
    a, b = [_row(_ts(1)), _row(_ts(2))], [_row(_ts(3)), _row(_ts(4))]
    _publish_by_hand(timeline, 1, {"20260101000000001_20260101000000002_0.parquet": a})
    # manifest 2 written but `_version_` not moved to it: readers stay on snapshot 1
    _publish_by_hand(timeline, 2, {"20260101000000001_20260101000000002_0.parquet": a,
                                   "20260101000000003_20260101000000004_0.parquet": b}, set_version=False)
    timeline.storage.write_atomic(timeline.file_path("20260101000000005_20260101000000005_0.parquet"),
                                  rows_to_parquet([_row(_ts(5))]))  # listed by no manifest
    assert timeline.latest_version() == 1
    assert [r.instant_time for r in timeline.instants()] == [_ts(1), _ts(2)]
    timeline.storage.delete(timeline.file_path(VERSION_FILE))  # no `_version_`: the highest manifest
    assert timeline.latest_version() == 2
    assert [r.instant_time for r in timeline.instants()] == [_ts(1), _ts(2), _ts(3), _ts(4)]
    timeline.storage.write_atomic(timeline.file_path(VERSION_FILE), b"garbage")
    assert timeline.latest_version() == 2


def test_reader_prunes_by_file_name_and_deduplicates(timeline, monkeypatch):
    files = {"20260101000000001_20260101000000004_1.parquet": [_row(_ts(i)) for i in range(1, 5)],
             "20260101000000004_20260101000000005_0.parquet": [_row(_ts(4), metadata=b"again"), _row(_ts(5))],
             "20260101000000007_20260101000000008_0.parquet": [_row(_ts(7)), _row(_ts(8))]}
    _publish_by_hand(timeline, 1, files)
    rows = timeline.instants()
    assert [r.instant_time for r in rows] == [_ts(i) for i in (1, 2, 3, 4, 5, 7, 8)]  # one row per instant time
    read = []
    original = LSMTimeline.read_file
    monkeypatch.setattr(LSMTimeline, "read_file", lambda self, name: read.append(name) or original(self, name))
    assert [r.instant_time for r in timeline.instants(start=_ts(5), end=_ts(7))] == [_ts(5), _ts(7)]
    assert sorted(read) == sorted(list(files)[1:])


# ----------------------------------------------------------------------------------------------- writing


def test_write_publishes_one_layer_zero_file_per_batch(timeline):
    writer = LSMTimelineWriter(timeline)
    first = writer.write([_row(_ts(2)), _row(_ts(1))])
    assert first == "20260101000000001_20260101000000002_0.parquet"
    assert _names(timeline) == [first, VERSION_FILE, "manifest_1"]
    assert timeline.storage.read_text(timeline.file_path(VERSION_FILE)) == "1"
    size = timeline.storage.size(timeline.file_path(first))
    assert timeline.manifest().files == (LSMFileEntry(first, size),)
    second = writer.write([_row(_ts(3))])
    assert timeline.latest_version() == 2 and timeline.manifest().file_names() == [first, second]
    # the same batch again (an archival that died after publishing): nothing new
    assert writer.write([_row(_ts(1)), _row(_ts(2))]) == first
    assert timeline.latest_version() == 2 and len(timeline.manifest().files) == 2
    assert [r.instant_time for r in timeline.instants()] == [_ts(1), _ts(2), _ts(3)]


def test_layers_compact_downwards_and_clean(timeline):
    writer = LSMTimelineWriter(timeline, compaction_batch_size=2, retained_manifests=1)
    for i in range(1, 5):
        writer.write([_row(_ts(2 * i - 1)), _row(_ts(2 * i))])
        merged = writer.compact_and_clean()
        if i == 2:
            assert merged == ["20260101000000001_20260101000000004_1.parquet"]
        if i == 4:  # L0 full again -> L1 full -> L2
            assert merged == ["20260101000000005_20260101000000008_1.parquet",
                              "20260101000000001_20260101000000008_2.parquet"]
    assert timeline.manifest().file_names() == ["20260101000000001_20260101000000008_2.parquet"]
    assert [r.instant_time for r in timeline.instants()] == [_ts(i) for i in range(1, 9)]
    # clean kept the newest manifests (1 + the 2 merges of the last round) and only the files they list
    versions = timeline.all_versions()
    assert len(versions) == 3 and versions[-1] == timeline.latest_version()
    listed = {n for v in versions for n in timeline.manifest(v).file_names()}
    assert {n for n in _names(timeline) if n.endswith(".parquet")} == listed


def test_merge_candidates_respect_batch_and_size(timeline):
    writer = LSMTimelineWriter(timeline, compaction_batch_size=3, compaction_max_bytes=100)
    files = [LSMFileEntry(f"{i}_{i}_0.parquet", size) for i, size in enumerate([500, 30, 40, 50, 60], start=1)]
    # the oversized first file is passed over; then at most 3, stopping once past the cap
    assert writer._merge_candidates(files) == ["2_2_0.parquet", "3_3_0.parquet", "4_4_0.parquet"]
    writer.compaction_max_bytes = 60
    assert writer._merge_candidates(files) == ["2_2_0.parquet", "3_3_0.parquet"]
    assert writer._merge_candidates([LSMFileEntry("1_1_0.parquet", 500), LSMFileEntry("2_2_0.parquet", 500)]) == []


def test_a_layer_of_files_too_large_is_not_merged(timeline):
    writer = LSMTimelineWriter(timeline, compaction_batch_size=2, compaction_max_bytes=1)
    writer.write([_row(_ts(1))])
    writer.write([_row(_ts(2))])
    assert writer.compact_and_clean() == []
    assert len(timeline.manifest().in_layer(0)) == 2


def test_clean_keeps_retained_snapshots_and_their_files(timeline):
    writer = LSMTimelineWriter(timeline, compaction_batch_size=100)  # no merges
    names = [writer.write([_row(_ts(i))]) for i in range(1, 6)]
    timeline.storage.write_atomic(timeline.file_path("20260101000000009_20260101000000009_0.parquet"), b"orphan")
    assert writer.clean() == ["manifest_1", "manifest_2", "20260101000000009_20260101000000009_0.parquet"]
    assert timeline.all_versions() == [3, 4, 5]
    assert [n for n in _names(timeline) if n.endswith(".parquet")] == names  # every kept manifest lists all
    assert writer.clean() == []


# ----------------------------------------------------------------------------------------------- dying between steps


def test_died_after_the_data_file(timeline, monkeypatch):
    writer = LSMTimelineWriter(timeline)
    writer.write([_row(_ts(1))])
    with monkeypatch.context() as m:
        m.setattr(LSMTimelineWriter, "write_manifest", lambda *a: (_ for _ in ()).throw(_Died()))
        with pytest.raises(_Died):
            writer.write([_row(_ts(2)), _row(_ts(3))])
    assert [r.instant_time for r in timeline.instants()] == [_ts(1)]  # the unpublished file is invisible
    assert writer.write([_row(_ts(2)), _row(_ts(3))]) == "20260101000000002_20260101000000003_0.parquet"
    assert timeline.latest_version() == 2
    assert [r.instant_time for r in timeline.instants()] == [_ts(1), _ts(2), _ts(3)]


def test_died_after_the_manifest(timeline, monkeypatch):
    writer = LSMTimelineWriter(timeline)
    writer.write([_row(_ts(1))])
    with monkeypatch.context() as m:
        m.setattr(LSMTimelineWriter, "write_version", lambda *a: (_ for _ in ()).throw(_Died()))
        with pytest.raises(_Died):
            writer.write([_row(_ts(5))])
    assert timeline.latest_version() == 1 and "manifest_2" in _names(timeline)
    assert [r.instant_time for r in timeline.instants()] == [_ts(1)]
    # another batch is archived next: the unpublished manifest 2 is overwritten, the dead batch is not listed
    writer.write([_row(_ts(2))])
    assert timeline.latest_version() == 2
    assert timeline.manifest().file_names() == ["20260101000000001_20260101000000001_0.parquet",
                                                "20260101000000002_20260101000000002_0.parquet"]


def test_died_during_a_merge_and_during_clean(timeline, monkeypatch):
    writer = LSMTimelineWriter(timeline, compaction_batch_size=2, retained_manifests=1)
    writer.write([_row(_ts(1))])
    writer.write([_row(_ts(2))])
    with monkeypatch.context() as m:
        m.setattr(LSMTimelineWriter, "publish", lambda *a: (_ for _ in ()).throw(_Died()))
        with pytest.raises(_Died):
            writer.compact_and_clean()
    assert "20260101000000001_20260101000000002_1.parquet" in _names(timeline)  # written, not published
    assert timeline.manifest().file_names() == ["20260101000000001_20260101000000001_0.parquet",
                                                "20260101000000002_20260101000000002_0.parquet"]
    assert [r.instant_time for r in timeline.instants()] == [_ts(1), _ts(2)]
    deleted = []
    original = HoodieStorage.delete

    def die_after_manifests(self, path):
        if path.endswith(".parquet"):
            raise _Died()
        deleted.append(path.rsplit("/", 1)[-1])
        return original(self, path)

    assert writer.compact_and_clean() == ["20260101000000001_20260101000000002_1.parquet"]  # redone from scratch
    with monkeypatch.context() as m:
        m.setattr(HoodieStorage, "delete", die_after_manifests)
        with pytest.raises(_Died):
            writer.clean()  # keeps the newest manifest only: dies deleting the merged-away files
    assert deleted == ["manifest_2"] and timeline.all_versions() == [3]
    assert [r.instant_time for r in timeline.instants()] == [_ts(1), _ts(2)]
    # the next archival's clean deletes what is left
    writer.write([_row(_ts(3))])
    writer.clean()
    assert [n for n in _names(timeline) if n.endswith(".parquet")] == [
        "20260101000000001_20260101000000002_1.parquet", "20260101000000003_20260101000000003_0.parquet"]
    assert [r.instant_time for r in timeline.instants()] == [_ts(1), _ts(2), _ts(3)]
