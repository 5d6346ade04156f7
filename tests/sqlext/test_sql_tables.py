"""CREATE TABLE / CTAS / INSERT OVERWRITE / DROP, queries with time travel, hudi_table_changes, pruning,
multi-statement strings, and what must pass through to Spark untouched."""
from __future__ import annotations

import json
import os

import pytest

from conftest import SEED_ROWS
from sqlext.sql import HoodieSqlError, WarehouseResolver
from storage.table.meta_client import HoodieTableMetaClient


def _rows(df):
    return sorted(tuple(r) for r in df.collect())


def test_create_table_writes_an_empty_table_on_disk(hudi_sql, warehouse, tmp_path):
    location = tmp_path / "ext" / "events"
    hudi_sql.sql("CREATE DATABASE IF NOT EXISTS sqlext_test_db")
    hudi_sql.sql(f"""
        CREATE TABLE IF NOT EXISTS sqlext_test_db.events (
            id INT, dt STRING, name STRING, amount DECIMAL(10, 2), ts BIGINT)
        USING hudi PARTITIONED BY (dt) LOCATION '{location}'
        TBLPROPERTIES (primaryKey = 'id', orderingFields = 'ts', type = 'cow', 'hoodie.index.type' = 'GLOBAL_SIMPLE')""")
    cfg = HoodieTableMetaClient.load(str(location)).table_config
    assert (cfg.record_key_fields, cfg.partition_fields, cfg.precombine_field) == (["id"], ["dt"], "ts")
    assert cfg.props["hoodie.index.type"] == "GLOBAL_SIMPLE" and cfg.database_name == "sqlext_test_db"
    assert [f["name"] for f in json.loads(cfg.create_schema)["fields"]] == ["id", "name", "amount", "ts", "dt"]
    df = hudi_sql.sql("SELECT * FROM sqlext_test_db.events")
    assert df.count() == 0 and df.columns[-5:] == ["id", "name", "amount", "ts", "dt"]
    registry = json.loads((warehouse / ".sqlext" / "tables.json").read_text())
    assert registry["tables"]["sqlext_test_db.events"]["path"] == str(location)
    # IF NOT EXISTS on an existing table is a no-op; without it, an error
    hudi_sql.sql("CREATE TABLE IF NOT EXISTS sqlext_test_db.events (id INT) USING hudi TBLPROPERTIES (primaryKey='id')")
    with pytest.raises(HoodieSqlError, match="already exists"):
        hudi_sql.sql("CREATE TABLE sqlext_test_db.events (id INT) USING hudi TBLPROPERTIES (primaryKey='id')")
    # a new resolver (a new session) finds it through the registry, and by path
    from sqlext.sql import install

    install(hudi_sql, WarehouseResolver(str(warehouse)))
    hudi_sql.sql("USE sqlext_test_db; INSERT INTO events VALUES (1, 'x', 1.5, 1, 'p'); USE default")
    assert _rows(hudi_sql.sql(f"SELECT id, dt, amount FROM hudi.`{location}`")) == [(1, "p", pytest.approx(1.5))]
    hudi_sql.sql("DROP TABLE sqlext_test_db.events")
    assert os.path.isdir(location)  # explicit LOCATION: DROP keeps the files, as Spark does
    with pytest.raises(Exception, match="events"):
        hudi_sql.sql("SELECT * FROM sqlext_test_db.events").collect()


def test_create_needs_a_primary_key_and_leaves_nothing_behind(hudi_sql, warehouse):
    with pytest.raises(HoodieSqlError, match="needs a primary key") as info:
        hudi_sql.sql("CREATE TABLE nokey (id INT, v STRING) USING hudi")
    assert info.value.table == "default.nokey"
    with pytest.raises(HoodieSqlError, match="primaryKey column 'idx'"):
        hudi_sql.sql("CREATE TABLE badkey (id INT) USING hudi TBLPROPERTIES (primaryKey = 'idx')")
    with pytest.raises(HoodieSqlError, match="database 'nodb' does not exist"):
        hudi_sql.sql("CREATE TABLE nodb.t (id INT) USING hudi TBLPROPERTIES (primaryKey = 'id')")
    assert not (warehouse / "nokey").exists() and not (warehouse / "badkey").exists()


def test_ctas_bulk_inserts_with_partition_columns_last(hudi_sql, warehouse):
    got = hudi_sql.sql("""
        CREATE TABLE c USING hudi PARTITIONED BY (dt) OPTIONS (primaryKey = 'id,name')
        AS SELECT * FROM VALUES ('p1', 1, 'a'), ('p2', 2, 'b'), ('p1', 3, 'c') AS v(dt, id, name)""").collect()[0]
    assert got.num_inserted_rows == 3
    df = hudi_sql.sql("SELECT * FROM c")
    assert df.columns[5:] == ["id", "name", "dt"]
    assert _rows(df.select("id", "name", "dt", "_hoodie_record_key")) == [
        (1, "a", "p1", "id:1,name:a"), (2, "b", "p2", "id:2,name:b"), (3, "c", "p1", "id:3,name:c")]
    meta = HoodieTableMetaClient.load(str(warehouse / "c"))
    instant = meta.timeline.completed().write_timeline().last()
    assert meta.active_timeline.commit_metadata(instant).operationType == "BULK_INSERT"


