"""Hive sync of Java-written Hudi tables into a real metastore, read back with hmsclient (no Spark needed).

Expected partitions come from hudi-rs (the partitions that still hold rows) and the fixtures' .sql files;
storage descriptors and properties are Apache Hudi's HiveSyncTool ones."""
from __future__ import annotations

import json
import shutil
import sys
import uuid
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from hudi_oracle import hudi_rs_read  # noqa: E402

from catalog.hive_schema_util import HiveColumn, HiveSyncSchemaError, is_widening, schema_difference
from catalog.hive_sync import sync_table
from catalog.hms_ddl import local_path
from catalog.partition_value_extractor import extractor_for, multi_part_keys

SERDE = "org.apache.hadoop.hive.ql.io.parquet.serde.ParquetHiveSerDe"
IN_RO = "org.apache.hudi.hadoop.HoodieParquetInputFormat"
IN_RT = "org.apache.hudi.hadoop.realtime.HoodieParquetRealtimeInputFormat"
OUT = "org.apache.hadoop.hive.ql.io.parquet.MapredParquetOutputFormat"
META = ["_hoodie_commit_time", "_hoodie_commit_seqno", "_hoodie_record_key", "_hoodie_partition_path",
        "_hoodie_file_name"]
TRIPS_COLS = [("ts", "bigint"), ("uuid", "string"), ("rider", "string"), ("driver", "string"), ("fare", "double")]


def db_name() -> str:
    return f"sync_{uuid.uuid4().hex[:8]}"


def spark_schema_of(table) -> dict:
    params = table.parameters
    n = int(params["spark.sql.sources.schema.numParts"])
    return json.loads("".join(params[f"spark.sql.sources.schema.part.{i}"] for i in range(n)))


def test_mor_fixture_synced_as_ro_and_rt(embedded_metastore, metastore_client, fixture_table):
    base = str(fixture_table("trips_mor_avro_v6_trips_8i1u"))
    db = db_name()
    report = sync_table(base, embedded_metastore.uri, {}, database=db, table="trips")
    assert report.ok and [t.table for t in report.tables] == [f"{db}.trips_ro", f"{db}.trips_rt"]
    assert sorted(metastore_client.get_all_tables(db)) == ["trips_ro", "trips_rt"]
    expected_cities = sorted({r["city"] for r in hudi_rs_read(base).to_pylist()})
    last_instant = sorted(p.name.split(".")[0] for p in (Path(base) / ".hoodie").glob("*.deltacommit"))[-1]
    for name, input_format, ro in (("trips_ro", IN_RO, "true"), ("trips_rt", IN_RT, "false")):
        t = metastore_client.get_table(db, name)
        assert t.tableType == "EXTERNAL_TABLE" and t.parameters["EXTERNAL"] == "TRUE"
        assert local_path(t.sd.location) == base
        assert (t.sd.inputFormat, t.sd.outputFormat, t.sd.serdeInfo.serializationLib) == (input_format, OUT, SERDE)
        serde = t.sd.serdeInfo.parameters
        assert serde["hoodie.query.as.ro.table"] == ro and local_path(serde["path"]) == base
        assert [(c.name, c.type) for c in t.sd.cols] == [(m, "string") for m in META] + TRIPS_COLS
        assert [(c.name, c.type) for c in t.partitionKeys] == [("city", "string")]
        assert t.parameters["spark.sql.sources.provider"] == "hudi"
        assert t.parameters["last_commit_time_sync"] == last_instant
        assert t.parameters["spark.sql.sources.schema.numPartCols"] == "1"
        assert t.parameters["spark.sql.sources.schema.partCol.0"] == "city"
        fields = [f["name"] for f in spark_schema_of(t)["fields"]]
        assert fields == META + [c for c, _ in TRIPS_COLS] + ["city"]  # partition column last
        parts = metastore_client.get_partitions(db, name)
        assert sorted(p.values[0] for p in parts) == expected_cities
        for p in parts:
            assert local_path(p.sd.location) == f"{base}/city={p.values[0]}"
            assert p.sd.inputFormat == input_format
    # nothing new: an incremental sync changes nothing and keeps last_commit_time_sync
    again = sync_table(base, embedded_metastore.uri, {}, database=db, table="trips")
    assert all(not t.full_listing and not t.added_partitions and not t.created for t in again.tables)


