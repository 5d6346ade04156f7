"""ALTER TABLE (ADD COLUMNS, SET/UNSET TBLPROPERTIES, RENAME TO, DROP PARTITION), TRUNCATE TABLE, SHOW
PARTITIONS / CREATE TABLE / TBLPROPERTIES / TABLES and DESCRIBE on Hudi tables; contents checked with hudi-rs,
metastore entries with a second metastore client."""
from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from hudi_oracle import arrow_rows, hudi_rs_read, spark_rows  # noqa: E402

from conftest import SEED_ROWS
from sqlext.sql import HoodieSqlError
from storage.table.meta_client import HoodieTableMetaClient


def _props(path) -> dict:
    return HoodieTableMetaClient.load(str(path)).table_config.props


def _instants(path) -> list[str]:
    return sorted(p.name for p in (Path(path) / ".hoodie").iterdir() if p.is_file())


def test_add_columns_is_read_by_hudi_rs(hudi_sql, seeded):
    path = seeded("t")
    hudi_sql.sql("ALTER TABLE t ADD COLUMNS (qty INT COMMENT 'how many', note STRING)")
    df = hudi_sql.sql("SELECT * FROM t")
    assert df.columns[5:] == ["id", "name", "price", "ts", "qty", "note", "dt"]  # new columns before partition
    assert {(r.qty, r.note) for r in df.collect()} == {(None, None)}
    rs = hudi_rs_read(path)
    assert {"qty", "note"} <= set(rs.column_names)
    hudi_sql.sql("INSERT INTO t VALUES (6, 'f', 60.0, 1, 7, 'new', 'p1')")
    hudi_sql.sql("UPDATE t SET qty = 1 WHERE id = 1")
    expected = [dict(zip(("id", "name", "price", "ts", "dt"), r), qty=None, note=None) for r in SEED_ROWS]
    expected[0]["qty"] = 1
    expected.append(dict(id=6, name="f", price=60.0, ts=1, dt="p1", qty=7, note="new"))
    cols = ["id", "name", "price", "ts", "qty", "note", "dt"]
    assert arrow_rows(hudi_rs_read(path), cols) == sorted(
        [tuple((c, e[c]) for c in cols) for e in expected], key=repr)
    assert spark_rows(hudi_sql.sql("SELECT * FROM t"), cols) == arrow_rows(hudi_rs_read(path), cols)
    before = _instants(path)
    for bad, message in [("ALTER TABLE t ADD COLUMNS (price DOUBLE)", "column 'price' already exists"),
                         ("ALTER TABLE t ADD COLUMNS (x INT NOT NULL)", "cannot be NOT NULL"),
                         ("ALTER TABLE t ALTER COLUMN price TYPE BIGINT", "not supported on Hudi tables")]:
        with pytest.raises(HoodieSqlError, match=message):
            hudi_sql.sql(bad)
    assert _instants(path) == before


def test_add_columns_on_merge_on_read(hudi_sql, warehouse):
    hudi_sql.sql("CREATE TABLE m (id INT, v STRING, ts BIGINT) USING hudi TBLPROPERTIES (primaryKey = 'id', "
                 "preCombineField = 'ts', type = 'mor'); INSERT INTO m VALUES (1, 'a', 1), (2, 'b', 1)")
    hudi_sql.sql("ALTER TABLE m ADD COLUMNS (extra STRING)")
    assert sorted(p.name.split(".")[1] for p in (warehouse / "m" / ".hoodie").glob("*.deltacommit")) == \
        ["deltacommit", "deltacommit"]  # the schema change is a deltacommit on merge-on-read
    hudi_sql.sql("UPDATE m SET extra = 'x', ts = 2 WHERE id = 1")  # a log block with the new schema
    assert list((warehouse / "m").glob(".*.log.*"))
    rows = sorted((r["id"], r["v"], r["extra"]) for r in hudi_rs_read(warehouse / "m").to_pylist())
    assert rows == [(1, "a", "x"), (2, "b", None)]
    assert sorted(tuple(r) for r in hudi_sql.sql("SELECT id, v, extra FROM m").collect()) == rows


