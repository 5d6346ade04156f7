"""File-system view over a hand-built table: slices per file group, visibility by completed instant,
replaced file groups hidden, as-of views."""
import os

from storage.fs_utils import make_base_file_name, make_log_file_name
from storage.table.fs_view import FileSystemView
from storage.table.meta_client import HoodieTableMetaClient
from storage.table.table_config import HoodieTableConfig
from storage.timeline.commit_metadata import HoodieCommitMetadata
from storage.timeline.instant import Action

T1, T2, T3, T4 = "20240101000000001", "20240101000000002", "20240101000000003", "20240101000000004"


def _table(tmp_path, table_type="COPY_ON_WRITE"):
    config = HoodieTableConfig({"hoodie.table.name": "t", "hoodie.table.type": table_type, "hoodie.table.version": "6",
                                "hoodie.timeline.layout.version": "1", "hoodie.table.recordkey.fields": "id",
                                "hoodie.table.partition.fields": "dt"})
    return HoodieTableMetaClient.init_table(str(tmp_path / "t"), config)


def _touch(meta, partition, name, size=10):
    directory = f"{meta.base_path}/{partition}"
    os.makedirs(directory, exist_ok=True)
    open(f"{directory}/.hoodie_partition_metadata", "a").close()
    with open(f"{directory}/{name}", "wb") as fh:
        fh.write(b"x" * size)


def _commit(meta, ts, action=Action.COMMIT, complete=True, replaced=None):
    timeline = meta.active_timeline
    requested = timeline.create_requested(action, ts)
    inflight = timeline.transition_to_inflight(requested)
    if complete:
        md = HoodieCommitMetadata(operationType="upsert")
        if replaced:
            md.partitionToReplaceFileIds = replaced
        timeline.transition_to_complete(inflight, md.to_json_bytes())
    meta.reload()


def test_latest_slices_ignore_uncompleted_and_later_instants(tmp_path):
    meta = _table(tmp_path)
    _touch(meta, "a", make_base_file_name("fg1", "0-1-1", T1))
    _commit(meta, T1)
    _touch(meta, "a", make_base_file_name("fg1", "0-2-2", T2))
    _touch(meta, "b", make_base_file_name("fg2", "0-2-2", T2))
    _commit(meta, T2)
    _touch(meta, "a", make_base_file_name("fg1", "0-3-3", T3))  # written by a write that never completed
    _commit(meta, T3, complete=False)

    latest = {(s.partition_path, s.file_id): s.base_instant for s in FileSystemView(meta).latest_file_slices()}
    assert latest == {("a", "fg1"): T2, ("b", "fg2"): T2}
    as_of_t1 = FileSystemView(meta, as_of=T1)
    assert [(s.partition_path, s.file_id, s.base_instant) for s in as_of_t1.latest_file_slices()] == [("a", "fg1", T1)]
    groups = FileSystemView(meta).file_groups("a")
    assert [s.base_instant for s in groups[0].ordered_slices()] == [T2, T1]  # newest first, as in Hudi
    assert FileSystemView(meta).latest_base_files(["b"])[0].file_id == "fg2"


def test_replaced_file_groups_are_hidden_after_the_replacecommit(tmp_path):
    meta = _table(tmp_path)
    _touch(meta, "a", make_base_file_name("fg1", "0-1-1", T1))
    _commit(meta, T1)
    _touch(meta, "a", make_base_file_name("fg9", "0-2-2", T2))
    _commit(meta, T2, Action.REPLACE_COMMIT, replaced={"a": ["fg1"]})
    assert [s.file_id for s in FileSystemView(meta).latest_file_slices()] == ["fg9"]
    assert [s.file_id for s in FileSystemView(meta, as_of=T1).latest_file_slices()] == ["fg1"]


def test_log_files_join_the_slice_of_their_base_instant(tmp_path):
    meta = _table(tmp_path, "MERGE_ON_READ")
    _touch(meta, "a", make_base_file_name("fg1", "0-1-1", T1))
    _commit(meta, T1, Action.DELTA_COMMIT)
    _touch(meta, "a", make_log_file_name("fg1", T1, 1, "0-2-2"))
    _commit(meta, T2, Action.DELTA_COMMIT)
    (slice_,) = FileSystemView(meta).latest_file_slices()
    assert slice_.base_instant == T1 and [lf.name for lf in slice_.log_files] == [make_log_file_name("fg1", T1, 1, "0-2-2")]
