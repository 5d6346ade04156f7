"""Each client library runs the same scenario against `sqlext serve` — CREATE TABLE ... USING hudi, INSERT,
MERGE INTO, UPDATE, DELETE, CALL show_commits, a time-travel SELECT and a read back — in a process of its
own, and its results must equal those of the same statements run through `spark.sql` in the test session.

The clients of the selected tests start together (each on a table of its own; the servers take many clients at
once), and each test awaits and checks its own."""
from __future__ import annotations

import csv
import io
import json
import subprocess
import sys
import uuid

import pytest
from quick_jvm import quick_jvm_env

from thrift_server.clients import run_scenario, statements, summarize
from thrift_server.support import CLIENTS, PASSWORD, USER, beeline_path, client_env, spark_home

HANG_GUARD_S = 300


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


class Started:
    """A client process started now, awaited by `result()`."""

    def __init__(self, cmd: list[str], env: dict[str, str]):
        self.proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)

    def result(self) -> subprocess.CompletedProcess:
        try:
            out, err = self.proc.communicate(timeout=HANG_GUARD_S)
        finally:
            self.kill()
        return subprocess.CompletedProcess(self.proc.args, self.proc.returncode, out, err)

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.communicate()


def start_client(client: str, **args) -> Started:
    """`python clients.py CLIENT ARGS` (what support.run_client runs), started now."""
    return Started([sys.executable, str(CLIENTS), client, json.dumps(args)], client_env())


def client_result(client: str, started: Started) -> dict:
    done = started.result()
    assert done.returncode == 0, f"{client} failed:\n{done.stdout[-3000:]}\n{done.stderr[-6000:]}"
    return json.loads(done.stdout.strip().splitlines()[-1])


def start_beeline(url: str, script: str) -> Started:
    """What support.run_beeline runs (user beeline, password pw, csv2 output), started now; its JVM on JIT tier 1
    only (see quick_jvm): a client that runs a few statements, what it does is the same."""
    return Started([str(beeline_path()), "-u", url, "-n", "beeline", "-p", "pw", "--silent=true",
                    "--outputformat=csv2", "-e", script],
                   quick_jvm_env({**client_env(), "SPARK_HOME": str(spark_home())}))


TESTS_OF_CLIENT = {"pyhive": "test_pyhive_nosasl_none_and_custom", "impyla": "test_impyla_over_http_with_basic_auth",
                   "sqlalchemy": "test_sqlalchemy_hive_dialect_pandas_and_reflection",
                   "beeline": "test_beeline_from_pysparks_jars"}


@pytest.fixture(scope="module")
def clients(request, oracle):
    """The clients of this module's selected tests, started together: name -> (Started, its table)."""
    selected = {item.name for item in request.session.items if item.module is request.module}
    wanted = [c for c, test in TESTS_OF_CLIENT.items() if test in selected]
    users = {"hive_server": {"pyhive", "sqlalchemy", "beeline"}, "auth_server": {"pyhive", "impyla"}}
    servers = {name: request.getfixturevalue(name) for name, clients in users.items() if clients & set(wanted)}
    tables = {c: _name(f"srv_{c.replace('sqlalchemy', 'sqla')}") for c in wanted}
    started = {}
    try:
        for client in wanted:
            table = tables[client]
            if client == "pyhive":
                started[client] = start_client("pyhive", port=servers["hive_server"].port,
                                               auth_port=servers["auth_server"].port, user=USER, password=PASSWORD,
                                               table=table)
            elif client == "impyla":
                started[client] = start_client("impyla", port=servers["auth_server"].http_port, http=True,
                                               auth="PLAIN", user=USER, password=PASSWORD, table=table)
            elif client == "sqlalchemy":
                started[client] = start_client("sqlalchemy", port=servers["hive_server"].port, table=table)
            else:
                script = ";\n".join(sql for _, sql in statements(table)) + ";"
                started[client] = start_beeline(f"jdbc:hive2://127.0.0.1:{servers['hive_server'].port}/default",
                                                script)
        yield {client: (run, tables[client]) for client, run in started.items()}
    finally:
        for run in started.values():
            run.kill()


EXPECTED_FINAL = [[1, "aa", 1.5], [2, "bb", 9.99], [4, "d", 4.0]]


def _check(result: dict, oracle: dict) -> None:
    for section in ("insert", "merge", "update", "delete", "commits", "time_travel", "final"):
        assert result[section] == oracle[section], section
    assert oracle["final"]["rows"] == EXPECTED_FINAL
    assert oracle["time_travel"]["rows"] == [[1, "a", 1.5], [2, "b", 2.25], [3, None, None]]
    assert oracle["merge"]["rows"] == [[2, 1, 1, 0]]


def test_pyhive_nosasl_none_and_custom(clients, oracle):
    result = client_result("pyhive", clients["pyhive"][0])
    _check(result, oracle)
    assert result["description"] == [["id", "BIGINT_TYPE"], ["name", "STRING_TYPE"], ["price", "DECIMAL_TYPE"]]


def test_impyla_over_http_with_basic_auth(clients, oracle):
    result = client_result("impyla", clients["impyla"][0])
    _check(result, oracle)
    assert "executing: SELECT id FROM" in result["log"]


def test_sqlalchemy_hive_dialect_pandas_and_reflection(clients, oracle):
    run, table = clients["sqlalchemy"]
    result = client_result("sqlalchemy", run)
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


def test_beeline_from_pysparks_jars(clients, oracle):
    done = clients["beeline"][0].result()
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
