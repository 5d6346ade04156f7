"""Table version upgrade (6 -> 8 -> 9) and downgrade (9 -> 8 -> 6): the layout each version reads, the same rows
before and after (this engine, hudi-rs, time travel), archived instants and a savepoint carried over, the refusals,
and an interrupted run finished by running it again."""
from __future__ import annotations

import os
import shutil

import pytest

import storage.table_service.upgrade_downgrade as ud
from hudi_oracle import arrow_rows, hudi_rs_read, spark_rows
from storage.exception import HoodieReadError
from storage.table.meta_client import HoodieTableMetaClient
from storage.table_service.compaction import schedule_compaction
from storage.table_service.savepoint import create_savepoint
from storage.table_service.upgrade.timeline_layout import completion_from_mtime
from storage.table_service.upgrade_downgrade import HoodieUpgradeDowngradeError, downgrade_table, upgrade_table
from storage.timeline.archived_timeline import HoodieArchivedTimeline
from storage.timeline.instant import Action

COLS = ["id", "name", "ts", "dt"]
SCHEMA = "id int, name string, ts long, dt string"


def _opts(mor: bool) -> dict[str, str]:
    return {"hoodie.table.name": "t", "hoodie.datasource.write.recordkey.field": "id",
            "hoodie.datasource.write.precombine.field": "ts", "hoodie.datasource.write.partitionpath.field": "dt",
            "hoodie.datasource.write.table.type": "MERGE_ON_READ" if mor else "COPY_ON_WRITE",
            "hoodie.keep.min.commits": "2", "hoodie.keep.max.commits": "3", "hoodie.cleaner.commits.retained": "1",
            "hoodie.commits.archival.batch": "1", "hoodie.compact.inline": "false",
            "hoodie.compact.inline.trigger.strategy": "TIME_ELAPSED",  # lets MOR archival pass the last compaction
            "hoodie.metadata.compact.max.delta.commits": "1"}  # and the metadata table's (archival waits for it)


BATCHES = [[(1, "a", 1, "p1"), (2, "b", 1, "p2"), (3, "c", 1, "p1")],
           [(1, "a2", 2, "p1"), (4, "d", 2, "p2")],
           [(2, "b3", 3, "p2"), (5, "e", 3, "p1")],
           [(3, "c4", 4, "p1"), (6, "f", 4, "p2")],
           [(1, "a5", 5, "p1")]]


def _table(spark, path: str, mor: bool) -> None:
    for batch in BATCHES:
        spark.createDataFrame(batch, SCHEMA).write.format("hudi").options(**_opts(mor)).mode("append").save(path)


def _points(path: str) -> list[str]:
    """Query points between the retained commits: each commit's completion (its file's time in version 6)."""
    meta = HoodieTableMetaClient.load(path)
    if meta.table_config.timeline_layout_version >= 2:
        return [i.completion_time for i in meta.timeline.completed().write_timeline()]
    infos = {i.name: i for i in meta.storage.list_dir(meta.meta_path)}
    return [completion_from_mtime(i, infos[i.file_name(1)].modification_time)
            for i in meta.timeline.completed().write_timeline()]


def _reads(spark, path: str, points: list[str]) -> list:
    out = [spark_rows(spark.read.format("hudi").load(path), COLS), arrow_rows(hudi_rs_read(path), COLS)]
    for p in points:
        try:
            out.append(spark_rows(spark.read.format("hudi").option("as.of.instant", p).load(path), COLS))
        except HoodieReadError:
            out.append("cleaned")  # time travel before the cleaner's retained commits is refused
    return out


def _archived(path: str) -> list[tuple[str, str]]:
    meta = HoodieTableMetaClient.load(path)
    return sorted((i.timestamp, i.action) for i in HoodieArchivedTimeline(meta).completed())