def test_set_unset_tblproperties(hudi_sql, seeded):
    path = seeded("t")
    hudi_sql.sql("ALTER TABLE t SET TBLPROPERTIES ('hoodie.cleaner.commits.retained' = '5', "
                 "hoodie.keep.min.commits = '7')")
    props = _props(path)
    assert (props["hoodie.cleaner.commits.retained"], props["hoodie.keep.min.commits"]) == ("5", "7")
    shown = dict(tuple(r) for r in hudi_sql.sql("SHOW TBLPROPERTIES t").collect())
    assert shown["hoodie.cleaner.commits.retained"] == "5" and shown["primaryKey"] == "id"
    assert [tuple(r) for r in hudi_sql.sql("SHOW TBLPROPERTIES t ('hoodie.keep.min.commits')").collect()] == \
        [("hoodie.keep.min.commits", "7")]
    hudi_sql.sql("ALTER TABLE t UNSET TBLPROPERTIES ('hoodie.keep.min.commits')")
    assert "hoodie.keep.min.commits" not in _props(path)
    with pytest.raises(HoodieSqlError, match="has no property 'hoodie.keep.min.commits'"):
        hudi_sql.sql("ALTER TABLE t UNSET TBLPROPERTIES ('hoodie.keep.min.commits')")
    hudi_sql.sql("ALTER TABLE t UNSET TBLPROPERTIES IF EXISTS ('hoodie.keep.min.commits')")
    before = _props(path)
    for bad in ("ALTER TABLE t SET TBLPROPERTIES (primaryKey = 'name')",
                "ALTER TABLE t SET TBLPROPERTIES ('hoodie.table.type' = 'MERGE_ON_READ')",
                "ALTER TABLE t UNSET TBLPROPERTIES ('hoodie.table.precombine.field')"):
        with pytest.raises(HoodieSqlError, match="fixed when the table is created"):
            hudi_sql.sql(bad)
    with pytest.raises(HoodieSqlError, match="record merger com.acme.MyMerger is not supported"):
        hudi_sql.sql("ALTER TABLE t SET TBLPROPERTIES ('hoodie.record.merger.impls' = 'com.acme.MyMerger')")
    assert _props(path) == before


def test_truncate_and_show_partitions(hudi_sql, seeded):
    path = seeded("t")
    assert [r[0] for r in hudi_sql.sql("SHOW PARTITIONS t").collect()] == ["dt=p1", "dt=p2", "dt=p3"]
    assert [r[0] for r in hudi_sql.sql("SHOW PARTITIONS t PARTITION (dt = 'p2')").collect()] == ["dt=p2"]
    hudi_sql.sql("TRUNCATE TABLE t PARTITION (dt = 'p1')")
    assert sorted(r["id"] for r in hudi_rs_read(path).to_pylist()) == [3, 4, 5]
    assert [r[0] for r in hudi_sql.sql("SHOW PARTITIONS t").collect()] == ["dt=p2", "dt=p3"]
    hudi_sql.sql("ALTER TABLE t DROP PARTITION (dt = 'p3')")
    assert sorted(r["id"] for r in hudi_rs_read(path).to_pylist()) == [3, 4]
    before_truncate = sorted(p.name.split(".")[0] for p in (Path(path) / ".hoodie").glob("*.replacecommit"))[-1]
    hudi_sql.sql("TRUNCATE TABLE t")
    assert hudi_rs_read(path).num_rows == 0 and hudi_sql.sql("SELECT * FROM t").count() == 0
    replaces = list((Path(path) / ".hoodie").glob("*.replacecommit"))
    assert len(replaces) == 3
    # time travel to before the truncate still reads the rows
    assert sorted(r["id"] for r in hudi_rs_read(path, as_of=before_truncate).to_pylist()) == [3, 4]
    hudi_sql.sql("INSERT INTO t VALUES (8, 'h', 8.0, 1, 'p1')")
    assert [r["id"] for r in hudi_rs_read(path).to_pylist()] == [8]
    with pytest.raises(HoodieSqlError, match="'name' is not a partition column"):
        hudi_sql.sql("TRUNCATE TABLE t PARTITION (name = 'a')")


def test_show_create_table_recreates_the_table(hudi_sql, seeded, tmp_path):
    path = seeded("t")
    hudi_sql.sql("ALTER TABLE t SET TBLPROPERTIES ('hoodie.cleaner.commits.retained' = '4')")
    statement = hudi_sql.sql("SHOW CREATE TABLE t").collect()[0][0]
    assert statement.startswith("CREATE TABLE default.t (") and "USING hudi" in statement
    assert f"LOCATION '{path}'" in statement
    copy = tmp_path / "copy"
    clone = statement.replace("CREATE TABLE default.t", "CREATE TABLE t_copy", 1)
    hudi_sql.sql(clone.replace(f"LOCATION '{path}'", f"LOCATION '{copy}'"))
    original, cloned = HoodieTableMetaClient.load(path), HoodieTableMetaClient.load(str(copy))
    for attr in ("record_key_fields", "partition_fields", "precombine_field", "table_type",
                 "hive_style_partitioning"):
        assert getattr(cloned.table_config, attr) == getattr(original.table_config, attr), attr
    assert cloned.table_config.props["hoodie.cleaner.commits.retained"] == "4"
    assert [(f.name, f.dataType) for f in hudi_sql.sql("SELECT * FROM t_copy").schema.fields] == \
        [(f.name, f.dataType) for f in hudi_sql.sql("SELECT * FROM t").schema.fields]


