"""Writing the metadata table (`storage.metadata.metadata_writer`): COW and MOR version 9 tables written with
`hoodie.metadata.enable=true` through insert, upsert, delete, insert overwrite, compaction, clustering, clean and
the rollback of a failed write; after each step the MDT's listing equals the committed data files on disk (the
oracle of test_table_metadata, from file names and instant files only) and its column stats equal the parquet
footers. hudi-rs reads the tables, a Java table keeps its MDT through our upsert, and a deltacommit whose data
instant never completed is ignored, then rolled back."""
from __future__ import annotations

import json

from pathlib import Path

import pytest

from fixture_tables import copy_fixture
from hudi_oracle import arrow_rows, check_record_index, check_secondary_indexes, hudi_rs_read, spark_rows
from storage.config import MetadataConfigKeys as MK
from storage.metadata.table_metadata_util import committed_files
from storage.metadata.table_metadata import HoodieTableMetadata
from storage.table.action_completion import register_pre_complete
from storage.table.fs_view import FileSystemView
from storage.table.meta_client import HoodieTableMetaClient
from test_table_metadata import disk_listing, data_stats

SCHEMA = "id int, name string, fare double, ts long, dt string"
MDT_ON = {"hoodie.metadata.enable": "true", "hoodie.metadata.index.column.stats.enable": "true",
          "hoodie.metadata.index.partition.stats.enable": "true"}


def _options(name: str, table_type: str, **extra: str) -> dict[str, str]:
    return {"hoodie.table.name": name, "hoodie.datasource.write.recordkey.field": "id",
            "hoodie.datasource.write.precombine.field": "ts", "hoodie.datasource.write.partitionpath.field": "dt",
            "hoodie.datasource.write.table.type": table_type, "hoodie.write.table.version": "9",
            "hoodie.upsert.shuffle.parallelism": "2", "hoodie.insert.shuffle.parallelism": "2", **MDT_ON, **extra}


def _write(spark, base: Path, opts: dict, rows: list[tuple], operation: str, **extra: str) -> None:
    spark.createDataFrame(rows, SCHEMA).write.format("hudi").options(**{**opts, **extra}) \
        .option("hoodie.datasource.write.operation", operation).mode("append").save(str(base))


def check_metadata_table(base: Path) -> HoodieTableMetadata:
    """The MDT lists exactly the committed data files (disk oracle and the file-system view agree), its column
    stats equal each parquet footer, and its partition stats cover the latest slices."""
    meta = HoodieTableMetaClient.load(str(base))
    metadata = HoodieTableMetadata(meta)
    expected = disk_listing(base)
    view_listing = {p: f for p, f in committed_files(FileSystemView(meta, use_metadata_table=False)).items() if f}
    assert view_listing == expected
    assert metadata.all_partition_paths() == sorted(expected)
    assert metadata.files_in_partitions(list(expected)) == expected
    by_file: dict[str, dict] = {}
    for stats in metadata.column_stats():
        by_file.setdefault(stats.file_name, {})[stats.column_name] = stats
    for partition, files in expected.items():
        for name in files:
            indexed = by_file[name]
            assert "_hoodie_file_name" not in indexed and "_hoodie_commit_seqno" not in indexed
            if name.endswith(".parquet"):
                footer = data_stats(base / partition / name)
                assert set(indexed) == set(footer) - {"_hoodie_file_name", "_hoodie_commit_seqno"}
                for column, stats in indexed.items():
                    assert (stats.min, stats.max, stats.null_count, stats.value_count) == footer[column], \
                        (name, column)
    assert set(by_file) == {n for files in expected.values() for n in files}  # cleaned files left the index
    for stats in metadata.partition_stats(columns=["fare"]):
        slices = FileSystemView(meta, use_metadata_table=False).latest_file_slices([stats.file_name])
        names = [n for s in slices for n in ([s.base_file.name] if s.base_file else []) + [lf.name for lf in s.log_files]]
        # a bound of the latest slices (Java computes it while the writer is inflight, so the file groups an
        # insert overwrite or clustering replaces still count until the partition's next write)
        fares = [by_file[n]["fare"] for n in names if by_file[n]["fare"].min is not None]
        assert stats.min <= min(f.min for f in fares) and stats.max >= max(f.max for f in fares)
        assert stats.value_count >= sum(by_file[n]["fare"].value_count for n in names)
        assert stats.is_tight_bound
    return metadata


