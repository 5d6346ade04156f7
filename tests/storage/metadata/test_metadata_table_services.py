"""The metadata table's own clean and archival (`storage.metadata.metadata_table_services`), run by its writer
before each MDT deltacommit as Hudi 1.x runs them: the options derived from the data writer's as Hudi derives them;
a version 9 copy-on-write table written until its MDT compacted, cleaned and archived - old MDT file slices
(HFiles and logs) and instants are really gone, the cleans are Avro clean instants on the MDT's timeline, the
archived instants are in the MDT's LSM history, within the bounds the data table sets - and the table still reads
the same (through the MDT, without it, with data skipping, in hudi-rs), `validate_metadata_table_files` finding no
difference; and a kill inside the MDT's clean or archival leaves a readable table whose next write finishes it."""
from __future__ import annotations

from pathlib import Path

import pytest

from hudi_oracle import arrow_rows, hudi_rs_read, spark_rows
from storage.avro.container import read_avro_container
from storage.config import HoodieConfig
from storage.table_service import metadata_table_services as services
from storage.table_service.metadata_table_services import MetadataServiceSettings, earliest_instant_for_metadata_archival
from storage.metadata.table_metadata_util import committed_files
from storage.metadata.table_metadata import HoodieTableMetadata
from storage.table.fs_view import FileSystemView
from storage.table.meta_client import HoodieTableMetaClient
from storage.timeline.archived_timeline import HoodieArchivedTimeline
from storage.timeline.lsm_timeline import LSMTimeline

SCHEMA = "id int, name string, fare double, ts long, dt string"
COLUMNS = ["id", "name", "fare", "ts", "dt"]


def _options(name: str, **extra: str) -> dict[str, str]:
    return {"hoodie.table.name": name, "hoodie.datasource.write.recordkey.field": "id",
            "hoodie.datasource.write.precombine.field": "ts", "hoodie.datasource.write.partitionpath.field": "dt",
            "hoodie.datasource.write.table.type": "COPY_ON_WRITE", "hoodie.write.table.version": "9",
            "hoodie.upsert.shuffle.parallelism": "2", "hoodie.insert.shuffle.parallelism": "2",
            "hoodie.metadata.enable": "true", "hoodie.metadata.index.column.stats.enable": "true",
            "hoodie.metadata.index.partition.stats.enable": "true",
            # small retention, so that a few writes reach every service of both tables
            "hoodie.metadata.compact.max.delta.commits": "3", "hoodie.cleaner.commits.retained": "1",
            "hoodie.keep.min.commits": "2", "hoodie.keep.max.commits": "3", **extra}


def _write(spark, base: Path, opts: dict, rows: list[tuple], operation: str = "upsert") -> None:
    spark.createDataFrame(rows, SCHEMA).write.format("hudi").options(**opts) \
        .option("hoodie.datasource.write.operation", operation).mode("append").save(str(base))


def _rows(spark, base: Path, **read: str):
    return spark_rows(spark.read.format("hudi").options(**read).load(str(base)), COLUMNS)


def _expected(rows) -> list[tuple]:
    """Rows as hudi_oracle compares them."""
    return sorted((tuple(zip(COLUMNS, r)) for r in rows), key=repr)


def _values(row: tuple) -> tuple:
    return tuple(v for _, v in row)


def _mdt(base: Path) -> HoodieTableMetaClient:
    return HoodieTableMetaClient.load(str(base / ".hoodie" / "metadata"))


def check_listing(spark, base: Path) -> None:
    """The MDT lists exactly the committed data files (the file-system view of a directory listing), every listed
    file has column stats, and validate_metadata_table_files finds no difference."""
    meta = HoodieTableMetaClient.load(str(base))
    metadata = HoodieTableMetadata(meta)
    listed = {p: f for p, f in committed_files(FileSystemView(meta, use_metadata_table=False)).items() if f}
    assert metadata.files_in_partitions(sorted(listed)) == listed
    assert metadata.all_partition_paths() == sorted(listed)
    assert {s.file_name for s in metadata.column_stats()} == {n for files in listed.values() for n in files}
    assert spark.sql(f"CALL validate_metadata_table_files(table => 'hudi.`{base}`')").collect() == []