def test_mor_with_archive_and_savepoint_upgrades_to_9_and_back(spark, tmp_path):
    path = str(tmp_path / "t")
    _table(spark, path, mor=True)
    meta = HoodieTableMetaClient.load(path)
    retained = meta.timeline.completed().write_timeline().timestamps()
    create_savepoint(path, retained[-1])
    archived = _archived(path)
    assert archived, "archival ran"
    points = _points(path)
    before = _reads(spark, path, points)
    assert len(before[0]) == 6 and before[-1] != "cleaned"

    result = upgrade_table(path, "NINE")
    assert result.steps == ("6->8", "8->9") and result.archived_actions >= 1
    meta = HoodieTableMetaClient.load(path)
    props = meta.table_config.props
    assert props["hoodie.table.version"] == "9" and props["hoodie.timeline.layout.version"] == "2"
    assert props["hoodie.table.initial.version"] == "6" and props["hoodie.table.ordering.fields"] == "ts"
    assert props["hoodie.table.keygenerator.type"] == "SIMPLE" and "hoodie.table.precombine.field" not in props
    assert not [n for n in os.listdir(meta.meta_path) if n[0].isdigit()], "no layout-1 instant file remains"
    assert all(i.completion_time for i in meta.timeline.completed())
    assert meta.timeline.completed().of_actions([Action.SAVEPOINT]).timestamps() == [retained[-1]]
    assert _archived(path) == archived
    assert _points(path) == points
    assert _reads(spark, path, points) == before

    result = downgrade_table(path, 6)
    assert result.steps == ("9->8", "8->6")
    meta = HoodieTableMetaClient.load(path)
    assert meta.table_config.version == 6 and not os.path.exists(os.path.join(meta.meta_path, "timeline"))
    assert "hoodie.table.initial.version" not in meta.table_config.props
    assert meta.table_config.props["hoodie.table.keygenerator.class"] == "org.apache.hudi.keygen.SimpleKeyGenerator"
    assert _archived(path) == archived
    assert _reads(spark, path, points) == before


def test_cow_upgrade_then_write_then_downgrade(spark, tmp_path):
    path = str(tmp_path / "t")
    _table(spark, path, mor=False)
    upgrade_table(path, 8)
    assert upgrade_table(path, 8).changed is False
    spark.createDataFrame([(7, "g", 6, "p1")], SCHEMA).write.format("hudi").options(**_opts(False)) \
        .mode("append").save(path)
    before = _reads(spark, path, [])
    assert len(before[0]) == 7
    downgrade_table(path, "SIX")
    assert _reads(spark, path, []) == before


def test_refusals_leave_the_table_unchanged(spark, tmp_path):
    path = str(tmp_path / "t")
    _table(spark, path, mor=True)
    listing = sorted(os.listdir(os.path.join(path, ".hoodie")))
    with pytest.raises(HoodieUpgradeDowngradeError, match="unknown table version '7'"):
        upgrade_table(path, "7")
    with pytest.raises(HoodieUpgradeDowngradeError, match="use upgrade_table"):
        downgrade_table(path, 9)
    compaction = schedule_compaction(path)
    assert compaction
    with pytest.raises(HoodieUpgradeDowngradeError, match=f"pending instants compaction {compaction}"):
        upgrade_table(path, 9)
    assert HoodieTableMetaClient.load(path).table_config.version == 6
    assert sorted(os.listdir(os.path.join(path, ".hoodie"))) == sorted(listing + [f"{compaction}.compaction.requested"])


class _Died(Exception):
    pass


@pytest.fixture(scope="module")
def interrupted_run_seeds(spark, tmp_path_factory):
    """seed(direction, path): at `path` a copy (modification times kept: version 6 completion times come from
    them) of the merge-on-read table an upgrade, or a downgrade, starts from; each is written once per module."""
    root, made = tmp_path_factory.mktemp("upgrade-seeds"), {}

    def seed(direction: str, path: str) -> None:
        if direction not in made:
            made[direction] = str(root / direction)
            _table(spark, made[direction], mor=True)
            if direction == "downgrade":
                upgrade_table(made[direction], 9)
                spark.createDataFrame([(2, "b6", 6, "p2")], SCHEMA).write.format("hudi").options(**_opts(True)) \
                    .mode("append").save(made[direction])  # a version-9 log file
        shutil.copytree(made[direction], path)

    return seed


@pytest.mark.parametrize("point", ["upgrade.after_archived_timeline", "upgrade.after_properties",
                                   "downgrade.after_log_renames", "downgrade.after_active_timeline",
                                   "downgrade.after_properties"])
def test_an_interrupted_run_reads_and_finishes(spark, tmp_path, monkeypatch, point, interrupted_run_seeds):
    path = str(tmp_path / "t")
    interrupted_run_seeds(point.split(".")[0], path)
    points = _points(path)
    before = _reads(spark, path, points)

    def die(name):
        if name == point:
            raise _Died(name)
    monkeypatch.setattr(ud, "crash_point", die)
    run, target = (upgrade_table, 9) if point.startswith("upgrade") else (downgrade_table, 6)
    with pytest.raises(_Died):
        run(path, target)
    assert _reads(spark, path, points) == before, f"reads after dying at {point}"
    monkeypatch.undo()
    run(path, target)
    meta = HoodieTableMetaClient.load(path)
    assert meta.table_config.version == target
    assert _reads(spark, path, points) == before
