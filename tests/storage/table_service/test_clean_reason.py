"""Issue 47: a clean that deletes nothing says why, from the decision the cleaner actually made. Hand-built tables
(files and instants written directly, no Spark): no more commits than retained, no commit older than the retained
hours, the trigger not reached, no file version older than the retained ones (also when a pending write holds the
earliest commit to retain back), an empty clean recorded, a pending clean finished instead; and no reason when a
clean deletes files."""
from __future__ import annotations

import os
from datetime import datetime

import pytest

from storage.config import HoodieConfig
from storage.fs_utils import make_base_file_name
from storage.table.meta_client import HoodieTableMetaClient
from storage.table.table_config import HoodieTableConfig
from storage.table_service.clean import clean_table, schedule_clean
from storage.table_service.clean_planner import CleanPlanner
from storage.timeline.commit_metadata import HoodieCommitMetadata
from storage.timeline.instant import Action

T1, T2, T3, T4 = "20240101000000001", "20240101000000002", "20240101000000003", "20240101000000004"


def _table(tmp_path) -> HoodieTableMetaClient:
    config = HoodieTableConfig({"hoodie.table.name": "t", "hoodie.table.type": "COPY_ON_WRITE",
                                "hoodie.table.version": "6", "hoodie.timeline.layout.version": "1",
                                "hoodie.table.recordkey.fields": "id", "hoodie.table.partition.fields": "dt"})
    return HoodieTableMetaClient.init_table(str(tmp_path / "t"), config)


def _write(meta, ts: str, file_ids=("fg1",), complete: bool = True) -> list[str]:
    """A commit at `ts` writing a base file of each file group (a new version of it); the files' paths."""
    directory = f"{meta.base_path}/p1"
    os.makedirs(directory, exist_ok=True)
    open(f"{directory}/.hoodie_partition_metadata", "a").close()
    paths = []
    for file_id in file_ids:
        paths.append(f"{directory}/{make_base_file_name(file_id, '0-1-1', ts)}")
        with open(paths[-1], "wb") as fh:
            fh.write(b"x")
    timeline = meta.active_timeline
    inflight = timeline.transition_to_inflight(timeline.create_requested(Action.COMMIT, ts))
    if complete:
        timeline.transition_to_complete(inflight, HoodieCommitMetadata(operationType="upsert").to_json_bytes())
    meta.reload()
    return paths


def _cleans(meta) -> list[str]:
    return [i.timestamp for i in meta.reload().timeline.of_actions([Action.CLEAN])]


def test_no_more_commits_than_retained_says_how_many_of_each(tmp_path):
    meta = _table(tmp_path)
    _write(meta, T1)
    _write(meta, T2)
    outcome = clean_table(None, meta.base_path, HoodieConfig.of({"hoodie.cleaner.commits.retained": "3"}))
    assert outcome.instant is None and not _cleans(meta)
    assert outcome.reason == ("the table has 2 completed commits and hoodie.cleaner.commits.retained=3 retains the "
                              "file versions of the latest 3: no file version is old enough to clean")


@pytest.mark.parametrize("now, expected", [
    (datetime(2024, 1, 3), ("no commit was made in the last hoodie.cleaner.hours.retained=24 hours (the latest of "
                            f"2 completed commits is {T2})")),
    (datetime(2024, 1, 1, 1), ("no commit is older than hoodie.cleaner.hours.retained=24 hours (the oldest of "
                               f"2 completed commits is {T1})")),
])
def test_hours_policy_says_which_way_no_commit_is_old_enough(tmp_path, now, expected):
    meta = _table(tmp_path)
    _write(meta, T1)
    _write(meta, T2)
    config = HoodieConfig.of({"hoodie.cleaner.policy": "KEEP_LATEST_BY_HOURS"})
    plan = CleanPlanner(meta, config, now=now).plan()
    assert plan.is_empty() and plan.reason == expected


