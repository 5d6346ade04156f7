"""Tables written at table version 8 and 9 (`hoodie.write.table.version`): what hoodie.properties records, the
layout every instant and log file takes, and - over the write sequence of test_write_sequence_golden (bulk insert,
inserts, upserts, a delete, an insert overwrite with inline clean, archival, clustering and compaction) - the same
rows as at version 6, read identically by hudi-rs, incremental queries included."""
from __future__ import annotations

import json
import re
from pathlib import Path

import pyarrow as pa
import pytest

from hudi_oracle import arrow_rows, hudi_rs_read, spark_rows
from storage.avro.container import read_avro_container_with_schema
from storage.avro.models import models_for
from storage.avro.schema_converter import avro_schema_to_json
from storage.config import HoodieConfig
from storage.exception import HoodieConfigError
from storage.table.meta_client import HoodieTableMetaClient
from storage.write.table_settings import new_table_config
from test_write_sequence_golden import GOLDEN, run_sequence, summary

BASE = {"hoodie.table.name": "t", "hoodie.datasource.write.recordkey.field": "id",
        "hoodie.datasource.write.partitionpath.field": "dt", "hoodie.datasource.write.precombine.field": "ts"}
ARROW = pa.schema([("id", pa.int32()), ("ts", pa.int64()), ("dt", pa.string())])


@pytest.mark.parametrize("version, expected, absent", [
    ("6", {"hoodie.table.version": "6", "hoodie.timeline.layout.version": "1",
           "hoodie.table.keygenerator.class": "org.apache.hudi.keygen.SimpleKeyGenerator",
           "hoodie.table.precombine.field": "ts",
           "hoodie.compaction.payload.class": "org.apache.hudi.common.model.OverwriteWithLatestAvroPayload"},
     ("hoodie.table.initial.version", "hoodie.timeline.path", "hoodie.record.merge.mode")),
    ("8", {"hoodie.table.version": "8", "hoodie.table.initial.version": "8", "hoodie.timeline.layout.version": "2",
           "hoodie.timeline.path": "timeline", "hoodie.timeline.history.path": "history",
           "hoodie.table.keygenerator.type": "SIMPLE", "hoodie.table.precombine.field": "ts",
           "hoodie.compaction.payload.class": "org.apache.hudi.common.model.DefaultHoodieRecordPayload",
           "hoodie.record.merge.mode": "EVENT_TIME_ORDERING",
           "hoodie.record.merge.strategy.id": "eeb8d96f-b1e4-49fd-bbf8-28ac514178e5"},
     ("hoodie.table.keygenerator.class", "hoodie.table.ordering.fields", "hoodie.table.format")),
    ("9", {"hoodie.table.version": "9", "hoodie.table.initial.version": "9", "hoodie.timeline.layout.version": "2",
           "hoodie.timeline.path": "timeline", "hoodie.timeline.history.path": "history",
           "hoodie.table.keygenerator.type": "SIMPLE", "hoodie.table.ordering.fields": "ts",
           "hoodie.record.merge.mode": "EVENT_TIME_ORDERING", "hoodie.table.format": "native"},
     ("hoodie.table.precombine.field", "hoodie.compaction.payload.class", "hoodie.record.merge.strategy.id")),
])
def test_new_table_properties_per_version(version, expected, absent):
    """As the Java fixtures of each version record them (../shared/spec/hudi-format.md §2)."""
    props = new_table_config(HoodieConfig.of(BASE, {"hoodie.write.table.version": version}), ARROW).props
    assert {k: props.get(k) for k in expected} == expected
    assert not [k for k in absent if k in props]


def test_commit_time_ordering_is_recorded_by_version_8():
    props = new_table_config(HoodieConfig.of(BASE, {
        "hoodie.write.table.version": "8",
        "hoodie.datasource.write.payload.class": "org.apache.hudi.common.model.OverwriteWithLatestAvroPayload"}),
        ARROW).props
    assert props["hoodie.record.merge.mode"] == "COMMIT_TIME_ORDERING"
    assert props["hoodie.record.merge.strategy.id"] == "ce9acb64-bde0-424c-9b91-f6ebba25356d"


def test_an_unknown_table_version_is_refused(spark, tmp_path):
    df = spark.createDataFrame([(1, 1, "a")], "id int, ts long, dt string")
    with pytest.raises(HoodieConfigError, match="hoodie.write.table.version.*expected one of 6, 8, 9"):
        df.write.format("hudi").options(**BASE, **{"hoodie.write.table.version": "7"}).mode("append") \
            .save(str(tmp_path / "t"))
    assert not (tmp_path / "t" / ".hoodie").exists()


def test_the_table_version_decides_later_writes(spark, tmp_path):
    path = str(tmp_path / "t")
    df = spark.createDataFrame([(1, 1, "a")], "id int, ts long, dt string")
    df.write.format("hudi").options(**BASE, **{"hoodie.write.table.version": "9"}).mode("append").save(path)
    df.write.format("hudi").options(**BASE, **{"hoodie.write.table.version": "6"}).mode("append").save(path)
    meta = HoodieTableMetaClient.load(path)
    assert meta.table_config.version == 9
    assert len(meta.timeline.completed()) == 2
    assert not any(p.is_file() and p.name[0].isdigit() for p in (tmp_path / "t" / ".hoodie").iterdir())


_COMPLETED = re.compile(r"^(\d{17})_(\d{17})\.(commit|deltacommit|replacecommit|clean|rollback|savepoint|restore)$")
_PENDING = re.compile(r"^\d{17}(\.[a-z]+)?\.(requested|inflight)$")


