"""Issue 47, what a new user trips over in DML:
- MERGE takes every source Spark's MERGE takes (a table or view, a CTE, a parenthesized query, inline VALUES),
  and an inline table may name its columns (`AS s(id, ...)`); the results are DuckDB's for the same statement;
- an assignment that would change a record's identity is refused as Hudi refuses it (a record key field; a
  partition field unless the index is global and moves records), naming the table, the column and the position,
  and writing nothing."""
from __future__ import annotations

import os

import re

import pytest

from conftest import COLUMNS, SEED_DDL, SEED_ROWS, values_sql
from sqlext.sql import HoodieSqlError
from storage.table.meta_client import HoodieTableMetaClient
from test_sql_dml_oracle import SOURCE, SRC_SCHEMA, duck_seeded

SELECT_ROWS = "SELECT " + ", ".join(COLUMNS) + " FROM {}"


@pytest.fixture(autouse=True)
def _drop_src(spark):
    """The `src` view lives in the session Spark: later modules create their own."""
    yield
    spark.catalog.dropTempView("src")


def _table(sql, warehouse, props: str = "") -> str:
    """A seed table `t` created with extra TBLPROPERTIES (`, 'k' = 'v'`): its base path."""
    sql.sql(SEED_DDL.format(name="t").replace("preCombineField = 'ts'", "preCombineField = 'ts'" + props)
            + "; INSERT INTO t VALUES " + values_sql(SEED_ROWS))
    return str(warehouse / "t")


def _ours(sql, statement: str, source=SOURCE) -> tuple[list[tuple], int]:
    sql.createDataFrame(source, SRC_SCHEMA).createOrReplaceTempView("src")
    affected = sql.sql(statement).collect()[0]["num_affected_rows"]
    return sorted((tuple(r) for r in sql.sql(SELECT_ROWS.format("t")).collect()), key=repr), affected


def _duck(statement: str, source=SOURCE, setup: tuple[str, ...] = ()) -> tuple[list[tuple], int]:
    con = duck_seeded(source)
    for step in setup:
        con.execute(step)
    result = con.execute(statement).fetchall()
    return sorted(con.execute(SELECT_ROWS.format("t")).fetchall(), key=repr), (result[0][0] if result else 0)


def _same_as_duckdb(sql, statement: str, source=SOURCE, setup: tuple[str, ...] = ()) -> list[tuple]:
    want = _duck(statement, source, setup)
    got = _ours(sql, statement, source)
    assert got == want
    # the stored partition path follows the (possibly changed) partition column
    paths = {(r.id, r._hoodie_partition_path) for r in sql.sql("SELECT id, _hoodie_partition_path FROM t").collect()}
    assert paths == {(r[0], f"dt={r[4]}") for r in got[0]}
    return got[0]


def _state(sql, path: str, views=("t",)) -> tuple:
    """What a refused statement must leave as it was: the timeline (no commit, nothing pending) and the rows."""
    meta = HoodieTableMetaClient.load(path)
    rows = {v: sorted(tuple(r) for r in sql.sql(SELECT_ROWS.format(v)).collect()) for v in views}
    return meta.timeline.completed().timestamps(), [i.timestamp for i in meta.timeline.pending().instants], rows


