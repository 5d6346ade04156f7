"""The embedded Hive metastore and its client, against a real HMS JVM (no mocks).

One metastore serves the whole session (`embedded_metastore` in conftest.py). The kill/restart
test runs last in this file because it replaces that JVM (same warehouse, same port)."""
from __future__ import annotations

import copy
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
from quick_jvm import quick_jvm_env
from hmsclient.genthrift.hive_metastore.ttypes import FieldSchema, Partition, SerDeInfo, StorageDescriptor, Table

from catalog import EmbeddedMetastore, MetastoreClient, MetastoreUnavailableError, resolve_metastore
from catalog.metastore_launcher import free_port, metastore_pids
from storage.io import class_data_sharing
from storage.write.heartbeat import pid_alive

REPO = Path(__file__).resolve().parents[2]
PARQUET_SERDE = "org.apache.hadoop.hive.ql.io.parquet.serde.ParquetHiveSerDe"
PARQUET_IN = "org.apache.hadoop.hive.ql.io.parquet.MapredParquetInputFormat"
PARQUET_OUT = "org.apache.hadoop.hive.ql.io.parquet.MapredParquetOutputFormat"


def external_table(db: str, name: str, location: Path) -> Table:
    """An external parquet table (id INT, name STRING) partitioned by dt STRING."""
    sd = StorageDescriptor(
        cols=[FieldSchema("id", "int", ""), FieldSchema("name", "string", "")],
        location=location.as_uri(), inputFormat=PARQUET_IN, outputFormat=PARQUET_OUT,
        compressed=False, numBuckets=-1, bucketCols=[], sortCols=[], parameters={},
        serdeInfo=SerDeInfo(name=name, serializationLib=PARQUET_SERDE, parameters={"serialization.format": "1"}))
    return Table(tableName=name, dbName=db, owner="test", createTime=int(time.time()), lastAccessTime=0,
                 retention=0, sd=sd, partitionKeys=[FieldSchema("dt", "string", "")],
                 parameters={"EXTERNAL": "TRUE"}, tableType="EXTERNAL_TABLE")


def partition(table: Table, dt: str) -> Partition:
    sd = copy.deepcopy(table.sd)
    sd.location = f"{table.sd.location}/dt={dt}"
    return Partition(values=[dt], dbName=table.dbName, tableName=table.tableName, sd=sd, parameters={},
                     createTime=int(time.time()), lastAccessTime=0)