COLUMNS = ["id", "name", "fare", "ts", "dt"]


def _rows(spark, base: Path):
    return spark_rows(spark.read.format("hudi").load(str(base)), COLUMNS)


def check_layout(base: Path) -> None:
    """The MDT's hoodie.properties as Java writes it (notes §2.3, checksum = CRC32 of ".<name>"), the 80-byte
    empty logs of initialisation (§2.5) and a deltacommit per data instant with the same time (§2.4)."""
    import zlib

    from storage.table.properties_file import parse_properties

    mdt_base = base / ".hoodie" / "metadata"
    props = parse_properties((mdt_base / ".hoodie" / "hoodie.properties").read_text())
    name = f"{base.name}_metadata"
    assert props == {
        "hoodie.table.name": name, "hoodie.table.type": "MERGE_ON_READ", "hoodie.table.version": "9",
        "hoodie.table.initial.version": "9", "hoodie.table.base.file.format": "HFILE",
        "hoodie.table.recordkey.fields": "key", "hoodie.table.keygenerator.type": "HOODIE_TABLE_METADATA",
        "hoodie.populate.meta.fields": "false",
        "hoodie.compaction.payload.class": "org.apache.hudi.metadata.HoodieMetadataPayload",
        "hoodie.record.merge.mode": "CUSTOM", "hoodie.record.merge.strategy.id": "00000000-0000-0000-0000-000000000000",
        "hoodie.timeline.layout.version": "2", "hoodie.timeline.path": "timeline",
        "hoodie.timeline.history.path": "history", "hoodie.archivelog.folder": "history",
        "hoodie.datasource.write.drop.partition.columns": "false",
        "hoodie.table.checksum": str(zlib.crc32(f".{name}".encode())),
    }
    empty = sorted(p.name for p in mdt_base.rglob(".*_0000000000000000*.log.1_0-0-0"))
    assert empty == [".col-stats-0000-0_00000000000000001.log.1_0-0-0", ".col-stats-0001-0_00000000000000001.log.1_0-0-0",
                     ".files-0000-0_00000000000000000.log.1_0-0-0",
                     ".partition-stats-0000-0_00000000000000002.log.1_0-0-0"]
    assert {p.stat().st_size for p in mdt_base.rglob(".*_0000000000000000*.log.1_0-0-0")} == {80}
    data = HoodieTableMetaClient.load(str(base))
    mdt = HoodieTableMetaClient.load(str(mdt_base))
    for instant in data.timeline.completed():
        done = mdt.timeline.completed().find(instant.timestamp)
        assert done is not None and done.action == "deltacommit" and done.completion_time <= instant.completion_time
        md = mdt.active_timeline.commit_metadata(done)
        assert md.operationType == "UPSERT_PREPPED" and md.extraMetadata["schema"].startswith(
            '{"type":"record","name":"HoodieMetadataRecord"')
        assert {s.partitionPath for s in md.write_stats()} == {"files", "column_stats", "partition_stats"}


# ----------------------------------------------------------------------------------------------- the sequence