# -- Item A: MERGE sources ---------------------------------------------------------------------------------------
UPSERT = "ON t.id = s.id WHEN MATCHED THEN UPDATE SET * WHEN NOT MATCHED THEN INSERT *"
INLINE = "VALUES (1, 'a2', 10.5, 5, 'p1'), (3, 'c2', 31.0, 5, 'p2'), (9, 'z', 1.5, 5, 'p3')"
SOURCES = {
    # the statement of the issue: inline VALUES naming its columns. Spark's own MERGE refuses a column list
    # (COLUMN_ALIASES_NOT_ALLOWED) and VALUES without parentheses; here they read as in a FROM clause
    "values_with_column_aliases": (f"MERGE INTO t USING ({INLINE}) AS s(id, name, price, ts, dt) {UPSERT}", ()),
    "values_without_parentheses": (f"MERGE INTO t USING {INLINE} AS s(id, name, price, ts, dt) {UPSERT}", ()),
    "cte": ("WITH s AS (SELECT id, name, price, ts, dt FROM src WHERE op <> 'del') "
            f"MERGE INTO t USING s {UPSERT}", ()),
    # CTEs see each other, take column aliases, and are visible in WHEN conditions as in Spark
    "cte_chain_in_conditions": ("WITH a(k, n) AS (SELECT id, name FROM src), b AS (SELECT k, n FROM a WHERE k < 5), "
                                "big AS (SELECT id FROM src WHERE price > 20) "
                                "MERGE INTO t USING b ON t.id = b.k "
                                "WHEN MATCHED AND b.k IN (SELECT id FROM big) THEN DELETE "
                                "WHEN MATCHED THEN UPDATE SET name = b.n", ()),
    "subquery": ("MERGE INTO t USING (SELECT id, upper(name) AS name, price, ts, dt FROM src WHERE op = 'upd') s "
                 "ON t.id = s.id WHEN MATCHED THEN UPDATE SET name = s.name, price = s.price", ()),
    "view_with_column_aliases": ("MERGE INTO t USING src AS s(k, n, p, o, d, op) ON t.id = s.k "
                                 "WHEN MATCHED THEN UPDATE SET name = s.n WHEN NOT MATCHED THEN INSERT "
                                 "(id, name, price, ts, dt) VALUES (s.k, s.n, s.p, s.o, s.d)", ()),
    # another Hudi table as the source, by name (DuckDB: a copy of the seed rows)
    "hudi_table": ("MERGE INTO t USING other o ON t.id = o.id + 3 WHEN MATCHED THEN UPDATE SET name = o.name",
                   ("CREATE TABLE other AS SELECT * FROM t",)),
}


@pytest.mark.parametrize("case", sorted(SOURCES))
def test_merge_source_same_as_duckdb(hudi_sql, seeded, case):
    statement, setup = SOURCES[case]
    seeded("t")
    if setup:
        seeded("other")
    rows = _same_as_duckdb(hudi_sql, statement, setup=setup)
    assert rows != sorted(SEED_ROWS, key=repr)  # every case changes something


def test_merge_values_source_without_alias_names_columns_as_spark(hudi_sql, seeded):
    """`(VALUES ...)` without a column list has Spark's column names col1, col2, ... (DuckDB counts from col0);
    without an alias its columns are referenced unqualified."""
    seeded("t")
    hudi_sql.sql("MERGE INTO t USING (VALUES (2, 'b2'), (4, 'd2')) s ON t.id = s.col1 "
                 "WHEN MATCHED THEN UPDATE SET name = s.col2")
    hudi_sql.sql("MERGE INTO t USING (VALUES (5)) ON t.id = col1 WHEN MATCHED THEN DELETE")
    got = sorted(tuple(r) for r in hudi_sql.sql(SELECT_ROWS.format("t")).collect())
    assert got == [(1, "a", 10.0, 1, "p1"), (2, "b2", 20.0, 1, "p1"), (3, "c", 30.0, 1, "p2"),
                   (4, "d2", 40.0, 1, "p2")]


def test_merge_cte_views_are_dropped_and_do_not_shadow_tables(hudi_sql, seeded):
    """A CTE named like an existing table reads the CTE (as in Spark); the temp views behind the CTEs do not
    outlive the statement."""
    seeded("t")
    seeded("other")
    views_before = {t.name for t in hudi_sql.catalog.listTables() if t.isTemporary}
    hudi_sql.sql("WITH other AS (SELECT 1 AS id, 'from-cte' AS name) "
                 "MERGE INTO t USING other o ON t.id = o.id WHEN MATCHED THEN UPDATE SET name = o.name")
    assert {r.id: r.name for r in hudi_sql.sql("SELECT id, name FROM t WHERE id <= 2").collect()} == {
        1: "from-cte", 2: "b"}
    assert {t.name for t in hudi_sql.catalog.listTables() if t.isTemporary} == views_before


