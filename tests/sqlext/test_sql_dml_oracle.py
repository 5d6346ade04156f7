"""MERGE / UPDATE / DELETE / INSERT through the SQL front end against DuckDB as an independent oracle:
the same statement over the same rows (DuckDB: plain tables) must leave the same final rows, report the
same number of affected rows, and fail in the same cases (then our table is unchanged)."""
from __future__ import annotations

import duckdb
import pytest

from conftest import COLUMNS, SEED_ROWS, values_sql
from hudi_oracle import arrow_rows, hudi_rs_read, rows
from sqlext.sql import HoodieSqlError
from storage.table.meta_client import HoodieTableMetaClient

SRC_SCHEMA = "id INT, name STRING, price DOUBLE, ts BIGINT, dt STRING, op STRING"
SRC_DUCK = "id INT, name VARCHAR, price DOUBLE, ts BIGINT, dt VARCHAR, op VARCHAR"
SOURCE = [(1, "a1", 5.0, 2, "p1", "upd"), (2, "b1", 25.0, 2, "p1", "del"), (4, "d1", 45.0, 2, "p2", "upd"),
          (6, "f1", 60.0, 2, "p3", "ins"), (7, "g1", 150.0, 2, "p4", "ins")]

CASES = {
    "conditional_clauses_two_deletes": (SOURCE, """
        MERGE INTO t USING src AS s ON t.id = s.id
        WHEN MATCHED AND s.op = 'del' THEN DELETE
        WHEN MATCHED AND t.price > 35 AND s.price > t.price THEN DELETE
        WHEN MATCHED AND s.price < t.price THEN UPDATE SET price = s.price, name = t.name || '+' || s.name
        WHEN MATCHED THEN UPDATE SET name = s.name
        WHEN NOT MATCHED BY TARGET AND s.price < 100 THEN INSERT (id, name, price, ts, dt)
            VALUES (s.id, s.name, s.price, s.ts, s.dt)
        WHEN NOT MATCHED THEN INSERT (id, name, dt) VALUES (s.id, 'pricey', s.dt)"""),
    "not_matched_by_source": (SOURCE[:2], """
        MERGE INTO t USING src s ON t.id = s.id
        WHEN MATCHED THEN UPDATE SET price = s.price, ts = s.ts
        WHEN NOT MATCHED BY SOURCE AND t.dt = 'p2' THEN DELETE
        WHEN NOT MATCHED BY SOURCE THEN UPDATE SET name = t.name || '-stale', ts = t.ts + 10"""),
    "null_source_keys": ([(None, "n1", 1.0, 2, "p1", "x"), (3, "c1", 3.0, 2, "p2", "x"), (None, "n2", 2.0, 2, "p9", "x")], """
        MERGE INTO t USING (SELECT * FROM src WHERE op = 'x') AS s ON t.id = s.id
        WHEN MATCHED THEN UPDATE SET name = s.name
        WHEN NOT MATCHED AND s.id IS NOT NULL THEN INSERT (id, name, price, ts, dt) VALUES (s.id, s.name, s.price, s.ts, s.dt)
        WHEN NOT MATCHED BY SOURCE AND t.id >= 4 THEN DELETE"""),
    "on_not_the_key": ([(10, "b", 99.0, 3, "p3", "x"), (11, "zz", 1.0, 3, "p1", "x")], """
        MERGE INTO t USING src s ON t.name = s.name
        WHEN MATCHED THEN UPDATE SET price = s.price
        WHEN NOT MATCHED THEN INSERT (id, name, price, ts, dt) VALUES (s.id, s.name, s.price, s.ts, s.dt)"""),
    "update_where": (SOURCE, "UPDATE t SET price = price * 2, name = upper(name) WHERE dt = 'p2' OR id = 1"),
    "delete_where": (SOURCE, "DELETE FROM t WHERE price >= 30 AND dt <> 'p3'"),
    "insert_values_and_select": (SOURCE, "INSERT INTO t SELECT id, name, price, ts, dt FROM src WHERE op = 'ins'"),
}