@pytest.mark.parametrize("table_type", ["COPY_ON_WRITE", "MERGE_ON_READ"])
def test_every_action_keeps_the_metadata_table_in_step(spark, tmp_path, table_type):
    base = tmp_path / f"mdt_{table_type[:3].lower()}"
    opts = _options(base.name, table_type, **{"hoodie.clean.automatic": "false"})
    _write(spark, base, opts, [(1, "a", 1.5, 1, "x"), (2, "b", 2.5, 1, "y"), (3, "c", 3.5, 1, "x")], "insert")
    meta = HoodieTableMetaClient.load(str(base))
    assert meta.table_config.props["hoodie.table.metadata.partitions"] == "column_stats,files,partition_stats"
    mdt = HoodieTableMetaClient.load(str(base / ".hoodie" / "metadata"))
    assert [i.timestamp for i in mdt.timeline.completed()][:3] == \
        ["00000000000000000", "00000000000000001", "00000000000000002"]
    check_layout(base)
    check_metadata_table(base)
    _write(spark, base, opts, [(1, "a2", 0.5, 2, "x"), (4, "d", 9.5, 2, "y")], "upsert")
    check_metadata_table(base)
    _write(spark, base, opts, [(2, "b", 2.5, 3, "y")], "delete")
    check_metadata_table(base)
    _write(spark, base, opts, [(5, "e", 5.5, 3, "x")], "insert_overwrite")
    check_metadata_table(base)
    if table_type == "MERGE_ON_READ":
        _write(spark, base, opts, [(4, "d2", 4.5, 4, "y")], "upsert",
               **{"hoodie.compact.inline": "true", "hoodie.compact.inline.max.delta.commits": "1"})
        assert any(i.action == "commit" for i in HoodieTableMetaClient.load(str(base)).timeline.completed())
        check_metadata_table(base)
    _write(spark, base, opts, [(6, "f", 6.5, 5, "y")], "insert",
           **{"hoodie.clustering.inline": "true", "hoodie.clustering.inline.max.commits": "1"})
    assert any(i.action == "replacecommit" and i.timestamp > "0"
               for i in HoodieTableMetaClient.load(str(base)).timeline.completed())
    check_metadata_table(base)
    _write(spark, base, opts, [(7, "g", 7.5, 6, "x")], "insert",
           **{"hoodie.clean.automatic": "true", "hoodie.cleaner.commits.retained": "1"})
    assert any(i.action == "clean" for i in HoodieTableMetaClient.load(str(base)).timeline.completed())
    check_metadata_table(base)
    expected = _rows(spark, base)
    assert arrow_rows(hudi_rs_read(str(base)), COLUMNS) == expected


# ----------------------------------------------------------------------------------------------- MDT compaction


def test_the_metadata_table_compacts_after_max_delta_commits(spark, tmp_path):
    base = tmp_path / "mdt_compact"
    opts = _options(base.name, "MERGE_ON_READ", **{"hoodie.metadata.compact.max.delta.commits": "2",
                                                  "hoodie.clean.automatic": "false"})
    for i in range(2):  # the three initialisation deltacommits count: the first write compacts
        _write(spark, base, opts, [(i, f"n{i}", float(i), i, "xy"[i % 2]), (9, f"r{i}", 9.0 - i, i, "x")], "upsert")
    mdt = HoodieTableMetaClient.load(str(base / ".hoodie" / "metadata"))
    compactions = list(mdt.timeline.completed().of_actions(["commit"]))
    assert len(compactions) >= 1
    first = compactions[0].timestamp
    hfiles = sorted(p.name for p in (base / ".hoodie" / "metadata").rglob(f"*_{first}.hfile"))
    assert [n.split("_")[0] for n in hfiles] == ["col-stats-0000-0", "col-stats-0001-0", "files-0000-0",
                                                 "partition-stats-0000-0"]
    check_metadata_table(base)
    assert arrow_rows(hudi_rs_read(str(base)), COLUMNS) == _rows(spark, base)
    # rolling back the last (completed, not yet compacted) write: an MDT rollback with the same time
    from storage.write.rollback import rollback_completed

    data = HoodieTableMetaClient.load(str(base))
    last = data.timeline.completed().last()
    done = rollback_completed(data, last)
    mdt.reload()
    assert mdt.timeline.find(last.timestamp) is None
    assert mdt.timeline.completed().of_actions(["rollback"]).last().timestamp == done.timestamp
    check_metadata_table(base)
    assert arrow_rows(hudi_rs_read(str(base)), COLUMNS) == _rows(spark, base)


