"""Which columns a statement can refer to (sqlext/sql/relations.referenced_names), and that a query over a
merge-on-read table reads only those while returning what the full read returns."""
from __future__ import annotations

import pytest
import sqlglot

from sqlext.sql.relations import referenced_names


def _names(sql: str):
    return referenced_names(sqlglot.parse_one(sql, read="spark"))


@pytest.mark.parametrize("sql, expected", [
    ("SELECT count(*), sum(f1) FROM t", {"f1", "t"}),
    ("SELECT a.x FROM t a JOIN u USING (k) WHERE a.y > 1", {"a", "x", "t", "u", "k", "y"}),
    ("SELECT x FROM (SELECT x, y FROM t) s GROUP BY x", {"x", "y", "t", "s"}),
])
def test_names_a_statement_can_use(sql, expected):
    assert _names(sql) == expected


@pytest.mark.parametrize("sql", [
    "SELECT * FROM t",
    "SELECT t.* FROM t",
    "SELECT x FROM (SELECT * FROM t) s",
    "SELECT struct(*) FROM t",
    "SELECT x FROM t NATURAL JOIN u",
    "SELECT * FROM t PIVOT (sum(v) FOR k IN ('a', 'b'))",
    "SELECT y FROM t PIVOT (sum(v) FOR k IN ('a', 'b'))",
])
def test_statements_that_may_use_unnamed_columns_are_not_pruned(sql):
    assert _names(sql) is None


def test_query_on_mor_table_reads_only_named_columns(hudi_sql, monkeypatch):
    from sqlext.sql.table import HudiTable

    hudi_sql.sql("CREATE TABLE m (id INT, name STRING, price DOUBLE, ts BIGINT, dt STRING) USING hudi "
                 "PARTITIONED BY (dt) TBLPROPERTIES (primaryKey = 'id', preCombineField = 'ts', type = 'mor'); "
                 "INSERT INTO m VALUES (1, 'a', 1.0, 1, 'p1'), (2, 'b', 2.0, 1, 'p1'), (3, 'c', 3.0, 1, 'p2'); "
                 "UPDATE m SET price = price * 10 WHERE id >= 2; DELETE FROM m WHERE id = 3")
    asked = []
    real = HudiTable.snapshot

    def spy(self, spark, options=None, partition_filter=None, columns=None, data_filter=None):
        asked.append(columns)
        return real(self, spark, options, partition_filter, columns, data_filter)

    monkeypatch.setattr(HudiTable, "snapshot", spy)
    got = hudi_sql.sql("SELECT count(*), sum(price) FROM m WHERE dt = 'p1'").collect()[0]
    assert tuple(got) == (2, 21.0)
    assert asked[-1] == ["price", "dt"]
    assert hudi_sql.sql("SELECT count(*) FROM m").collect()[0][0] == 2
    assert asked[-1] == ["_hoodie_record_key"]
    rows = hudi_sql.sql("SELECT * FROM m").collect()
    assert asked[-1] is None and sorted((r.id, r.price) for r in rows) == [(1, 1.0), (2, 20.0)]
