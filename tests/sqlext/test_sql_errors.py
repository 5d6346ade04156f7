"""Bad SQL gets a clear error naming the statement's position and the table/column, and changes nothing."""
from __future__ import annotations

import pytest

from sqlext.sql import HoodieSqlError
from storage.table.meta_client import HoodieTableMetaClient
from test_sql_dml_oracle import SOURCE, SRC_SCHEMA

CASES = [
    # (statement, message pattern, column, (line, col) or None)
    ("UPDATE t SET nme = 'x'", r"column 'nme' does not exist in default\.t", "nme", (1, 14)),
    ("UPDATE t SET name = 'x'\nWHERE prize > 1", r"column 'prize' does not exist", "prize", (2, 7)),
    ("DELETE FROM t WHERE id", r"WHERE condition must be a boolean", None, (1, 21)),
    ("MERGE INTO t USING src s ON t.id = s.id WHEN MATCHED THEN UPDATE SET name = s.nme",
     r"column 'nme' does not exist in the source", "nme", (1, 77)),
    ("MERGE INTO t USING src s ON t.id = s.id WHEN MATCHED THEN UPDATE SET nme = s.name",
     r"column 'nme' does not exist in default\.t", "nme", (1, 70)),
    ("MERGE INTO t USING src s WHEN MATCHED THEN DELETE", r"MERGE needs an ON condition", None, None),
    ("MERGE INTO t USING src s ON t.id WHEN MATCHED THEN DELETE", r"ON condition must be a boolean", None, (1, 29)),
    ("MERGE INTO t USING src s ON t.id = s.id WHEN NOT MATCHED THEN INSERT (id) VALUES (t.id)",
     r"unknown table or alias 't'", "id", None),
    ("MERGE INTO t USING src s ON t.id = s.id WHEN MATCHED THEN UPDATE SET price = s.name",
     r"cannot write a string value into column 'price' double", "price", (1, 78)),
    ("UPDATE t SET price = 'abc'", r"cannot write a string value into column 'price'", "price", (1, 22)),
    ("INSERT INTO t VALUES ('x', 'n', 1.0, 1, 'p1')", r"cannot write a string value into column 'id' int", "id", (1, 23)),
    ("INSERT INTO t VALUES (1, 'n')", r"the data has 2 columns but 4 are expected|the data has 2 columns but 5", None, None),
    ("INSERT INTO t (id, nme) VALUES (1, 'n')", r"column 'nme' does not exist", "nme", (1, 20)),
    ("MERGE INTO t USING src s ON t.id = s.id WHEN MATCHED THEN UPDATE SET name = s.name WHEN MATCHED THEN DELETE "
     "WHEN MATCHED AND s.op = 'x' THEN DELETE", r"only the last WHEN MATCHED clause may omit", None, None),
    ("SELECT 1;\n\nUPDATE t SET\n  nme = 1", r"column 'nme'", "nme", (4, 3)),
    ("MERGE INTO t USING src s ON t.id = s.id WHEN MATCHED THEN", r"syntax error", None, None),
]


def _state(sql, path):
    commits = HoodieTableMetaClient.load(path).timeline.completed().timestamps()
    return commits, sorted(tuple(r) for r in sql.sql("SELECT id, name, price, ts, dt FROM t").collect())


@pytest.mark.parametrize("statement, pattern, column, position", CASES, ids=[c[1][:40] for c in CASES])
def test_bad_statement_is_rejected_clearly_and_changes_nothing(hudi_sql, seeded, statement, pattern, column, position):
    path = seeded("t")
    hudi_sql.createDataFrame(SOURCE, SRC_SCHEMA).createOrReplaceTempView("src")
    before = _state(hudi_sql, path)
    with pytest.raises(HoodieSqlError, match=pattern) as info:
        hudi_sql.sql(statement).collect()
    err = info.value
    if column:
        assert err.column == column
    if position:
        assert (err.line, err.col) == position, str(err)
    assert _state(hudi_sql, path) == before


def test_unknown_tables_are_named(hudi_sql, seeded):
    seeded("t")
    with pytest.raises(Exception, match="nosuch"):
        hudi_sql.sql("UPDATE nosuch SET a = 1")
    with pytest.raises(HoodieSqlError, match="nosuch"):
        hudi_sql.sql("SELECT * FROM t JOIN nosuch ON t.id = nosuch.id")
    with pytest.raises(HoodieSqlError, match="hudi_table_changes: table nope"):
        hudi_sql.sql("SELECT * FROM hudi_table_changes('nope', 'latest_state', 'earliest')")


def test_null_record_key_fails_the_write_and_names_the_column(hudi_sql, seeded):
    path = seeded("t")
    hudi_sql.createDataFrame([(None, "n", 1.0, 2, "p1", "x")], SRC_SCHEMA).createOrReplaceTempView("src")
    before = _state(hudi_sql, path)
    with pytest.raises(HoodieSqlError, match="record key field 'id' cannot be null") as info:
        hudi_sql.sql("MERGE INTO t USING src s ON t.id = s.id WHEN NOT MATCHED THEN INSERT (id, name, dt) "
                     "VALUES (s.id, s.name, s.dt)")
    assert info.value.column == "id"
    assert _state(hudi_sql, path) == before