def start_in_subprocess(warehouse: Path) -> subprocess.Popen[str]:
    code = "import sys; from catalog.embedded_metastore import EmbeddedMetastore as E; print(E(sys.argv[1]).start())"
    return subprocess.Popen([sys.executable, "-c", code, str(warehouse)], cwd=REPO,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


# ------------------------------------------------------------------------------------------------
def test_start_status_and_reuse(embedded_metastore):
    status = embedded_metastore.status()
    assert status["running"] and status["answering"]
    assert status["uri"] == embedded_metastore.uri == f"thrift://127.0.0.1:{status['port']}"
    paths = embedded_metastore.paths
    assert paths.hive_site.exists() and paths.state_file.exists() and paths.derby_db.is_dir()
    assert (paths.logs_dir / "derby.log").exists(), "derby log must land under .metastore/logs"

    # Same directory, new object (and a new process): reuse, no second JVM.
    again = EmbeddedMetastore(paths.warehouse)
    assert again.start() == embedded_metastore.uri
    assert again.status()["pid"] == status["pid"]
    other = start_in_subprocess(paths.warehouse)
    out, err = other.communicate(timeout=60)
    assert other.returncode == 0, err
    assert out.strip() == embedded_metastore.uri
    assert metastore_pids(paths.conf_dir) == [status["pid"]]


def test_resolve_metastore(embedded_metastore, tmp_path):
    configured = "thrift://metastore.example:9083"
    for key in ("hive.metastore.uris", "spark.hadoop.hive.metastore.uris"):
        assert resolve_metastore({key: configured}, tmp_path / "wh") == configured
    assert not (tmp_path / "wh").exists(), "a configured metastore must not start anything"
    assert resolve_metastore({}, embedded_metastore.paths.warehouse) == embedded_metastore.uri


def test_database_external_table_partitions_roundtrip(metastore_client, tmp_path):
    client = metastore_client
    assert client.create_database("cat_db", location=(tmp_path / "cat_db").as_uri(), description="d")
    assert not client.create_database("cat_db")  # if-not-exists
    assert "cat_db" in client.get_all_databases()
    assert client.get_database("cat_db").description == "d"
    assert client.get_database("no_such_db") is None

    table = external_table("cat_db", "events", tmp_path / "events")
    client.create_table(table)
    assert client.add_partitions([partition(table, "2024-01-01"), partition(table, "2024-01-02")]) == 2
    assert client.get_all_tables("cat_db") == ["events"]

    got = client.get_table("cat_db", "events")
    assert got.tableType == "EXTERNAL_TABLE" and got.parameters["EXTERNAL"] == "TRUE"
    assert [c.name for c in got.sd.cols] == ["id", "name"] and got.partitionKeys[0].name == "dt"
    parts = client.get_partitions("cat_db", "events")
    assert sorted(p.values[0] for p in parts) == ["2024-01-01", "2024-01-02"]
    assert parts[0].sd.location.endswith(f"/events/dt={parts[0].values[0]}")

    got.parameters["hoodie.table.type"] = "COPY_ON_WRITE"
    client.alter_table("cat_db", "events", got)
    assert client.get_table("cat_db", "events").parameters["hoodie.table.type"] == "COPY_ON_WRITE"

    assert client.drop_partition("cat_db", "events", ["2024-01-01"])
    assert not client.drop_partition("cat_db", "events", ["2024-01-01"])
    assert client.get_partition_names("cat_db", "events") == ["dt=2024-01-02"]

    assert client.drop_table("cat_db", "events")
    assert client.get_table("cat_db", "events") is None
    assert not client.drop_table("cat_db", "events")
    assert client.drop_database("cat_db") and not client.drop_database("cat_db")


def test_unreachable_uri_fails_fast_naming_it():
    uri = f"thrift://127.0.0.1:{free_port()}"  # nothing listens there
    started = time.monotonic()
    with pytest.raises(MetastoreUnavailableError, match=uri) as info:
        MetastoreClient(uri, connect_timeout_s=1).get_all_databases()
    assert time.monotonic() - started < 3
    assert info.value.uri == uri and "refused" in str(info.value).lower()


def test_silent_server_times_out_instead_of_hanging():
    # Accepts the TCP connection (backlog) but never answers: the call timeout must fire.
    with socket.socket() as silent:
        silent.bind(("127.0.0.1", 0))
        silent.listen(4)
        uri = f"thrift://127.0.0.1:{silent.getsockname()[1]}"
        started = time.monotonic()
        with pytest.raises(MetastoreUnavailableError, match=uri):
            MetastoreClient(uri, connect_timeout_s=1, call_timeout_s=0.5).get_all_databases()
        assert time.monotonic() - started < 3


def test_plain_pyspark_sees_table_created_through_client(embedded_metastore, metastore_client, tmp_path):
    import pyarrow as pa
    import pyarrow.parquet as pq
    from pyspark import SparkContext
    from pyspark.sql import SparkSession

    if SparkContext._active_spark_context is not None:
        pytest.skip("another SparkContext is active in this process; Hive settings are static")
    metastore_client.create_database("spark_db", location=(tmp_path / "spark_db").as_uri())
    table = external_table("spark_db", "events", tmp_path / "events")
    metastore_client.create_table(table)
    for dt, ids in (("d1", [1, 2]), ("d2", [3])):
        (tmp_path / "events" / f"dt={dt}").mkdir(parents=True)
        rows = pa.table({"id": pa.array(ids, pa.int32()), "name": [f"n{i}" for i in ids]})
        pq.write_table(rows, tmp_path / "events" / f"dt={dt}" / "part-0.parquet")
    metastore_client.add_partitions([partition(table, "d1"), partition(table, "d2")])

    os.environ["PYSPARK_PYTHON"] = os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable
    conf = {"spark.sql.catalogImplementation": "hive",
            "spark.hadoop.hive.metastore.uris": embedded_metastore.uri,
            "spark.sql.warehouse.dir": str(tmp_path / "spark-warehouse"),
            "spark.ui.enabled": "false", "spark.ui.showConsoleProgress": "false",
            "spark.sql.shuffle.partitions": "1", "spark.driver.memory": "1g"}
    launches_jvm = SparkContext._gateway is None
    archive = class_data_sharing.spark_archive_key()
    if launches_jvm and archive is not None and archive.archive.exists():
        # The JVM launched here stays this process's (the session's Spark reuses it): start it as sqlext.session()
        # would, with the class data sharing archive mapped when there is one (never training one from here).
        # Only start-up changes; what Spark does with the catalog is the same.
        options = class_data_sharing.java_options(archive, [])
        if options:
            conf["spark.driver.extraJavaOptions"] = options
    builder = SparkSession.builder.master("local[1]").appName("catalog-hms-test")
    for key, value in conf.items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    try:
        spark.sparkContext.setLogLevel("ERROR")
        assert [r.tableName for r in spark.sql("SHOW TABLES IN spark_db").collect()] == ["events"]
        assert [r[0] for r in spark.sql("SHOW PARTITIONS spark_db.events").collect()] == ["dt=d1", "dt=d2"]
        rows = spark.sql("SELECT id, name, dt FROM spark_db.events WHERE dt = 'd1' ORDER BY id").collect()
        assert [tuple(r) for r in rows] == [(1, "n1", "d1"), (2, "n2", "d1")]
        assert spark.table("spark_db.events").count() == 3
    finally:
        jvm = spark.sparkContext._jvm
        spark.stop()
        if launches_jvm:
            # pyspark hands the builder's settings to the JVM it launches as system properties, which
            # later sessions in this process would inherit (e.g. a hive catalog on a stopped metastore).
            for key in [*conf, "spark.master", "spark.app.name"]:
                jvm.java.lang.System.clearProperty(key)


def test_killed_metastore_restarts_once_and_client_reconnects(embedded_metastore, monkeypatch):
    # the JVM that replaces it (started here or in the subprocess) on JIT tier 1 only: its start-up is what this
    # test waits for (about 13 -> 7 CPU-s, see quick_jvm), and the few catalog tests after it ask little of it
    monkeypatch.setenv("JAVA_TOOL_OPTIONS", quick_jvm_env()["JAVA_TOOL_OPTIONS"])
    uri, old_pid = embedded_metastore.uri, embedded_metastore.status()["pid"]
    warehouse = embedded_metastore.paths.warehouse
    connected = MetastoreClient(uri)
    connected.create_database("survivor")  # also opens the connection that the kill breaks
    probe = MetastoreClient(uri, connect_timeout_s=1)

    os.kill(old_pid, signal.SIGKILL)
    deadline = time.monotonic() + 10
    while pid_alive(old_pid) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not EmbeddedMetastore(warehouse).status()["running"]
    started = time.monotonic()
    with pytest.raises(MetastoreUnavailableError, match=uri):
        probe.get_all_databases()
    assert time.monotonic() - started < 3

    # Two processes revive it at once (a reviving client here, a plain start in a subprocess):
    # the lock lets one start the JVM, the other reuses it; the previous port is kept.
    other = start_in_subprocess(warehouse)
    reviving = MetastoreClient(uri, reviver=EmbeddedMetastore(warehouse).start)
    assert "survivor" in reviving.get_all_databases()
    out, err = other.communicate(timeout=120)
    assert other.returncode == 0, err
    assert out.strip() == uri
    new_pids = metastore_pids(embedded_metastore.paths.conf_dir)
    assert len(new_pids) == 1 and new_pids[0] != old_pid
    assert embedded_metastore.status()["pid"] == new_pids[0]

    # The client whose connection the kill broke reconnects transparently on its next call.
    assert "survivor" in connected.get_all_databases()
    assert "survivor" in probe.get_all_databases()
    connected.close()
    probe.close()
