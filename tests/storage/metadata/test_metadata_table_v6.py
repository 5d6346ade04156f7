"""The metadata table of a table version 6 table, laid out as Hudi 1.x's v6 writer (and 0.14/0.15) lays it out:
layout-1 timeline with JSON deltacommits, suffixed instants for its own initialisation (010, 011), compaction (001)
and clean (002), log files named after their slice's base instant with one new version per deltacommit, a data
rollback as an MDT deltacommit R plus an MDT rollback R006, no partition_stats; kept in step through upserts,
deletes, compaction, clean, rollback and restore (the listing equals the storage listing, reads agree with and
without it, with data skipping, and with hudi-rs); created on Java's version 6 tables by a write and by CALL
create_metadata_table; CALL init/delete_metadata_table."""
from __future__ import annotations

import re
from pathlib import Path

import pytest

from fixture_tables import copy_fixture
from hudi_oracle import arrow_rows, hudi_rs_read, spark_rows
from storage.config import HoodieConfig
from storage.fs_utils import parse_base_file_name, parse_log_file_name
from storage.metadata.table_metadata import HoodieTableMetadata
from storage.table.meta_client import HoodieTableMetaClient
from storage.timeline.archived_timeline import HoodieArchivedTimeline
from storage.table_service.restore import restore_to_savepoint
from storage.table_service.savepoint import create_savepoint
from test_metadata_table_services import _expected, _write, check_reads

V6_OPTIONS = {"hoodie.write.table.version": "6", "hoodie.metadata.index.partition.stats.enable": "true"}
_LAYOUT_1 = re.compile(r"^(\d{17,20})\.(deltacommit|commit|compaction|clean|rollback|restore)(\.requested|\.inflight)?$")


def _options(name: str, table_type: str, **extra: str) -> dict[str, str]:
    from test_metadata_table_services import _options as base

    return base(name, **{**V6_OPTIONS, "hoodie.datasource.write.table.type": table_type,
                         "hoodie.parquet.small.file.limit": "0", **extra})


def _batch(step: int) -> list[tuple]:
    return [(k, f"n{step}", float(k + step), step, "xy"[k % 2]) for k in (step % 4, 100 + step, 200 + step)]


def _mdt_timeline(base: Path) -> list[str]:
    return sorted(p.name for p in (base / ".hoodie" / "metadata" / ".hoodie").iterdir() if p.is_file()
                  and p.name != "hoodie.properties")


def _check_reads(spark, base: Path, expected: list[tuple]) -> None:
    check_reads(spark, base, expected, ("fare >= 3.0", "id = 101"))


def _in_step(spark, base: Path) -> None:
    assert spark.sql(f"CALL validate_metadata_table_files(table => 'hudi.`{base}`')").collect() == []