def test_duplicate_key_rules(hudi_sql, seeded):
    path = seeded("t")
    before = _state(hudi_sql, path)
    # UPDATE SET * writes the source row, key included, in place of the matched row
    hudi_sql.createDataFrame([(2, "a", 1.0, 5, "p1", "x")], SRC_SCHEMA).createOrReplaceTempView("src")
    with pytest.raises(HoodieSqlError, match="record key '2' .*already exists"):  # would land on a row that stays
        hudi_sql.sql("MERGE INTO t USING src s ON t.name = s.name WHEN MATCHED THEN UPDATE SET *")
    hudi_sql.createDataFrame([(9, "x", 1.0, 5, "p1", "x")], SRC_SCHEMA).createOrReplaceTempView("src")
    with pytest.raises(HoodieSqlError, match="write 2 rows with the same record key"):
        hudi_sql.sql("MERGE INTO t USING src s ON t.dt = s.dt WHEN MATCHED THEN UPDATE SET *")
    hudi_sql.conf.set("hoodie.spark.sql.insert.into.operation", "insert")
    hudi_sql.conf.set("hoodie.datasource.insert.dup.policy", "fail")
    try:
        with pytest.raises(HoodieSqlError, match="record key '2' already exists"):
            hudi_sql.sql("INSERT INTO t VALUES (2, 'dup', 1.0, 9, 'p1'), (8, 'new', 1.0, 9, 'p1')")
        assert _state(hudi_sql, path) == before
        hudi_sql.conf.set("hoodie.datasource.insert.dup.policy", "drop")
        got = hudi_sql.sql("INSERT INTO t VALUES (2, 'dup', 1.0, 9, 'p1'), (8, 'new', 1.0, 9, 'p1')").collect()[0]
    finally:
        hudi_sql.conf.unset("hoodie.spark.sql.insert.into.operation")
        hudi_sql.conf.unset("hoodie.datasource.insert.dup.policy")
    assert got.num_inserted_rows == 1
    assert {r.id: r.name for r in hudi_sql.sql("SELECT id, name FROM t WHERE id IN (2, 8)").collect()} == {
        2: "b", 8: "new"}


def test_merge_inserts_that_land_on_stored_rows_are_refused(hudi_sql, seeded):
    """The shortcut that skips the stored-key check applies only when an unmatched source row cannot name a
    stored key; both statements here can, and must fail without writing."""
    path = seeded("t")
    before = _state(hudi_sql, path)
    hudi_sql.createDataFrame([(2, "dup", 1.0, 5, "p1", "x")], SRC_SCHEMA).createOrReplaceTempView("src")
    for statement in (
        # ON on a non-key column: id 2 is not matched (names differ) but exists
        "MERGE INTO t USING src s ON t.name = s.name WHEN NOT MATCHED THEN INSERT (id, name, price, ts, dt) "
        "VALUES (s.id, s.name, s.price, s.ts, s.dt)",
        # ON on the key, but the INSERT takes the key from another expression
        "MERGE INTO t USING src s ON t.id = s.id + 100 WHEN NOT MATCHED THEN INSERT (id, name, price, ts, dt) "
        "VALUES (s.id, s.name, s.price, s.ts, s.dt)",
    ):
        with pytest.raises(HoodieSqlError, match="record key '2' .*already exists"):
            hudi_sql.sql(statement)
        assert _state(hudi_sql, path) == before


@pytest.mark.parametrize("statement, expected", [
    ("MERGE INTO t USING s ON t.id = s.id WHEN NOT MATCHED THEN INSERT *", True),
    ("MERGE INTO t USING s ON s.id = t.id WHEN MATCHED THEN UPDATE SET * WHEN NOT MATCHED THEN INSERT *", True),
    ("MERGE INTO t USING s ON t.id = s.id AND t.dt = s.dt WHEN NOT MATCHED THEN INSERT *", True),
    ("MERGE INTO t USING s ON t.id = s.id AND t.name = s.name WHEN NOT MATCHED THEN INSERT *", False),
    ("MERGE INTO t USING s ON t.id = s.id + 1 WHEN NOT MATCHED THEN INSERT *", False),
    ("MERGE INTO t USING s ON t.id = s.id WHEN NOT MATCHED THEN INSERT (id, name, price, ts, dt) "
     "VALUES (s.ts, s.name, s.price, s.ts, s.dt)", False),
    ("MERGE INTO t USING s ON t.id > s.id WHEN NOT MATCHED THEN INSERT *", False),
])
def test_inserts_are_new_is_decided_from_the_statement(hudi_sql, seeded, statement, expected):
    import sqlglot

    from sqlext.sql import merge as merge_mod
    from sqlext.sql.resolver import HudiTableRef
    from sqlext.sql.table import HudiTable

    class Ctx:  # the clause parser needs only error reporting from its context
        @staticmethod
        def error(message, *_a, **_k):
            return HoodieSqlError(message)

    path = seeded("t")
    node = sqlglot.parse_one(statement, read="spark")
    table = HudiTable.load(HudiTableRef("t", "default", path))
    source = hudi_sql.createDataFrame(SOURCE, SRC_SCHEMA)
    sides = merge_mod.MergeSides(table, "t", "s", source)
    clauses = [merge_mod._clause(Ctx, i, merge_mod.NOT_MATCHED if not w.args.get("matched") else merge_mod.MATCHED,
                                 w, w.args.get("condition"), sides)
               for i, w in enumerate(node.args["whens"].expressions)]
    assert merge_mod._inserts_are_new(node.args["on"], clauses, sides, table.write_options(hudi_sql)) is expected
