"""Merge-on-read writes: updates and deletes land in log files (valid log format), hudi-rs reads the merged
snapshot equal to rows computed independently here; a pending compaction sends new logs to a new slice."""
from __future__ import annotations

import glob
import os

import pytest
from crashing_writer import write_and_crash_before_commit
from hudi_oracle import apply_batch, arrow_rows, hudi_rs_read, rows, spark_rows

from storage.file_group.log_block import HoodieLogBlockType
from storage.file_group.log_format import read_log_blocks
from storage.table.meta_client import HoodieTableMetaClient
from storage.table_service.compaction import schedule_compaction, show_compaction

pytestmark = pytest.mark.usefixtures("write_engine")  # every test on both write engines

SCHEMA = "id int, name string, price double, ts long, dt string"
COLS = ["id", "name", "price", "ts", "dt"]


def _opts(name, partitioned=True):
    opts = {
        "hoodie.table.name": name,
        "hoodie.datasource.write.table.type": "MERGE_ON_READ",
        "hoodie.datasource.write.recordkey.field": "id",
        "hoodie.datasource.write.precombine.field": "ts",
        "hoodie.datasource.write.hive_style_partitioning": "true",
        # no small-file handling: these tests are about log appends (a batch with inserts would otherwise merge
        # the log-free slices it fills into new base files, as Hudi's delta-commit partitioner does)
        "hoodie.parquet.small.file.limit": "0",
    }
    if partitioned:
        opts["hoodie.datasource.write.partitionpath.field"] = "dt"
    else:
        opts["hoodie.datasource.write.keygenerator.type"] = "NON_PARTITION"
    return opts


def _write(spark, path, data, opts, operation="upsert"):
    df = spark.createDataFrame(data, SCHEMA)
    df.write.format("hudi").options(**opts).option("hoodie.datasource.write.operation", operation).mode("append").save(str(path))


def _check(path, state):
    want = rows([dict(zip(COLS, r)) for r in state.values()], COLS)
    assert arrow_rows(hudi_rs_read(str(path)), COLS) == want


@pytest.mark.parametrize("partitioned", [True, False])
def test_mor_upserts_and_deletes(spark, tmp_path, partitioned):
    path = tmp_path / "m"
    opts = _opts("m", partitioned)
    state: dict = {}
    b1 = [(i, f"n{i}", float(i), 1, f"2024-01-0{1 + i % 2}") for i in range(10)]
    _write(spark, path, b1, opts)
    apply_batch(state, b1)
    _check(path, state)
    b2 = [(i, f"u{i}", i * 2.0, 2, f"2024-01-0{1 + i % 2}") for i in range(0, 10, 3)] + [(20, "new", 1.0, 1, "2024-01-01")]
    _write(spark, path, b2, opts)
    apply_batch(state, b2)
    _check(path, state)
    b3 = [(i, "x", 0.0, 3, f"2024-01-0{1 + i % 2}") for i in (1, 4)]
    _write(spark, path, b3, opts, "delete")
    apply_batch(state, b3, delete=True)
    _check(path, state)
    logs = glob.glob(f"{path}/**/.*.log.*", recursive=True)
    assert logs
    types = set()
    for lf in logs:
        types |= {b.block_type for b in read_log_blocks(lf)}
    assert types == {HoodieLogBlockType.AVRO_DATA_BLOCK, HoodieLogBlockType.DELETE_BLOCK}
    mc = HoodieTableMetaClient.load(str(path))
    assert mc.table_config.is_mor
    actions = [i.action for i in mc.timeline.completed()]
    assert actions == ["deltacommit"] * 3
    md = mc.active_timeline.commit_metadata(mc.timeline.completed().instants[1])
    log_stats = [s for s in md.write_stats() if s.logFiles]
    assert log_stats and all(s.logVersion >= 1 and s.totalLogRecords > 0 for s in log_stats)

    # a pending compaction: the next write goes to a new slice at the compaction instant; reads stay correct
    instant = schedule_compaction(str(path))
    assert instant and show_compaction(str(path))[0]["state"] == "REQUESTED"
    b4 = [(i, f"v{i}", 9.0, 4, f"2024-01-0{1 + i % 2}") for i in (0, 3)]
    _write(spark, path, b4, opts)
    apply_batch(state, b4)
    new_logs = [f for f in glob.glob(f"{path}/**/.*.log.*", recursive=True) if f"_{instant}.log." in os.path.basename(f)]
    assert new_logs
    # hudi-rs does not merge a slice that starts at a pending compaction (Java Hudi does), so check the new
    # slice's log content directly: exactly the upserted rows, at the new deltacommit
    written = []
    for lf in new_logs:
        for block in read_log_blocks(lf):
            written += block.to_table().select(COLS).to_pylist()
    assert sorted(tuple(r[c] for c in COLS) for r in written) == sorted(b4)