# ----------------------------------------------------------------------------------------------- crash safety


def test_an_undone_write_takes_its_metadata_deltacommit_with_it(spark, tmp_path):
    """A pre-complete hook after the MDT's fails: the write is undone (abort_write) and so is its MDT
    deltacommit."""
    base = tmp_path / "mdt_undone"
    opts = _options(base.name, "COPY_ON_WRITE")
    _write(spark, base, opts, [(1, "a", 1.0, 1, "x")], "insert")

    def boom(completion):
        if completion.action == "commit":
            raise RuntimeError("dies after the metadata table's deltacommit")

    undo = register_pre_complete(boom)
    try:
        with pytest.raises(Exception, match="dies after"):
            _write(spark, base, opts, [(2, "b", 2.0, 1, "y")], "insert")
    finally:
        undo()
    mdt = HoodieTableMetaClient.load(str(base / ".hoodie" / "metadata"))
    data = HoodieTableMetaClient.load(str(base))
    assert {i.timestamp for i in mdt.timeline if not i.timestamp.startswith("0000")} == \
        {i.timestamp for i in data.timeline.completed()}
    check_metadata_table(base)


def test_a_deltacommit_of_a_write_that_died_is_ignored_then_rolled_back(spark, tmp_path, monkeypatch):
    """Killed between the MDT deltacommit and the data commit (nothing undone): readers ignore the MDT entry; the
    next writer's rollback of the failed instant rolls it back in the MDT too."""
    import storage.write.write_operation as write_operation
    from storage.write.heartbeat import heartbeat_path

    base = tmp_path / "mdt_killed"
    opts = _options(base.name, "MERGE_ON_READ")
    _write(spark, base, opts, [(1, "a", 1.0, 1, "x")], "insert")
    monkeypatch.setattr(write_operation, "abort_write", lambda meta, instant: None)  # a killed writer undoes nothing

    def kill(completion):
        if completion.action == "deltacommit":
            raise RuntimeError("killed")

    undo = register_pre_complete(kill)
    try:
        with pytest.raises(Exception, match="killed"):
            _write(spark, base, opts, [(1, "a2", 5.0, 2, "x"), (2, "b", 2.0, 1, "y")], "upsert")
    finally:
        undo()
        monkeypatch.undo()
    data = HoodieTableMetaClient.load(str(base))
    failed = data.timeline.pending().last().timestamp
    mdt = HoodieTableMetaClient.load(str(base / ".hoodie" / "metadata"))
    assert mdt.timeline.completed().find(failed) is not None  # the MDT deltacommit completed ...
    metadata = check_metadata_table(base)  # ... but readers ignore it: no file of the failed write is listed
    assert failed not in metadata.valid
    assert not any(failed in n for files in metadata.files_in_partitions(["x", "y"]).values() for n in files)
    Path(heartbeat_path(data.meta_path, failed)).unlink(missing_ok=True)  # its heartbeat expires (if left)
    _write(spark, base, opts, [(3, "c", 3.0, 3, "y")], "insert")
    mdt.reload()
    assert mdt.timeline.find(failed) is None
    rollbacks = list(mdt.timeline.completed().of_actions(["rollback"]))
    assert [r.timestamp for r in rollbacks] == \
        [r.timestamp for r in HoodieTableMetaClient.load(str(base)).timeline.completed().of_actions(["rollback"])]
    assert not list((base / ".hoodie" / "metadata").rglob(f"*_{failed}.log.*"))
    check_metadata_table(base)
    assert arrow_rows(hudi_rs_read(str(base)), COLUMNS) == _rows(spark, base) == \
        [(("id", 1), ("name", "a"), ("fare", 1.0), ("ts", 1), ("dt", "x")),
         (("id", 3), ("name", "c"), ("fare", 3.0), ("ts", 3), ("dt", "y"))]


# ----------------------------------------------------------------------------------------------- switching it off


