import pytest

from storage.exception import HoodieFileAlreadyExistsError
from storage.io.storage import HoodieStorage
from storage.timeline.commit_metadata import HoodieCommitMetadata, HoodieWriteStat
from storage.timeline.instant import Action, State, parse_instant_file_name
from storage.timeline.instant_time import new_instant_time, normalize_instant_time
from storage.timeline.timeline import ActiveTimeline


@pytest.mark.parametrize("name,expected", [
    ("20240418173235694.commit", (State.COMPLETED, "commit", "20240418173235694", None)),
    ("20240418173235694.inflight", (State.INFLIGHT, "commit", "20240418173235694", None)),
    ("20240418173235694.commit.requested", (State.REQUESTED, "commit", "20240418173235694", None)),
    ("20240418173235694.deltacommit.inflight", (State.INFLIGHT, "deltacommit", "20240418173235694", None)),
    ("20240707001303088.replacecommit", (State.COMPLETED, "replacecommit", "20240707001303088", None)),
    ("20251220210108078_20251220210109593.deltacommit",
     (State.COMPLETED, "deltacommit", "20251220210108078", "20251220210109593")),
    ("20251220210129235.compaction.requested", (State.REQUESTED, "compaction", "20251220210129235", None)),
])
def test_parse_instant_file_names(name, expected):
    i = parse_instant_file_name(name)
    assert (i.state, i.action, i.timestamp, i.completion_time) == expected
    assert i.file_name(2 if i.completion_time else 1) == name


@pytest.mark.parametrize("name", ["hoodie.properties", ".temp", "archived", "20240418.commit", "x.commit"])
def test_non_instant_files_ignored(name):
    assert parse_instant_file_name(name) is None


def test_instant_times_unique_and_increasing():
    times = [new_instant_time() for _ in range(200)]
    assert times == sorted(set(times)) and all(len(t) == 17 for t in times)
    last = times[-1]
    assert new_instant_time(after=last) > last


@pytest.mark.parametrize("text,expected", [
    ("20240418173235694", "20240418173235694"),
    ("2024-04-18 17:32:35.694", "20240418173235694"),
    ("2024-04-18 17:32:35", "20240418173235999"),
    ("2024-04-18", "20240418000000000"),
])
def test_normalize_instant_time(text, expected):
    assert normalize_instant_time(text) == expected


def test_normalize_rejects_garbage():
    with pytest.raises(ValueError, match="invalid instant time"):
        normalize_instant_time("yesterday")


def test_transitions_and_no_overwrite(tmp_path):
    tl = ActiveTimeline(HoodieStorage(), str(tmp_path), 1)
    t = tl.new_instant_time()
    req = tl.create_requested(Action.COMMIT, t)
    assert (tmp_path / f"{t}.commit.requested").exists()
    inflight = tl.transition_to_inflight(req, b"{}")
    assert (tmp_path / f"{t}.inflight").exists()
    md = HoodieCommitMetadata(operationType="UPSERT")
    md.add_write_stat(HoodieWriteStat(fileId="f-0", path="p/f-0_0-1-2_x.parquet", partitionPath="p", numWrites=3))
    done = tl.transition_to_complete(inflight, md.to_json_bytes())
    assert done.is_completed and tl.timeline.completed().timestamps() == [t]
    assert tl.commit_metadata(done).write_stats()[0].numWrites == 3
    with pytest.raises(HoodieFileAlreadyExistsError):
        tl.transition_to_complete(inflight, b"{}")
    with pytest.raises(HoodieFileAlreadyExistsError):
        tl.create_requested(Action.COMMIT, t)


def test_layout2_completed_needs_completion_time(tmp_path):
    (tmp_path / "20250101000000000.commit").write_bytes(b"")  # no completion time: not completed in layout 2
    (tmp_path / "20250101000000001_20250101000000005.commit").write_bytes(b"")
    tl = ActiveTimeline(HoodieStorage(), str(tmp_path), 2)
    assert tl.timeline.completed().timestamps() == ["20250101000000001"]


def test_fixture_commit_metadata_parses(fixture_table):
    base = fixture_table("sample_cow_v6_simplekeygen_nonhivestyle_overwritetable")
    tl = ActiveTimeline(HoodieStorage(), f"{base}/.hoodie", 1)
    completed = tl.timeline.completed()
    assert [i.action for i in completed] == ["commit", "commit", "replacecommit"]
    md = tl.commit_metadata(completed.last())
    assert md.operationType == "INSERT_OVERWRITE_TABLE"
    assert md.replaced_file_ids() and md.schema.startswith("{")
    # Jackson layout round trip is stable
    again = HoodieCommitMetadata.from_bytes(md.to_json_bytes())
    assert again.to_json_dict() == md.to_json_dict()


def test_v8_avro_commit_metadata(fixture_table):
    base = fixture_table("sample_cow_v8_nonpartitioned")
    tl = ActiveTimeline(HoodieStorage(), f"{base}/.hoodie/timeline", 2)
    last = tl.timeline.completed().last()
    assert last.completion_time
    md = tl.commit_metadata(last)
    assert md.write_stats() and md.write_stats()[0].path.endswith(".parquet")
