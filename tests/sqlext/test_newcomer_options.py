"""Issue 47, what a new user trips over in options and the catalog, with the user's own steps on the session's
real Hive metastore:
- a DataFrame write never re-points or replaces a catalog table silently: a write to a new path under the name
  of a table registered elsewhere fails before writing anything, naming the table and both locations, unless
  `sqlext.catalog.relocate.table=true`; a write to the registered path, or under a new name, registers as before;
- a misspelt key option (record key, ordering field, partition path, key generator, table type; their SQL names
  in TBLPROPERTIES) fails naming the key meant, with nothing written or registered; any other unknown option
  warns every time it is given, with the key it may mean."""
from __future__ import annotations

import logging
import uuid
from pathlib import Path

import pytest

from catalog import MetastoreClient, hive_sync
from catalog.hive_sync_config import CatalogTableConflictError
from catalog.hms_ddl import LAST_COMMIT_TIME_SYNC, local_path
from catalog.hoodie_catalog_table import SQL_MANAGED
from sqlext.sql import HoodieSqlError, TableName
from storage.config import HoodieConfig
from storage.exception import HoodieConfigError
from storage.table.meta_client import HoodieTableMetaClient
from storage.client.write_client import write_dataframe

RELOCATE = "sqlext.catalog.relocate.table"
SYNC = "hoodie.datasource.hive_sync.enable"


def _opts(name: str, **extra) -> dict[str, str]:
    return {"hoodie.table.name": name, "hoodie.datasource.write.recordkey.field": "id",
            "hoodie.datasource.write.precombine.field": "ts", **extra}


def _df(spark, rows=((1, "a", 1, "sf"),)):
    return spark.createDataFrame(list(rows), "id int, v string, ts long, city string")


def _save(spark, path, options, rows=((1, "a", 1, "sf"),)) -> None:
    _df(spark, rows).write.format("hudi").options(**options).mode("append").save(str(path))


def _commits(path) -> list[str]:
    return sorted(p.name for p in (Path(path) / ".hoodie").glob("*.commit"))


def _entries(client, name: str) -> list[str]:
    """The metastore tables of the default database named `name` or `name_ro` / `name_rt`."""
    return sorted(t for t in client.get_all_tables("default") if t in (name, f"{name}_ro", f"{name}_rt"))


def _warnings(caplog, needle: str) -> list[str]:
    return [r.getMessage() for r in caplog.records
            if r.name == "storage.config" and r.levelno == logging.WARNING and needle in r.getMessage()]


@pytest.fixture
def catalog(spark):
    """(session catalog, metastore client) with post-commit Hive sync on, as in a plain `sqlext.session()`."""
    from sqlext.sql import install

    session_catalog = spark._sqlext_catalog
    install(spark, session_catalog.resolver)
    spark.conf.set(SYNC, "true")
    with MetastoreClient(session_catalog.uri) as client:
        yield session_catalog, client
    spark.conf.set(SYNC, "false")


@pytest.fixture
def name(catalog):
    """A table name of the default database no other test uses; its entries are dropped after the test."""
    table = f"trips_{uuid.uuid4().hex[:8]}"
    yield table
    client = catalog[1]
    for entry in (table, f"{table}_ro", f"{table}_rt"):
        client.drop_table("default", entry, False)


# -- item 1: a write never re-points or replaces a catalog table -------------------------------------------------
def test_write_to_a_new_path_under_a_registered_name_fails_before_writing(spark, catalog, name, tmp_path):
    _, client = catalog
    first, other = tmp_path / "trips", tmp_path / "trips_v2"
    _save(spark, first, _opts(name))  # a name not registered yet: registered by the write's sync, as before
    entry = client.get_table("default", name)
    assert local_path(entry.sd.location) == str(first)
    synced = entry.parameters[LAST_COMMIT_TIME_SYNC]

    with pytest.raises(CatalogTableConflictError) as failed:
        _save(spark, other, _opts(name))
    message = str(failed.value)
    assert f"default.{name}" in message and str(first) in message and str(other) in message
    assert "nothing was written" in message and RELOCATE in message
    assert not other.exists(), "nothing may be written at the new path"
    entry = client.get_table("default", name)
    assert local_path(entry.sd.location) == str(first) and entry.parameters[LAST_COMMIT_TIME_SYNC] == synced

    # the registered path keeps working, and is synced
    _save(spark, first, _opts(name), rows=[(2, "b", 1, "nyc")])
    assert len(_commits(first)) == 2
    entry = client.get_table("default", name)
    assert local_path(entry.sd.location) == str(first) and entry.parameters[LAST_COMMIT_TIME_SYNC] > synced
    assert spark.table(f"default.{name}").count() == 2

    # the explicit opt-in re-registers the name at the new path
    _save(spark, other, _opts(name, **{RELOCATE: "true"}))
    assert local_path(client.get_table("default", name).sd.location) == str(other)
    assert spark.table(f"default.{name}").count() == 1


