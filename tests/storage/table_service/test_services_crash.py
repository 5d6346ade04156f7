"""Kill -9 at each phase of clean, archival and restore (a child process dies at a named crash point): the table
still reads the same rows, and the next run of the service finishes the work."""
from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import pytest

from service_helpers import expected, options, ours, theirs, timeline_files, write_commits
from storage.table.meta_client import HoodieTableMetaClient
from storage.table_service.archival import archive
from storage.table_service.clean import run_clean
from storage.table_service.restore import finish_pending_restores
from storage.testing.crash_points import CRASH_EXIT_CODE, crash_env
from storage.timeline.archived_timeline import HoodieArchivedTimeline

OFF = {"hoodie.clean.automatic": "false", "hoodie.archive.automatic": "false"}
KEEP = {"hoodie.keep.min.commits": "2", "hoodie.keep.max.commits": "3", "hoodie.cleaner.commits.retained": "1",
        "hoodie.commits.archival.batch": "1"}


def _die_at(point: str, code: str) -> None:
    """Run `code` (storage calls, no Spark) in a child process that dies at `point`."""
    env = {**os.environ, **crash_env(point)}
    proc = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], env=env, capture_output=True, timeout=300)
    assert proc.returncode == CRASH_EXIT_CODE, proc.stderr.decode()[-2000:]


@pytest.fixture(scope="module")
def table(spark, tmp_path_factory):
    path = tmp_path_factory.mktemp("crash") / "t"
    state = write_commits(spark, path, options("t", **OFF), range(6))
    return path, state


def test_clean_killed_after_plan_and_inflight_is_finished(spark, table, tmp_path):
    import shutil

    for point in ("clean.after_plan", "clean.after_inflight"):
        path = tmp_path / point
        shutil.copytree(table[0], path)
        _die_at(point, f"""
            from storage.table_service.clean import run_clean
            run_clean(None, {str(path)!r}, {{"hoodie.cleaner.commits.retained": "1"}})
        """)
        assert ours(spark, path) == expected(table[1]) == theirs(path)
        pending = HoodieTableMetaClient.load(str(path)).timeline.pending()
        assert [i.action for i in pending] == ["clean"]
        run_clean(spark, str(path), {"hoodie.cleaner.commits.retained": "1"})
        meta = HoodieTableMetaClient.load(str(path))
        assert not meta.timeline.pending() and len(meta.timeline.completed().of_actions(["clean"])) >= 1
        assert ours(spark, path) == expected(table[1])


@pytest.mark.parametrize("point", ["archive.after_write", "archive.between_deletes"])
def test_archival_killed_is_finished(spark, table, tmp_path, point):
    import shutil

    path = tmp_path / "a"
    shutil.copytree(table[0], path)
    _die_at(point, f"""
        from storage.table_service.archival import archive
        archive({str(path)!r}, {KEEP!r})
    """)
    assert ours(spark, path) == expected(table[1]) == theirs(path)
    archive(str(path), KEEP)
    meta = HoodieTableMetaClient.load(str(path))
    archived = HoodieArchivedTimeline(meta).completed().timestamps()
    assert len(archived) == 4 and len(set(archived)) == 4  # 6 commits down to min 2; re-archived, read once
    assert not set(archived) & set(meta.timeline.timestamps())
    assert ours(spark, path) == expected(table[1]) == theirs(path)


def test_archive_merge_killed_is_settled(table, tmp_path):
    """Two small archive files (a second version, as object stores write them) merged; killed after the merged
    file is written: the next archival settles the plan, one file remains with every entry once."""
    import shutil

    path = tmp_path / "m"
    shutil.copytree(table[0], path)
    archive(str(path), {**KEEP, "hoodie.keep.min.commits": "4", "hoodie.keep.max.commits": "5"})
    folder = path / ".hoodie" / "archived"
    shutil.copy(folder / ".commits_.archive.1_1-0-1", folder / ".commits_.archive.2_1-0-1")
    before = HoodieArchivedTimeline(HoodieTableMetaClient.load(str(path))).completed().timestamps()
    merge = {**KEEP, "hoodie.archive.merge.enable": "true", "hoodie.archive.merge.files.batch.size": "2"}
    _die_at("archive.merge_after_write", f"""
        from storage.table_service.archival import archive
        archive({str(path)!r}, {merge!r})
    """)
    assert "mergeArchivePlan" in os.listdir(folder)
    archive(str(path), merge)  # every candidate is still there: the merged file may be partial, it goes
    assert sorted(os.listdir(folder)) == [".commits_.archive.1_1-0-1", ".commits_.archive.2_1-0-1"]
    from storage.config import HoodieConfig
    from storage.table_service.archival import merge_small_archive_files

    merge_small_archive_files(HoodieTableMetaClient.load(str(path)), HoodieConfig.of(merge))  # redone whole
    assert sorted(os.listdir(folder)) == [".commits_.archive.3_1-0-1"]
    after = HoodieArchivedTimeline(HoodieTableMetaClient.load(str(path))).completed().timestamps()
    assert set(before) < set(after) and len(after) == len(set(after)) == 4


def test_restore_killed_between_rollbacks_is_finished(spark, table, tmp_path):
    import shutil

    path = tmp_path / "r"
    shutil.copytree(table[0], path)
    meta = HoodieTableMetaClient.load(str(path))
    target = meta.timeline.completed().write_timeline().timestamps()[2]
    at_target = ours(spark, path, **{"as.of.instant": target})
    _die_at("restore.between_rollbacks", f"""
        from storage.table_service.restore import restore_to_instant
        restore_to_instant({str(path)!r}, {target!r})
    """)
    meta = HoodieTableMetaClient.load(str(path))
    assert [i.action for i in meta.timeline.pending()] == ["restore"]
    finish_pending_restores(meta)
    assert not HoodieTableMetaClient.load(str(path)).timeline.pending()
    assert ours(spark, path) == at_target == theirs(path)
    assert any(n.endswith(".restore") for n in timeline_files(path))