def check_reads(spark, base: Path, expected: list[tuple], wheres: tuple[str, ...]) -> None:
    """Reads through the MDT, without it and in hudi-rs give `expected`; each of `wheres` reads the same rows with
    data skipping as without."""
    assert _rows(spark, base) == _rows(spark, base, **{"hoodie.metadata.enable": "false"}) == expected
    assert arrow_rows(hudi_rs_read(str(base)), COLUMNS) == expected
    for where in wheres:
        skipped = spark_rows(spark.read.format("hudi").load(str(base)).where(where), COLUMNS)
        assert skipped == spark_rows(spark.read.format("hudi").option("hoodie.enable.data.skipping", "false")
                                     .load(str(base)).where(where), COLUMNS)


# ----------------------------------------------------------------------------------------------- options


def test_the_metadata_tables_options_are_derived_as_hudi_derives_them():
    """createMetadataWriteConfig: the data writer's policy with 20% more retention (at least 20 commits), its
    clean trigger, and archival bounds one above the data table's."""
    mdt = MetadataServiceSettings.of(HoodieConfig()).mdt_config()
    assert (mdt.get(services.CK.POLICY), mdt.get(services.CK.COMMITS_RETAINED), mdt.get(services.CK.MAX_COMMITS),
            mdt.get(services.AK.MIN_COMMITS_TO_KEEP), mdt.get(services.AK.MAX_COMMITS_TO_KEEP)) == \
        ("KEEP_LATEST_COMMITS", 20, 1, 21, 31)
    mdt = MetadataServiceSettings.of(HoodieConfig({"hoodie.cleaner.commits.retained": "30",
                                                   "hoodie.keep.min.commits": "40", "hoodie.keep.max.commits": "50",
                                                   "hoodie.clean.max.commits": "4"})).mdt_config()
    assert (mdt.get(services.CK.COMMITS_RETAINED), mdt.get(services.CK.MAX_COMMITS),
            mdt.get(services.AK.MIN_COMMITS_TO_KEEP), mdt.get(services.AK.MAX_COMMITS_TO_KEEP)) == (36, 4, 41, 51)
    versions = MetadataServiceSettings.of(HoodieConfig({"hoodie.cleaner.policy": "KEEP_LATEST_FILE_VERSIONS",
                                                        "hoodie.cleaner.fileversions.retained": "3"})).mdt_config()
    assert (versions.get(services.CK.POLICY), versions.get(services.CK.FILE_VERSIONS_RETAINED)) == \
        ("KEEP_LATEST_FILE_VERSIONS", 4)
    hours = MetadataServiceSettings.of(HoodieConfig({"hoodie.cleaner.policy": "KEEP_LATEST_BY_HOURS",
                                                     "hoodie.cleaner.hours.retained": "24"})).mdt_config()
    assert hours.get(services.CK.HOURS_RETAINED) == 29


# ----------------------------------------------------------------------------------------------- the services


def _mdt_files(base: Path) -> set[str]:
    """Names of the MDT's base and log files."""
    return {p.name for p in (base / ".hoodie" / "metadata").glob("*/*") if p.name.endswith(".hfile") or ".log." in p.name}


@pytest.fixture(scope="module")
def served(spark, tmp_path_factory):
    """A copy-on-write table (upserts, each followed by the data table's clean and archival) written until its MDT
    compacted, cleaned and archived; (base, options, every MDT file ever written, the expected rows)."""
    with pytest.MonkeyPatch.context() as m:
        # Hudi's MDT cleaner retains at least 20 commits; 2 here keeps the test to a few writes
        m.setattr(services, "DEFAULT_METADATA_CLEANER_COMMITS_RETAINED", 2)
        base = tmp_path_factory.mktemp("mdt_services") / "t"
        opts = _options(base.name)
        state = {i: (i, f"n{i}", float(i), 0, "xy"[i % 2]) for i in range(4)}
        _write(spark, base, opts, list(state.values()), "insert")
        written = _mdt_files(base)
        for step in range(1, 5):
            batch = [(step % 4, f"u{step}", float(step), step, "xy"[step % 4 % 2]),
                     (100 + step, f"i{step}", 0.5 * step, step, "xy"[step % 2])]
            _write(spark, base, opts, batch)
            state.update((r[0], r) for r in batch)
            written |= _mdt_files(base)
        yield base, opts, written, _expected(state.values())


