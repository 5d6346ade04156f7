"""Issue 47, what a new user trips over:
- `sqlext serve` lists exactly the tables `sqlext.session()` (or the CLI) lists, a merge-on-read table's `_ro` / `_rt`
  views included, to PyHive's SHOW TABLES, SQLAlchemy's `get_table_names` and the GetTables RPC (JDBC's getTables,
  what BI tools list), and the views answer queries through it: on the test session's metastore (where Hive sync
  makes the views) and with no metastore (the warehouse's tables, and the views its resolver reads);
- `CALL run_clean` that deletes nothing says why, in its `reason` column.

Servers and clients run as processes of their own, as in thrift_server/; the client is this file run as a script.
"""
from __future__ import annotations

import json
import re
import subprocess
import sys
import threading
import uuid
from pathlib import Path

import pytest

from thrift_server.support import client_env, read_lines

SPARK_CONF = ["--master", "local[1]", "--conf", "spark.ui.enabled=false", "--conf", "spark.sql.shuffle.partitions=2",
              "--conf", "spark.driver.memory=1g"]
CREATE_MOR = ("CREATE TABLE {t} (id INT, name STRING, ts BIGINT) USING hudi "
              "TBLPROPERTIES (type = 'mor', primaryKey = 'id', preCombineField = 'ts')")
INSERT = "INSERT INTO {t} VALUES (1, 'a', 1)"
HANG_GUARD_S = 600  # JVMs start slowly on a busy machine: a guard against hangs only


# -- the client (this file run as a script) -------------------------------------------------------------------
def client(args: dict) -> dict:
    """After the `setup` statements: the tables of `db` as PyHive's SHOW TABLES, SQLAlchemy's inspector and the
    GetTables RPC list them, `SELECT *` of the `m_ro` / `m_rt` views through PyHive, and the columns GetColumns
    answers for `m_rt`."""
    from pyhive import hive
    from sqlalchemy import create_engine, inspect

    from thrift_server.clients import Raw

    port, db = args["port"], args["db"]

    def cursor(**kwargs):
        return hive.connect(host="127.0.0.1", port=port, auth="NOSASL", username="newcomer", **kwargs).cursor()

    setup = cursor()
    for sql in args["setup"]:
        setup.execute(sql)
    pyhive = cursor(database=db)
    pyhive.execute("SHOW TABLES")
    out = {"show_tables": [row[0] for row in pyhive.fetchall()]}
    for view in ("m_ro", "m_rt"):
        pyhive.execute(f"SELECT * FROM {view}")
        out[view] = {"columns": [d[0].split(".")[-1] for d in pyhive.description],
                     "rows": [list(r) for r in pyhive.fetchall()]}
    out["sqlalchemy"] = inspect(create_engine(f"hive://newcomer@127.0.0.1:{port}/{db}")).get_table_names()
    raw = Raw(port)
    answer = raw.result(raw.client.GetTables(raw.t.TGetTablesReq(raw.session, schemaName=db, tableName="%")))
    out["get_tables"] = [row[2] for row in answer["rows"] if row[1] == db]  # temporary views have no schema
    answer = raw.result(raw.client.GetColumns(raw.t.TGetColumnsReq(raw.session, schemaName=db, tableName="m_rt")))
    out["get_columns_rt"] = [row[3] for row in answer["rows"]]
    return out


def start_client(**args) -> subprocess.Popen:
    """The client script, started now (see `client_result`)."""
    return subprocess.Popen([sys.executable, __file__, json.dumps(args)], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env=client_env())


def client_result(proc: subprocess.Popen) -> dict:
    try:
        out, err = proc.communicate(timeout=HANG_GUARD_S)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert proc.returncode == 0, f"client failed:\n{out[-3000:]}\n{err[-6000:]}"
    return json.loads(out.strip().splitlines()[-1])


# -- servers ------------------------------------------------------------------------------------------------
def spark_env() -> dict[str, str]:
    """The environment of the servers and CLI runs: their JVMs on JIT tier 1 only (see tests/quick_jvm.py; imported
    here, not at the top: this file also runs as the client script, where tests/ is not on the path)."""
    from quick_jvm import quick_jvm_env

    return quick_jvm_env(client_env())


