"""Each client library runs the same scenario against `sqlext serve` — CREATE TABLE ... USING hudi, INSERT,
MERGE INTO, UPDATE, DELETE, CALL show_commits, a time-travel SELECT and a read back — in a process of its
own, and its results must equal those of the same statements run through `spark.sql` in the test session."""
from __future__ import annotations

import csv
import io
import uuid

import pytest

from thrift_server.clients import run_scenario, statements, summarize
from thrift_server.support import PASSWORD, USER, run_beeline, run_client


def _name(prefix: str) -> str:
    return f"{prefix}_{uuid.uuid4().hex[:8]}"


@pytest.fixture(scope="module")
def oracle(spark):
    """The scenario through the test session's own `spark.sql` (Hudi SQL front end, same metastore)."""
    def run(sql):
        df = spark.sql(sql)
        if not df.columns:
            return None, []
        return df.columns, [list(r) for r in df.collect()]

    return run_scenario(run, _name("srv_oracle"))


EXPECTED_FINAL = [[1, "aa", 1.5], [2, "bb", 9.99], [4, "d", 4.0]]


def _check(result: dict, oracle: dict) -> None:
    for section in ("insert", "merge", "update", "delete", "commits", "time_travel", "final"):
        assert result[section] == oracle[section], section
    assert oracle["final"]["rows"] == EXPECTED_FINAL
    assert oracle["time_travel"]["rows"] == [[1, "a", 1.5], [2, "b", 2.25], [3, None, None]]
    assert oracle["merge"]["rows"] == [[2, 1, 1, 0]]


def test_pyhive_nosasl_none_and_custom(hive_server, auth_server, oracle):
    result = run_client("pyhive", port=hive_server.port, auth_port=auth_server.port, user=USER, password=PASSWORD,
                        table=_name("srv_pyhive"))
    _check(result, oracle)
    assert result["description"] == [["id", "BIGINT_TYPE"], ["name", "STRING_TYPE"], ["price", "DECIMAL_TYPE"]]


def test_impyla_over_http_with_basic_auth(auth_server, oracle):
    result = run_client("impyla", port=auth_server.http_port, http=True, auth="PLAIN", user=USER, password=PASSWORD,
                        table=_name("srv_impyla"))
    _check(result, oracle)
    assert "executing: SELECT id FROM" in result["log"]


def test_sqlalchemy_hive_dialect_pandas_and_reflection(hive_server, oracle):
    table = _name("srv_sqla")
    result = run_client("sqlalchemy", port=hive_server.port, table=table)
    _check(result, oracle)
    reflection = result["reflection"]
    assert "default" in reflection["schemas"]
    assert table in reflection["tables"]
    assert reflection["columns"][-4:] == ["id", "name", "price", "ts"]
    assert reflection["has_table"] and not reflection["has_missing"]


def _csv_sections(output: str) -> list[tuple[str, list[list[str]]]]:
    """beeline --outputformat=csv2 output cut into result sets at their header lines."""
    starts = {"num_affected_rows,": "dml", "commit_time,": "commits", "id,name,price": "select"}
    sections: list[tuple[str, list[str]]] = []
    for line in output.splitlines():
        kind = next((k for prefix, k in starts.items() if line.startswith(prefix)), None)
        if kind is not None:
            sections.append((kind, [line]))
        elif sections and line.strip():
            sections[-1][1].append(line)
    return [(kind, list(csv.reader(io.StringIO("\n".join(lines))))) for kind, lines in sections]


def test_beeline_from_pysparks_jars(hive_server, oracle):
    table = _name("srv_beeline")
    script = ";\n".join(sql for _, sql in statements(table)) + ";"
    done = run_beeline(f"jdbc:hive2://127.0.0.1:{hive_server.port}/default", script)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    sections = _csv_sections(done.stdout)
    assert [kind for kind, _ in sections] == ["dml"] * 4 + ["commits", "select", "select"], done.stdout[-3000:]

    def typed(rows):
        return [[int(r[0]), None if r[1] == "NULL" else r[1], None if r[2] == "NULL" else float(r[2])] for r in rows]

    for name, (_, rows) in zip(("insert", "merge", "update", "delete"), sections):
        assert summarize(name, rows[0], [[int(v) for v in r] for r in rows[1:]]) == oracle[name], name
    commits = sections[4][1]
    assert summarize("commits", commits[0], commits[1:]) == oracle["commits"]
    assert typed(sections[5][1][1:]) == oracle["time_travel"]["rows"]
    assert typed(sections[6][1][1:]) == oracle["final"]["rows"]
