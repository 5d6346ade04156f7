"""Catalog on the real Hive metastore of the test session: CREATE/DROP registration, databases, post-commit Hive
sync of COW and MOR tables, `_ro` / `_rt` reads, and a metastore killed before a commit.

Everything is read back with hmsclient (a second client, not the resolver's); table contents are compared with
hudi-rs. The kill test replaces the session's metastore JVM (same port), so it runs last in this file."""
from __future__ import annotations

import logging
import os
import shutil
import signal
import subprocess
import sys
import time
import uuid
from decimal import Decimal
from pathlib import Path

import pytest
from pyspark.sql.types import (DecimalType, DoubleType, IntegerType, LongType, StringType, StructField,
                               StructType)

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from hudi_oracle import hudi_rs_read  # noqa: E402

from catalog import MetastoreClient, hive_sync
from catalog.hms_ddl import local_path
from storage.write.heartbeat import pid_alive

REPO = Path(__file__).resolve().parents[2]
META = ["_hoodie_commit_time", "_hoodie_commit_seqno", "_hoodie_record_key", "_hoodie_partition_path",
        "_hoodie_file_name"]
IN_RO = "org.apache.hudi.hadoop.HoodieParquetInputFormat"
IN_RT = "org.apache.hudi.hadoop.realtime.HoodieParquetRealtimeInputFormat"
SERDE = "org.apache.hadoop.hive.ql.io.parquet.serde.ParquetHiveSerDe"


@pytest.fixture
def hms(spark):
    """The session's metastore catalog with the metastore resolver installed and post-commit sync on."""
    from sqlext.sql import install

    catalog = spark._sqlext_catalog
    assert catalog.uri, "the session fixture must attach a metastore"
    install(spark, catalog.resolver)
    spark.conf.set("hoodie.datasource.hive_sync.enable", "true")
    yield catalog
    spark.conf.set("hoodie.datasource.hive_sync.enable", "false")
    spark._sqlext_frontend.original_sql("USE default")
    install(spark, catalog.resolver)


@pytest.fixture
def client(hms):
    with MetastoreClient(hms.uri) as c:
        yield c


@pytest.fixture
def db(spark, hms):
    name = f"cat_{uuid.uuid4().hex[:8]}"
    spark.sql(f"CREATE DATABASE {name}")
    return name


def instants(path: str, action: str = "commit") -> list[str]:
    return sorted(p.name.split(".")[0] for p in (Path(path) / ".hoodie").glob(f"*.{action}"))


def cols(table) -> list[tuple[str, str]]:
    return [(c.name, c.type) for c in table.sd.cols]


def partition_values(client, db, name) -> list[str]:
    return sorted("/".join(p.values) for p in client.get_partitions(db, name))


def hudi_rows(path, columns):
    rows = hudi_rs_read(path).to_pylist()
    return sorted(tuple(r[c] for c in columns) for r in rows)


# ------------------------------------------------------------------------------------------------
def test_databases_create_use_show(spark, hms, client):
    name = f"cat_{uuid.uuid4().hex[:8]}"
    spark.sql(f"CREATE DATABASE {name}")
    assert client.get_database(name) is not None
    spark.sql(f"USE {name}")
    assert spark.catalog.currentDatabase() == name and hms.resolver.current_database == name
    assert name in [r[0] for r in spark.sql("SHOW DATABASES").collect()]
    spark.sql("CREATE TABLE u (id INT, v STRING) USING hudi TBLPROPERTIES (primaryKey = 'id')")
    assert client.get_table(name, "u") is not None, "an unqualified CREATE goes to the current database"


