"""File sizing of tables that run for months (issue 42): base files roll over at hoodie.parquet.max.file.size by
the bytes actually written, log files at hoodie.logfile.max.size, and merge-on-read inserts fill small file
slices as Hudi's delta-commit partitioner picks them. Every table is read back by hudi-rs (the oracle) and by
this engine."""
from __future__ import annotations

import glob
import hashlib
import logging
import os

import pytest
from hudi_oracle import apply_batch, arrow_rows, hudi_rs_read, rows, spark_rows

from storage.table.meta_client import HoodieTableMetaClient
from storage.write.partitioner import SizingConfig, SliceSize, mor_small_files

log = logging.getLogger(__name__)

SCHEMA = "id int, name string, ts long, dt string"
COLS = ["id", "name", "ts", "dt"]
LIMIT = 48 * 1024


def _name(i: int, ts: int) -> str:
    return hashlib.md5(f"{i}-{ts}".encode()).hexdigest()  # incompressible enough that files grow with rows


def _rows(ids, ts: int, dt: str = "p0") -> list[tuple]:
    return [(i, _name(i, ts), ts, dt) for i in ids]


def _opts(name: str, table_type: str = "COPY_ON_WRITE", **extra) -> dict[str, str]:
    opts = {"hoodie.table.name": name, "hoodie.datasource.write.table.type": table_type,
            "hoodie.datasource.write.recordkey.field": "id", "hoodie.datasource.write.precombine.field": "ts",
            "hoodie.datasource.write.partitionpath.field": "dt",
            "hoodie.index.bloom.num_entries": "2000",  # a small bloom filter: the footer stays small next to LIMIT
            "hoodie.bloom.index.filter.dynamic.max.entries": "20000"}
    opts.update(extra)
    return opts


def _write(spark, path: str, data: list[tuple], opts: dict, operation: str = "upsert") -> None:
    spark.createDataFrame(data, SCHEMA).coalesce(1).write.format("hudi").options(**opts) \
        .option("hoodie.datasource.write.operation", operation).mode("append").save(path)


def _latest_stats(path: str):
    meta = HoodieTableMetaClient.load(path)
    instant = meta.timeline.completed().write_timeline().last()
    return meta.active_timeline.commit_metadata(instant).write_stats()


def _same_rows(spark, path: str, state: dict, ours: bool = False) -> None:
    """hudi-rs reads the expected rows (and, with `ours`, this engine's reader too)."""
    want = rows([dict(zip(COLS, r)) for r in state.values()], COLS)
    assert arrow_rows(hudi_rs_read(path), COLS) == want
    if ours:
        assert spark_rows(spark.read.format("hudi").load(path), COLS) == want


def _check_base_files(path: str, stats) -> list[int]:
    """Every file of the commit has its own write stat, is at most 10% over the limit, and every file but the
    last of a chain that rolled (the smallest) is within 10% of the limit."""
    sizes = []
    for s in stats:
        full = os.path.join(path, s.path)
        assert os.path.getsize(full) == s.fileSizeInBytes
        sizes.append(s.fileSizeInBytes)
    assert len({s.path for s in stats}) == len(stats) and len({s.fileId for s in stats}) == len(stats)
    assert all(size <= 1.1 * LIMIT for size in sizes), sizes
    assert all(size >= 0.9 * LIMIT for size in sorted(sizes)[1:]), sizes
    return sizes


def test_base_files_roll_over_at_max_file_size(spark, tmp_path):
    path = str(tmp_path / "cow")
    # the planner's guess of 4 bytes a record sends far too many records to each file: the bytes written decide
    opts = _opts("cow", **{"hoodie.parquet.max.file.size": str(LIMIT), "hoodie.parquet.small.file.limit": str(LIMIT),
                           "hoodie.copyonwrite.record.size.estimate": "4",
                           "hoodie.record.size.estimation.threshold": "1000"})
    state: dict = {}
    first = _rows(range(3000), 1)
    _write(spark, path, first, opts, "insert")
    apply_batch(state, first)
    stats = _latest_stats(path)
    sizes = _check_base_files(path, stats)
    assert len(stats) >= 3 and sum(s.numInserts for s in stats) == 3000
    assert sorted(glob.glob(f"{path}/p0/*.parquet")) == sorted(os.path.join(path, s.path) for s in stats)
    _same_rows(spark, path, state)

    # an upsert into the small (last) file group, the only one below the small file limit: updates of every
    # group, inserts that overflow the small one into new file groups
    small = min(stats, key=lambda s: s.fileSizeInBytes)
    opts["hoodie.parquet.small.file.limit"] = str(small.fileSizeInBytes + 1)
    batch = _rows(range(0, 3000, 50), 2) + _rows(range(3000, 4500), 2)
    _write(spark, path, batch, opts)
    apply_batch(state, batch)
    stats = _latest_stats(path)
    merged = [s for s in stats if s.fileId == small.fileId]
    assert len(merged) == 1 and merged[0].prevCommit != "null"  # the small group continues, full now
    new_groups = [s for s in stats if s.prevCommit == "null"]
    assert new_groups and sum(s.numInserts for s in stats) == 1500 and sum(s.numUpdateWrites for s in stats) == 60
    rolled = [merged[0]] + new_groups
    _check_base_files(path, rolled)
    assert merged[0].fileSizeInBytes >= 0.9 * LIMIT
    assert all(s.fileSizeInBytes <= 1.1 * LIMIT for s in stats)
    _same_rows(spark, path, state, ours=True)
    log.info("limit %d: insert wrote %s, upsert rolled %s bytes", LIMIT, sorted(sizes),
             [s.fileSizeInBytes for s in rolled])


