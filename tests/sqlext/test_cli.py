"""The `sqlext` CLI run as a subprocess (`python -m sqlext.cli`): `sql -f` with CSV output and --conf, the
piped shell with JSON output, errors with line and column and a non-zero exit, `metastore start|status|stop`,
and a run against the test session's running metastore (its thrift URI): the piped shell's. Spark starts in each
subprocess (slow), so there are two Spark runs in all, started together."""
from __future__ import annotations

import csv
import io
import json
import os
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from hudi_oracle import hudi_rs_read  # noqa: E402
from quick_jvm import quick_jvm_env  # noqa: E402

PYTHON = sys.executable
REPO = Path(__file__).resolve().parents[2]
SPARK_CONF = ["--master", "local[1]", "--conf", "spark.ui.enabled=false", "--conf", "spark.driver.memory=1g"]


HANG_GUARD_S = 900  # a guard against hangs only: several CLI runs overlap, each starting a JVM (slow on a busy machine)


def sqlext(*args, stdin: str | None = None, timeout: int = HANG_GUARD_S, env: dict[str, str] | None = None):
    return started(*args, stdin=stdin, env=env).result(timeout)


class Run:
    """A CLI subprocess started now, awaited later (the Spark runs overlap: each spends most of its time
    starting a JVM)."""

    def __init__(self, args, stdin: str | None, env: dict[str, str] | None = None):
        # by default its JVMs on JIT tier 1 only (see quick_jvm): these runs are a start-up and a few statements
        self.proc = subprocess.Popen([PYTHON, "-m", "sqlext.cli", *args], stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=REPO,
                                     env=quick_jvm_env() if env is None else env)
        self._done = None
        self.proc.stdin.write(stdin or "")  # small: fits the pipe buffer, so the statements run right away
        self.proc.stdin.close()
        self.proc.stdin = None  # communicate() must not touch it again

    def result(self, timeout: int = HANG_GUARD_S) -> subprocess.CompletedProcess:
        if self._done is None:
            out, err = self.proc.communicate(timeout=timeout)
            self._done = subprocess.CompletedProcess(self.proc.args, self.proc.returncode, out, err)
        return self._done


def started(*args, stdin: str | None = None, env: dict[str, str] | None = None) -> Run:
    return Run(args, stdin, env)


SCRIPT = """-- a Hudi table from a SQL file
CREATE TABLE orders (id INT, item STRING, qty INT, dt STRING) USING hudi
  PARTITIONED BY (dt) TBLPROPERTIES (primaryKey = 'id', preCombineField = 'qty');
INSERT INTO orders VALUES (1, 'apple', 3, 'd1'), (2, 'pear; ripe', 5, 'd2');
UPDATE orders SET qty = qty + 10 WHERE id = 1;
SET spark.sql.shuffle.partitions;
SELECT id, item, qty, dt FROM orders ORDER BY id;
CALL show_commits(table => 'orders', limitt => 1);
SELECT 'never runs'
"""


# piped into `sqlext shell` on the test session's metastore, in a database of its own ({db}, at {location})
SHELL_INPUT = ("CREATE DATABASE {db} LOCATION '{location}';\nUSE {db};\n"
               "CREATE TABLE s (id INT, v STRING)\n  USING hudi TBLPROPERTIES (primaryKey = 'id');\n"
               "INSERT INTO s VALUES (1, 'a;b'),\n  (2, NULL);\n"
               "SELECT * FROM no_such_table;\n"
               "SELECT id, v FROM s\n ORDER BY id;\n"
               "CREATE TABLE {db}.m (id INT, v STRING) USING hudi TBLPROPERTIES (primaryKey = 'id'); "
               "INSERT INTO {db}.m VALUES (1, 'x');\nSHOW TABLES IN {db};\n"
               "exit\nSELECT 'after exit';\n")


@pytest.fixture(scope="module")
def runs(spark, tmp_path_factory):
    """The two Spark runs of this module, started together: name -> (Run, its warehouse or database)."""
    base = tmp_path_factory.mktemp("cli")
    (base / "script.sql").write_text(SCRIPT)
    uri = spark._sqlext_catalog.uri
    db = f"cli_{uuid.uuid4().hex[:8]}"
    out = {
        "file": (started("sql", "-f", str(base / "script.sql"), "--output", "csv", "--metastore", "none",
                         "--warehouse", str(base / "wh1"), "--conf", "spark.sql.shuffle.partitions=3",
                         *SPARK_CONF), base / "wh1"),
        "shell": (started("shell", "--output", "json", "--metastore", uri, "--warehouse", str(base / "wh2"),
                          *SPARK_CONF, stdin=SHELL_INPUT.format(db=db, location=base / "db")), db),
    }
    yield out
    for run, _ in out.values():
        if run.proc.poll() is None:
            run.proc.kill()
            run.proc.communicate()


