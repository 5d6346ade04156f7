"""Savepoint and restore of a table with a metadata table (storage.metadata.metadata_writer, "Savepoint and
restore"), kept in step as Hudi 1.x keeps them: a version 9 copy-on-write table savepointed, written on (data
cleans, an MDT compaction and an MDT clean after the savepoint), then restored to the savepoint. The MDT is restored
to the same instant (an MDT restore instant rolling back its later deltacommits and compaction) and synced with the
files left; restored to a savepoint at or before its oldest compaction it is rebuilt instead (Hudi deletes it
then). Either way it lists exactly the data table's files, its column and partition stats describe exactly those
files (data skipping gives the rows a scan without it gives), and reads through it, without it and in hudi-rs
agree. A restore killed at its crash points (and inside its MDT step) leaves a table whose MDT is in step once the
restore is re-run."""
from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from storage.config import HoodieConfig
from storage.table_service import metadata_table_services as services
from storage.metadata.metadata_restore import MetadataTableRestore
from storage.metadata.table_metadata import HoodieTableMetadata
from storage.table.fs_view import FileSystemView
from storage.table.meta_client import HoodieTableMetaClient
from storage.table_service.restore import restore_to_savepoint
from storage.table_service.savepoint import create_savepoint
from test_metadata_table_services import _expected, _mdt, _options, _write, check_listing, check_reads

# no archival on either table: the MDT keeps the compaction before the savepoint, so it can be restored to it
_KEEP_ALL = {"hoodie.keep.min.commits": "20", "hoodie.keep.max.commits": "30"}


class _Killed(BaseException):
    """A process killed at a crash point (nothing after it runs)."""


def _batch(step: int) -> list[tuple]:
    return [(step % 4, f"u{step}", float(step), step, "xy"[step % 4 % 2]),
            (100 + step, f"i{step}", 0.5 * step, step, "xy"[step % 2])]


def _build(spark, base: Path, opts: dict, last: int, savepoint_at: int) -> tuple[str, list[tuple]]:
    """Writes 0..`last`, a savepoint after write `savepoint_at`; (savepoint time, rows at the savepoint)."""
    state = {i: (i, f"n{i}", float(i), 0, "xy"[i % 2]) for i in range(4)}
    savepoint, kept = None, None
    for step in range(0, last + 1):
        rows = list(state.values()) if step == 0 else _batch(step)
        _write(spark, base, opts, rows, "insert" if step == 0 else "upsert")
        state.update((r[0], r) for r in rows)
        if step == savepoint_at:
            savepoint = HoodieTableMetaClient.load(str(base)).timeline.completed().write_timeline().last().timestamp
            create_savepoint(str(base), savepoint, config=HoodieConfig(opts))
            kept = _expected(state.values())
    return savepoint, kept


def check_in_step(spark, base: Path, expected: list[tuple]) -> None:
    """The MDT lists exactly the data files and has their stats (check_listing); partition stats describe the
    latest slices; reads through the MDT, without it, with data skipping and in hudi-rs give `expected`."""
    check_listing(spark, base)
    meta = HoodieTableMetaClient.load(str(base))
    metadata = HoodieTableMetadata(meta)
    view = FileSystemView(meta, use_metadata_table=False)
    for stats in metadata.partition_stats(columns=["fare"]):
        partition = stats.file_name
        names = {n for s in view.latest_file_slices([partition])
                 for n in [*([s.base_file.name] if s.base_file else []), *(lf.name for lf in s.log_files)]}
        fares = [s for s in metadata.column_stats(partition_path=partition, columns=["fare"]) if s.file_name in names]
        assert (stats.min_value, stats.max_value) == (min(s.min_value for s in fares), max(s.max_value for s in fares))
    check_reads(spark, base, expected, ("fare >= 2.0", "id = 101"))


@pytest.fixture(scope="module")
def restorable(spark, tmp_path_factory):
    """Savepoint after write 2 (the MDT compacted at write 1), writes 3 and 4: data cleans each write, the MDT
    compacts again and cleans its initial slices at write 4; nothing archived. (base, options, savepoint, rows at
    the savepoint)."""
    with pytest.MonkeyPatch.context() as m:
        m.setattr(services, "DEFAULT_METADATA_CLEANER_COMMITS_RETAINED", 3)
        base = tmp_path_factory.mktemp("mdt_restore") / "t"
        opts = _options(base.name, **_KEEP_ALL)
        savepoint, kept = _build(spark, base, opts, 4, 2)
        yield base, opts, savepoint, kept