def test_a_version_6_metadata_table_is_laid_out_as_hudi_writes_it_for_version_6(spark, tmp_path):
    """Merge-on-read (copy-on-write's MDT goes through the same writer: the Java-table and procedure tests below
    run it on copy-on-write tables)."""
    table_type = "MERGE_ON_READ"
    base = tmp_path / "t"
    opts = _options("v6mdt", table_type)
    state = {}
    for step in range(9):
        rows = _batch(step)
        _write(spark, base, opts, rows)
        state.update((r[0], r) for r in rows)
    _write(spark, base, opts, [state.pop(100)], "delete")
    expected = _expected(state.values())

    props = (base / ".hoodie" / "metadata" / ".hoodie" / "hoodie.properties").read_text()
    for line in ("hoodie.table.version=6", "hoodie.timeline.layout.version=1", "hoodie.archivelog.folder=archived",
                 "hoodie.table.keygenerator.type=HOODIE_TABLE_METADATA", "hoodie.table.base.file.format=HFILE"):
        assert line in props
    assert "hoodie.table.initial.version" not in props and "hoodie.record.merge.mode" not in props
    data_props = (base / ".hoodie" / "hoodie.properties").read_text()
    assert "hoodie.table.metadata.partitions=column_stats,files" in data_props  # no partition_stats on v6
    assert not (base / ".hoodie" / "metadata" / "partition_stats").exists()

    names = _mdt_timeline(base)
    assert all(_LAYOUT_1.match(n) for n in names), [n for n in names if not _LAYOUT_1.match(n)]
    completed = {n.split(".")[0]: n.split(".")[1] for n in names if n.count(".") == 1}
    data_meta = HoodieTableMetaClient.load(str(base))
    data_instants = {i.timestamp for i in data_meta.timeline.completed()} | \
        {i.timestamp for i in HoodieArchivedTimeline(data_meta).completed()}
    deltacommits = sorted(t for t, a in completed.items() if a == "deltacommit")
    assert deltacommits[:2] == ["00000000000000010", "00000000000000011"]  # files, then column_stats
    # one per data action, at its time (active or archived on the data timeline)
    assert all(len(t) == 17 for t in deltacommits[2:]) and set(deltacommits[2:]) <= data_instants
    compactions = sorted(t for t, a in completed.items() if a == "commit")
    cleans = sorted(t for t, a in completed.items() if a == "clean")
    assert compactions and all(t[:17] in deltacommits and t.endswith("001") for t in compactions)
    assert cleans and all(t[:17] in deltacommits and t.endswith("002") for t in cleans)
    deltacommit_file = base / ".hoodie" / "metadata" / ".hoodie" / f"{deltacommits[-1]}.deltacommit"
    assert deltacommit_file.read_bytes().lstrip().startswith(b"{")  # JSON commit metadata (layout 1)

    slice_starts = {"00000000000000010", "00000000000000011", *compactions}
    for partition in ("files", "column_stats"):
        logs: dict[tuple[str, str], list[int]] = {}
        for f in (base / ".hoodie" / "metadata" / partition).iterdir():
            parsed = parse_log_file_name(f.name)
            if parsed:
                assert parsed.instant_time in slice_starts, f.name  # named after the slice, not the deltacommit
                logs.setdefault((parsed.file_id, parsed.instant_time), []).append(parsed.version)
            elif parse_base_file_name(f.name):
                assert parse_base_file_name(f.name).instant_time in slice_starts
        assert logs and all(sorted(v) == list(range(1, len(v) + 1)) for v in logs.values())

    metadata = HoodieTableMetadata(HoodieTableMetaClient.load(str(base)))
    assert metadata.column_stats()
    _in_step(spark, base)
    _check_reads(spark, base, expected)


def test_rollback_and_restore_keep_a_version_6_merge_on_read_metadata_table_in_step(spark, tmp_path):
    base = tmp_path / "t"
    opts = _options("v6rb", "MERGE_ON_READ", **{"hoodie.metadata.compact.max.delta.commits": "10"})
    state = {}
    for step in range(3):
        _write(spark, base, opts, _batch(step))
        state.update((r[0], r) for r in _batch(step))
    savepoint = HoodieTableMetaClient.load(str(base)).timeline.completed().write_timeline().last().timestamp
    create_savepoint(str(base), savepoint, config=HoodieConfig(opts))
    at_savepoint = _expected(state.values())
    before_last = dict(state)
    for step in range(3, 5):
        _write(spark, base, opts, _batch(step))
        state.update((r[0], r) for r in _batch(step))
    last = HoodieTableMetaClient.load(str(base)).timeline.completed().write_timeline().last().timestamp

    # the last deltacommit (log appends: undone by a rollback command block) rolled back
    spark.sql(f"CALL rollback_to_instant(table => 'hudi.`{base}`', instant_time => '{last}')").collect()
    rollback_time = HoodieTableMetaClient.load(str(base)).timeline.completed().of_actions(["rollback"]).last().timestamp
    names = _mdt_timeline(base)
    assert f"{rollback_time}.deltacommit" in names and f"{rollback_time}006.rollback" in names
    assert not any(n.startswith(f"{last}.deltacommit") for n in names)
    state = dict(before_last)
    for step in range(3, 4):
        state.update((r[0], r) for r in _batch(step))
    _in_step(spark, base)
    _check_reads(spark, base, _expected(state.values()))

    restore_to_savepoint(str(base), savepoint, config=HoodieConfig(opts))
    assert any(_LAYOUT_1.match(n) and n.endswith(".restore") for n in _mdt_timeline(base))
    _in_step(spark, base)
    _check_reads(spark, base, at_savepoint)
    _write(spark, base, opts, _batch(7))  # and the next write goes on from there
    _in_step(spark, base)