def test_describe(hudi_sql, seeded):
    path = seeded("t")
    rows = [tuple(r) for r in hudi_sql.sql("DESCRIBE t").collect()]
    names = [r[0] for r in rows]
    assert names[:10] == ["_hoodie_commit_time", "_hoodie_commit_seqno", "_hoodie_record_key",
                          "_hoodie_partition_path", "_hoodie_file_name", "id", "name", "price", "ts", "dt"]
    assert ("price", "double", None) in rows and ("ts", "bigint", None) in rows
    assert names[10:] == ["# Partition Information", "# col_name", "dt"]
    extended = dict((r[0], r[1]) for r in hudi_sql.sql("DESCRIBE EXTENDED t").collect())
    assert (extended["Location"], extended["Provider"], extended["Table"]) == (path, "hudi", "t")
    assert extended["Record Key"] == "id" and extended["Table Type"] == "COPY_ON_WRITE"
    by_path = [r[0] for r in hudi_sql.sql(f"DESC hudi.`{path}`").collect()]
    assert by_path == names


def test_rename_without_metastore(hudi_sql, seeded):
    path = seeded("t")
    hudi_sql.sql("ALTER TABLE t RENAME TO t2")
    assert _props(path)["hoodie.table.name"] == "t2"
    assert hudi_sql.sql("SELECT * FROM t2").count() == len(SEED_ROWS)
    with pytest.raises(Exception, match="t"):
        hudi_sql.sql("SELECT * FROM t").collect()
    seeded("t3")
    with pytest.raises(HoodieSqlError, match="already exists"):
        hudi_sql.sql("ALTER TABLE t2 RENAME TO t3")


def test_show_tables_without_metastore_lists_hudi_tables(hudi_sql, warehouse, tmp_path):
    hudi_sql.sql("CREATE TABLE managed_t (id INT, v STRING) USING hudi TBLPROPERTIES (primaryKey = 'id')")
    hudi_sql.sql(f"CREATE TABLE located_t (id INT) USING hudi LOCATION '{tmp_path / 'elsewhere'}' "
                 "TBLPROPERTIES (primaryKey = 'id')")
    hudi_sql.sql("CREATE DATABASE IF NOT EXISTS other_db")
    hudi_sql.sql("CREATE TABLE other_db.o (id INT) USING hudi TBLPROPERTIES (primaryKey = 'id')")
    hudi_sql.createDataFrame([(1,)], "x int").createOrReplaceTempView("a_view")
    try:
        listed = {(r.namespace, r.tableName, r.isTemporary) for r in hudi_sql.sql("SHOW TABLES").collect()}
        assert {("default", "managed_t", False), ("default", "located_t", False), ("", "a_view", True)} <= listed
        assert not any(name == "o" for _, name, _ in listed)
        # Spark lists temporary views in every database
        assert [r.tableName for r in hudi_sql.sql("SHOW TABLES IN other_db").collect() if not r.isTemporary] == ["o"]
        assert [r.tableName for r in hudi_sql.sql("SHOW TABLES LIKE 'man*|nothing'").collect()] == ["managed_t"]
        hudi_sql.sql("DROP TABLE managed_t")
        assert "managed_t" not in [r.tableName for r in hudi_sql.sql("SHOW TABLES").collect()]
    finally:
        hudi_sql.catalog.dropTempView("a_view")
        hudi_sql.sql("DROP TABLE IF EXISTS other_db.o")
        hudi_sql.sql("DROP DATABASE IF EXISTS other_db")


def test_alter_keeps_the_metastore_in_step(spark, hms_db):
    from catalog import MetastoreClient

    catalog, db = hms_db
    spark.sql(f"USE {db}")
    try:
        spark.sql("CREATE TABLE a (id INT, v STRING, dt STRING) USING hudi PARTITIONED BY (dt) "
                  "TBLPROPERTIES (primaryKey = 'id'); INSERT INTO a VALUES (1, 'x', 'p1')")
        assert "a" in [r.tableName for r in spark.sql("SHOW TABLES").collect()]  # Spark's SHOW TABLES
        spark.sql("ALTER TABLE a ADD COLUMNS (extra DOUBLE); ALTER TABLE a SET TBLPROPERTIES "
                  "('hoodie.cleaner.commits.retained' = '3')")
        with MetastoreClient(catalog.uri) as client:
            entry = client.get_table(db, "a")
            assert [c.name for c in entry.sd.cols][-3:] == ["id", "v", "extra"]
            assert entry.parameters["hoodie.cleaner.commits.retained"] == "3"
            spark.sql("ALTER TABLE a UNSET TBLPROPERTIES ('hoodie.cleaner.commits.retained')")
            assert "hoodie.cleaner.commits.retained" not in client.get_table(db, "a").parameters
            spark.sql(f"ALTER TABLE a RENAME TO {db}.b")
            assert client.get_table(db, "a") is None and client.get_table(db, "b") is not None
        path = spark.sql("DESCRIBE EXTENDED b").where("col_name = 'Location'").collect()[0][1]
        assert _props(path)["hoodie.table.name"] == "b"
        assert [tuple(r) for r in spark.sql("SELECT id, v, extra, dt FROM b").collect()] == [(1, "x", None, "p1")]
        # temporary views of other modules (isTemporary) are listed in every database
        assert sorted(r.tableName for r in spark.sql("SHOW TABLES").collect() if not r.isTemporary) == ["b"]
    finally:
        spark._sqlext_frontend.original_sql("USE default")