def _duck(statement: str, source) -> tuple[list[tuple], int]:
    con = duckdb.connect()
    con.execute("CREATE TABLE t (id INT, name VARCHAR, price DOUBLE, ts BIGINT, dt VARCHAR)")
    con.execute("INSERT INTO t VALUES " + values_sql(SEED_ROWS))
    con.execute(f"CREATE TABLE src ({SRC_DUCK})")
    if source:
        con.execute("INSERT INTO src VALUES " + values_sql(source))
    result = con.execute(statement).fetchall()
    final = con.execute("SELECT " + ", ".join(COLUMNS) + " FROM t").fetchall()
    return sorted(final, key=repr), (result[0][0] if result else 0)


def _ours(sql, statement: str, source) -> tuple[list[tuple], int]:
    sql.createDataFrame(source, SRC_SCHEMA).createOrReplaceTempView("src")
    affected = sql.sql(statement).collect()[0]["num_affected_rows"]
    final = [tuple(r) for r in sql.sql("SELECT " + ", ".join(COLUMNS) + " FROM t").collect()]
    return sorted(final, key=repr), affected


@pytest.mark.parametrize("case", sorted(CASES))
def test_same_final_rows_as_duckdb(hudi_sql, seeded, case):
    source, statement = CASES[case]
    path = seeded("t")
    want_rows, want_affected = _duck(statement, source)
    got_rows, got_affected = _ours(hudi_sql, statement, source)
    assert got_rows == want_rows
    assert got_affected == want_affected
    # the stored partition path follows the (possibly updated) partition column
    paths = {(r.id, r._hoodie_partition_path) for r in hudi_sql.sql("SELECT id, _hoodie_partition_path FROM t").collect()}
    assert paths == {(r[0], f"dt={r[4]}") for r in got_rows}
    if case == "conditional_clauses_two_deletes":
        # an independent reader sees the same table (delete markers, rewritten files, new partitions)
        theirs = arrow_rows(hudi_rs_read(path), list(COLUMNS))
        assert theirs == rows([dict(zip(COLUMNS, r)) for r in got_rows], list(COLUMNS))


@pytest.mark.parametrize("case", ["conditional_clauses_two_deletes", "update_where", "delete_where"])
def test_same_final_rows_as_duckdb_with_spark_holding_the_changes(hudi_sql, seeded, case):
    """A statement over a small table collects its change rows into the driver (then writes them in process);
    forced onto Spark they stay there (persisted, counted and written by Spark jobs): the same final rows."""
    source, statement = CASES[case]
    seeded("t")
    want_rows, want_affected = _duck(statement, source)
    hudi_sql.conf.set("hoodie.sqlext.engine", "SPARK")
    try:
        got_rows, got_affected = _ours(hudi_sql, statement, source)
    finally:
        hudi_sql.conf.unset("hoodie.sqlext.engine")
    assert (got_rows, got_affected) == (want_rows, want_affected)


def test_cardinality_violation_fails_and_writes_nothing(hudi_sql, seeded):
    """A target row matched by two source rows is the SQL standard's cardinality violation (Spark's and Delta's
    MERGE fail too). DuckDB is no oracle here: from 1.4 on it updates with one of the matches and goes on."""
    source = [(1, "x", 1.0, 2, "p1", "a"), (1, "y", 2.0, 2, "p1", "b"), (9, "z", 3.0, 2, "p1", "c")]
    statement = "MERGE INTO t USING src s ON t.id = s.id WHEN MATCHED THEN UPDATE SET name = s.name " \
                "WHEN NOT MATCHED THEN INSERT (id, name, price, ts, dt) VALUES (s.id, s.name, s.price, s.ts, s.dt)"
    path = seeded("t")
    before = HoodieTableMetaClient.load(path).timeline.completed().timestamps()
    with pytest.raises(HoodieSqlError, match="matches 2 source rows") as info:
        _ours(hudi_sql, statement, source)
    assert info.value.table == "default.t" and info.value.line == 1
    assert HoodieTableMetaClient.load(path).timeline.completed().timestamps() == before
    assert sorted(tuple(r) for r in hudi_sql.sql("SELECT id, name, price, ts, dt FROM t").collect()) == SEED_ROWS