def test_cow_partitioned_registration_commits_and_schema_evolution(spark, hms, client, db):
    spark.sql(f"CREATE TABLE {db}.orders (id INT, name STRING, qty INT, ratio FLOAT, amount DECIMAL(10,2), ts BIGINT, "
              "dt STRING) USING hudi PARTITIONED BY (dt) "
              "TBLPROPERTIES (primaryKey = 'id', preCombineField = 'ts', 'hoodie.bulkinsert.sort.mode' = 'NONE')")
    t = client.get_table(db, "orders")
    path = local_path(t.sd.location)
    assert path == local_path(client.get_database(db).locationUri) + "/orders"
    assert (t.sd.inputFormat, t.sd.serdeInfo.serializationLib) == (IN_RO, SERDE)
    assert local_path(t.sd.serdeInfo.parameters["path"]) == path
    data_cols = [("id", "int"), ("name", "string"), ("qty", "int"), ("ratio", "float"), ("amount", "decimal(10,2)"),
                 ("ts", "bigint")]
    assert cols(t) == [(m, "string") for m in META] + data_cols
    assert [(c.name, c.type) for c in t.partitionKeys] == [("dt", "string")]
    p = t.parameters
    assert (p["spark.sql.sources.provider"], p["provider"], p["type"]) == ("hudi", "hudi", "cow")
    assert (p["primaryKey"], p["preCombineField"], p["hoodie.table.name"]) == ("id", "ts", "orders")
    assert p["hoodie.bulkinsert.sort.mode"] == "NONE" and "last_commit_time_sync" not in p
    assert client.get_partitions(db, "orders") == []

    # commits: each one is synced (partitions added, last_commit_time_sync moved)
    spark.sql(f"INSERT INTO {db}.orders VALUES (1, 'a', 1, 1.5, 10.25, 1, 'd1'), (2, 'b', 2, 2.5, 20.50, 1, 'd2')")
    assert partition_values(client, db, "orders") == ["d1", "d2"]
    assert client.get_table(db, "orders").parameters["last_commit_time_sync"] == instants(path)[-1]
    spark.sql(f"INSERT INTO {db}.orders VALUES (3, 'c', 3, 3.5, 30.75, 1, 'd3')")
    spark.sql(f"UPDATE {db}.orders SET name = 'A', ts = 2 WHERE id = 1")
    assert partition_values(client, db, "orders") == ["d1", "d2", "d3"]
    assert client.get_table(db, "orders").parameters["last_commit_time_sync"] == instants(path)[-1]
    assert hive_sync.last_sync_report(path).ok

    # schema evolution through a datasource write: added column, int->bigint, float->double, decimal(10,2)->(12,2)
    schema = StructType([StructField("id", IntegerType()), StructField("name", StringType()),
                         StructField("qty", LongType()), StructField("ratio", DoubleType()),
                         StructField("amount", DecimalType(12, 2)), StructField("ts", LongType()),
                         StructField("dt", StringType()), StructField("note", StringType())])
    df = spark.createDataFrame([(4, "d", 4, 4.5, Decimal("40.00"), 1, "d2", "new")], schema)
    df.write.format("hudi").option("hoodie.table.name", "orders").mode("append").save(path)
    evolved = client.get_table(db, "orders")
    assert cols(evolved) == [(m, "string") for m in META] + [
        ("id", "int"), ("name", "string"), ("qty", "bigint"), ("ratio", "double"), ("amount", "decimal(12,2)"),
        ("ts", "bigint"), ("note", "string")]
    for part in client.get_partitions(db, "orders"):  # cascaded: Hive readers use the partition's columns
        assert ("note", "string") in [(c.name, c.type) for c in part.sd.cols]
    assert evolved.parameters["last_commit_time_sync"] == instants(path)[-1]
    fields = [f.name for f in spark.sql(f"SELECT * FROM {db}.orders").schema.fields]
    assert "note" in fields

    # an overwrite of the whole table with rows for d3 only: d1 and d2 have no live files any more
    schema_now = spark.sql(f"SELECT * FROM {db}.orders").drop(*META).schema
    only_d3 = spark.createDataFrame([(9, "z", 9, 9.5, Decimal("90.00"), 5, "d3", None)], schema_now)
    only_d3.write.format("hudi").option("hoodie.table.name", "orders").mode("overwrite").save(path)
    expected_parts = sorted({r["dt"] for r in hudi_rs_read(path).to_pylist()})
    assert expected_parts == ["d3"]
    assert partition_values(client, db, "orders") == expected_parts

    # plain Spark (Hive catalog) lists the table and its partitions
    assert "orders" in [t.name for t in spark.catalog.listTables(db)]
    external = spark._jsparkSession.sharedState().externalCatalog()
    none = getattr(getattr(spark._jvm.scala, "None$"), "MODULE$")
    names = external.listPartitionNames(db, "orders", none)
    assert [names.apply(i) for i in range(names.size())] == ["dt=d3"]


