"""CALL procedures: argument binding and errors, and each procedure's output checked against an independent
source (hudi-rs's timeline and file slices, the files on disk, hoodie.properties, the metastore)."""
from __future__ import annotations

import shutil
import sys
import uuid
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from hudi_oracle import arrow_rows, hudi_rs_read, spark_rows  # noqa: E402

from sqlext.sql import HoodieSqlError
from storage.fs_utils import parse_base_file_name
from storage.table.table_config import load_table_config
from storage.io.storage import HoodieStorage

DDL = ("CREATE TABLE {name} (id INT, name STRING, price DOUBLE, ts BIGINT, dt STRING) USING hudi "
       "PARTITIONED BY (dt) TBLPROPERTIES (primaryKey = 'id', preCombineField = 'ts'{extra})")
WRITES = ["INSERT INTO {name} VALUES (1, 'a', 10.0, 1, 'p1'), (2, 'b', 20.0, 1, 'p2')",
          "INSERT INTO {name} VALUES (3, 'c', 30.0, 1, 'p1')",
          "UPDATE {name} SET price = price + 1 WHERE id IN (1, 2)"]


def _rs_commits(path) -> list[str]:
    from hudi import HudiTableBuilder

    timeline = HudiTableBuilder.from_base_uri(str(path)).build().get_timeline()
    instants = [*timeline.get_completed_commits(), *timeline.get_completed_deltacommits(),
                *timeline.get_completed_replacecommits()]
    return sorted(i.timestamp for i in instants)


def _base_files(path) -> list[tuple[str, str, int]]:
    """(partition, file name, size) of every base file on disk."""
    out = []
    for f in Path(path).rglob("*.parquet"):
        if ".hoodie" not in f.parts and parse_base_file_name(f.name):
            out.append((f.parent.relative_to(path).as_posix(), f.name, f.stat().st_size))
    return sorted(out)


@pytest.fixture(scope="module")
def history_table(spark, tmp_path_factory):
    """A partitioned COW table with three commits (insert, insert, update), written once per module."""
    from sqlext.sql import WarehouseResolver, installed

    wh = tmp_path_factory.mktemp("proc-warehouse")
    with installed(spark, WarehouseResolver(str(wh))):
        spark.sql("; ".join([DDL.format(name="hist", extra="")] + [w.format(name="hist") for w in WRITES]))
    return wh / "hist"


@pytest.fixture
def hist(hudi_sql, history_table, tmp_path):
    """A private copy of the history table, registered as `h` in the test's warehouse; its path."""
    path = tmp_path / f"h-{uuid.uuid4().hex[:6]}"
    shutil.copytree(history_table, path)
    hudi_sql.sql(f"CREATE TABLE h USING hudi LOCATION '{path}'")
    return path


def _rows(df):
    return [tuple(r) for r in df.collect()]


def test_show_commits_equal_the_timeline(hudi_sql, hist):
    commits = _rs_commits(hist)
    assert len(commits) == 3
    df = hudi_sql.sql("CALL show_commits(table => 'h')")
    assert df.columns == ["commit_time", "state_transition_time", "action", "total_bytes_written",
                          "total_files_added", "total_files_updated", "total_partitions_written",
                          "total_records_written", "total_update_records_written", "total_errors"]
    rows = df.collect()
    assert [r.commit_time for r in rows] == commits[::-1]  # newest first
    assert {r.action for r in rows} == {"commit"}
    first, second, update = rows[2], rows[1], rows[0]
    assert (first.total_files_added, first.total_partitions_written, first.total_records_written) == (2, 2, 2)
    assert (update.total_files_updated, update.total_update_records_written) == (2, 2)
    # second insert: its one file group in p1 is either new or merged into (small file handling)
    assert second.total_partitions_written == 1 and second.total_errors == 0
    # positional arguments, system. prefix, path form of the table, limit
    assert [r[0] for r in hudi_sql.sql(f"CALL system.show_commits('{hist}', 2)").collect()] == commits[::-1][:2]
    assert [r[0] for r in hudi_sql.sql(f"CALL show_commits(table => 'hudi.`{hist}`', limit => 1)").collect()] == \
        commits[-1:]