def test_insert_overwrite_static_dynamic_and_whole_table(hudi_sql, seeded):
    seeded("t")
    hudi_sql.sql("INSERT OVERWRITE t PARTITION (dt = 'p1') SELECT 100, 'x', 1.0, 9")
    assert _rows(hudi_sql.sql("SELECT id, dt FROM t")) == [(3, "p2"), (4, "p2"), (5, "p3"), (100, "p1")]
    hudi_sql.sql("INSERT OVERWRITE t PARTITION (dt) SELECT 300, 'z', 3.0, 9, 'p2'")
    assert _rows(hudi_sql.sql("SELECT id, dt FROM t")) == [(5, "p3"), (100, "p1"), (300, "p2")]
    hudi_sql.sql("INSERT OVERWRITE TABLE t VALUES (200, 'y', 2.0, 9, 'p7')")
    assert _rows(hudi_sql.sql("SELECT id, name, dt FROM t")) == [(200, "y", "p7")]
    # the history stays readable
    assert len(_rows(hudi_sql.sql("SELECT id FROM t VERSION AS OF 1"))) == len(SEED_ROWS)


def test_multi_statement_time_travel_and_table_changes(hudi_sql, warehouse):
    final = hudi_sql.sql("""
        CREATE TABLE tt (id INT, name STRING, ts BIGINT) USING hudi TBLPROPERTIES (primaryKey = 'id', preCombineField = 'ts');
        INSERT INTO tt VALUES (1, 'one', 1), (2, 'two', 1);  -- first commit
        UPDATE tt SET name = 'uno' WHERE id = 1;              /* second commit; */
        SELECT id, name FROM tt ORDER BY id""")
    assert [tuple(r) for r in final.collect()] == [(1, "uno"), (2, "two")]
    first, second = HoodieTableMetaClient.load(str(warehouse / "tt")).timeline.completed().timestamps()
    assert _rows(hudi_sql.sql("SELECT id, name FROM tt VERSION AS OF 1")) == [(1, "one"), (2, "two")]
    assert _rows(hudi_sql.sql(f"SELECT id, name FROM tt TIMESTAMP AS OF '{first}'")) == [(1, "one"), (2, "two")]
    readable = f"{first[:4]}-{first[4:6]}-{first[6:8]} {first[8:10]}:{first[10:12]}:{first[12:14]}.{first[14:]}"
    assert _rows(hudi_sql.sql(f"SELECT id, name FROM tt TIMESTAMP AS OF '{readable}'")) == [(1, "one"), (2, "two")]
    # two versions of the same table in one query, a CTE, a subquery and a non-Hudi table
    hudi_sql.createDataFrame([(1, "L1"), (2, "L2")], "id INT, label STRING").createOrReplaceTempView("labels")
    joined = hudi_sql.sql("""
        WITH now AS (SELECT id, name FROM tt)
        SELECT old.id, old.name AS before, now.name AS after, l.label
        FROM tt VERSION AS OF 1 AS old JOIN now ON old.id = now.id JOIN labels l ON l.id = now.id
        WHERE old.id IN (SELECT id FROM tt VERSION AS OF 2 WHERE name = 'uno')""")
    assert [tuple(r) for r in joined.collect()] == [(1, "one", "uno", "L1")]
    changes = hudi_sql.sql(f"SELECT id, name, _hoodie_commit_time FROM hudi_table_changes('tt', 'latest_state', '{first}')")
    assert [tuple(r) for r in changes.collect()] == [(1, "uno", second)]
    everything = hudi_sql.sql("SELECT id FROM hudi_table_changes('default.tt', 'latest_state', 'earliest')")
    assert _rows(everything) == [(1,), (2,)]
    with pytest.raises(HoodieSqlError, match=r"VERSION AS OF 3: table default.tt has 2 completed commits") as info:
        hudi_sql.sql("SELECT 1;\nSELECT * FROM tt VERSION AS OF 3")
    assert (info.value.line, info.value.col) == (2, 32)


def test_partition_predicates_prune_files(hudi_sql, seeded):
    path = seeded("t")
    files = hudi_sql.sql("SELECT id FROM t WHERE dt = 'p2' AND id > 0").inputFiles()
    assert files and all("/dt=p2/" in f for f in files)
    files = hudi_sql.sql(f"SELECT id FROM hudi.`{path}` AS x WHERE x.dt IN ('p1', 'p3')").inputFiles()
    assert {f.split("/")[-2] for f in files} == {"dt=p1", "dt=p3"}
    assert _rows(hudi_sql.sql("SELECT id FROM t WHERE dt = 'p2' OR id = 1")) == [(1,), (3,), (4,)]
    # DESCRIBE and EXPLAIN see the same relation
    assert "price" in [r.col_name for r in hudi_sql.sql("DESCRIBE t").collect()]
    plan = hudi_sql.sql("EXPLAIN SELECT id FROM t WHERE dt = 'p2'").collect()[0][0]
    assert "Physical Plan" in plan and "EqualTo(dt,p2)" in plan


def test_non_hudi_statements_pass_through_unchanged(hudi_sql):
    assert "sql" in vars(hudi_sql) and type(hudi_sql).sql is not hudi_sql.sql  # instance attribute only
    assert hudi_sql.sql("SELECT 1 AS x").collect()[0].x == 1
    assert hudi_sql.sql("SELECT :v AS v", args={"v": 7}).collect()[0].v == 7
    assert hudi_sql.sql("SHOW DATABASES").count() >= 1
    assert hudi_sql.sql("SELECT 1 AS x; SELECT 2 AS y").collect()[0].y == 2


def test_temp_views_shadow_hudi_tables_as_in_spark(hudi_sql, seeded):
    seeded("t")
    hudi_sql.createDataFrame([(42,)], "id INT").createOrReplaceTempView("t")
    try:
        assert _rows(hudi_sql.sql("SELECT id FROM t")) == [(42,)]
        assert len(_rows(hudi_sql.sql("SELECT id FROM default.t"))) == len(SEED_ROWS)
    finally:
        hudi_sql.catalog.dropTempView("t")