SOURCE_ERRORS = [
    # (statement, message pattern, column, (line, col))
    ("MERGE INTO t USING nosuch s ON t.id = s.id WHEN MATCHED THEN DELETE", r"nosuch", None, (1, 20)),
    ("MERGE INTO t USING (SELECT idd FROM src) s ON t.id = s.id WHEN MATCHED THEN DELETE", r"idd", "idd", (1, 28)),
    ("MERGE INTO t\nUSING (VALUES (1, 'a')) AS s(id)\nON t.id = s.id WHEN MATCHED THEN DELETE",
     r"MERGE cannot read its source", None, (2, 16)),
    ("WITH s AS (SELECT idd FROM src) MERGE INTO t USING s ON t.id = s.id WHEN MATCHED THEN DELETE",
     r"MERGE cannot read the CTE 's'.*idd", "idd", (1, 19)),
    ("WITH s(a, b) AS (SELECT id FROM src) MERGE INTO t USING s ON t.id = s.a WHEN MATCHED THEN DELETE",
     r"the CTE 's' names 2 columns but its query returns 1", None, (1, 6)),
    ("MERGE INTO t USING (VALUES (1, 'a')) AS t(id, name) ON t.id = t.id WHEN MATCHED THEN DELETE",
     r"target and source are both called 't'", None, (1, 29)),
]


@pytest.mark.parametrize("statement, pattern, column, position", SOURCE_ERRORS, ids=[c[1][:30] for c in SOURCE_ERRORS])
def test_merge_source_errors_point_at_the_source(hudi_sql, seeded, statement, pattern, column, position):
    path = seeded("t")
    hudi_sql.createDataFrame(SOURCE, SRC_SCHEMA).createOrReplaceTempView("src")
    before = _state(hudi_sql, path)
    with pytest.raises(HoodieSqlError, match=pattern) as info:
        hudi_sql.sql(statement)
    err = info.value
    assert (err.line, err.col) == position, str(err)
    assert len(re.findall(r"\bline \d+", str(err))) == 1  # one position, the source's (not Spark's as well)
    if column:
        assert err.column == column
    assert _state(hudi_sql, path) == before


# -- Item B: assignments that would change a record's identity ----------------------------------------------------
@pytest.mark.parametrize("table_type", ["cow", "mor"])
def test_update_of_a_record_key_is_refused_and_writes_nothing(hudi_sql, warehouse, table_type):
    path = _table(hudi_sql, warehouse, f", type = '{table_type}'")
    hudi_sql.sql("UPDATE t SET price = price + 1 WHERE id = 3")  # a merge-on-read table: a log file too
    views = ("t", "t_ro") if table_type == "mor" else ("t",)
    before = _state(hudi_sql, path, views)
    with pytest.raises(HoodieSqlError, match=r"UPDATE cannot change the record key field 'id' of default\.t") as info:
        hudi_sql.sql("UPDATE t SET id = 7 WHERE id = 1")
    assert (info.value.table, info.value.column) == ("default.t", "id")
    assert (info.value.line, info.value.col) == (1, 14)
    assert _state(hudi_sql, path, views) == before


@pytest.mark.parametrize("props", ["", ", 'hoodie.index.type' = 'SIMPLE'",
                                   ", 'hoodie.index.type' = 'BUCKET', 'hoodie.bucket.index.num.buckets' = '2'",
                                   ", 'hoodie.index.type' = 'GLOBAL_BLOOM', "
                                   "'hoodie.bloom.index.update.partition.path' = 'false'"],
                         ids=["bloom", "simple", "bucket", "global_bloom_keeping_partitions"])