def test_merge_on_read_write_checks_its_ro_and_rt_tables(spark, catalog, name, tmp_path):
    _, client = catalog
    mor = {"hoodie.datasource.write.table.type": "MERGE_ON_READ"}
    first, other = tmp_path / "a", tmp_path / "b"
    _save(spark, first, _opts(name, **mor))
    assert _entries(client, name) == [f"{name}_ro", f"{name}_rt"]
    with pytest.raises(CatalogTableConflictError, match=f"table default.{name}_ro is registered at {first}"):
        _save(spark, other, _opts(name, **mor))
    assert not other.exists()
    assert {local_path(client.get_table("default", t).sd.location) for t in (f"{name}_ro", f"{name}_rt")} == \
        {str(first)}


def test_write_never_replaces_a_table_that_is_not_hudi(spark, catalog, name, tmp_path):
    _, client = catalog
    spark.sql(f"CREATE TABLE default.{name} (id INT, v STRING) USING parquet")
    before = client.get_table("default", name)
    with pytest.raises(CatalogTableConflictError, match=f"default.{name} is a parquet table, not a Hudi table"):
        _save(spark, tmp_path / "t", _opts(name, **{RELOCATE: "true"}))  # the opt-in never replaces
    assert not (tmp_path / "t").exists()
    after = client.get_table("default", name)
    assert (after.sd.location, after.sd.inputFormat, after.parameters.get("spark.sql.sources.provider")) == \
        (before.sd.location, before.sd.inputFormat, before.parameters.get("spark.sql.sources.provider"))


def test_storage_api_write_keeps_its_commit_but_its_sync_leaves_the_name_alone(spark, catalog, name, tmp_path):
    """A write not made through format("hudi") (no pre-check) still never re-points: its sync refuses, the
    failure is reported, the commit stands."""
    _, client = catalog
    first, other = tmp_path / "a", tmp_path / "b"
    _save(spark, first, _opts(name))
    write_dataframe(spark, _df(spark), str(other), HoodieConfig.of(_opts(name)))
    assert len(_commits(other)) == 1
    report = hive_sync.last_sync_report(str(other))
    assert not report.ok and "CatalogTableConflictError" in report.error and str(first) in report.error
    assert local_path(client.get_table("default", name).sd.location) == str(first)


def test_save_as_table_registers_only_the_name_saved_to(spark, catalog, tmp_path):
    session_catalog, client = catalog
    db = f"n_{uuid.uuid4().hex[:8]}"
    spark.sql(f"CREATE DATABASE {db}")
    stray = f"x_{uuid.uuid4().hex[:8]}"
    # hoodie.table.name differs from the name saved to: the sync used to register default.<hoodie.table.name> too
    options = _opts(stray, **{"hoodie.datasource.write.partitionpath.field": "city"})
    _df(spark).write.format("hudi").options(**options).saveAsTable(f"{db}.orders")
    assert client.get_table("default", stray) is None and client.get_all_tables(db) == ["orders"]
    entry = client.get_table(db, "orders")
    ref = session_catalog.resolver.location_for(TableName("orders", db))
    assert local_path(entry.sd.location) == ref.path and entry.parameters[SQL_MANAGED] == "true"
    assert [p.values for p in client.get_partitions(db, "orders")] == [["sf"]], "synced by the first commit"
    assert HoodieTableMetaClient.load(ref.path).table_config.database_name == db
    spark.sql(f"DROP TABLE {db}.orders")
    assert not Path(ref.path).exists(), "a managed table's data goes with DROP TABLE"


