"""UPDATE, DELETE and a general MERGE read the target once: each changed row goes to the write with the location
its stored row was read from (`sqlext.sql.changes.stored_location`), so the write looks no key up again.

Copy-on-write tables are read by Spark's own Parquet scan, whose bytes Hadoop's file-system statistics count; the
index is SIMPLE, whose lookup is a Spark scan of the stored keys, so a second look at the table would show there.
Merge-on-read rows come from file slices with logs (read in Python): there the test checks that rows read from
logs are placed in their file group (rows and file groups as expected, hudi-rs agreeing)."""
from __future__ import annotations

import pytest

from hudi_oracle import arrow_rows, hudi_rs_read, rows
from storage.table.fs_view import FileSystemView
from storage.table.meta_client import HoodieTableMetaClient

COLS = ["id", "name", "price", "ts", "dt"]
ROWS = 4000


def _bytes_read(spark) -> int:
    stats = spark._jvm.org.apache.hadoop.fs.FileSystem.getAllStatistics()
    return sum(s.getBytesRead() for s in stats if s.getScheme() == "file")


def _measured(spark, sql: str) -> int:
    before = _bytes_read(spark)
    spark.sql(sql).collect()
    return _bytes_read(spark) - before


def _rows(spark, table: str) -> list[tuple]:
    return sorted(tuple(r) for r in spark.sql(f"SELECT {', '.join(COLS)} FROM {table}").collect())


def _create(spark, name: str, table_type: str) -> None:
    spark.sql(f"CREATE TABLE {name} (id INT, name STRING, price DOUBLE, ts BIGINT, dt STRING) USING hudi "
              f"PARTITIONED BY (dt) TBLPROPERTIES (primaryKey = 'id', preCombineField = 'ts', type = '{table_type}')")
    spark.range(ROWS).selectExpr("CAST(id AS INT) id", "concat('n', id) name", "CAST(id AS DOUBLE) price",
                                 "1L ts", "concat('p', id % 4) dt").createOrReplaceTempView("seed_rows")
    spark.sql(f"INSERT INTO {name} SELECT * FROM seed_rows")


@pytest.fixture
def simple_index(hudi_sql):
    hudi_sql.conf.set("hoodie.index.type", "SIMPLE")
    yield hudi_sql
    hudi_sql.conf.unset("hoodie.index.type")


def test_cow_update_delete_and_general_merge_scan_the_target_once(simple_index):
    spark = simple_index
    _create(spark, "t", "cow")
    expected = {r[0]: list(r) for r in _rows(spark, "t")}
    one_scan = _measured(spark, "SELECT * FROM t")
    assert one_scan > 0, "Hadoop's statistics count no bytes of Spark's scan: the measure below would be void"

    # a general MERGE (conditions on its clauses): an update, a delete, and inserts of new keys
    merge = _measured(spark, """
        MERGE INTO t USING (SELECT id, 'm' name, price, 2L ts, dt FROM seed_rows WHERE id < 40
                            UNION ALL SELECT id + 100000, 'new', 1.0, 2L, dt FROM seed_rows WHERE id < 8) s
        ON t.id = s.id
        WHEN MATCHED AND t.price < 20 THEN UPDATE SET name = s.name, ts = s.ts
        WHEN MATCHED AND t.price >= 30 THEN DELETE
        WHEN NOT MATCHED AND s.name = 'new' THEN INSERT *""")
    for i in range(40):
        if i < 20:
            expected[i][1], expected[i][3] = "m", 2
        elif i >= 30:
            del expected[i]
    for i in range(8):
        expected[i + 100000] = [i + 100000, "new", 1.0, 2, f"p{i % 4}"]
    assert _rows(spark, "t") == sorted(tuple(r) for r in expected.values())
    # one scan of the target (the MERGE's join); the write adds no key lookup of its own
    assert merge <= one_scan * 1.1, f"MERGE read {merge} bytes; one scan of the table reads {one_scan}"

    update = _measured(spark, "UPDATE t SET name = 'u' WHERE price BETWEEN 100 AND 120")
    delete = _measured(spark, "DELETE FROM t WHERE price BETWEEN 200 AND 210")
    for i in range(100, 121):
        expected[i][1] = "u"
    for i in range(200, 211):
        del expected[i]
    assert _rows(spark, "t") == sorted(tuple(r) for r in expected.values())
    assert update <= one_scan * 1.1, f"UPDATE read {update} bytes; one scan of the table reads {one_scan}"
    assert delete <= one_scan * 1.1, f"DELETE read {delete} bytes; one scan of the table reads {one_scan}"
    assert [c for c in spark.table("t").columns if not c.startswith("_hoodie")] == COLS, \
        "the locations that ride along with the batch became columns of the table"


def test_mor_rows_read_from_logs_are_updated_in_their_file_group(hudi_sql, warehouse):
    spark = hudi_sql
    _create(spark, "m", "mor")
    path = str(warehouse / "m")
    groups = {g.file_group_id for g in FileSystemView(HoodieTableMetaClient.load(path)).file_groups()}
    expected = {r[0]: list(r) for r in _rows(spark, "m")}
    # the first UPDATE writes logs; the second reads those rows from the logs (their _hoodie_file_name is not a
    # base file's name) and must place them in the same file groups
    spark.sql("UPDATE m SET ts = 2, name = 'u1' WHERE id < 50")
    spark.sql("UPDATE m SET ts = 3, name = 'u2' WHERE id < 30")
    spark.sql("""MERGE INTO m USING (SELECT id, 'm' name, price, 4L ts, dt FROM seed_rows WHERE id < 60) s
                 ON m.id = s.id
                 WHEN MATCHED AND m.name = 'u2' THEN DELETE
                 WHEN MATCHED AND m.price < 55 THEN UPDATE SET name = s.name, ts = s.ts""")
    spark.sql("DELETE FROM m WHERE id BETWEEN 50 AND 52")
    for i in range(60):
        if i < 30 or 50 <= i <= 52:
            del expected[i]
        elif i < 55:
            expected[i][1], expected[i][3] = "m", 4
    want = sorted(tuple(r) for r in expected.values())
    assert _rows(spark, "m") == want
    assert arrow_rows(hudi_rs_read(path), COLS) == rows([dict(zip(COLS, r)) for r in want], COLS)
    after = {g.file_group_id for g in FileSystemView(HoodieTableMetaClient.load(path)).file_groups()}
    assert after == groups, "an update was written to a new file group instead of its stored one"
