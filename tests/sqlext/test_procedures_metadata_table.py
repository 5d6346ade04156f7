"""CALL show_metadata_table_partitions / show_metadata_table_files / show_metadata_table_column_stats /
show_metadata_table_stats / validate_metadata_table_files on a copy of Java's v9 table with a full metadata table: answers checked against a
directory listing of the committed files and the reader, a stray file found by the validation."""
from __future__ import annotations

import shutil

import pytest

from fixture_tables import copy_fixture
from storage.metadata.table_metadata_util import committed_files
from storage.table.fs_view import FileSystemView
from storage.table.meta_client import HoodieTableMetaClient

COW_V9 = "sample_cow_v9_txns_simple_meta"


@pytest.fixture
def table(fixtures_cache, tmp_path):
    """(path of a private copy of the v9 COW table, its committed files listed from the directories)."""
    base = copy_fixture(COW_V9, fixtures_cache, tmp_path)
    view = FileSystemView(HoodieTableMetaClient.load(str(base)), use_metadata_table=False)
    return base, committed_files(view)


def _call(spark, text: str) -> list[tuple]:
    return [tuple(r) for r in spark.sql(text).collect()]


def test_show_metadata_table_partitions(hudi_sql, table):
    base, listed = table
    rows = _call(hudi_sql, f"CALL show_metadata_table_partitions(table => 'hudi.`{base}`')")
    assert rows == [(p,) for p in sorted(listed)]


def test_show_metadata_table_files(hudi_sql, table):
    base, listed = table
    partition = sorted(listed)[0]
    rows = _call(hudi_sql, f"CALL show_metadata_table_files(table => 'hudi.`{base}`', partition => '{partition}')")
    assert rows == [(name,) for name in sorted(listed[partition])]


def test_show_metadata_table_column_stats(hudi_sql, table):
    base, listed = table
    partition = sorted(listed)[0]
    rows = _call(hudi_sql, f"CALL show_metadata_table_column_stats(table => 'hudi.`{base}`', "
                           f"partition => '{partition}', targetColumns => 'txn_id')")
    assert rows and {r[1] for r in rows} == {"txn_id"}
    assert {r[0] for r in rows} <= set(listed[partition])
    assert all(r[2] is not None and r[2] <= r[3] and r[4] == 0 for r in rows)


def test_show_metadata_table_stats(hudi_sql, table):
    """Per MDT partition: its latest base files (one per file group, the newest HFile on disk) and a log count and
    size bounded by the partition directory's."""
    base, _ = table
    rows = dict(_call(hudi_sql, f"CALL show_metadata_table_stats(table => 'hudi.`{base}`')"))
    props = HoodieTableMetaClient.load(str(base)).table_config.props
    partitions = props["hoodie.table.metadata.partitions"].split(",")
    assert set(rows) == {f"{p}.{k}" for p in partitions for k in ("totalBaseFileSizeInBytes",
                                                                   "totalLogFileSizeInBytes", "baseFileCount",
                                                                   "logFileCount")}
    for partition in partitions:
        directory = base / ".hoodie" / "metadata" / partition
        newest: dict[str, tuple[str, int]] = {}
        for f in directory.glob("*.hfile"):
            file_id, instant = f.name.split("_")[0], f.stem.rsplit("_", 1)[-1]
            if file_id not in newest or instant > newest[file_id][0]:
                newest[file_id] = (instant, f.stat().st_size)
        assert int(rows[f"{partition}.baseFileCount"]) == len(newest), partition
        assert int(rows[f"{partition}.totalBaseFileSizeInBytes"]) == sum(size for _, size in newest.values())
        logs = list(directory.glob(".*.log.*"))
        assert 0 <= int(rows[f"{partition}.logFileCount"]) <= len(logs)
        assert 0 <= int(rows[f"{partition}.totalLogFileSizeInBytes"]) <= sum(f.stat().st_size for f in logs)
    only_files = _call(hudi_sql, f"CALL show_metadata_table_stats(table => 'hudi.`{base}`', "
                                 f"filter => \"stat_key LIKE 'files.%'\")")
    assert sorted(only_files) == sorted((k, v) for k, v in rows.items() if k.startswith("files."))


def test_validate_metadata_table_files_finds_a_stray_file(hudi_sql, table):
    base, listed = table
    call = f"CALL validate_metadata_table_files(table => 'hudi.`{base}`')"
    assert _call(hudi_sql, call) == []
    verbose = _call(hudi_sql, f"CALL validate_metadata_table_files(table => 'hudi.`{base}`', verbose => true)")
    assert len(verbose) == sum(len(files) for files in listed.values())
    partition = sorted(listed)[0]
    original = base / partition / sorted(n for n in listed[partition] if n.endswith(".parquet"))[0]
    stray = original.with_name("00000000" + original.name[8:])
    shutil.copy(original, stray)
    size = stray.stat().st_size
    assert _call(hudi_sql, call) == [(partition, stray.name, True, False, size, 0)]


def test_a_table_without_a_metadata_table_is_a_clear_error(hudi_sql, fixtures_cache, tmp_path):
    base = copy_fixture("sample_cow_v9_txns_nonpart_nometa", fixtures_cache, tmp_path)
    with pytest.raises(Exception, match="metadata table not enabled/initialized"):
        hudi_sql.sql(f"CALL show_metadata_table_partitions(table => 'hudi.`{base}`')").collect()


def test_savepoint_and_restore_by_sql_keep_the_metadata_table_in_step(hudi_sql, table):
    """CALL create_savepoint / rollback_to_savepoint run with the session's `SET hoodie.*`: with the metadata table
    on, the restore brings it in step (validation finds nothing) instead of removing it."""
    base, _ = table
    name = f"hudi.`{base}`"
    meta = HoodieTableMetaClient.load(str(base))
    last = meta.timeline.completed().write_timeline().last().timestamp
    before = sorted(_call(hudi_sql, f"SELECT txn_id FROM {name}"))
    hudi_sql.sql("SET hoodie.metadata.enable=true")
    try:
        assert _call(hudi_sql, f"CALL create_savepoint(table => '{name}', commit_time => '{last}')") == [(True,)]
        hudi_sql.sql(f"DELETE FROM {name} WHERE txn_id = '{before[0][0]}'")
        assert len(_call(hudi_sql, f"SELECT txn_id FROM {name}")) == len(before) - 1
        assert _call(hudi_sql, f"CALL rollback_to_savepoint(table => '{name}', instant_time => '{last}')") == [(True,)]
        assert (base / ".hoodie" / "metadata" / ".hoodie" / "hoodie.properties").exists()
        assert _call(hudi_sql, f"CALL validate_metadata_table_files(table => '{name}')") == []
        assert sorted(_call(hudi_sql, f"SELECT txn_id FROM {name}")) == before
    finally:
        hudi_sql.sql("RESET hoodie.metadata.enable")
