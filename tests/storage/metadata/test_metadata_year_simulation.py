"""A year of daily writes, scaled down, on version 9 COW and MOR tables with the metadata table (files, column_stats,
partition_stats, record_index) and every service inline: compaction (MOR), clustering, clean and archival of the data table, and
the metadata table's own compaction, clean and archival. Some days bring a delete batch, an insert overwrite of one
partition, or a write that dies (before its commit, or after its MDT deltacommit) and is rolled back by the next
writer. At checkpoints and at the end `validate_metadata_table_files` finds no difference, the record index
equals a scan's key -> location map, this engine and hudi-rs
read the expected state, a filter on a data column reads the same rows with and without data skipping; at the end
the metadata table's timeline shows it compacted, cleaned and archived."""
from __future__ import annotations

import logging
import re
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "table_service"))
from service_helpers import COLS, batch, expected, options, ours, theirs, write  # noqa: E402
from hudi_oracle import apply_batch, check_record_index, spark_rows  # noqa: E402
import storage.write.write_operation as write_operation  # noqa: E402
from storage.avro.container import read_avro_container  # noqa: E402
from storage.table.action_completion import register_post_complete, register_pre_complete  # noqa: E402
from storage.table.meta_client import HoodieTableMetaClient  # noqa: E402
from storage.table_service import metadata_table_services  # noqa: E402
from storage.timeline.archived_timeline import HoodieArchivedTimeline  # noqa: E402
from storage.write.heartbeat import heartbeat_path  # noqa: E402

DAYS = 12
SERVICES = {
    "hoodie.write.table.version": 9, "hoodie.upsert.shuffle.parallelism": 2, "hoodie.insert.shuffle.parallelism": 2,
    "hoodie.metadata.enable": "true", "hoodie.metadata.index.column.stats.enable": "true",
    "hoodie.metadata.index.partition.stats.enable": "true", "hoodie.metadata.compact.max.delta.commits": 3,
    "hoodie.metadata.record.index.enable": "true", "hoodie.metadata.record.index.min.filegroup.count": 2,
    "hoodie.metadata.record.index.max.filegroup.count": 2,
    "hoodie.compact.inline": "true", "hoodie.compact.inline.max.delta.commits": 3,
    "hoodie.clustering.inline": "true", "hoodie.clustering.inline.max.commits": 4,
    "hoodie.cleaner.commits.retained": 2, "hoodie.keep.min.commits": 3, "hoodie.keep.max.commits": 5,
    "hoodie.commits.archival.batch": 1}
DELETE_DAY, OVERWRITE_DAY = 4, 6
DIES_BEFORE_COMMIT, DIES_AFTER_MDT = 8, 11  # on these days a write dies; the day's next writer rolls it back
CHECKPOINTS = {5, 9}  # and the end


class _Killed(BaseException):
    """A writer process killed (nothing after the point runs, no `finally` undoes the write)."""


def _dies(spark, path, opts, data, point: str, monkeypatch) -> str:
    """Write `data` in a writer that is killed at `point`: before its commit (data files written, no MDT
    deltacommit) or after the MDT's deltacommit of the write (the data instant never completes). Its instant time."""
    undo = lambda: None  # noqa: E731
    with monkeypatch.context() as m:
        m.setattr(write_operation, "abort_write", lambda *a: None)  # a killed writer undoes nothing
        if point == "before_commit":
            def crash(name):
                if name == "write.before_commit":
                    raise _Killed(name)
            m.setattr(write_operation, "crash_point", crash)
        else:
            def kill(completion):
                if completion.action in ("commit", "deltacommit") and \
                        not completion.meta.base_path.endswith("/.hoodie/metadata"):
                    raise _Killed("after the MDT deltacommit")
            undo = register_pre_complete(kill)
        try:
            with pytest.raises(_Killed):
                write(spark, path, data, opts)
        finally:
            undo()
    meta = HoodieTableMetaClient.load(str(path))
    failed = meta.timeline.pending().last().timestamp
    mdt = HoodieTableMetaClient.load(str(Path(path) / ".hoodie" / "metadata"))
    assert (mdt.timeline.completed().find(failed) is not None) == (point == "after_mdt")
    Path(heartbeat_path(meta.meta_path, failed)).unlink(missing_ok=True)  # its heartbeat expires
    return failed


def _check(spark, path, state: dict, since: int, caplog) -> tuple[int, int]:
    """No file differs between the MDT and the directories; both readers read the expected state; a filter on a
    data column (`ts >= since`) reads the same rows with and without data skipping. The (kept, all) file slices of
    the skipping read."""
    assert spark.sql(f"CALL validate_metadata_table_files(table => 'hudi.`{path}`')").collect() == []
    check_record_index(spark, path)  # rebuilt from a scan, compared
    want = expected(state)
    assert ours(spark, path) == want
    assert ours(spark, path, **{"hoodie.metadata.enable": "false"}) == want
    assert theirs(path) == want
    filtered = [r for r in want if dict(r)["ts"] >= since]
    caplog.clear()
    with caplog.at_level(logging.INFO, logger="storage.read.data_skipping"):
        for skipping in ("true", "false"):
            df = spark.read.format("hudi").option("hoodie.enable.data.skipping", skipping).load(str(path))
            assert spark_rows(df.where(f"ts >= {since}"), COLS) == filtered, skipping
    pruned = [re.search(r"(\d+) of (\d+) file slices may match", r.getMessage()) for r in caplog.records]
    kept, slices = next(map(int, m.groups()) for m in pruned if m)
    return kept, slices