def test_another_process_and_new_session_find_table_by_name(spark, hms, client, db):
    from sqlext.sql import install
    from sqlext.sql.metastore_resolver import MetastoreResolver

    spark.sql(f"CREATE TABLE {db}.people (id INT, name STRING) USING hudi TBLPROPERTIES (primaryKey = 'id')")
    spark.sql(f"INSERT INTO {db}.people VALUES (1, 'ann'), (2, 'bob')")
    code = ("import sys; sys.path.insert(0, 'tests'); from catalog import MetastoreClient;"
            "from sqlext.sql.metastore_resolver import MetastoreResolver; from sqlext.sql.resolver import TableName;"
            "from hudi_oracle import hudi_rs_read;"
            "ref = MetastoreResolver(MetastoreClient(sys.argv[1])).resolve(TableName.parse(sys.argv[2]));"
            "print(ref.path); print(sorted(r['name'] for r in hudi_rs_read(ref.path).to_pylist()))")
    out = subprocess.run([sys.executable, "-c", code, hms.uri, f"{db}.people"], cwd=REPO, capture_output=True,
                         text=True, timeout=120, env={**os.environ, "PYTHONPATH": str(REPO)})
    assert out.returncode == 0, out.stderr
    path, names = out.stdout.strip().splitlines()
    assert names == "['ann', 'bob']"
    assert path == local_path(client.get_table(db, "people").sd.location)

    other = spark.newSession()  # a new session: its own current database, same metastore
    install(other, MetastoreResolver(MetastoreClient(hms.uri), other.catalog.currentDatabase))
    assert other.catalog.currentDatabase() == "default"
    rows = other.sql(f"SELECT id, name FROM {db}.people ORDER BY id").collect()
    assert [tuple(r) for r in rows] == [(1, "ann"), (2, "bob")]


def test_adopt_mor_location_sync_ro_rt_and_drop(spark, hms, client, db, fixture_table, tmp_path):
    path = tmp_path / "trips"
    shutil.copytree(fixture_table("trips_mor_avro_v6_trips_8i1u"), path)
    spark.sql(f"CREATE TABLE {db}.trips USING hudi LOCATION '{path}'")
    t = client.get_table(db, "trips")
    assert cols(t) == [(m, "string") for m in META] + [("ts", "bigint"), ("uuid", "string"), ("rider", "string"),
                                                       ("driver", "string"), ("fare", "double")]
    assert [(c.name, c.type) for c in t.partitionKeys] == [("city", "string")]
    assert (t.parameters["type"], t.sd.inputFormat) == ("mor", IN_RT)
    assert t.parameters["primaryKey"] == "uuid" and t.parameters["preCombineField"] == "ts"

    from sqlext.sql.metastore_resolver import run_hive_sync

    report = run_hive_sync(hms.resolver, f"{db}.trips")
    assert [r.table for r in report.tables] == [f"{db}.trips_ro", f"{db}.trips_rt"]
    assert sorted(client.get_all_tables(db)) == ["trips", "trips_ro", "trips_rt"]
    cities = sorted({r["city"] for r in hudi_rs_read(str(path)).to_pylist()})
    assert partition_values(client, db, "trips_ro") == partition_values(client, db, "trips_rt") == cities
    assert "trips_ro" in [x.name for x in spark.catalog.listTables(db)]

    # _ro reads base files only (the update in the log file is not visible), as hudi-rs read-optimized
    from hudi import HudiReadOptions, HudiTableBuilder

    ro = HudiTableBuilder.from_base_uri(str(path)).with_hudi_option(
        "hoodie.read.use.read_optimized.mode", "true").build().read(HudiReadOptions())
    import pyarrow as pa

    ro_expected = sorted((r["uuid"], r["fare"]) for r in pa.Table.from_batches(ro).to_pylist())
    got_ro = sorted(tuple(r) for r in spark.sql(f"SELECT uuid, fare FROM {db}.trips_ro").collect())
    assert got_ro == ro_expected
    snapshot_expected = hudi_rows(str(path), ["uuid", "fare"])
    assert snapshot_expected != ro_expected, "fixture must have a log-file update that only the realtime view shows"
    got_rt = sorted(tuple(r) for r in spark.sql(f"SELECT uuid, fare FROM {db}.trips_rt").collect())
    assert got_rt == snapshot_expected

    spark.sql(f"DROP TABLE {db}.trips")
    assert client.get_all_tables(db) == [], "DROP TABLE removes the table and its synced _ro/_rt tables"
    assert (path / ".hoodie").is_dir(), "a table created with LOCATION keeps its files"