def _check_layout(base: Path, version: int) -> None:
    meta = HoodieTableMetaClient.load(str(base))
    assert meta.table_config.version == version
    hoodie = base / ".hoodie"
    assert not [p.name for p in hoodie.iterdir() if p.is_file() and p.name[0].isdigit()], "instants left in .hoodie/"
    names = [p.name for p in (hoodie / "timeline").iterdir() if p.is_file()]
    assert names and all(_COMPLETED.match(n) or _PENDING.match(n) for n in names), names
    for name in names:
        data = (hoodie / "timeline" / name).read_bytes()
        assert not data or data[:4] == b"Obj\x01", f"{name} is not an Avro container"
        if data:  # in the schemas of the Hudi release that writes this version (1.1's for version 9)
            writer = read_avro_container_with_schema(data)[1]
            assert avro_schema_to_json(writer) == avro_schema_to_json(models_for(version)[writer["name"]]), name
        m = _COMPLETED.match(name)
        assert not m or m.group(1) < m.group(2), f"{name}: completed before it was requested"
    # a merge-on-read write's log files are its own: version 1, named by the deltacommit's request time
    requested = {i.timestamp for i in meta.timeline}
    logs = [p.name for p in base.rglob(".*.log.*") if ".hoodie" not in p.parts]  # the MDT's have their own rules
    for name in logs:
        instant, log_version = re.match(r"^\.[^_]+_(\d{17})\.log\.(\d+)_", name).groups()
        assert log_version == "1" and instant in requested | _archived(meta), name


def _archived(meta) -> set[str]:
    from storage.timeline.archived_timeline import HoodieArchivedTimeline

    return {i.timestamp for i in HoodieArchivedTimeline(meta).completed()}


@pytest.mark.parametrize("version, table_type", [(8, "MERGE_ON_READ"), (9, "COPY_ON_WRITE"), (9, "MERGE_ON_READ"),
                                                 (8, "COPY_ON_WRITE")])
def test_write_sequence_at_version(spark, tmp_path, version, table_type):
    base = tmp_path / f"seq_{table_type[:3].lower()}"
    # LSM layers compacted from two files on: the sequence archives past the first compaction of layers
    run_sequence(spark, base, table_type, {"hoodie.write.table.version": str(version),
                                           "hoodie.timeline.compaction.batch.size": "2"})
    _check_layout(base, version)
    assert [p for p in (base / ".hoodie" / "timeline" / "history").glob("*_1.parquet")], "no layer was compacted"
    got = summary(spark, base)
    assert got["rows"] == json.loads(GOLDEN.read_text())[table_type]["rows"], "not the rows version 6 ends with"
    columns = ["id", "name", "ts", "dt"]
    ours = spark_rows(spark.read.format("hudi").load(str(base)).select(*columns))
    assert arrow_rows(hudi_rs_read(str(base)).select(columns)) == ours
    # an incremental query between two instants: the same rows as hudi-rs (both compare completion times)
    meta = HoodieTableMetaClient.load(str(base))
    writes = [i for i in meta.timeline.completed().write_timeline()]
    start, end = writes[-3].completion_time, writes[-2].completion_time
    incremental = spark.read.format("hudi").options(**{
        "hoodie.datasource.query.type": "incremental", "hoodie.datasource.read.begin.instanttime": start,
        "hoodie.datasource.read.end.instanttime": end}).load(str(base)).select(*columns)
    from hudi import HudiQueryType, HudiReadOptions, HudiTableBuilder

    options = HudiReadOptions().with_query_type(HudiQueryType.Incremental).with_start_timestamp(start).with_end_timestamp(end)
    batches = HudiTableBuilder.from_base_uri(str(base)).build().read(options)
    theirs = arrow_rows(pa.Table.from_batches(batches).select(columns)) if batches else []
    assert theirs and spark_rows(incremental) == theirs, (start, end, [str(i) for i in writes])
    # from the beginning: archived commits included (their completion times read from the LSM timeline), so
    # every current row, whose commit is one of them, is in it
    everything = spark.read.format("hudi").options(**{
        "hoodie.datasource.query.type": "incremental", "hoodie.datasource.read.begin.instanttime": "000"}) \
        .load(str(base)).select(*columns)
    assert spark_rows(everything) == ours


@pytest.mark.parametrize("version, table_type", [(9, "MERGE_ON_READ"), (8, "COPY_ON_WRITE")])
def test_restore_to_a_savepoint_at_version(spark, tmp_path, version, table_type):
    from storage.table_service.restore import restore_to_savepoint
    from storage.table_service.savepoint import create_savepoint

    path = str(tmp_path / "t")
    opts = {**BASE, "hoodie.write.table.version": str(version), "hoodie.datasource.write.table.type": table_type}
    columns = ["id", "ts", "dt"]
    for ts in (1, 2, 3):
        spark.createDataFrame([(i, ts, f"p{i % 2}") for i in range(ts * 2)], "id int, ts long, dt string") \
            .write.format("hudi").options(**opts).mode("append").save(path)
        if ts == 2:
            saved = spark_rows(spark.read.format("hudi").load(path).select(*columns))
            meta = HoodieTableMetaClient.load(path)
            create_savepoint(path, meta.timeline.completed().write_timeline().last().timestamp)
    restore_to_savepoint(path, HoodieTableMetaClient.load(path).timeline.completed().of_actions(["savepoint"])
                         .last().timestamp)
    _check_layout(tmp_path / "t", version)
    assert spark_rows(spark.read.format("hudi").load(path).select(*columns)) == saved
    assert arrow_rows(hudi_rs_read(path).select(columns)) == saved
