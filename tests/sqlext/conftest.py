"""Fixtures for the SQL front end: the session-wide Spark with `spark.sql` routed through
`sqlext.sql.install`, a fresh warehouse per test, and a seed Hudi table written once per module and
copied (a directory copy, no Spark write) for every test that changes data."""
from __future__ import annotations

import shutil
import uuid

import pytest

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