def test_the_metadata_table_compacts_cleans_and_archives(spark, served):
    base, _, written, expected = served
    mdt, data = _mdt(base), HoodieTableMetaClient.load(str(base))
    timeline = mdt.active_timeline
    # compacted and cleaned: Avro clean instants on the MDT's timeline (plan and metadata) whose files are gone
    assert list(mdt.timeline.completed().of_actions(["commit"]))
    cleans = [i for i in mdt.timeline.completed().of_actions(["clean"])]
    assert cleans and not list(mdt.timeline.pending())
    deleted = set()
    for clean in cleans:
        plan = read_avro_container(timeline.read_bytes(timeline.requested_of(clean)))
        assert plan["policy"] == "KEEP_LATEST_COMMITS" and plan["earliestInstantToRetain"]["timestamp"]
        md = read_avro_container(timeline.read_bytes(clean))
        deleted |= {n for pm in md["partitionMetadata"].values() for n in pm["successDeleteFiles"]}
        assert {p for p in md["partitionMetadata"]} <= {"files", "column_stats", "partition_stats"}
    present = _mdt_files(base)
    assert deleted and deleted <= written - present
    assert any(n.endswith(".hfile") for n in deleted) and any(".log." in n for n in deleted)
    assert not any(n.endswith("_00000000000000000.hfile") for n in present)  # the initial slices went
    # archived: the oldest MDT instants moved to its LSM history, the active timeline keeps what is still needed
    archived = [i.timestamp for i in HoodieArchivedTimeline(mdt).completed()]
    assert (base / ".hoodie" / "metadata" / ".hoodie" / "timeline" / "history" / "_version_").is_file()
    assert "00000000000000000" in archived and not set(archived) & {i.timestamp for i in mdt.timeline}
    assert max(archived) < earliest_instant_for_metadata_archival(data, False)  # what the data table still needs
    metadata = HoodieTableMetadata(data)
    for partition in ("files", "column_stats", "partition_stats"):
        for file_slice in metadata.file_slices(partition):  # every latest MDT slice's files are active instants'
            assert mdt.timeline.completed().find(file_slice.base_instant) is not None
            assert all(mdt.timeline.completed().find(lf.instant_time) for lf in file_slice.log_files)
    # the table reads the same through the MDT, without it, with data skipping and in hudi-rs
    check_listing(spark, base)
    assert _rows(spark, base) == _rows(spark, base, **{"hoodie.metadata.enable": "false"}) == expected
    assert arrow_rows(hudi_rs_read(str(base)), COLUMNS) == expected
    skipped = spark_rows(spark.read.format("hudi").load(str(base)).where("fare >= 3.0"), COLUMNS)
    assert skipped == [r for r in expected if dict(r)["fare"] >= 3.0]


class _Killed(BaseException):
    """A process killed at a crash point (nothing after it runs, no finally undoes it)."""