# -- item 2: misspelt key options are errors ----------------------------------------------------------------------
@pytest.mark.parametrize("typo, value, meant", [
    ("hoodie.datasource.write.partitionpath.feild", "city", "hoodie.datasource.write.partitionpath.field"),
    ("hoodie.datasource.write.precombine.feild", "ts", "hoodie.datasource.write.precombine.field"),
    ("hoodie.datasource.write.keygenerator.clas", "org.apache.hudi.keygen.SimpleKeyGenerator",
     "hoodie.datasource.write.keygenerator.class"),
    ("hoodie.datasource.write.table.Type", "MERGE_ON_READ", "hoodie.datasource.write.table.type"),
])
def test_dataframe_write_with_a_misspelt_key_option_fails_naming_the_key(spark, catalog, name, tmp_path, typo,
                                                                          value, meant):
    path = tmp_path / "trips"
    options = {"hoodie.table.name": name, "hoodie.datasource.write.recordkey.field": "id", typo: value}
    with pytest.raises(HoodieConfigError, match=rf"unknown option {typo}: did you mean {meant}\?"):
        _save(spark, path, options)
    assert not (path / ".hoodie").exists(), "nothing may be written"
    assert _entries(catalog[1], name) == [], "nothing may be registered"


def test_unknown_options_warn_every_time_with_the_key_meant(spark, tmp_path, caplog):
    caplog.set_level(logging.WARNING, logger="storage.config")
    path = tmp_path / "trips"
    typo, other = "hoodie.parquet.compresion.codec", "hoodie.cleaner.commits.retaind"
    _save(spark, path, _opts("warned", **{typo: "snappy"}))
    _save(spark, path, _opts("warned", **{typo: "snappy", other: "3"}), rows=[(2, "b", 1, "sf")])
    assert len(_warnings(caplog, typo)) == 2, "warned at every write, not once per process"
    assert all("did you mean hoodie.parquet.compression.codec?" in m for m in _warnings(caplog, typo))
    assert [m for m in _warnings(caplog, other) if "did you mean hoodie.cleaner.commits.retained?" in m]
    assert len(_commits(path)) == 2


@pytest.mark.parametrize("prop, meant", [
    ("preCombineFeild = 'ts'", "preCombineField"),
    ("precombine_field = 'ts'", "preCombineField"),
    ("tpye = 'mor'", "type"),
    ("'hoodie.datasource.write.partitionpath.feild' = 'city'", "hoodie.datasource.write.partitionpath.field"),
])
def test_create_table_with_a_misspelt_key_property_fails_naming_the_key(spark, hms_db, prop, meant):
    session_catalog, db = hms_db
    with pytest.raises(HoodieSqlError, match=rf"did you mean {meant}\?"):
        spark.sql(f"CREATE TABLE {db}.trips (id INT, v STRING, ts BIGINT, city STRING) USING hudi "
                  f"TBLPROPERTIES (primaryKey = 'id', {prop})")
    assert session_catalog.resolver.client.get_all_tables(db) == []
    path = Path(session_catalog.resolver.location_for(TableName("trips", db)).path)
    assert not (path / ".hoodie").exists(), "nothing may be written"


def test_table_properties_warn_every_time_and_alter_rejects_misspelt_keys(spark, hms_db, caplog):
    caplog.set_level(logging.WARNING, logger="storage.config")
    session_catalog, db = hms_db
    for table in ("t1", "t2"):
        spark.sql(f"CREATE TABLE {db}.{table} (id INT, ts BIGINT) USING hudi "
                  "TBLPROPERTIES (primaryKey = 'id', preCombineField = 'ts', payloadClas = 'x')")
    warned = _warnings(caplog, "payloadClas")
    assert len(warned) == 2 and all("did you mean payloadClass?" in m for m in warned)
    path = session_catalog.resolver.location_for(TableName("t1", db)).path
    before = HoodieTableMetaClient.load(path).table_config.props
    with pytest.raises(HoodieSqlError, match=r"preCombineFeild: did you mean preCombineField\?"):
        spark.sql(f"ALTER TABLE {db}.t1 SET TBLPROPERTIES ('preCombineFeild' = 'id')")
    assert HoodieTableMetaClient.load(path).table_config.props == before
    assert HoodieTableMetaClient.load(path).table_config.precombine_field == "ts"