def test_a_write_with_it_enabled_builds_it_on_a_java_version_6_table(spark, fixtures_cache, tmp_path):
    base = copy_fixture("sample_cow_v6_nonpartitioned", fixtures_cache, tmp_path)
    meta = HoodieTableMetaClient.load(str(base))
    latest = meta.timeline.completed().last().timestamp
    before = arrow_rows(hudi_rs_read(str(base)))
    key, precombine = meta.table_config.record_key_fields[0], meta.table_config.precombine_field
    df = spark.read.format("hudi").load(str(base)).drop(*[c for c in spark.read.format("hudi").load(str(base)).columns
                                                         if c.startswith("_hoodie")]).limit(1)
    df.write.format("hudi").options(**{
        "hoodie.table.name": meta.table_config.name, "hoodie.datasource.write.recordkey.field": key,
        "hoodie.datasource.write.precombine.field": precombine or key, "hoodie.datasource.write.operation": "upsert",
        "hoodie.metadata.enable": "true", "hoodie.metadata.index.column.stats.enable": "true",
        "hoodie.datasource.hive_sync.enable": "false"}).mode("append").save(str(base))
    names = _mdt_timeline(base)
    assert f"{latest}010.deltacommit" in names and f"{latest}011.deltacommit" in names  # built as of the table
    _in_step(spark, base)
    after = arrow_rows(hudi_rs_read(str(base)))
    assert len(after) == len(before)
    assert spark_rows(spark.read.format("hudi").load(str(base))) == after


def test_create_init_and_delete_metadata_table_procedures(spark, fixtures_cache, tmp_path):
    base = copy_fixture("sample_cow_v6_complexkeygen_hivestyle", fixtures_cache, tmp_path)
    table = f"hudi.`{base}`"
    expected = spark_rows(spark.read.format("hudi").load(str(base)))
    with pytest.raises(Exception, match="does not exist"):
        spark.sql(f"CALL init_metadata_table(table => '{table}')").collect()
    [created] = spark.sql(f"CALL create_metadata_table(table => '{table}')").collect()
    assert created.result.startswith(f"Created Metadata Table in {base}/.hoodie/metadata")
    assert "hoodie.table.metadata.partitions=files" in (base / ".hoodie" / "hoodie.properties").read_text()
    _in_step(spark, base)
    assert spark_rows(spark.read.format("hudi").load(str(base))) == expected
    with pytest.raises(Exception, match="not empty"):
        spark.sql(f"CALL create_metadata_table(table => '{table}')").collect()

    spark.sql("SET hoodie.metadata.index.column.stats.enable=true")
    try:
        [init] = spark.sql(f"CALL init_metadata_table(table => '{table}')").collect()
    finally:
        spark.sql("RESET hoodie.metadata.index.column.stats.enable")
    assert init.result.startswith("Initialized Metadata Table in")
    assert "hoodie.table.metadata.partitions=column_stats,files" in (base / ".hoodie" / "hoodie.properties").read_text()
    assert HoodieTableMetadata(HoodieTableMetaClient.load(str(base))).column_stats()
    [opened] = spark.sql(f"CALL init_metadata_table(table => '{table}', read_only => true)").collect()
    assert opened.result.startswith("Opened Metadata Table in")

    [deleted] = spark.sql(f"CALL delete_metadata_table(table => '{table}')").collect()
    assert deleted.result == f"Deleted Metadata Table at '{base}/.hoodie/metadata'"
    assert not (base / ".hoodie" / "metadata").exists()
    assert "hoodie.table.metadata.partitions=" not in (base / ".hoodie" / "hoodie.properties").read_text()
    assert spark_rows(spark.read.format("hudi").load(str(base))) == expected