def test_sql_file_csv_conf_and_error(runs):
    pending, wh = runs["file"]
    run = pending.result()
    assert run.returncode == 1, run.stderr
    assert "error: line 8:38: CALL show_commits: unknown argument 'limitt'" in run.stderr
    lines = list(csv.reader(io.StringIO(run.stdout)))
    assert ["key", "value"] in lines and ["spark.sql.shuffle.partitions", "3"] in lines
    select = lines[lines.index(["id", "item", "qty", "dt"]):]
    assert select == [["id", "item", "qty", "dt"], ["1", "apple", "13", "d1"], ["2", "pear; ripe", "5", "d2"]]
    assert "never runs" not in run.stdout
    rows = sorted((r["id"], r["item"], r["qty"]) for r in hudi_rs_read(wh / "orders").to_pylist())
    assert rows == [(1, "apple", 13), (2, "pear; ripe", 5)]


def test_shell_reads_piped_statements(runs):
    pending, db = runs["shell"]
    run = pending.result()
    assert run.returncode == 1, run.stderr  # one statement failed
    assert "error: line 1:15:" in run.stderr and "no_such_table" in run.stderr
    assert run.stderr.count("error:") == 1, run.stderr  # the others ran, up to `exit`
    out = [json.loads(line) for line in run.stdout.splitlines()]
    assert out[:4] == [{"num_affected_rows": 2, "num_inserted_rows": 2, "num_updated_rows": 0, "num_deleted_rows": 0},
                       {"id": 1, "v": "a;b"}, {"id": 2, "v": None},
                       {"num_affected_rows": 1, "num_inserted_rows": 1, "num_updated_rows": 0, "num_deleted_rows": 0}]
    assert "after exit" not in run.stdout


def test_usage_errors_and_metastore_commands(tmp_path):
    from catalog import MetastoreClient

    wh = str(tmp_path / "wh")
    # three runs that start no JVM and depend on nothing, started together
    pending = [started("sql", "SELECT 1", "--conf", "novalue"), started("sql", "-f", str(tmp_path / "nope.sql")),
               started("metastore", "status", "--warehouse", wh)]
    bad, missing, status = (run.result() for run in pending)
    assert bad.returncode == 2 and "--conf 'novalue': expected KEY=VALUE" in bad.stderr
    assert missing.returncode == 2 and "cannot read" in missing.stderr
    assert status.returncode == 0
    info = json.loads(status.stdout)
    assert info["running"] is False and info["warehouse"] == wh
    start = sqlext("metastore", "start", "--warehouse", wh)
    try:
        assert start.returncode == 0, start.stderr
        uri = start.stdout.strip()
        assert uri.startswith("thrift://")
        info = json.loads(sqlext("metastore", "status", "--warehouse", wh).stdout)
        assert info["running"] is True and info["uri"] == uri
        with MetastoreClient(uri) as client:
            assert "default" in client.get_all_databases()
    finally:
        stop = sqlext("metastore", "stop", "--warehouse", wh)
    assert stop.returncode == 0 and stop.stdout.strip() == "stopped"
    assert json.loads(sqlext("metastore", "status", "--warehouse", wh).stdout)["running"] is False


def test_sql_against_the_session_metastore(spark, runs):
    from catalog import MetastoreClient
    from sqlext.sql import install

    uri = spark._sqlext_catalog.uri
    assert uri and os.environ.get("HIVE_METASTORE_URIS") == uri
    pending, db = runs["shell"]  # on that metastore: CREATE DATABASE db, tables s and db.m, SHOW TABLES IN db
    run = pending.result()
    assert run.returncode == 1 and run.stderr.count("error:") == 1, run.stderr  # only no_such_table's
    out = [json.loads(line) for line in run.stdout.splitlines()]
    assert sorted((r["namespace"], r["tableName"], r["isTemporary"]) for r in out[4:]) == \
        [(db, "m", False), (db, "s", False)], run.stdout  # SHOW TABLES IN db, the last statement before `exit`
    with MetastoreClient(uri) as client:
        entry = client.get_table(db, "m")
        assert entry is not None and entry.parameters["provider"] == "hudi"
    install(spark, spark._sqlext_catalog.resolver)
    assert [tuple(r) for r in spark.sql(f"SELECT id, v FROM {db}.m").collect()] == [(1, "x")]


def test_config_lists_keys_and_one_key(capsys):
    from sqlext.cli import main

    assert main(["config", "--key", "hoodie.cleaner.policy"]) == 0
    out = capsys.readouterr().out
    assert out.splitlines()[:3] == ["hoodie.cleaner.policy", "\tdefault: KEEP_LATEST_COMMITS", "\thonoured: yes"]
    assert main(["config", "--key", "hoodie.table.payload.class"]) == 0  # an alternative spelling
    assert capsys.readouterr().out.startswith("hoodie.compaction.payload.class\n")
    assert main(["config"]) == 0
    listing = capsys.readouterr().out
    assert "hoodie.rollback.using.markers\n\tdefault: True\n\thonoured: no" in listing
    assert "\nhoodie.strict.config\n" in listing
    assert main(["config", "--key", "hoodie.cleaner.polcy"]) == 1
    assert "unknown config key hoodie.cleaner.polcy (did you mean hoodie.cleaner.policy?)" in capsys.readouterr().err


def test_shell_help_and_exit_are_the_shells_not_sql():
    from sqlext.cli import SHELL_HELP, shell

    out = io.StringIO()
    # no statement reaches Spark (there is none here): `help` prints the shell's help, `exit;` leaves
    assert shell(None, "json", io.StringIO("help\n?\nexit;\nSELECT never_runs;\n"), out, 10) == 0
    assert out.getvalue() == SHELL_HELP * 2
