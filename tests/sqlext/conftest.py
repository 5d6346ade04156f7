"""Fixtures for the SQL front end: the session-wide Spark with `spark.sql` routed through
`sqlext.sql.install`, a fresh warehouse per test, and a seed Hudi table written once per module and
copied (a directory copy, no Spark write) for every test that changes data.

Also the session's `sqlext serve` on the test session's metastore (`hive_server`, with Spark's own Thrift server
`spark_thrift_server` starting beside it): the thrift_server/ tests and test_newcomer_server share that one
server process (see thrift_server/conftest.py for the other servers)."""
from __future__ import annotations

import re
import shutil
import subprocess
import sys
import threading
import uuid

import pytest
from quick_jvm import quick_jvm_env

from thrift_server.support import (
    MAX_MESSAGE_SIZE,
    ServerProcess,
    client_env,
    read_lines,
    start_spark_thrift_server,
)

SEED_DDL = ("CREATE TABLE {name} (id INT, name STRING, price DOUBLE, ts BIGINT, dt STRING) USING hudi "
            "PARTITIONED BY (dt) TBLPROPERTIES (primaryKey = 'id', preCombineField = 'ts')")
SEED_ROWS = [(1, "a", 10.0, 1, "p1"), (2, "b", 20.0, 1, "p1"), (3, "c", 30.0, 1, "p2"),
             (4, "d", 40.0, 1, "p2"), (5, "e", 50.0, 1, "p3")]
COLUMNS = ("id", "name", "price", "ts", "dt")


def values_sql(rows) -> str:
    def lit(v):
        if v is None:
            return "NULL"
        return f"'{v}'" if isinstance(v, str) else repr(v)
    return ", ".join("(" + ", ".join(lit(v) for v in row) + ")" for row in rows)


@pytest.fixture
def warehouse(tmp_path):
    return tmp_path / "warehouse"


@pytest.fixture
def hudi_sql(spark, warehouse):
    """`spark` with the Hudi SQL front end on a fresh warehouse; the session's own front end is back after."""
    from sqlext.sql import WarehouseResolver, installed

    warehouse.mkdir(parents=True, exist_ok=True)
    with installed(spark, WarehouseResolver(str(warehouse))):
        yield spark


@pytest.fixture(scope="module")
def seed_table(spark, tmp_path_factory):
    """Base path of a partitioned Hudi table holding SEED_ROWS (one CREATE + one INSERT, once per module)."""
    from sqlext.sql import WarehouseResolver, installed

    wh = tmp_path_factory.mktemp("seed-warehouse")
    with installed(spark, WarehouseResolver(str(wh))):
        spark.sql(SEED_DDL.format(name="seed") + "; INSERT INTO seed VALUES " + values_sql(SEED_ROWS))
    return wh / "seed"


@pytest.fixture
def seeded(hudi_sql, seed_table, tmp_path):
    """make(name) -> a private copy of the seed table, registered as `name` in the test's warehouse."""
    def make(name: str = "t") -> str:
        path = tmp_path / f"{name}-{uuid.uuid4().hex[:6]}"
        shutil.copytree(seed_table, path)
        hudi_sql.sql(f"CREATE TABLE {name} USING hudi LOCATION '{path}'")
        return str(path)
    return make


@pytest.fixture
def hms_db(spark):
    """(catalog, db): the session's metastore resolver installed and a fresh database in the real metastore."""
    from sqlext.sql import install

    catalog = spark._sqlext_catalog
    install(spark, catalog.resolver)
    db = f"t_{uuid.uuid4().hex[:8]}"
    spark.sql(f"CREATE DATABASE {db}")
    return catalog, db


@pytest.fixture(scope="session")
def metastore_uri(spark) -> str:
    catalog = getattr(spark, "_sqlext_catalog", None)
    if catalog is None or not catalog.uri:
        pytest.skip("the test session has no metastore")
    return catalog.uri


@pytest.fixture(scope="session")
def hive_server(metastore_uri, tmp_path_factory):
    """`sqlext serve` as its own process (auth none: NOSASL and SASL PLAIN with any password, HTTP on /cliservice, a
    1 MiB maximum message size) on the test session's metastore; Spark's own Thrift server starts with it."""
    root = tmp_path_factory.mktemp("serve")
    sts = start_spark_thrift_server(metastore_uri, root)
    cmd = [sys.executable, "-m", "sqlext.cli", "-v", "serve", "--port", "0", "--http-port", "0", "--auth", "none",
           "--max-message-size", str(MAX_MESSAGE_SIZE), "--metastore", metastore_uri,
           "--warehouse", str(root / "warehouse"), "--master", "local[2]",
           "--conf", "spark.ui.enabled=false", "--conf", "spark.sql.shuffle.partitions=2",
           "--conf", "spark.driver.memory=1g"]
    log = open(root / "server.log", "w")
    # its JVM on JIT tier 1 only (quick_jvm): what it runs for the tests is its start-up and short statements
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=log, text=True, env=quick_jvm_env(client_env()),
                            cwd=root)
    lines: list[str] = []
    ready = threading.Event()
    threading.Thread(target=read_lines, args=(proc, lines, ready), daemon=True).start()
    ready.wait(240)
    found = next((re.search(r":(\d+) \(binary.*http://[^:]+:(\d+)/", line) for line in lines if "listening" in line),
                 None)
    if found is None:
        proc.kill()
        log.close()
        pytest.fail(f"sqlext serve did not start: {lines}\n{(root / 'server.log').read_text()[-5000:]}")
    server = ServerProcess(int(found.group(1)), int(found.group(2)), proc, lines)
    server.sts = sts
    server.log_path = root / "server.log"
    yield server
    proc.terminate()
    try:
        proc.wait(60)
    except subprocess.TimeoutExpired:
        proc.kill()
    log.close()
    sts.stop()


@pytest.fixture(scope="session")
def spark_thrift_server(hive_server) -> int:
    return hive_server.sts.wait_ready()