def test_a_restore_restores_the_metadata_table_to_the_savepoint(spark, restorable, tmp_path):
    src, opts, savepoint, kept = restorable
    base = tmp_path / "t"
    shutil.copytree(src, base)
    mdt = _mdt(base)
    compactions = [i.timestamp for i in mdt.timeline.completed().of_actions(["commit"])]
    assert compactions[0] < savepoint < compactions[-1]  # compacted before and after the savepoint
    assert list(mdt.timeline.completed().of_actions(["clean"]))  # and cleaned after it
    done = restore_to_savepoint(str(base), savepoint, config=HoodieConfig(opts))
    mdt.reload()
    restores = list(mdt.timeline.completed().of_actions(["restore"]))
    assert len(restores) == 1  # restored, not rebuilt: its deltacommits before the savepoint stay
    assert mdt.timeline.completed().find(savepoint) is not None
    assert [i.timestamp for i in mdt.timeline.completed().of_actions(["commit"])] == \
        [c for c in compactions if c < savepoint]
    later = [i.timestamp for i in mdt.timeline.of_actions(["deltacommit", "commit"]) if i.timestamp > savepoint]
    assert later == [done.timestamp]  # the sync deltacommit, at the data restore's time
    assert not list(mdt.timeline.pending())
    check_in_step(spark, base, kept)
    _write(spark, base, opts, _batch(9))  # and it is kept in step afterwards
    check_in_step(spark, base, _expected([*(tuple(v for _, v in r) for r in kept if dict(r)["id"] != 1),
                                          *_batch(9)]))


def test_a_restore_rebuilds_a_metadata_table_that_cannot_go_back(spark, tmp_path):
    """A merge-on-read table savepointed at its first write, before the MDT's first compaction; two upserts on
    (log files; the MDT compacts and archives its initialisation): Hudi deletes the MDT for a restore at or before
    its oldest compaction; here it is rebuilt from the restored table."""
    base = tmp_path / "t"
    opts = _options(base.name, **{"hoodie.datasource.write.table.type": "MERGE_ON_READ",
                                  "hoodie.parquet.small.file.limit": "0"})
    savepoint, kept = _build(spark, base, opts, 2, 0)
    mdt = _mdt(base)
    assert savepoint < mdt.timeline.completed().of_actions(["commit"]).first().timestamp
    assert list(mdt.timeline.completed().of_actions(["commit"]))
    restore_to_savepoint(str(base), savepoint, config=HoodieConfig(opts))
    mdt = _mdt(base)
    assert not list(mdt.timeline.of_actions(["restore", "commit"]))  # a new MDT: its initialisation only
    assert {i.timestamp[:14] for i in mdt.timeline} == {"00000000000000"}
    check_in_step(spark, base, kept)


@pytest.mark.parametrize("point", ["restore.after_plan", "restore.between_rollbacks", "rollback.after_files_deleted",
                                   "mdt.restored"])
def test_a_killed_restore_leaves_the_metadata_table_in_step_once_re_run(spark, restorable, tmp_path, monkeypatch,
                                                                       point):
    """Killed after planning, between its rollbacks, inside one, or inside its MDT step (the MDT restored, not
    yet synced): readers list storage while it is pending; re-running it brings the MDT in step."""
    import storage.table_service.restore as restore
    import storage.write.rollback as rollback

    src, opts, savepoint, kept = restorable
    base = tmp_path / "t"
    shutil.copytree(src, base)

    def kill(name):
        if name == point:
            raise _Killed(name)

    def killed_sync(self):
        raise _Killed(point)

    with monkeypatch.context() as m:
        m.setattr(restore, "crash_point", kill)
        m.setattr(rollback, "crash_point", kill)
        if point == "mdt.restored":
            m.setattr(MetadataTableRestore, "_sync_records", killed_sync)
        with pytest.raises(_Killed):
            restore_to_savepoint(str(base), savepoint, config=HoodieConfig(opts))
    data = HoodieTableMetaClient.load(str(base))
    assert list(data.timeline.pending().of_actions(["restore"]))
    with pytest.raises(Exception, match="restore .* is under way"):
        HoodieTableMetadata(data)
    restore_to_savepoint(str(base), savepoint, config=HoodieConfig(opts))
    assert not list(HoodieTableMetaClient.load(str(base)).timeline.pending())
    assert not list(_mdt(base).timeline.pending())
    check_in_step(spark, base, kept)