def test_mor_sql_table_commits_sync_ro_and_rt(spark, hms, client, db):
    """A MOR table made by SQL: CREATE registers `<t>` (realtime input format, as Hudi's Spark SQL does); each
    delta commit syncs `<t>_ro` and `<t>_rt`; reads through them match hudi-rs."""
    spark.sql(f"CREATE TABLE {db}.m (id INT, v STRING, ts BIGINT, dt STRING) USING hudi PARTITIONED BY (dt) "
              "TBLPROPERTIES (type = 'mor', primaryKey = 'id', preCombineField = 'ts')")
    t = client.get_table(db, "m")
    assert (t.parameters["type"], t.sd.inputFormat) == ("mor", IN_RT)
    spark.sql(f"INSERT INTO {db}.m VALUES (1, 'a', 1, 'p1'), (2, 'b', 1, 'p2')")
    path = local_path(t.sd.location)
    spark.sql(f"INSERT INTO {db}.m VALUES (1, 'a2', 2, 'p1'), (3, 'c', 1, 'p3')")
    assert sorted(client.get_all_tables(db)) == ["m", "m_ro", "m_rt"]
    last = instants(path, "deltacommit")[-1]
    for name, input_format, ro in (("m_ro", IN_RO, "true"), ("m_rt", IN_RT, "false")):
        synced = client.get_table(db, name)
        assert (synced.sd.inputFormat, synced.sd.serdeInfo.parameters["hoodie.query.as.ro.table"]) == (input_format, ro)
        assert synced.parameters["last_commit_time_sync"] == last
        assert partition_values(client, db, name) == ["p1", "p2", "p3"]
        assert cols(synced) == [(m, "string") for m in META] + [("id", "int"), ("v", "string"), ("ts", "bigint")]
    rt = sorted(tuple(r) for r in spark.sql(f"SELECT id, v FROM {db}.m_rt").collect())
    assert rt == hudi_rows(path, ["id", "v"]) == [(1, "a2"), (2, "b"), (3, "c")]
    ro = sorted(tuple(r) for r in spark.sql(f"SELECT id, v FROM {db}.m_ro").collect())
    from hudi import HudiReadOptions, HudiTableBuilder
    import pyarrow as pa

    batches = HudiTableBuilder.from_base_uri(path).with_hudi_option(
        "hoodie.read.use.read_optimized.mode", "true").build().read(HudiReadOptions())
    assert ro == sorted((r["id"], r["v"]) for r in pa.Table.from_batches(batches).to_pylist())