def test_skip_ro_suffix(embedded_metastore, metastore_client, fixture_table):
    base = str(fixture_table("trips_mor_avro_v6_trips_8i1u"))
    db = db_name()
    sync_table(base, embedded_metastore.uri, {"hoodie.datasource.hive_sync.skip_ro_suffix": "true"},
               database=db, table="trips")
    assert sorted(metastore_client.get_all_tables(db)) == ["trips", "trips_rt"]
    assert metastore_client.get_table(db, "trips").sd.serdeInfo.parameters["hoodie.query.as.ro.table"] == "true"


def test_cow_nonhivestyle_overwrite_syncs_only_live_partitions(embedded_metastore, metastore_client, fixture_table):
    """insert_overwrite_table replaced every earlier file group: partitions left without live files are not
    synced, and a partition added by hand for such a path is dropped by a full sync."""
    base = str(fixture_table("sample_cow_v6_simplekeygen_nonhivestyle_overwritetable"))
    db = db_name()
    report = sync_table(base, embedded_metastore.uri, {}, database=db, table="ow")
    assert [t.table for t in report.tables] == [f"{db}.ow"]
    t = metastore_client.get_table(db, "ow")
    assert t.sd.inputFormat == IN_RO and t.sd.serdeInfo.parameters["hoodie.query.as.ro.table"] == "false"
    expected = sorted({str(r["byteField"]) for r in hudi_rs_read(base).to_pylist()})
    assert [(c.name, c.type) for c in t.partitionKeys] == [("bytefield", "int")]
    got = sorted(p.values[0] for p in metastore_client.get_partitions(db, "ow"))
    assert got == expected
    dirs = sorted(d.name for d in Path(base).iterdir() if d.is_dir() and not d.name.startswith("."))
    stale = [d for d in dirs if d not in expected]
    assert stale, "fixture must have a partition directory whose files were all replaced"
    from catalog.hms_ddl import new_partition
    metastore_client.add_partitions([new_partition(t, [stale[0]], f"file:{base}/{stale[0]}")])
    full = sync_table(base, embedded_metastore.uri, {}, database=db, table="ow", full=True)
    assert full.tables[0].dropped_partitions == [f"bytefield={stale[0]}"]
    assert sorted(p.values[0] for p in metastore_client.get_partitions(db, "ow")) == expected


def test_partition_moved_is_updated_and_nonpartitioned_has_none(embedded_metastore, metastore_client, fixture_table,
                                                                tmp_path):
    base = tmp_path / "trips"
    shutil.copytree(fixture_table("trips_mor_avro_v6_trips_8i1u"), base)
    db = db_name()
    sync_table(str(base), embedded_metastore.uri, {}, database=db, table="t")
    p = metastore_client.get_partitions(db, "t_ro")[0]
    p.sd.location = "file:/somewhere/else"
    metastore_client.alter_partitions(db, "t_ro", [p])
    fixed = sync_table(str(base), embedded_metastore.uri, {}, database=db, table="t", full=True)
    assert fixed.tables[0].updated_partitions == [f"city={p.values[0]}"]
    moved = {q.values[0]: local_path(q.sd.location) for q in metastore_client.get_partitions(db, "t_ro")}
    assert moved[p.values[0]] == f"{base}/city={p.values[0]}"

    flat = str(fixture_table("sample_cow_v6_nonpartitioned"))
    sync_table(flat, embedded_metastore.uri, {}, database=db, table="flat")
    t = metastore_client.get_table(db, "flat")
    assert t.partitionKeys == [] and metastore_client.get_partitions(db, "flat") == []
    assert "spark.sql.sources.schema.numPartCols" not in t.parameters