@pytest.mark.parametrize("point", ["clean.after_deletes", "archive.after_write"])
def test_a_kill_inside_the_metadata_tables_services_leaves_a_readable_table(spark, served, tmp_path, monkeypatch,
                                                                            point):
    """Killed inside the MDT's clean (after it deleted its files, before it completed) or archival (its instants in
    the LSM history, still on the active timeline) - the data-table services' crash points, reached by the MDT's
    services before the data write completes: the table reads its last committed state; the next write rolls the
    failed one back and finishes the MDT's service."""
    import shutil
    import sys

    import storage.table_service.archival as archival
    import storage.table_service.clean as clean
    import storage.write.write_operation as write_operation
    from storage.write.heartbeat import heartbeat_path

    monkeypatch.setattr(services, "DEFAULT_METADATA_CLEANER_COMMITS_RETAINED", 2)
    base = tmp_path / "t"
    shutil.copytree(served[0], base)
    opts, expected = served[1], served[3]

    def kill(name):
        meta = sys._getframe(1).f_locals.get("meta")  # the table whose service reached the point
        if name == point and meta is not None and meta.base_path.endswith("/.hoodie/metadata"):
            raise _Killed(name)

    with monkeypatch.context() as m:
        m.setattr(clean if point.startswith("clean") else archival, "crash_point", kill)
        m.setattr(write_operation, "abort_write", lambda *a: None)  # a killed writer undoes nothing
        for step in range(20, 27):
            try:
                _write(spark, base, opts, [(step, f"k{step}", 1.0, step, "x")])
            except _Killed:
                break
            expected = _expected([*map(_values, expected), (step, f"k{step}", 1.0, step, "x")])
        else:
            pytest.fail(f"the metadata table's services never reached {point}")
    mdt, data = _mdt(base), HoodieTableMetaClient.load(str(base))
    failed = data.timeline.pending().last().timestamp
    assert mdt.timeline.find(failed) is None  # died before the MDT deltacommit of the write
    if point.startswith("clean"):
        killed = mdt.timeline.pending().of_actions(["clean"]).last()
        assert killed is not None and killed.is_inflight
    else:
        lsm = {row.instant.timestamp for row in LSMTimeline.for_table(mdt).instants(None, None)}
        assert lsm & {i.timestamp for i in mdt.timeline.completed()}  # archived, and still active
    meta = HoodieTableMetaClient.load(str(base))  # readable: the MDT lists exactly the committed files
    listed = {p: f for p, f in committed_files(FileSystemView(meta, use_metadata_table=False)).items() if f}
    assert HoodieTableMetadata(meta).files_in_partitions(sorted(listed)) == listed
    assert _rows(spark, base) == expected and arrow_rows(hudi_rs_read(str(base)), COLUMNS) == expected
    Path(heartbeat_path(data.meta_path, failed)).unlink(missing_ok=True)  # the killed writer's heartbeat expires
    _write(spark, base, opts, [(50, "r", 2.0, 50, "y")])
    expected = _expected([*map(_values, expected), (50, "r", 2.0, 50, "y")])
    mdt.reload()
    if point.startswith("clean"):
        assert mdt.timeline.completed().find(killed.timestamp) is not None and not list(mdt.timeline.pending())
    else:
        lsm = {row.instant.timestamp for row in LSMTimeline.for_table(mdt).instants(None, None)}
        assert not lsm & {i.timestamp for i in mdt.timeline}  # the next archival finished the move
    check_listing(spark, base)
    assert _rows(spark, base) == expected and arrow_rows(hudi_rs_read(str(base)), COLUMNS) == expected


def test_the_data_table_archives_nothing_after_the_metadata_tables_latest_compaction(spark, tmp_path):
    """Hudi's archiver with a metadata table: no data instant (cleans included) at or after the MDT's latest
    compaction is archived, none before its first - the MDT trusts a deltacommit whose data instant is active, so a
    clean archived before the MDT compacted it would bring its deleted files back to the listing."""
    base = tmp_path / "t"
    opts = _options("arch_bound", **{"hoodie.metadata.compact.max.delta.commits": "6",
                                     "hoodie.cleaner.commits.retained": "1"})
    for step in range(7):
        _write(spark, base, opts, [(step, f"n{step}", float(step), step, "xy"[step % 2])])
        meta = HoodieTableMetaClient.load(str(base))
        archived = [i.timestamp for i in HoodieArchivedTimeline(meta).completed()]
        compactions = [i.timestamp for i in _mdt(base).timeline.completed().of_actions(["commit"])]
        assert all(ts < compactions[-1] for ts in archived) if compactions else archived == []
        check_listing(spark, base)
    assert compactions and archived  # both happened: the bound moved with the MDT's compaction