def test_drop_managed_and_purge(spark, hms, client, db, tmp_path):
    spark.sql(f"CREATE TABLE {db}.m (id INT, v STRING) USING hudi TBLPROPERTIES (primaryKey = 'id')")
    spark.sql(f"INSERT INTO {db}.m VALUES (1, 'x')")
    managed = local_path(client.get_table(db, "m").sd.location)
    assert client.get_table(db, "m").parameters.get("hoodie.sql.managed") == "true"
    spark.sql(f"DROP TABLE {db}.m")
    assert client.get_table(db, "m") is None and not os.path.exists(managed)

    ext = tmp_path / "ext"
    spark.sql(f"CREATE TABLE {db}.e (id INT, v STRING) USING hudi LOCATION '{ext}' TBLPROPERTIES (primaryKey = 'id')")
    spark.sql(f"INSERT INTO {db}.e VALUES (1, 'x')")
    spark.sql(f"DROP TABLE {db}.e")
    assert client.get_table(db, "e") is None and (ext / ".hoodie").is_dir()
    spark.sql(f"CREATE TABLE {db}.e2 USING hudi LOCATION '{ext}'")  # adopt it again, schema from the table
    assert [c.name for c in client.get_table(db, "e2").sd.cols][-2:] == ["id", "v"]
    assert [tuple(r) for r in spark.sql(f"SELECT id, v FROM {db}.e2").collect()] == [(1, "x")]
    spark.sql(f"DROP TABLE {db}.e2 PURGE")
    assert client.get_table(db, "e2") is None and not ext.exists()


def test_sync_on_by_default_refresh_and_rename(spark, hms, client, db, fixture_table, tmp_path):
    from sqlext.sql.resolver import TableName

    spark.conf.unset("hoodie.datasource.hive_sync.enable")  # the default: on, since a metastore is in use
    spark.sql(f"CREATE TABLE {db}.r (id INT, v STRING, dt STRING) USING hudi PARTITIONED BY (dt) "
              "TBLPROPERTIES (primaryKey = 'id')")
    spark.sql(f"INSERT INTO {db}.r VALUES (1, 'x', 'a')")
    assert partition_values(client, db, "r") == ["a"]

    # a change the metastore did not see (sync off), then refresh (what ALTER TABLE calls) brings it in line
    ref = hms.resolver.resolve(TableName("r", db))
    spark.createDataFrame([(2, "y", "b", 7)], "id INT, v STRING, dt STRING, extra INT").write.format("hudi") \
        .option("hoodie.table.name", "r").option("hoodie.datasource.hive_sync.enable", "false") \
        .mode("append").save(ref.path)
    assert "extra" not in [c.name for c in client.get_table(db, "r").sd.cols]
    hms.resolver.refresh(ref)
    refreshed = client.get_table(db, "r")
    assert cols(refreshed)[-1] == ("extra", "int")
    assert refreshed.parameters["last_commit_time_sync"] == instants(ref.path)[0], "refresh keeps the sync state"
    assert partition_values(client, db, "r") == ["a"], "refresh keeps the partitions"

    # rename moves the entry (data stays); a MOR table's synced _ro/_rt tables move with it
    new_ref = hms.resolver.rename(ref, TableName("r2", db))
    assert client.get_table(db, "r") is None and local_path(client.get_table(db, "r2").sd.location) == ref.path
    assert new_ref.path == ref.path and partition_values(client, db, "r2") == ["a"]
    trips = tmp_path / "trips"
    shutil.copytree(fixture_table("trips_mor_avro_v6_trips_8i1u"), trips)
    spark.sql(f"CREATE TABLE {db}.trips USING hudi LOCATION '{trips}'")
    hive_sync.sync_table(str(trips), hms.uri, database=db, table="trips")
    hms.resolver.rename(hms.resolver.resolve(TableName("trips", db)), TableName("rides", db))
    assert sorted(client.get_all_tables(db)) == ["r2", "rides", "rides_ro", "rides_rt"]
    assert [tuple(r) for r in spark.sql(f"SELECT count(*) FROM {db}.rides_ro").collect()] == [(8,)]


def test_configured_metastore_is_used_and_nothing_started(hms, tmp_path):
    import importlib

    session_module = importlib.import_module("sqlext.session")
    for conf, arg in (({"hive.metastore.uris": hms.uri}, None), ({}, hms.uri)):
        uri, embedded = session_module._metastore(arg, conf, tmp_path)
        assert (uri, embedded) == (hms.uri, None)
    assert not (tmp_path / ".metastore").exists()
    assert session_module._metastore("none", {}, tmp_path) == (None, None)


def test_unreachable_metastore_error_names_uri(tmp_path):
    import sqlext
    from catalog import MetastoreUnavailableError
    from catalog.metastore_launcher import free_port

    uri = f"thrift://127.0.0.1:{free_port()}"
    with pytest.raises(MetastoreUnavailableError, match=uri):
        sqlext.session(warehouse=tmp_path, metastore=uri)