def test_incompatible_type_change_fails_naming_column(embedded_metastore, metastore_client, fixture_table):
    base = str(fixture_table("sample_cow_v6_nonpartitioned"))
    db = db_name()
    sync_table(base, embedded_metastore.uri, {}, database=db, table="flat")
    t = metastore_client.get_table(db, "flat")
    col = next(c for c in t.sd.cols if c.type == "int")
    col.type = "string"  # the metastore says string, the table says int: not a widening
    metastore_client.alter_table(db, "flat", t)
    with pytest.raises(Exception, match=col.name):
        sync_table(base, embedded_metastore.uri, {}, database=db, table="flat")


def test_widening_rules():
    assert is_widening("int", "bigint") and is_widening("float", "double")
    assert is_widening("decimal(10,2)", "decimal(12,2)") and is_widening("tinyint", "int")
    assert not is_widening("bigint", "int") and not is_widening("double", "float")
    assert not is_widening("decimal(10,2)", "decimal(10,3)") and not is_widening("string", "int")
    diff = schema_difference("t", [HiveColumn("a", "bigint"), HiveColumn("b", "string")], [HiveColumn("a", "int")])
    assert [c.name for c in diff.added] == ["b"] and [c.name for c, _ in diff.updated] == ["a"]
    with pytest.raises(HiveSyncSchemaError, match="'a'"):
        schema_difference("t", [HiveColumn("a", "int")], [HiveColumn("a", "bigint")])


def test_partition_value_extractors():
    assert multi_part_keys("year=2024/month=01") == ["2024", "01"]
    assert multi_part_keys("2024/01") == ["2024", "01"]
    assert extractor_for(None, False)("anything") == []
    assert extractor_for("org.apache.hudi.hive.SlashEncodedDayPartitionValueExtractor", True)("2024/1/2") == ["2024-01-02"]
    assert extractor_for(None, True, url_encoded=True)("city=s%C3%A3o") == ["são"]
    with pytest.raises(ValueError, match="NoSuchExtractor"):
        extractor_for("x.NoSuchExtractor", True)


def test_table_without_meta_fields_is_synced_without_them(embedded_metastore, metastore_client, fixture_table):
    base = str(fixture_table("sample_mor_parquet_v6_simplekeygen_hivestyle_no_metafields"))
    db = db_name()
    sync_table(base, embedded_metastore.uri, {}, database=db, table="nm")
    t = metastore_client.get_table(db, "nm_ro")
    names = [c.name for c in t.sd.cols]
    assert names[:3] == ["id", "name", "isactive"] and not any(n.startswith("_hoodie") for n in names)
    types = dict((c.name, c.type) for c in t.sd.cols)
    assert types["decimalfield"] == "decimal(10,5)" and types["timestampfield"] == "timestamp"
    assert types["arrayfield"] == "array<struct<arr_struct_f1:string,arr_struct_f2:int>>"
    assert [(c.name, c.type) for c in t.partitionKeys] == [("bytefield", "int")]
    expected = sorted({str(r["byteField"]) for r in hudi_rs_read(base).to_pylist()})
    assert sorted(p.values[0] for p in metastore_client.get_partitions(db, "nm_rt")) == expected


def test_v8_table_records_completion_time(embedded_metastore, metastore_client, fixture_table):
    base = str(fixture_table("sample_cow_v8_nonpartitioned"))
    db = db_name()
    report = sync_table(base, embedded_metastore.uri, {}, database=db, table="v8")
    params = metastore_client.get_table(db, "v8").parameters
    assert params["last_commit_time_sync"] == report.tables[0].last_commit_time_sync
    completed = sorted(p.name for p in (Path(base) / ".hoodie" / "timeline").glob("*.commit"))
    # v8 completed instant files are named <instant>_<completion time>.commit
    assert params["last_commit_completion_time_sync"] == completed[-1].split("_")[1].split(".")[0]