def test_a_writer_with_the_metadata_table_disabled_removes_it(spark, tmp_path):
    base = tmp_path / "mdt_off"
    opts = _options(base.name, "COPY_ON_WRITE")
    _write(spark, base, opts, [(1, "a", 1.0, 1, "x")], "insert")
    assert (base / ".hoodie" / "metadata").is_dir()
    _write(spark, base, opts, [(2, "b", 2.0, 1, "x")], "insert", **{"hoodie.metadata.enable": "false"})
    assert not (base / ".hoodie" / "metadata").exists()
    assert "hoodie.table.metadata.partitions" not in HoodieTableMetaClient.load(str(base)).table_config.props
    _write(spark, base, opts, [(3, "c", 3.0, 1, "y")], "insert")  # on again: initialised from the table
    check_metadata_table(base)


def test_an_action_nobody_here_keeps_in_step_removes_the_metadata_table(spark, tmp_path, monkeypatch, caplog):
    """A path that changes files without preparing the MDT (simulated: the write skips the preparation and this
    process forgets the table) must not leave a stale MDT behind: readers list files through it. (The write's
    inline table services, which prepare it, then build it again from the table.)"""
    import storage.metadata.metadata_writer as metadata_writer
    import storage.write.write_operation as write_operation

    base = tmp_path / "mdt_unprepared"
    opts = _options(base.name, "COPY_ON_WRITE")
    _write(spark, base, opts, [(1, "a", 1.0, 1, "x")], "insert")
    assert (base / ".hoodie" / "metadata").is_dir()
    monkeypatch.setattr(write_operation, "prepare_metadata_table", lambda *a: False)
    monkeypatch.setattr(metadata_writer, "_REGISTERED", {})
    with caplog.at_level("WARNING", logger="storage.table.metadata_table"):
        _write(spark, base, opts, [(2, "b", 2.0, 1, "y")], "insert")
    assert "(not kept in step here)" in caplog.text and "is removed first" in caplog.text
    if (base / ".hoodie" / "metadata").exists():
        check_metadata_table(base)
    assert sorted(dict(r)["id"] for r in _rows(spark, base)) == [1, 2]


# ----------------------------------------------------------------------------------------------- Java's tables


def test_our_upsert_keeps_a_java_tables_metadata_table(spark, fixtures_cache, tmp_path):
    """...and indexes the columns Java's column_stats index definition names (index.json; narrowed here)."""
    base = copy_fixture("sample_cow_v9_txns_simple_meta", fixtures_cache, tmp_path)
    index_json = base / ".hoodie" / ".index_defs" / "index.json"
    definitions = json.loads(index_json.read_text())
    indexed = ["_hoodie_record_key", "txn_id", "amount", "merchant_name"]
    definitions["indexDefinitions"]["column_stats"]["sourceFields"] = indexed
    index_json.write_text(json.dumps(definitions, indent=2))
    meta = HoodieTableMetaClient.load(str(base))
    before = {i.timestamp for i in HoodieTableMetaClient.load(str(base / ".hoodie" / "metadata")).timeline}
    df = spark.read.format("hudi").load(str(base))
    row = df.where("txn_id = 'TXN-001'").drop(*[c for c in df.columns if c.startswith("_hoodie")])
    from pyspark.sql import functions as F

    opts = {"hoodie.table.name": meta.table_config.name, "hoodie.datasource.write.recordkey.field": "txn_id",
            "hoodie.datasource.write.precombine.field": "txn_ts", "hoodie.datasource.write.partitionpath.field": "region",
            "hoodie.datasource.write.hive_style_partitioning": "true", "hoodie.write.table.version": "9",
            "hoodie.datasource.write.operation": "upsert", **MDT_ON}
    row.withColumn("merchant_name", F.lit("Changed")).withColumn("txn_ts", F.col("txn_ts") + 1) \
        .write.format("hudi").options(**opts).mode("append").save(str(base))
    meta = HoodieTableMetaClient.load(str(base))
    # Java's record index and secondary indexes are kept in step (each equal to a scan: rebuild and compare)
    assert meta.table_config.props["hoodie.table.metadata.partitions"] == \
        "column_stats,files,partition_stats,record_index,secondary_index_merchant_idx,secondary_index_txn_date_idx"
    check_record_index(spark, base)
    merchants = check_secondary_indexes(spark, base)["secondary_index_merchant_idx"]
    assert "Changed$TXN-001" in merchants
    mdt = HoodieTableMetaClient.load(str(base / ".hoodie" / "metadata"))
    ours = meta.timeline.completed().last().timestamp
    assert before < {i.timestamp for i in mdt.timeline} and mdt.timeline.completed().find(ours) is not None
    metadata = HoodieTableMetadata(meta)
    expected = disk_listing(base)
    assert metadata.all_partition_paths() == sorted(expected)
    assert metadata.files_in_partitions(list(expected)) == expected
    new_files = [(p, n) for p, files in expected.items() for n in files if ours in n]
    assert new_files
    for partition, name in new_files:
        footer = data_stats(base / partition / name)
        mine = [s for s in metadata.column_stats(partition_path=partition) if s.file_name == name]
        assert sorted(s.column_name for s in mine) == sorted(indexed)
        for stats in mine:
            assert (stats.min, stats.max, stats.null_count, stats.value_count) == footer[stats.column_name]
    got = arrow_rows(hudi_rs_read(str(base)), ["txn_id", "merchant_name", "txn_ts"])
    assert got == spark_rows(spark.read.format("hudi").load(str(base)), ["txn_id", "merchant_name", "txn_ts"])
    assert ("merchant_name", "Changed") in dict((r[0][1], r) for r in got)["TXN-001"]