def test_merge_with_set_star_and_subquery_source_of_another_hudi_table(hudi_sql, seeded):
    seeded("t")
    seeded("other")
    hudi_sql.sql("UPDATE other SET name = name || '!', ts = 7 WHERE id <= 2")
    result = hudi_sql.sql("""
        MERGE INTO t USING (SELECT id, name, price, ts, dt FROM other WHERE ts = 7) AS o ON t.id = o.id
        WHEN MATCHED THEN UPDATE SET *
        WHEN NOT MATCHED THEN INSERT *""").collect()[0]
    assert (result.num_updated_rows, result.num_inserted_rows) == (2, 0)
    got = {r.id: (r.name, r.ts) for r in hudi_sql.sql("SELECT id, name, ts FROM t WHERE id <= 3").collect()}
    assert got == {1: ("a!", 7), 2: ("b!", 7), 3: ("c", 1)}


# -- MERGE by record key: run as one upsert / delete (sqlext/sql/key_merge.py), same results as DuckDB ---------
STAR = "WHEN MATCHED THEN UPDATE SET * WHEN NOT MATCHED THEN INSERT *"
COLS_SRC = "(SELECT id, name, price, ts, dt FROM src)"
KEY_CASES = {
    # id 1 updated in place, id 3 moves p2 -> p1, id 6 inserted, id 2 re-inserted after its delete
    "upsert_moves_partition": ("DELETE FROM t WHERE id = 2",
                               [(1, "a1", 5.0, 2, "p1", "x"), (3, "c1", 3.0, 2, "p1", "x"), (6, "f1", 6.0, 2, "p3", "x"),
                                (2, "b2", 2.0, 2, "p2", "x")],
                               f"MERGE INTO t USING {COLS_SRC} s ON t.id = s.id {STAR}", True),
    # the same after an update in place (merge-on-read: a log without deletes)
    "upsert_moves_after_update": ("UPDATE t SET price = price + 1 WHERE id = 3",
                                  [(3, "c1", 3.0, 2, "p1", "x"), (5, "e1", 5.0, 2, "p3", "x"), (7, "g1", 7.0, 2, "p2", "x")],
                                  f"MERGE INTO t USING {COLS_SRC} s ON t.id = s.id {STAR}", True),
    # with the partition in ON, id 3 in p1 is another record than id 3 in p2
    "upsert_per_partition": ("UPDATE t SET price = price + 1 WHERE id = 4",
                             [(3, "c1", 3.0, 2, "p1", "x"), (4, "d1", 4.0, 2, "p2", "x")],
                             f"MERGE INTO t USING {COLS_SRC} s ON t.id = s.id AND s.dt = t.dt {STAR}", True),
    "delete_by_key": ("UPDATE t SET price = price + 1 WHERE id = 4",
                      [(4, "", 0.0, 0, "", ""), (5, "", 0.0, 0, "p1", ""), (9, "", 0.0, 0, "p1", "")],
                      "MERGE INTO t USING src s ON t.id = s.id WHEN MATCHED THEN DELETE", True),
    # DELETE naming its rows by key literals: a delete of those keys, no read of the table (key_merge.plan_key_delete)
    "delete_statement_key_in": (None, [(0, "", 0.0, 0, "", "")], "DELETE FROM t WHERE id IN (1, 4, 99)", True),
    "delete_statement_key_and_partition": (None, [(0, "", 0.0, 0, "", "")],
                                           "DELETE FROM t WHERE t.id = 3 AND dt = 'p2'", True),
    "delete_statement_key_elsewhere": (None, [(0, "", 0.0, 0, "", "")], "DELETE FROM t WHERE dt = 'p1' AND id = 3",
                                       True),
    "delete_statement_not_by_key": (None, [(0, "", 0.0, 0, "", "")], "DELETE FROM t WHERE id = 3 OR id = 4", False),
    # two new rows with one key in two partitions: distinct records of a per-partition table (general plan)
    "duplicate_new_keys": (None, [(8, "h1", 8.0, 2, "p1", "x"), (8, "h2", 8.0, 2, "p2", "x")],
                           f"MERGE INTO t USING {COLS_SRC} s ON t.id = s.id {STAR}", False),
}


def _make_table(sql, name: str, table_type: str, prelude: str | None) -> None:
    from conftest import SEED_DDL

    ddl = SEED_DDL.format(name=name).replace("preCombineField = 'ts'", f"preCombineField = 'ts', type = '{table_type}'")
    sql.sql(ddl + "; INSERT INTO " + name + " VALUES " + values_sql(SEED_ROWS))
    if prelude:
        sql.sql(prelude.replace(" t ", f" {name} "))