def test_update_of_a_partition_field_is_refused_unless_the_index_moves_records(hudi_sql, warehouse, props):
    path = _table(hudi_sql, warehouse, props)
    before = _state(hudi_sql, path)
    with pytest.raises(HoodieSqlError, match=r"cannot change the partition field 'dt' of default\.t") as info:
        hudi_sql.sql("UPDATE t SET price = 0,\n  dt = 'p9' WHERE id = 1")
    assert (info.value.table, info.value.column) == ("default.t", "dt")
    assert (info.value.line, info.value.col) == (2, 3)
    assert _state(hudi_sql, path) == before


@pytest.mark.parametrize("index", ["GLOBAL_BLOOM", "GLOBAL_SIMPLE"])
def test_update_of_a_partition_field_with_a_global_index_moves_the_row(hudi_sql, warehouse, index):
    path = _table(hudi_sql, warehouse, f", 'hoodie.index.type' = '{index}'")
    rows = _same_as_duckdb(hudi_sql, "UPDATE t SET dt = 'p9', ts = ts + 1 WHERE id IN (1, 3)")
    assert {r[0] for r in rows if r[4] == "p9"} == {1, 3}
    # moved, not rewritten in place: each row's file lies in its partition's directory
    stored = hudi_sql.sql("SELECT dt, _hoodie_partition_path, _hoodie_file_name FROM t").collect()
    assert all(r._hoodie_partition_path == f"dt={r.dt}" and os.path.exists(f"{path}/dt={r.dt}/{r._hoodie_file_name}")
               for r in stored)


MERGE_REFUSED = [
    # (statement, column, (line, col))
    ("MERGE INTO t USING src s ON t.id = s.id WHEN MATCHED THEN UPDATE SET id = s.id + 100", "id", (1, 70)),
    # the key ON does not match on
    ("MERGE INTO t USING src s ON t.name = s.name WHEN MATCHED THEN UPDATE SET name = s.name, id = s.id", "id",
     (1, 89)),
    ("MERGE INTO t USING src s ON t.id = s.id WHEN NOT MATCHED BY SOURCE THEN UPDATE SET id = t.id + 10", "id",
     (1, 84)),
    # a per-partition index: ON leaves the partition free, so SET dt = s.dt may move the row
    ("MERGE INTO t USING src s ON t.id = s.id WHEN MATCHED THEN UPDATE SET price = s.price, dt = s.dt", "dt",
     (1, 87)),
]


@pytest.mark.parametrize("statement, column, position", MERGE_REFUSED,
                         ids=[f"{c[1]}-{i}" for i, c in enumerate(MERGE_REFUSED)])
def test_merge_update_changing_a_record_identity_is_refused(hudi_sql, seeded, statement, column, position):
    path = seeded("t")
    hudi_sql.createDataFrame(SOURCE, SRC_SCHEMA).createOrReplaceTempView("src")
    before = _state(hudi_sql, path)
    kind = "record key" if column == "id" else "partition"
    with pytest.raises(HoodieSqlError, match=rf"MERGE cannot change the {kind} field '{column}' of default\.t") as info:
        hudi_sql.sql(statement)
    assert (info.value.table, info.value.column) == ("default.t", column)
    assert (info.value.line, info.value.col) == position, str(info.value)
    assert _state(hudi_sql, path) == before


MERGE_ALLOWED = {
    # the key set to the source key ON equates it with (or to itself) changes nothing
    "key_from_on": "MERGE INTO t USING src s ON t.id = s.id WHEN MATCHED THEN UPDATE SET id = s.id, name = s.name "
                   "WHEN NOT MATCHED BY SOURCE THEN UPDATE SET id = t.id, ts = t.ts + 1",
    "key_and_partition_from_on": "MERGE INTO t USING src s ON s.id = t.id AND t.dt = s.dt "
                                 "WHEN MATCHED THEN UPDATE SET dt = s.dt, id = s.id, price = s.price",
    # UPDATE SET * upserts the source row: id 4 moves from p2 to p3 (delete + insert in one commit)
    "set_star_moves_partition": "MERGE INTO t USING (SELECT id, name, price, ts, 'p3' AS dt FROM src) s "
                                f"{UPSERT}",
}