def test_drop_entry_whose_files_are_gone_and_create_over_foreign_table(spark, hms, client, db, tmp_path):
    spark.sql(f"CREATE TABLE {db}.o (id INT) USING hudi LOCATION '{tmp_path}/o' TBLPROPERTIES (primaryKey = 'id')")
    shutil.rmtree(tmp_path / "o")
    spark.sql(f"DROP TABLE {db}.o")  # Spark could not: it has no `hudi` data source to resolve the entry
    assert client.get_table(db, "o") is None

    spark._sqlext_frontend.original_sql(f"CREATE TABLE {db}.pq (id INT) USING parquet")
    with pytest.raises(Exception, match=f"{db}.pq already exists"):
        spark.sql(f"CREATE TABLE {db}.pq (id INT) USING hudi TBLPROPERTIES (primaryKey = 'id')")
    kept = client.get_table(db, "pq")
    assert kept.parameters["spark.sql.sources.provider"] == "parquet", "the foreign table is left as it was"


def test_killed_metastore_commit_succeeds_sync_reported_and_repaired(spark, hms, client, db, caplog):
    """Runs last: kills the session's metastore JVM and brings it back on the same port."""
    spark.sql(f"CREATE TABLE {db}.k (id INT, v STRING, dt STRING) USING hudi PARTITIONED BY (dt) "
              "TBLPROPERTIES (primaryKey = 'id')")
    spark.sql(f"INSERT INTO {db}.k VALUES (1, 'x', 'p1')")
    path = local_path(client.get_table(db, "k").sd.location)
    assert partition_values(client, db, "k") == ["p1"]

    pid = hms.embedded.status()["pid"]
    os.kill(pid, signal.SIGKILL)
    deadline = time.monotonic() + 10
    while pid_alive(pid) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not hms.embedded.status()["running"]
    try:
        from storage.client.write_client import HoodieWriteClient
        from storage.config import HoodieConfig

        df = spark.createDataFrame([(2, "y", "p2")], "id INT, v STRING, dt STRING")
        writer = HoodieWriteClient(spark, path, HoodieConfig.of({"hoodie.table.name": "k"}))
        with caplog.at_level(logging.WARNING, logger="catalog.hive_sync"):
            result = writer.write(df)
        assert result.metadata is not None
        assert any("hive sync" in r.getMessage() and hms.uri in r.getMessage() for r in caplog.records)
        # the commit is complete and readable ...
        assert len(instants(path)) == 2
        assert [name for name, _ in result.callback_failures] == ["hive_sync"]
        assert hudi_rows(path, ["id", "dt"]) == [(1, "p1"), (2, "p2")]
        # ... the sync failure is reported, naming the metastore
        report = hive_sync.last_sync_report(path)
        assert report is not None and not report.ok and report.instant_time == instants(path)[-1]
        assert hms.uri in report.error or "unavailable" in report.error
        assert any(r.base_path == path for r in hive_sync.sync_failures())
        # the session's catalog client reconnects on its next call: the embedded metastore is restarted
        from sqlext.sql.resolver import TableName

        assert hms.resolver.resolve(TableName("k", db)).path == path
        assert hms.embedded.status()["running"] and hms.embedded.uri == hms.uri  # same port
    finally:
        hms.embedded.start()  # no-op when running; never leave the session without its metastore
    assert partition_values(client, db, "k") == ["p1"], "the metastore missed the commit"
    rows = spark.sql(f"CALL hive_sync(table => '{db}.k')").collect()
    assert [(r.result, r.synced_table) for r in rows] == [(True, f"{db}.k")]
    assert partition_values(client, db, "k") == ["p1", "p2"]
    assert client.get_table(db, "k").parameters["last_commit_time_sync"] == instants(path)[-1]
    assert not any(r.base_path == path for r in hive_sync.sync_failures())
    # Spark's own Hive client reconnects to the restarted metastore too
    assert "k" in [t.name for t in spark.catalog.listTables(db)]