# ----------------------------------------------------------------------------------------------- hudi-rs


def test_what_hudi_rs_lists_a_table_with_a_metadata_table_by(spark, tmp_path):
    """A stray parquet file that looks committed (a copy of a base file under a new file id, same instant) but
    that the MDT does not list: a reader listing through the MDT (hudi-rs, and ours by default) does not see its
    rows, a reader listing storage (ours with the MDT off for the read) does."""
    import shutil

    base = tmp_path / "mdt_stray"
    opts = _options(base.name, "COPY_ON_WRITE")
    _write(spark, base, opts, [(1, "a", 1.0, 1, "x")], "insert")
    original = next((base / "dt=x" if (base / "dt=x").exists() else base / "x").glob("*.parquet"))
    stray = original.with_name("00000000-1111-2222-3333-444444444444-0" + original.name[original.name.index("_"):])
    shutil.copy(original, stray)
    hudi_rs_rows = hudi_rs_read(str(base)).num_rows
    ours = spark.read.format("hudi").load(str(base)).count()
    listing_storage = spark.read.format("hudi").option(MK.READER_ENABLE.key, "false").load(str(base)).count()
    assert hudi_rs_rows == 1, "hudi-rs listed storage, not the metadata table"
    assert ours == 1
    assert listing_storage == 2  # the stray copy's row too


def test_a_version_8_table_gets_a_version_8_metadata_table(spark, tmp_path):
    """Table version 8: the 1.0.x record schema (no valueType) and the same listing and stats."""
    base = tmp_path / "mdt_v8"
    opts = _options(base.name, "MERGE_ON_READ", **{"hoodie.write.table.version": "8"})
    _write(spark, base, opts, [(1, "a", 1.0, 1, "x"), (2, "b", 2.0, 1, "y")], "insert")
    _write(spark, base, opts, [(1, "a2", 0.5, 2, "x")], "upsert")
    mdt = HoodieTableMetaClient.load(str(base / ".hoodie" / "metadata"))
    assert mdt.table_config.props["hoodie.table.version"] == "8"
    last = mdt.timeline.completed().last()
    assert '"valueType"' not in mdt.active_timeline.commit_metadata(last).extraMetadata["schema"]
    check_metadata_table(base)
    assert arrow_rows(hudi_rs_read(str(base)), COLUMNS) == _rows(spark, base)