def test_trigger_not_reached_is_the_reason_not_the_planner(tmp_path):
    meta = _table(tmp_path)
    first = _write(meta, T1)
    _write(meta, T2)
    _write(meta, T3)
    opts = HoodieConfig.of({"hoodie.cleaner.commits.retained": "1", "hoodie.clean.max.commits": "5"})
    waiting = clean_table(None, meta.base_path, opts, force=False)
    assert waiting.instant is None and not _cleans(meta)
    assert waiting.reason == ("3 commits and no clean yet: hoodie.clean.trigger.strategy=NUM_COMMITS cleans after "
                              "hoodie.clean.max.commits=5")
    done = clean_table(None, meta.base_path, opts)  # forced: the same table has a version to clean
    assert done.instant is not None and done.reason is None and not os.path.exists(first[0])
    assert clean_table(None, meta.base_path, opts, force=False).reason.startswith(
        f"0 commits since the last clean ({done.instant}): ")


def test_no_file_version_older_than_the_retained_ones(tmp_path):
    """Inserts only: each commit makes a new file group, so no group has an old version."""
    meta = _table(tmp_path)
    for ts, file_id in ((T1, "fg1"), (T2, "fg2"), (T3, "fg3")):
        _write(meta, ts, (file_id,))
    outcome = clean_table(None, meta.base_path, HoodieConfig.of({"hoodie.cleaner.commits.retained": "1"}))
    assert outcome.instant is None
    assert outcome.reason.startswith("no file version is older than the retained ones: KEEP_LATEST_COMMITS with "
                                     f"hoodie.cleaner.commits.retained=1 retains from commit {T3}, ")
    versions = clean_table(None, meta.base_path, HoodieConfig.of({"hoodie.cleaner.policy": "KEEP_LATEST_FILE_VERSIONS",
                                                                  "hoodie.cleaner.fileversions.retained": "1"}))
    assert versions.reason == ("no file group has more file versions than KEEP_LATEST_FILE_VERSIONS with "
                               "hoodie.cleaner.fileversions.retained=1 keeps")
    # an empty clean is still recorded when asked for (it moves the earliest commit to retain): it says so
    empty = clean_table(None, meta.base_path, HoodieConfig.of({"hoodie.cleaner.commits.retained": "1",
                                                               "hoodie.write.empty.clean.create.duration.ms": "0"}))
    assert empty.instant in _cleans(meta)
    assert empty.reason.startswith(f"an empty clean was recorded to move the earliest commit to retain to {T3}, so "
                                   "that archival can pass it; it deleted nothing: no file version is older than ")


def test_a_pending_write_holding_the_retained_commit_back_is_named(tmp_path):
    meta = _table(tmp_path)
    oldest = _write(meta, T1)
    _write(meta, T2, ("fg2",), complete=False)  # a write still running, older than the commits retained
    _write(meta, T3)
    _write(meta, T4)
    outcome = clean_table(None, meta.base_path, HoodieConfig.of({"hoodie.cleaner.commits.retained": "1"}))
    assert outcome.instant is None and os.path.exists(oldest[0])
    assert f"retains from commit {T2} (held back by the pending write {T2})" in outcome.reason


def test_a_pending_clean_finished_instead(tmp_path):
    meta = _table(tmp_path)
    oldest = _write(meta, T1)
    _write(meta, T2)
    _write(meta, T3)
    opts = HoodieConfig.of({"hoodie.cleaner.commits.retained": "1"})
    pending = schedule_clean(meta.base_path, opts)  # planned, then the cleaner died before executing it
    assert pending is not None and os.path.exists(oldest[0])
    outcome = clean_table(None, meta.base_path, opts)
    assert outcome.instant is None and outcome.finished == (pending,) and not os.path.exists(oldest[0])
    assert outcome.reason.startswith(f"the pending clean {pending} (planned earlier, not completed) was finished "
                                     f"instead; nothing more to clean: ")