def test_commit_detail_procedures_name_the_files_on_disk(hudi_sql, hist):
    latest = _rs_commits(hist)[-1]
    files = _base_files(hist)
    written = {(p, n.split("_")[0]) for p, n, _ in files if parse_base_file_name(n).instant_time == latest}
    df = hudi_sql.sql(f"CALL show_commit_files(table => 'h', instant_time => '{latest}')")
    assert {(r.partition_path, r.file_id) for r in df.collect()} == written
    assert {r.action for r in df.collect()} == {"commit"}
    sizes = {(p, n.split("_")[0]): s for p, n, s in files if parse_base_file_name(n).instant_time == latest}
    assert {(r.partition_path, r.file_id): r.file_size for r in df.collect()} == sizes
    parts = hudi_sql.sql(f"CALL show_commit_partitions(table => 'h', instant_time => '{latest}')").collect()
    assert sorted((r.partition_path, r.total_files_updated, r.total_records_updated) for r in parts) == \
        [("dt=p1", 1, 1), ("dt=p2", 1, 1)]
    stats = hudi_sql.sql(f"CALL show_commit_write_stats(table => 'h', instant_time => '{latest}')").collect()[0]
    assert stats.total_bytes_written == sum(sizes.values()) and stats.total_records_written >= 2
    assert stats.avg_record_size == -(-stats.total_bytes_written // stats.total_records_written)
    meta_rows = hudi_sql.sql("CALL show_commits_metadata(table => 'h', limit => 100)").collect()
    assert {r.commit_time for r in meta_rows} == set(_rs_commits(hist))
    assert {(r.partition, r.file_id) for r in meta_rows if r.commit_time == latest} == written
    with pytest.raises(HoodieSqlError, match="show_commit_files: commit 20000101000000000 not found"):
        hudi_sql.sql("CALL show_commit_files(table => 'h', instant_time => '20000101000000000')")


def test_table_properties_fsview_and_file_sizes(hudi_sql, hist):
    from hudi import HudiTableBuilder

    props = load_table_config(HoodieStorage(), f"{hist}/.hoodie").props
    got = dict(_rows(hudi_sql.sql("CALL show_table_properties(table => 'h', limit => 100)")))
    assert got == dict(props) and got["hoodie.table.recordkey.fields"] == "id"
    assert len(hudi_sql.sql(f"CALL show_table_properties(path => '{hist}', limit => 3)").collect()) == 3

    slices = HudiTableBuilder.from_base_uri(str(hist)).build().get_file_slices()
    expected = sorted((s.partition_path, s.file_id, s.base_file_name, s.base_file_size) for s in slices)
    latest = hudi_sql.sql("CALL show_fsview_latest(table => 'h', limit => 100)").collect()
    assert sorted((r.partition, r.file_id, r.data_file.rsplit("/", 1)[-1], r.data_file_size)
                  for r in latest) == expected
    everything = hudi_sql.sql("CALL show_fsview_all(table => 'h', limit => 100)").collect()
    assert sorted((r.partition, r.data_file.rsplit("/", 1)[-1]) for r in everything) == \
        sorted((p, n) for p, n, _ in _base_files(hist))  # every slice, older versions too
    only_p1 = hudi_sql.sql("CALL show_fsview_latest(table => 'h', partition_path => 'dt=p1')").collect()
    assert {r.partition for r in only_p1} == {"dt=p1"}

    sizes = [s for _, _, s in _base_files(hist)]
    stats = {r.commit_time: r for r in hudi_sql.sql("CALL stats_file_sizes(table => 'h')").collect()}
    assert (stats["ALL"].num_files, stats["ALL"].max, stats["ALL"].min) == (len(sizes), max(sizes), min(sizes))
    assert set(stats) - {"ALL"} == {parse_base_file_name(n).instant_time for _, n, _ in _base_files(hist)}


def test_copy_to_temp_view_reads_like_hudi_rs(hudi_sql, hist):
    first = _rs_commits(hist)[0]
    assert _rows(hudi_sql.sql("CALL copy_to_temp_view(table => 'h', view_name => 'h_now')")) == [(0,)]
    assert spark_rows(hudi_sql.sql("SELECT * FROM h_now")) == arrow_rows(hudi_rs_read(hist))
    hudi_sql.sql(f"CALL copy_to_temp_view(table => 'h', view_name => 'h_then', as_of_instant => '{first}')")
    assert spark_rows(hudi_sql.sql("SELECT * FROM h_then")) == arrow_rows(hudi_rs_read(hist, as_of=first))
    with pytest.raises(HoodieSqlError, match="cannot create view 'h_now'"):
        hudi_sql.sql("CALL copy_to_temp_view(table => 'h', view_name => 'h_now')")
    hudi_sql.sql("CALL copy_to_temp_view(table => 'h', view_name => 'h_now', replace => true, "
                 f"as_of_instant => '{first}')")
    assert hudi_sql.sql("SELECT * FROM h_now").count() == 2
    for view in ("h_now", "h_then"):
        hudi_sql.catalog.dropTempView(view)


def test_rollback_to_instant_restores_the_previous_snapshot(hudi_sql, hist):
    commits = _rs_commits(hist)
    before = arrow_rows(hudi_rs_read(hist, as_of=commits[-2]))
    with pytest.raises(HoodieSqlError, match=f"commit {commits[0]} is the first commit of the active timeline"):
        hudi_sql.sql(f"CALL rollback_to_instant(table => 'h', instant_time => '{commits[0]}')")
    assert _rs_commits(hist) == commits  # refused: nothing changed
    files_before = _base_files(hist)
    assert _rows(hudi_sql.sql(f"CALL rollback_to_instant(table => 'h', instant_time => '{commits[-1]}')")) == \
        [(True,)]
    assert _rs_commits(hist) == commits[:-1]
    assert arrow_rows(hudi_rs_read(hist)) == before
    assert spark_rows(hudi_sql.sql("SELECT * FROM h")) == before
    removed = sorted(set(files_before) - set(_base_files(hist)))
    assert removed and all(parse_base_file_name(n).instant_time == commits[-1] for _, n, _ in removed)
    rollbacks = hudi_sql.sql("CALL show_rollbacks(table => 'h')").collect()
    assert {r.rollback_instant for r in rollbacks} == {f"[{commits[-1]}]"}
    assert sorted(r.deleted_file.rsplit("/", 1)[-1] for r in rollbacks) == sorted(n for _, n, _ in removed)
    assert all(r.succeeded and r.state == "COMPLETED" for r in rollbacks)
    # the table takes writes again after the rollback
    hudi_sql.sql("INSERT INTO h VALUES (9, 'z', 9.0, 1, 'p2')")
    assert hudi_sql.sql("SELECT id FROM h WHERE id = 9").count() == 1


def test_rollback_of_a_merge_on_read_deltacommit(hudi_sql, warehouse):
    hudi_sql.sql(DDL.format(name="mr", extra=", type = 'mor'") + "; " + WRITES[0].format(name="mr"))
    path = warehouse / "mr"
    before = arrow_rows(hudi_rs_read(path))
    hudi_sql.sql("UPDATE mr SET name = 'changed' WHERE id = 1; INSERT INTO mr VALUES (5, 'e', 1.0, 1, 'p2')")
    logs = list(path.rglob(".*.log.*"))
    assert logs and len(_rs_commits(path)) == 3  # the update went to a log file
    commits = _rs_commits(path)
    hudi_sql.sql(f"CALL rollback_to_instant(table => 'mr', instant_time => '{commits[-1]}')")
    hudi_sql.sql(f"CALL rollback_to_instant(table => 'mr', instant_time => '{commits[-2]}')")
    assert _rs_commits(path) == commits[:1]
    assert arrow_rows(hudi_rs_read(path)) == before
    assert spark_rows(hudi_sql.sql("SELECT * FROM mr")) == before
    shown = hudi_sql.sql("CALL show_rollbacks(table => 'mr')").collect()
    assert {r.rollback_instant for r in shown} == {f"[{commits[-1]}]", f"[{commits[-2]}]"}


def test_call_errors_name_the_procedure_and_argument(hudi_sql, hist):
    cases = [
        ("CALL show_comits(table => 'h')", r"unknown procedure 'show_comits'", (1, 6)),
        ("CALL show_commits(table => 'h', limt => 3)", r"show_commits: unknown argument 'limt'", (1, 33)),
        ("CALL show_commit_files(table => 'h')", r"show_commit_files: missing required argument 'instant_time'",
         (1, 6)),
        ("CALL show_commits(table => 'h', limit => 'many')", r"show_commits: argument 'limit' must be int", (1, 33)),
        ("CALL show_commits('h', 1, true, 2)", r"show_commits: too many arguments", (1, 33)),
        ("CALL show_commits(table => 'nope')", r"table 'nope' does not exist or is not a Hudi table", None),
        ("CALL show_commits(limit => 1, 'h')", r"positional argument cannot follow named", None),
        ("CALL foo.show_commits(table => 'h')", r"unknown procedure namespace 'foo'", None),
    ]
    for sql, message, position in cases:
        with pytest.raises(HoodieSqlError, match=message) as info:
            hudi_sql.sql(sql)
        if position:
            assert (info.value.line, info.value.col) == position, sql
    # a later statement in a multi-statement string: position in the whole text
    with pytest.raises(HoodieSqlError) as info:
        hudi_sql.sql("SELECT 1;\nCALL show_commits(table => 'h', bogus => 1)")
    assert (info.value.line, info.value.col) == (2, 33)


def test_help_lists_procedures_and_parameters(hudi_sql):
    text = hudi_sql.sql("CALL help()").collect()[0][0]
    for name in ("show_commits", "rollback_to_instant", "run_compaction", "show_compaction", "hive_sync",
                 "show_fsview_latest", "stats_file_sizes", "copy_to_temp_view"):
        assert f"\t{name}\t" in text
    detail = hudi_sql.sql("CALL help(cmd => 'show_commit_files')").collect()[0][0]
    assert "instant_time" in detail and "file_size" in detail and "total_records_written" in detail
    with pytest.raises(HoodieSqlError, match="can not find nope command"):
        hudi_sql.sql("CALL help(cmd => 'nope')")
    assert "call help(cmd=>[hoodie.key])" in text
    key = hudi_sql.sql("CALL help(cmd => 'hoodie.datasource.write.record.merger.impls')").collect()[0][0]
    assert key.startswith("hoodie.datasource.write.record.merger.impls\n") and "honoured: no" in key
    with pytest.raises(HoodieSqlError, match=r"unknown config key hoodie.cleaner.polcy \(did you mean "
                                           r"hoodie.cleaner.policy\?\)"):
        hudi_sql.sql("CALL help(cmd => 'hoodie.cleaner.polcy')")


def test_hive_sync_procedure_registers_partitions(spark, hms_db):
    from catalog import MetastoreClient

    catalog, db = hms_db
    spark.sql(DDL.format(name=f"{db}.synced", extra="") + f"; {WRITES[0].format(name=f'{db}.synced')}")
    with MetastoreClient(catalog.uri) as client:
        assert client.get_partitions(db, "synced") == []  # post-commit sync is off in the test session
        rows = spark.sql(f"CALL hive_sync(table => '{db}.synced')").collect()
        assert [(r.result, r.synced_table, r.added_partitions) for r in rows] == [(True, f"{db}.synced", 2)]
        assert sorted("/".join(p.values) for p in client.get_partitions(db, "synced")) == ["p1", "p2"]
    with pytest.raises(HoodieSqlError, match="hive_sync: table 'nosuch' does not exist"):
        spark.sql("CALL hive_sync(table => 'nosuch')")


def test_compaction_procedures(hudi_sql, tmp_path):
    hudi_sql.sql(DDL.format(name="m", extra=", type = 'mor'") + "; " + "; ".join(w.format(name="m") for w in WRITES))
    path = hudi_sql.sql("DESCRIBE EXTENDED m").where("col_name = 'Location'").collect()[0].data_type
    expected = arrow_rows(hudi_rs_read(path))
    assert hudi_sql.sql("CALL run_compaction(op => 'run', table => 'm')").collect() == []  # nothing pending
    scheduled = hudi_sql.sql("CALL run_compaction(op => 'schedule', table => 'm')").collect()
    assert len(scheduled) == 1 and scheduled[0].state == "REQUESTED" and scheduled[0].operation_size >= 1
    instant = scheduled[0].timestamp
    shown = hudi_sql.sql("CALL show_compaction(table => 'm')").collect()
    assert {(r.compaction_time, r.state) for r in shown} == {(instant, "REQUESTED")}
    with pytest.raises(HoodieSqlError, match="op 'compact'"):
        hudi_sql.sql("CALL run_compaction(op => 'compact', table => 'm')")
    with pytest.raises(HoodieSqlError, match="copy-on-write"):
        hudi_sql.sql(DDL.format(name="c", extra="") + "; CALL run_compaction(op => 'run', table => 'c')")
    ran = hudi_sql.sql(f"CALL run_compaction(op => 'run', path => '{path}', timestamp => {instant})").collect()
    assert [(r.timestamp, r.state) for r in ran] == [(instant, "COMPLETED")]
    assert instant in _rs_commits(path)
    assert arrow_rows(hudi_rs_read(path)) == expected
    shown = hudi_sql.sql("CALL show_compaction(table => 'm')").collect()
    assert {r.state for r in shown} == {"COMPLETED"} and {r.compaction_time for r in shown} == {instant}


def test_repair_bloom_filters_rewrites_legacy_footers(hudi_sql, seeded):
    """A table whose footers this engine wrote in Hadoop's hash order: a dry run lists them, the repair rewrites them
    in Hudi's order (marked), a second repair has nothing to do, and the rows are the same throughout."""
    import pyarrow.parquet as pq

    from storage.bloom import TailOrder
    from storage.bloom.footer import is_legacy_footer
    from storage.table_service.bloom_repair import rewrite_footer_filter

    path = Path(seeded("rb"))
    files = sorted(str(p) for p in path.rglob("*.parquet") if ".hoodie" not in p.parts)
    storage = HoodieStorage.for_path(str(path))
    for f in files:
        rewrite_footer_filter(storage, f, TailOrder.HADOOP, mark=False)
    before = spark_rows(hudi_sql.sql("SELECT * FROM rb"))
    planned = hudi_sql.sql("CALL repair_bloom_filters(table => 'rb', dry_run => true)").collect()
    assert sorted(r.file_name for r in planned) == sorted(Path(f).name for f in files)
    assert {r.action for r in planned} == {"would rewrite"}
    assert all(is_legacy_footer(pq.read_metadata(f)) for f in files)
    done = hudi_sql.sql("CALL repair_bloom_filters(table => 'rb')").collect()
    assert {r.action for r in done} == {"rewritten"} and sum(r.keys for r in done) == 5
    assert not any(is_legacy_footer(pq.read_metadata(f)) for f in files)
    assert hudi_sql.sql("CALL repair_bloom_filters(table => 'rb')").collect() == []
    assert spark_rows(hudi_sql.sql("SELECT * FROM rb")) == before