def test_killed_deltacommit_is_rolled_back_with_command_block(spark, tmp_path):
    from storage.avro.container import read_avro_container

    path = tmp_path / "k"
    opts = _opts("k")
    state: dict = {}
    b1 = [(1, "a", 1.0, 1, "d"), (2, "b", 1.0, 1, "d")]
    _write(spark, path, b1, opts)
    apply_batch(state, b1)
    write_and_crash_before_commit(path, [(1, "a2", 1.0, 2, "d"), (9, "z", 1.0, 1, "d")], SCHEMA, opts, tmp_path)
    (pending,) = HoodieTableMetaClient.load(str(path)).timeline.pending().instants
    assert pending.action == "deltacommit"
    _check(path, state)  # the failed deltacommit's log blocks are not visible
    b3 = [(3, "c", 1.0, 1, "d")]
    _write(spark, path, b3, opts)
    apply_batch(state, b3)
    meta = HoodieTableMetaClient.load(str(path))
    assert [i.action for i in meta.timeline.completed()] == ["deltacommit", "rollback", "deltacommit"]
    commands = []
    for lf in glob.glob(f"{path}/dt=d/.*.log.*"):
        commands += [b for b in read_log_blocks(lf) if b.block_type == HoodieLogBlockType.COMMAND_BLOCK]
    assert len(commands) == 1
    assert commands[0].header[1] == pending.timestamp and commands[0].header[3] == "0"
    rb = [i for i in meta.timeline.completed() if i.action == "rollback"][0]
    md = read_avro_container(meta.active_timeline.read_bytes(rb))
    assert md["commitsRollback"] == [pending.timestamp]
    assert any(pm["rollbackLogFiles"] for pm in md["partitionMetadata"].values())
    _check(path, state)


def test_schedule_inline_num_commits(spark, tmp_path):
    path = tmp_path / "i"
    opts = {**_opts("i"), "hoodie.compact.schedule.inline": "true", "hoodie.compact.inline.max.delta.commits": "2"}
    _write(spark, path, [(1, "a", 1.0, 1, "d")], opts)
    assert show_compaction(str(path)) == []
    _write(spark, path, [(1, "b", 1.0, 2, "d")], opts)  # second deltacommit: a log exists, plan scheduled
    shown = show_compaction(str(path))
    assert len(shown) == 1 and shown[0]["state"] == "REQUESTED" and shown[0]["operation_size"] == 1


def test_parquet_data_blocks(spark, tmp_path):
    """hoodie.logfile.data.block.format=parquet: updates go to PARQUET_DATA_BLOCKs, which hudi-rs and our reader
    merge exactly like Avro blocks."""
    path = tmp_path / "pq"
    opts = {**_opts("pq"), "hoodie.logfile.data.block.format": "parquet"}
    state: dict = {}
    for batch in ([(i, f"n{i}", float(i), 1, f"2024-01-0{1 + i % 2}") for i in range(8)],
                  [(i, f"u{i}", 2.0 * i, 2, f"2024-01-0{1 + i % 2}") for i in (1, 2, 5)]):
        _write(spark, path, batch, opts)
        apply_batch(state, batch)
    _check(path, state)
    assert spark_rows(spark.read.format("hudi").load(str(path)), COLS) == rows(
        [dict(zip(COLS, r)) for r in state.values()], COLS)
    kinds = {b.block_type for lf in glob.glob(f"{path}/**/.*.log.*", recursive=True) for b in read_log_blocks(lf)}
    assert kinds == {HoodieLogBlockType.PARQUET_DATA_BLOCK}
    with pytest.raises(Exception, match="unsupported hoodie.logfile.data.block.format"):
        _write(spark, path, [(1, "x", 1.0, 3, "2024-01-02")], {**opts, "hoodie.logfile.data.block.format": "orc"})