@pytest.mark.parametrize("case", sorted(MERGE_ALLOWED))
def test_merge_update_keeping_the_identity_is_allowed(hudi_sql, seeded, case):
    seeded("t")
    rows = _same_as_duckdb(hudi_sql, MERGE_ALLOWED[case])
    assert rows != sorted(SEED_ROWS, key=repr)


@pytest.mark.parametrize("statement", [
    "MERGE INTO t USING src s ON t.id = s.id WHEN MATCHED THEN UPDATE SET price = s.price, dt = s.dt",
    # ON not on the key: the rows whose name matches move to the source's partition
    "MERGE INTO t USING src s ON t.name = s.name WHEN MATCHED THEN UPDATE SET dt = s.dt, price = s.price "
    "WHEN NOT MATCHED THEN INSERT (id, name, price, ts, dt) VALUES (s.id, s.name, s.price, s.ts, s.dt)",
], ids=["on_key", "on_not_the_key"])
def test_merge_update_of_a_partition_field_with_a_global_index_moves_rows(hudi_sql, warehouse, statement):
    _table(hudi_sql, warehouse, ", 'hoodie.index.type' = 'GLOBAL_SIMPLE'")
    source = [(1, "b", 5.0, 2, "p3", "x"), (4, "d", 1.0, 2, "p1", "x"), (11, "yy", 2.0, 2, "p4", "x")]
    rows = _same_as_duckdb(hudi_sql, statement, source)
    seed_partition = {r[0]: r[4] for r in SEED_ROWS}
    assert {r[0] for r in rows if seed_partition.get(r[0], r[4]) != r[4]} >= {4}  # id 4 moved from p2 to p1


def test_a_path_that_is_no_hudi_table_is_named(hudi_sql, tmp_path):
    missing = tmp_path / "not-a-table"
    statement = f"SELECT * FROM hudi.`{missing}`"
    with pytest.raises(HoodieSqlError, match=f"no Hudi table at {re.escape(str(missing))}: it has no .hoodie") as info:
        hudi_sql.sql(statement)
    assert (info.value.line, info.value.col) == (1, 15)


def test_insert_in_natural_order_after_add_columns_says_partition_columns_come_last(hudi_sql, warehouse):
    """The user's steps: ADD COLUMNS, then INSERT with the new column's value last. The table's order keeps the
    partition column last, so the value lands in the wrong column: the error quotes the value once and says so."""
    path = _table(hudi_sql, warehouse)
    hudi_sql.sql("ALTER TABLE t ADD COLUMNS (fare DOUBLE)")
    before = _state(hudi_sql, path)
    statement = "INSERT INTO t VALUES (9, 'z', 1.5, 2, 'p1', 3.5)"
    with pytest.raises(HoodieSqlError) as info:
        hudi_sql.sql(statement)
    message = str(info.value)
    assert "cannot write a string value into column 'fare' double of default.t: 'p1' (" in message
    assert "''" not in message  # the value's quotes once, not garbled
    assert "table's column order: id, name, price, ts, fare, dt; partition columns (dt) come last" in message
    assert "INSERT INTO default.t (id, name, price, ts, fare, dt) ..." in message
    assert (info.value.line, info.value.col) == (1, 39) and info.value.column == "fare"  # at 'p1'
    assert _state(hudi_sql, path) == before
    # what the hint says works
    hudi_sql.sql("INSERT INTO t (id, name, price, ts, dt, fare) VALUES (9, 'z', 1.5, 2, 'p1', 3.5)")
    assert hudi_sql.sql("SELECT fare, dt FROM t WHERE id = 9").collect()[0] == (3.5, "p1")
