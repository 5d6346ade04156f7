"""Persistent views over Hudi tables (sqlext/sql/view.py) on the test session's real metastore: CREATE VIEW,
CREATE OR REPLACE VIEW and DROP VIEW through `spark.sql` with the SQL front end; the stored view is read by a
session WITHOUT the front end (no temp views of ours exist there), sees later writes, joins a plain table,
pins time travel, and what a stored view cannot name fails with a clear error."""
from __future__ import annotations

import pytest

from sqlext.sql.errors import HoodieSqlError


@pytest.fixture
def hudi_and_plain(spark, hms_db):
    """(db, hudi table, plain parquet table): a partitioned Hudi table (one commit) and a parquet table."""
    _, db = hms_db
    spark.sql(f"CREATE TABLE {db}.trips (id INT, rider STRING, ts INT, city STRING) USING hudi "
              f"PARTITIONED BY (city) TBLPROPERTIES (primaryKey = 'id', preCombineField = 'ts')")
    spark.sql(f"INSERT INTO {db}.trips VALUES (1, 'ann', 1, 'sf'), (2, 'bob', 1, 'nyc')")
    spark.sql(f"CREATE TABLE {db}.riders (rider STRING, tier STRING) USING parquet")
    spark.sql(f"INSERT INTO {db}.riders VALUES ('ann', 'gold'), ('bob', 'basic'), ('cy', 'gold')")
    yield db, f"{db}.trips", f"{db}.riders"
    spark.sql(f"DROP DATABASE IF EXISTS {db} CASCADE")


def spark_alone(spark):
    """A session with Spark's own spark.sql (no front end, none of its temp views) and the `hudi` data source
    registered, as every sqlext session has it: the stored view text must resolve there on its own."""
    from sqlext.datasource import register

    plain = register(spark.newSession())
    assert not hasattr(plain, "_sqlext_frontend")
    return plain


def rows(df) -> list[tuple]:
    return sorted(tuple(r) for r in df.collect())


def test_view_joining_hudi_and_plain_tables_is_read_without_the_front_end(spark, hudi_and_plain):
    db, trips, riders = hudi_and_plain
    spark.sql(f"CREATE VIEW {db}.gold_trips AS SELECT t.id, t.rider, r.tier, t.city FROM {trips} t "
              f"JOIN {riders} r ON t.rider = r.rider WHERE r.tier = 'gold'")
    plain = spark_alone(spark)
    assert rows(plain.sql(f"SELECT * FROM {db}.gold_trips")) == [(1, "ann", "gold", "sf")]
    # snapshot semantics: a write after the view was made is what the next read sees
    spark.sql(f"INSERT INTO {trips} VALUES (3, 'cy', 1, 'sf')")
    spark.sql(f"UPDATE {trips} SET rider = 'cy' WHERE id = 2")
    assert rows(plain.sql(f"SELECT * FROM {db}.gold_trips")) == [(1, "ann", "gold", "sf"), (2, "cy", "gold", "nyc"),
                                                                  (3, "cy", "gold", "sf")]
    # through the front end too, in a new statement, and joined again with the Hudi table itself
    assert rows(spark.sql(f"SELECT v.id, t.ts FROM {db}.gold_trips v JOIN {trips} t ON v.id = t.id")) == \
        [(1, 1), (2, 1), (3, 1)]


def test_create_or_replace_pins_time_travel_and_drop_view_keeps_the_table(spark, hudi_and_plain):
    db, trips, _ = hudi_and_plain
    spark.sql(f"CREATE VIEW {db}.v AS SELECT id FROM {trips}")
    spark.sql(f"UPDATE {trips} SET rider = 'bo' WHERE id = 2")
    spark.sql(f"CREATE OR REPLACE VIEW {db}.v AS SELECT id, rider FROM {trips} VERSION AS OF 1")
    spark.sql(f"INSERT INTO {trips} VALUES (9, 'zed', 1, 'sf')")
    plain = spark_alone(spark)
    assert rows(plain.sql(f"SELECT * FROM {db}.v")) == [(1, "ann"), (2, "bob")]  # the first commit, as named
    assert "WITH ('path' = " in plain.sql(f"SHOW CREATE TABLE {db}.v").first()[0]
    spark.sql(f"DROP VIEW {db}.v")
    assert not spark.catalog.tableExists(f"{db}.v")
    assert rows(spark.sql(f"SELECT id, rider FROM {trips}")) == [(1, "ann"), (2, "bo"), (9, "zed")]
    spark.sql(f"DROP VIEW IF EXISTS {db}.v")  # nothing left to drop: no error


def test_what_a_stored_view_cannot_name_is_refused_clearly(spark, hudi_and_plain):
    db, trips, _ = hudi_and_plain
    location = {r[0]: r[1] for r in spark.sql(f"DESCRIBE TABLE EXTENDED {trips}").collect()}["Location"]
    path = location.removeprefix("file:")
    with pytest.raises(HoodieSqlError, match=r"cannot read the path-addressed table .*register it first"):
        spark.sql(f"CREATE VIEW {db}.by_path AS SELECT * FROM hudi.`{path}`")
    with pytest.raises(HoodieSqlError, match="cannot read hudi_table_changes"):
        spark.sql(f"CREATE VIEW {db}.changes AS SELECT * FROM hudi_table_changes('{trips}', 'latest_state', '0')")
    assert not spark.catalog.tableExists(f"{db}.by_path") and not spark.catalog.tableExists(f"{db}.changes")


def test_a_table_only_the_warehouse_resolver_knows_is_refused(hudi_sql, seeded):
    seeded("t")  # registered in the test's warehouse folder, not in Spark's catalog
    with pytest.raises(HoodieSqlError, match=r"cannot read default\.t: the table is not in Spark's catalog"):
        hudi_sql.sql("CREATE VIEW warehouse_only AS SELECT * FROM t")