@pytest.mark.parametrize("columns", [["price"], ["_hoodie_commit_time", "dt"], ["ID", "Name"], ["_hoodie_record_key"]])
def test_projected_snapshot_merges_like_the_full_one(spark, tmp_path, columns):
    """read_table(columns=...) reads and merges only some columns; the merge still sees keys, ordering values,
    delete blocks and soft deletes, so the rows equal the full snapshot's projected rows."""
    from storage.read import read_table

    path = tmp_path / "p"
    opts = _opts("p")
    _write(spark, path, [(i, f"n{i}", float(i), 5, f"2024-01-0{1 + i % 2}") for i in range(12)], opts)
    _write(spark, path, [(1, "late", 99.0, 1, "2024-01-02"), (2, "u", 20.0, 6, "2024-01-01")], opts)  # 1 loses on ts
    _write(spark, path, [(3, "x", 0.0, 9, "2024-01-02")], opts, "delete")
    soft = spark.createDataFrame([(4, "y", 0.0, 9, "2024-01-01", True)], SCHEMA + ", _hoodie_is_deleted boolean")
    soft.write.format("hudi").options(**opts).mode("append").save(str(path))
    full = read_table(spark, str(path))
    assert glob.glob(f"{path}/**/.*.log.*", recursive=True)  # the slices have logs to merge
    projected = read_table(spark, str(path), columns=columns)
    names = [c for c in full.columns if c.lower() in {x.lower() for x in columns}]
    assert projected.columns == names
    assert sorted(map(tuple, projected.collect())) == sorted(map(tuple, full.select(*names).collect()))
    assert projected.count() == 10  # 12 - a delete block - a soft delete


def test_a_losing_write_never_removes_the_log_file_of_the_winner(spark, tmp_path):
    """Two writers of one round plan the same next log version of a file group, and their write tokens can be
    equal (they count Spark stages the same way in different applications). The loser's log goes to the next
    free version, its marker names only that file, so undoing it (abort_write deletes what its markers name)
    leaves the winner's committed log in place."""
    from storage.file_group.log_block import AvroDataBlock
    from storage.fs_utils import parse_log_file_name
    from storage.write.handle import write_new_log_file
    from storage.write.markers import list_markers
    from storage.write.rollback import abort_write
    from storage.write.task_context import LogTarget

    path = tmp_path / "w"
    opts = _opts("w")
    state: dict = {}
    for batch in ([(1, "a", 1.0, 1, "d")], [(1, "winner", 2.0, 2, "d")]):
        _write(spark, path, batch, opts)
        apply_batch(state, batch)
    [winner_log] = glob.glob(f"{path}/dt=d/.*.log.*")
    parsed = parse_log_file_name(os.path.basename(winner_log))
    meta = HoodieTableMetaClient.load(str(path))
    loser = meta.active_timeline.new_instant_time()
    meta.active_timeline.create_requested("deltacommit", loser)
    block = AvroDataBlock.from_table(
        spark.createDataFrame([(1, "loser", 3.0, 3, "d")], SCHEMA).toArrow(),
        '{"type":"record","name":"r","fields":[]}', loser)
    created = write_new_log_file(meta.storage, str(path), meta.marker_dir(loser), "dt=d", parsed.file_id,
                                 LogTarget(parsed.instant_time, parsed.version), parsed.write_token, [block], 1 << 20,
                                 loser)
    assert created.version == parsed.version + 1
    assert [m.file_name for m in list_markers(meta.storage, meta.marker_dir(loser))] == [created.name]
    abort_write(meta, loser)
    assert os.path.exists(winner_log) and not os.path.exists(f"{path}/dt=d/{created.name}")
    _check(path, state)


@pytest.mark.parametrize("index", ["GLOBAL_SIMPLE", "GLOBAL_BLOOM"])
def test_global_index_moves_a_key_back_and_forth(spark, tmp_path, index):
    """A key moved to another partition stays in its old base file, deleted by a log block: the global index
    looks keys up in the merged slices, so moving it back updates one place, never two (no duplicate)."""
    path = tmp_path / "g"
    opts = {**_opts("g"), "hoodie.index.type": index}
    state: dict = {}
    for batch in ([(1, "a", 1.0, 1, "p1"), (2, "b", 1.0, 1, "p1")], [(1, "a2", 1.0, 2, "p2")],
                  [(1, "a3", 1.0, 3, "p1")], [(1, "a4", 1.0, 4, "p2")], [(1, "a5", 1.0, 5, "p2")]):
        _write(spark, path, batch, opts)
        apply_batch(state, batch)
        _check(path, state)
        assert spark_rows(spark.read.format("hudi").load(str(path)), COLS) == \
            rows([dict(zip(COLS, r)) for r in state.values()], COLS)