@pytest.mark.parametrize("table_type", ["cow", "mor"])
@pytest.mark.parametrize("case", sorted(KEY_CASES))
def test_merge_by_record_key_same_as_duckdb(hudi_sql, warehouse, caplog, table_type, case):
    prelude, source, statement, by_key = KEY_CASES[case]
    _make_table(hudi_sql, "t", table_type, prelude)
    con_statement = statement if prelude is None else prelude + "; " + statement
    want_rows, want_affected = _duck_script(con_statement, source)
    with caplog.at_level("INFO", logger="sqlext.sql.key_merge"):
        got_rows, got_affected = _ours(hudi_sql, statement, source)
    assert got_rows == want_rows
    assert got_affected == want_affected
    assert any("by record key" in r.getMessage() for r in caplog.records) == (
        by_key and not (table_type == "mor" and case == "upsert_moves_partition"))  # log deletes: general plan
    paths = {(r.id, r._hoodie_partition_path) for r in hudi_sql.sql("SELECT id, _hoodie_partition_path FROM t").collect()}
    assert paths == {(r[0], f"dt={r[4]}") for r in got_rows}
    theirs = arrow_rows(hudi_rs_read(str(warehouse / "t")), list(COLUMNS))
    assert theirs == rows([dict(zip(COLUMNS, r)) for r in got_rows], list(COLUMNS))


def duck_seeded(source) -> duckdb.DuckDBPyConnection:
    """DuckDB holding what the Hudi side starts from: the seed table `t` and the source table `src`."""
    con = duckdb.connect()
    con.execute("CREATE TABLE t (id INT, name VARCHAR, price DOUBLE, ts BIGINT, dt VARCHAR)")
    con.execute("INSERT INTO t VALUES " + values_sql(SEED_ROWS))
    con.execute(f"CREATE TABLE src ({SRC_DUCK})")
    con.execute("INSERT INTO src VALUES " + values_sql(source))
    return con


def _duck_script(script: str, source) -> tuple[list[tuple], int]:
    *before, last = [s for s in script.split("; ") if s.strip()]
    con = duck_seeded(source)
    for statement in before:
        con.execute(statement)
    result = con.execute(last).fetchall()
    final = con.execute("SELECT " + ", ".join(COLUMNS) + " FROM t").fetchall()
    return sorted(final, key=repr), (result[0][0] if result else 0)


@pytest.mark.parametrize("table_type", ["cow", "mor"])
def test_merge_by_record_key_cardinality_violation_writes_nothing(hudi_sql, warehouse, table_type):
    _make_table(hudi_sql, "t", table_type, None)
    source = [(1, "x", 1.0, 2, "p1", "a"), (1, "y", 2.0, 2, "p1", "b")]
    before = HoodieTableMetaClient.load(str(warehouse / "t")).timeline.completed().timestamps()
    with pytest.raises(HoodieSqlError, match="matches 2 source rows"):
        _ours(hudi_sql, f"MERGE INTO t USING {COLS_SRC} s ON t.id = s.id {STAR}", source)
    meta = HoodieTableMetaClient.load(str(warehouse / "t"))
    assert meta.timeline.completed().timestamps() == before
    assert not meta.timeline.pending().instants
    assert sorted(tuple(r) for r in hudi_sql.sql("SELECT id, name, price, ts, dt FROM t").collect()) == SEED_ROWS


def test_merge_by_record_key_that_matches_nothing_commits_nothing(hudi_sql, warehouse):
    _make_table(hudi_sql, "t", "cow", None)
    before = HoodieTableMetaClient.load(str(warehouse / "t")).timeline.completed().timestamps()
    got_rows, affected = _ours(hudi_sql, "MERGE INTO t USING src s ON t.id = s.id WHEN MATCHED THEN DELETE",
                               [(42, "x", 1.0, 2, "p1", "a")])
    assert affected == 0 and len(got_rows) == len(SEED_ROWS)
    assert HoodieTableMetaClient.load(str(warehouse / "t")).timeline.completed().timestamps() == before
