"""MERGE / UPDATE / DELETE / INSERT through the SQL front end against DuckDB as an independent oracle:
the same statement over the same rows (DuckDB: plain tables) must leave the same final rows, report the
same number of affected rows, and fail in the same cases (then our table is unchanged)."""
from __future__ import annotations

import duckdb
import pytest

from conftest import COLUMNS, SEED_ROWS, values_sql
from hudi_oracle import arrow_rows, hudi_rs_read, rows
from sqlext.sql import HudiSqlError
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
    "on_not_the_key_moves_rows": ([(10, "b", 99.0, 3, "p3", "x"), (11, "zz", 1.0, 3, "p1", "x")], """
        MERGE INTO t USING src s ON t.name = s.name
        WHEN MATCHED THEN UPDATE SET dt = s.dt, price = s.price
        WHEN NOT MATCHED THEN INSERT (id, name, price, ts, dt) VALUES (s.id, s.name, s.price, s.ts, s.dt)"""),
    "update_where": (SOURCE, "UPDATE t SET price = price * 2, name = upper(name) WHERE dt = 'p2' OR id = 1"),
    "update_partition_column": (SOURCE, "UPDATE t SET dt = 'p9', ts = ts + 1 WHERE id IN (1, 3)"),
    "update_primary_key": (SOURCE, "UPDATE t SET id = id + 100 WHERE id = 2"),
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


def test_cardinality_violation_fails_in_both_and_writes_nothing(hudi_sql, seeded):
    source = [(1, "x", 1.0, 2, "p1", "a"), (1, "y", 2.0, 2, "p1", "b"), (9, "z", 3.0, 2, "p1", "c")]
    statement = "MERGE INTO t USING src s ON t.id = s.id WHEN MATCHED THEN UPDATE SET name = s.name " \
                "WHEN NOT MATCHED THEN INSERT (id, name, price, ts, dt) VALUES (s.id, s.name, s.price, s.ts, s.dt)"
    with pytest.raises(duckdb.Error, match="more than once"):
        _duck(statement, source)
    path = seeded("t")
    before = HoodieTableMetaClient.load(path).timeline.completed().timestamps()
    with pytest.raises(HudiSqlError, match="matches 2 source rows") as info:
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