class Server:
    """`sqlext serve` started now (its JVM starts while the caller goes on), its port known once `ready()`."""

    def __init__(self, root: Path, *args: str):
        self.log_path = root / "server.log"
        self._log = open(self.log_path, "w")
        cmd = [sys.executable, "-m", "sqlext.cli", "-v", "serve", "--port", "0", "--http-port", "none",
               "--auth", "none", *SPARK_CONF, *args]
        self.proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=self._log, text=True,
                                     env=spark_env(), cwd=root)
        self.lines: list[str] = []
        self._ready = threading.Event()
        threading.Thread(target=read_lines, args=(self.proc, self.lines, self._ready), daemon=True).start()

    def ready(self) -> int:
        self._ready.wait(HANG_GUARD_S)
        found = next((re.search(r"listening on [^ ]+:(\d+) \(binary", line) for line in self.lines
                      if "listening on" in line), None)
        if found is None:
            self.stop()
            pytest.fail(f"sqlext serve did not start: {self.lines}\n{self.log_path.read_text()[-5000:]}")
        return int(found.group(1))

    def stop(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(60)
        except subprocess.TimeoutExpired:
            self.proc.kill()
        self._log.close()


def _session_tables(spark, db: str) -> list[str]:
    """What `sqlext.session()` lists: the test session is one, on the metastore resolver it was made with."""
    from sqlext.sql import install

    install(spark, spark._sqlext_catalog.resolver)
    return [r.tableName for r in spark.sql(f"SHOW TABLES IN {db}").collect() if not r.isTemporary]


@pytest.fixture(scope="module")
def all_listings(request, spark, tmp_path_factory) -> dict:
    """Both configurations at once (their JVMs start together: each keeps about one core busy while it starts):
    - "metastore": the table made through a server on the test session's metastore (whose Hive sync makes the
      views), in a database of its own: the session's `hive_server` (tests/sqlext/conftest.py: `sqlext serve`,
      auth none, on that metastore, as the thrift_server/ tests use it), asked for once the other processes
      have started;
    - "no_metastore": the table made and listed by the CLI (`sqlext.session(metastore=False)`) while a server
      (`--metastore none`) starts on the same warehouse.
    Each: what the client saw through its server, and what the session (or the CLI) lists as "session"."""
    uri = getattr(getattr(spark, "_sqlext_catalog", None), "uri", None)
    off_root = tmp_path_factory.mktemp("newcomer-no_metastore")
    off_warehouse = str(off_root / "warehouse")
    started: list[Server] = []
    clients: list[subprocess.Popen] = []
    cli = None
    try:
        off = Server(off_root, "--metastore", "none", "--warehouse", off_warehouse)
        started.append(off)
        cli = subprocess.Popen([sys.executable, "-m", "sqlext.cli", "sql", "--metastore", "none", "--warehouse",
                                off_warehouse, "--output", "json", *SPARK_CONF,
                                f"{CREATE_MOR.format(t='m')}; {INSERT.format(t='m')}; SHOW TABLES"],
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=spark_env(),
                               cwd=off_root)
        db = f"newcomer_{uuid.uuid4().hex[:6]}"
        if uri:
            table = f"{db}.m"
            on_port = request.getfixturevalue("hive_server").port
            on_client = start_client(port=on_port, db=db, setup=[f"CREATE DATABASE {db}",
                                                                 CREATE_MOR.format(t=table), INSERT.format(t=table)])
            clients.append(on_client)
        cli_out, cli_err = cli.communicate(timeout=HANG_GUARD_S)
        assert cli.returncode == 0, cli_err[-4000:]
        listed = [json.loads(line) for line in cli_out.splitlines() if '"tableName"' in line]
        off_client = start_client(port=off.ready(), db="default", setup=[])
        clients.append(off_client)
        out = {}
        if uri:
            out["metastore"] = {**client_result(on_client), "session": _session_tables(spark, db)}
        out["no_metastore"] = {**client_result(off_client),
                               "session": [row["tableName"] for row in listed if not row["isTemporary"]]}
        return out
    finally:
        for proc in [*clients, *([cli] if cli is not None else [])]:
            if proc.poll() is None:
                proc.kill()
                proc.communicate()
        for server in started:
            server.stop()


@pytest.fixture(scope="module", params=["metastore", "no_metastore"])
def listings(request, all_listings) -> dict:
    if request.param not in all_listings:
        pytest.skip("the test session has no metastore")
    return all_listings[request.param]


def test_server_lists_what_the_session_lists_views_included(listings):
    session = sorted(listings["session"])
    assert {"m", "m_ro", "m_rt"} <= set(session)
    assert sorted(listings["show_tables"]) == session
    assert sorted(listings["sqlalchemy"]) == session
    assert sorted(listings["get_tables"]) == session


@pytest.mark.parametrize("view", ["m_ro", "m_rt"])
def test_views_answer_through_the_server(listings, view):
    answer = listings[view]
    assert answer["columns"][0] == "_hoodie_commit_time" and answer["columns"][-3:] == ["id", "name", "ts"]
    assert [row[-3:] for row in answer["rows"]] == [[1, "a", 1]]


def test_view_columns_are_listed_as_queried(listings):
    assert listings["get_columns_rt"] == listings["m_rt"]["columns"]


# -- run_clean says why it deleted nothing ---------------------------------------------------------------------
HUDI_CLEAN_COLUMNS = ["start_clean_time", "time_taken_in_millis", "total_files_deleted", "earliest_commit_to_retain",
                      "last_completed_commit_timestamp", "version"]


def _run_clean(spark, args: str = "") -> list[dict]:
    frame = spark.sql(f"CALL run_clean(table => 't'{args})")
    assert frame.columns == HUDI_CLEAN_COLUMNS + ["reason"]
    return [row.asDict() for row in frame.collect()]


def test_run_clean_that_deletes_nothing_says_why(hudi_sql, seeded):
    seeded("t")  # one commit
    (row,) = _run_clean(hudi_sql)
    assert (row["start_clean_time"], row["total_files_deleted"]) == (None, 0)
    assert row["reason"] == ("the table has 1 completed commit and hoodie.cleaner.commits.retained=10 retains the "
                             "file versions of the latest 10: no file version is old enough to clean")
    (row,) = _run_clean(hudi_sql, ", retain_commits => 1, trigger_max_commits => 3")
    assert row["reason"] == ("1 commit and no clean yet: hoodie.clean.trigger.strategy=NUM_COMMITS cleans after "
                             "hoodie.clean.max.commits=3")
    hudi_sql.sql("UPDATE t SET price = price + 1")
    hudi_sql.sql("UPDATE t SET price = price + 1")  # every file group now has 3 versions
    (row,) = _run_clean(hudi_sql, ", retain_commits => 1")
    assert row["start_clean_time"] is not None and row["total_files_deleted"] == 3 and row["reason"] is None
    (row,) = _run_clean(hudi_sql, ", retain_commits => 1")
    assert row["total_files_deleted"] == 0 and "no file version is older than the retained ones" in row["reason"]


if __name__ == "__main__":
    print(json.dumps(client(json.loads(sys.argv[1])), default=str))