@pytest.mark.parametrize("version", ["6", "8"])
def test_mor_logs_roll_over_at_logfile_max_size(spark, tmp_path, version):
    path = str(tmp_path / f"mor{version}")
    log_limit, block = 24 * 1024, 6 * 1024
    opts = _opts("mor", "MERGE_ON_READ", **{"hoodie.logfile.max.size": str(log_limit),
                                            "hoodie.logfile.data.block.max.size": str(block),
                                            "hoodie.write.table.version": version})
    state: dict = {}
    first = _rows(range(1500), 1)
    _write(spark, path, first, opts, "insert")
    apply_batch(state, first)
    for ts in (2, 3):
        batch = _rows(range(0, 1500, 1), ts)
        _write(spark, path, batch, opts)
        apply_batch(state, batch)
        stats = _latest_stats(path)
        logs = sorted(stats, key=lambda s: s.logVersion)
        assert len(logs) >= 3 and all(".log." in s.path for s in logs)
        assert sum(s.numUpdateWrites for s in logs) == 1500
        versions = [s.logVersion for s in logs]
        assert versions == list(range(versions[0], versions[0] + len(versions)))  # consecutive versions
        for s in logs:
            assert os.path.getsize(os.path.join(path, s.path)) == s.fileSizeInBytes
            assert s.fileSizeInBytes <= log_limit + block + 4096  # the limit plus one block (and its header)
        assert all(s.fileSizeInBytes >= log_limit for s in logs[:-1])
        log.info("v%s log limit %d (blocks of %d): versions %s, %s bytes", version, log_limit, block, versions,
                 [s.fileSizeInBytes for s in logs])
        _same_rows(spark, path, state, ours=ts == 3)
    on_disk = glob.glob(f"{path}/p0/.*.log.*")
    assert len(on_disk) >= 6


def test_mor_inserts_fill_a_small_slice_without_logs(spark, tmp_path):
    path = str(tmp_path / "mor_small")
    opts = _opts("mors", "MERGE_ON_READ")
    state: dict = {}
    first = _rows(range(100), 1)
    _write(spark, path, first, opts, "insert")
    apply_batch(state, first)
    [created] = _latest_stats(path)
    # inserts go to the small slice (no log files): merged into a new base file of the same file group
    more = _rows(range(100, 150), 1)
    _write(spark, path, more, opts, "insert")
    apply_batch(state, more)
    [merged] = _latest_stats(path)
    assert merged.fileId == created.fileId and merged.path.endswith(".parquet") and merged.numInserts == 50
    assert merged.prevCommit == created.path.rsplit("_", 1)[1].split(".")[0]
    assert not glob.glob(f"{path}/p0/.*.log.*")
    _same_rows(spark, path, state)
    # an update puts a log file in the slice: a bloom index cannot find records in logs, so inserts now start a
    # new file group instead of padding that slice
    upd = _rows(range(0, 10), 2)
    _write(spark, path, upd, opts)
    apply_batch(state, upd)
    assert glob.glob(f"{path}/p0/.*.log.*")
    later = _rows(range(150, 180), 1)
    _write(spark, path, later, opts, "insert")
    apply_batch(state, later)
    [fresh] = _latest_stats(path)
    assert fresh.fileId != created.fileId and fresh.prevCommit == "null" and fresh.numInserts == 30
    _same_rows(spark, path, state, ours=True)


def test_mor_small_file_candidates_follow_the_index():
    sizing = SizingConfig(small_file_limit=1000, max_file_size=4000)
    slices = [SliceSize("p", "a", 900), SliceSize("p", "b", 300), SliceSize("p", "c", 200, (100,)),
              SliceSize("p", "d", 1500), SliceSize("p", "e", None, (2000,)), SliceSize("p", "f", 3900, (1000,))]
    # bloom / simple: slices without logs below the small file limit, smallest first, up to the candidates limit
    picked = mor_small_files(slices, sizing, can_index_logs=False, candidates_limit=1)
    assert [(s.file_id, s.size, s.rewrites_base) for s in picked] == [("b", 300, True)]
    assert [s.file_id for s in mor_small_files(slices, sizing, False, 5)] == ["b", "a"]
    assert mor_small_files(slices, SizingConfig(small_file_limit=0, max_file_size=4000), False, 5) == []
    # an index of log files: every slice whose base plus logs (at 0.35 of their bytes) stays below the max size
    both = {s.file_id: s.size for s in mor_small_files(slices, sizing, can_index_logs=True, candidates_limit=1)}
    assert both == {"a": 900, "b": 300, "c": 235, "d": 1500, "e": 700}
    assert not any(s.rewrites_base for s in mor_small_files(slices, sizing, True, 1))