def _mdt_timeline(path) -> list[str]:
    """Names of the files of the metadata table's active timeline (version 9: `.hoodie/timeline/`)."""
    timeline = Path(path) / ".hoodie" / "metadata" / ".hoodie" / "timeline"
    return sorted(p.name for p in timeline.iterdir() if p.is_file())


@pytest.mark.parametrize("table_type", ["COPY_ON_WRITE", "MERGE_ON_READ"])
def test_a_year_with_the_metadata_table_and_all_services(spark, tmp_path, table_type, monkeypatch, caplog):
    # Hudi's MDT cleaner retains at least 20 commits; 2 here lets a few weeks reach the MDT's clean
    monkeypatch.setattr(metadata_table_services, "DEFAULT_METADATA_CLEANER_COMMITS_RETAINED", 2)
    path = tmp_path / table_type.lower()
    opts = options("ymdt", table_type, **SERVICES)
    completed: list[tuple[str, str, str]] = []  # (table, action, operation) of every action completed
    unregister = register_post_complete(lambda c, _: completed.append(
        ("mdt" if c.meta.base_path.endswith("/.hoodie/metadata") else "data", c.action, c.operation)))
    state: dict = {}
    failed = None
    try:
        for day in range(DAYS):
            if day == DELETE_DAY:  # a key updated every day, and two inserted on day 2
                gone = [r for r in state.values() if r[0] in (1, 112, 113)]
                write(spark, path, gone, opts, "delete")
                apply_batch(state, gone, delete=True)
                assert theirs(path) == expected(state)
            elif day == OVERWRITE_DAY:  # partition p0 replaced by four rows
                data = [(k, f"o{day}", day, "p0") for k in (0, 2, 600, 602)]
                write(spark, path, data, opts, "insert_overwrite")
                state = {k: r for k, r in state.items() if r[3] != "p0"}
                apply_batch(state, data, ordering=2)
                assert theirs(path) == expected(state)
            elif day in (DIES_BEFORE_COMMIT, DIES_AFTER_MDT):
                failed = _dies(spark, path, opts, [(k, f"x{day}", 50, f"p{k % 2}") for k in (0, 1, 700, 701)],
                      "before_commit" if day == DIES_BEFORE_COMMIT else "after_mdt", monkeypatch)
                assert ours(spark, path) == theirs(path) == expected(state)  # the failed write is not read
            # day 0 also fills a partition never written again: a filter on recent days skips its files
            data = batch(day) + ([(900, "old", 0, "p2"), (901, "old", 0, "p2")] if day == 0 else [])
            write(spark, path, data, opts)  # (after a failed write: rolls it back first)
            apply_batch(state, data, ordering=2)
            assert theirs(path) == expected(state)  # after every write and the services it ran inline
            if failed:  # rolled back, in the MDT too
                for table in (path, path / ".hoodie" / "metadata"):
                    assert HoodieTableMetaClient.load(str(table)).timeline.find(failed) is None, table
                failed = None
            if day in CHECKPOINTS:
                _check(spark, path, state, day - 1, caplog)
    finally:
        unregister()
    kept, slices = _check(spark, path, state, DAYS - 2, caplog)
    assert 0 < kept < slices  # the skipping read really skipped file slices (and read some)

    # the data table's services all ran
    data_actions = {(a, o) for t, a, o in completed if t == "data"}
    assert {"clean", "rollback"} <= {a for a, _ in data_actions}
    assert ("clustering", "CLUSTER") in data_actions and ("replacecommit", "INSERT_OVERWRITE") in data_actions
    assert table_type == "COPY_ON_WRITE" or ("compaction", "COMPACT") in data_actions
    assert list(HoodieArchivedTimeline(HoodieTableMetaClient.load(str(path))).completed())
    # the metadata table compacted, cleaned and archived: its timeline files show it
    mdt_files = _mdt_timeline(path)
    compactions = {n.split(".")[0] for n in mdt_files if n.endswith(".compaction.requested")}
    assert {n.split("_")[0] for n in mdt_files if n.endswith(".commit")} & compactions, mdt_files
    assert any(n.endswith(".clean") for n in mdt_files), mdt_files
    history = Path(path) / ".hoodie" / "metadata" / ".hoodie" / "timeline" / "history"
    assert (history / "_version_").is_file() and any(p.name.endswith(".parquet") for p in history.iterdir())
    assert not any(n.startswith("0000000000000000") for n in mdt_files)  # the MDT's initial instants archived
    # cleaned for real: the files the MDT's cleans name as deleted are gone, the initial slices among them
    timeline = history.parent
    deleted = {n for clean in mdt_files if clean.endswith(".clean")
               for pm in read_avro_container((timeline / clean).read_bytes())["partitionMetadata"].values()
               for n in pm["successDeleteFiles"]}
    present = {p.name for p in (Path(path) / ".hoodie" / "metadata").glob("*/*")}
    assert deleted and not deleted & present
    assert any(n.endswith(".hfile") for n in deleted) and any(".log." in n for n in deleted)
    assert not [n for n in present if n.endswith(".hfile") and n.rsplit("_", 1)[1].startswith("0000000000000000")]
