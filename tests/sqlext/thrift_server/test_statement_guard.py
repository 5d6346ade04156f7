"""The safe default of served sessions (sqlext/server/statement_guard.py): the escapes an authenticated client
could use to read the host's files, the users file, the server's environment or to load code are refused with
SQLSTATE 42000 through a real client (PyHive, in its own process), and allowed only when the server is started
with the administrator's flag; ordinary statements pass. The audit log (sqlext/server/audit.py) has one
parseable line per statement of that client."""
from __future__ import annotations

import hashlib
import json
import subprocess
import sys
import textwrap
import time

import pytest

from sqlext.server.config import ServerConfig
from sqlext.server.statement_guard import HoodieAccessDeniedError, StatementGuard
from thrift_server.support import client_env

WAREHOUSE = "/srv/warehouse"


@pytest.fixture
def guard(tmp_path) -> StatementGuard:
    return StatementGuard.for_server(f"file:{WAREHOUSE}", (str(tmp_path / "extra"),), str(tmp_path / "users"))


REFUSED = [
    ("SELECT * FROM text.`/etc/passwd`", "outside the data roots"),
    ("select * from CSV . `/etc/passwd`", "outside the data roots"),
    ("WITH x AS (SELECT * FROM json.`/root/.aws/credentials`) SELECT * FROM x", "outside the data roots"),
    ("SELECT * FROM t WHERE id IN (SELECT id FROM parquet.`/tmp/elsewhere`)", "outside the data roots"),
    (f"SELECT * FROM hudi.`{WAREHOUSE}/../etc`", "outside the data roots"),
    (f"SELECT * FROM text.`{WAREHOUSE}/.sqlext/servers/1.json`", "server's own state"),
    ("SELECT java_method('java.lang.System', 'getenv', 'HOME')", "java_method() calls Java"),
    ("SELECT `reflect`('java.lang.System', 'getenv', 'HOME')", "reflect() calls Java"),
    ("SELECT try_reflect ('java.util.UUID', 'randomUUID')", "try_reflect() calls Java"),
    ("ADD JAR /tmp/evil.jar", "ADD JAR"),
    ("  add files /tmp/a /tmp/b", "ADD JAR"),
    ("CREATE TEMPORARY FUNCTION f AS 'com.evil.Udf' USING JAR '/tmp/evil.jar'", "Java class"),
    ("CREATE FUNCTION f AS \"org.apache.hadoop.hive.ql.udf.UDFReflect\"", "Java class"),
    ("INSERT OVERWRITE DIRECTORY '/any/path' SELECT 1", "INSERT OVERWRITE DIRECTORY"),
    ("insert overwrite local directory '/tmp/x' using parquet select 1", "INSERT OVERWRITE DIRECTORY"),
    ("CREATE TABLE t (a string) USING text LOCATION '/etc'", "LOCATION '/etc'"),
    ("CREATE TABLE t USING csv OPTIONS (header 'true', path '/etc/passwd')", "OPTIONS (path)"),
    ("LOAD DATA LOCAL INPATH '/etc/passwd' INTO TABLE t", "INPATH '/etc/passwd'"),
    ("SET spark.hadoop.fs.s3a.endpoint=http://evil:9000", "setting spark.hadoop.fs.s3a.endpoint"),
    ("SET hoodie.aws.secret.key = x", "setting hoodie.aws.secret.key"),
    ("SET hoodie.write.lock.dynamodb.endpoint_url=http://x", "setting hoodie.write.lock.dynamodb.endpoint_url"),
    ("SET spark.sql.warehouse.dir=/tmp/other", "setting spark.sql.warehouse.dir"),
    ("/* a comment */ SET `spark.sql.catalog.x`=org.Evil", "setting spark.sql.catalog.x"),
]

ALLOWED = [
    "SELECT * FROM trips WHERE city = 'reflect' AND note = 'ADD JAR'",
    f"SELECT * FROM hudi.`{WAREHOUSE}/trips`",
    f"SELECT * FROM parquet.`file:{WAREHOUSE}/raw/part-0.parquet`",
    "SET spark.sql.shuffle.partitions=3",
    "SET hoodie.enable.data.skipping = false",
    "SET hoodie.aws.secret.key",  # reading a key's value: SET without = shows it; the server never holds one there
    f"CREATE TABLE t (a int) USING hudi LOCATION '{WAREHOUSE}/t'",
    "CREATE FUNCTION plus_one(x INT) RETURNS INT RETURN x + 1",
    "MERGE INTO t USING s ON t.id = s.id WHEN MATCHED THEN UPDATE SET * WHEN NOT MATCHED THEN INSERT *",
    "CALL run_clean(table => 't')",
    "-- SELECT java_method('a', 'b')\nSELECT 1",
]


@pytest.mark.parametrize("statement,why", REFUSED)
def test_escapes_are_refused(guard, statement, why):
    with pytest.raises(HoodieAccessDeniedError, match="refused by the server's safe default") as denied:
        guard.check_statement(statement)
    assert why in str(denied.value) and denied.value.sqlstate == "42000"


@pytest.mark.parametrize("statement", ALLOWED)
def test_ordinary_statements_pass(guard, statement):
    guard.check_statement(statement)


def test_extra_data_roots_and_the_users_file(guard, tmp_path):
    guard.check_statement(f"SELECT * FROM csv.`{tmp_path}/extra/a.csv`")
    with pytest.raises(HoodieAccessDeniedError, match="server's own state"):
        guard.check_statement(f"SELECT * FROM text.`{tmp_path}/users`")
    with pytest.raises(HoodieAccessDeniedError, match="setting spark.hadoop.fs.s3a.access.key"):
        guard.check_setting("spark.hadoop.fs.s3a.access.key")
    guard.check_setting("hoodie.datasource.write.operation")


def test_server_options_name_the_flag():
    config, rest = ServerConfig.from_conf({"sqlext.serve.unsafe.statements": "true",
                                           "sqlext.serve.data.roots": "/a, /b", "spark.x": "1"})
    assert config.allow_unsafe_statements and config.data_roots == ("/a", "/b") and rest == {"spark.x": "1"}
    with pytest.raises(ValueError, match="sqlext.serve.unsafe.statements: expected true or false"):
        ServerConfig.from_conf({"sqlext.serve.unsafe.statements": "yes"})


# -- through a real client ------------------------------------------------------------------------------------
_CLIENT = textwrap.dedent("""
    import json, sys
    from pyhive import hive
    args = json.loads(sys.argv[1])
    cursor = hive.connect(host="127.0.0.1", port=args["port"], auth="NONE", username="mallory").cursor()
    out = {}
    for sql in args["statements"]:
        try:
            cursor.execute(sql)
            out[sql] = {"rows": [list(map(str, r)) for r in cursor.fetchall()][:3]}
        except Exception as exc:
            status = getattr(getattr(exc, "args", [None])[0], "status", None)
            out[sql] = {"error": str(getattr(status, "errorMessage", exc)),
                        "sqlstate": getattr(status, "sqlState", None)}
    print(json.dumps(out))
""")


def _run_pyhive(port: int, statements: list[str]) -> dict:
    done = subprocess.run([sys.executable, "-c", _CLIENT, json.dumps({"port": port, "statements": statements})],
                          capture_output=True, text=True, timeout=300, env=client_env())
    assert done.returncode == 0, done.stderr[-4000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


@pytest.fixture
def served(spark, tmp_path):
    """Two servers over the test session's SparkSession: the safe default and the administrator's flag."""
    from sqlext.server.server import HiveService

    users = tmp_path / "users"
    users.write_text("")
    started = []
    for unsafe in (False, True):
        config = ServerConfig(port=0, http_port=None, allow_unsafe_statements=unsafe,
                              audit_log=None if unsafe else str(tmp_path / "audit.log"))
        started.append(HiveService(spark, config).start())
    yield started
    for service in started:
        service.stop()


def test_escapes_through_pyhive_refused_by_default_and_allowed_by_the_flag(served, tmp_path):
    secret = tmp_path / "secret.txt"
    secret.write_text("the host's file\n")
    escapes = [f"SELECT * FROM text.`{secret}`",
               "SELECT java_method('java.lang.System', 'getProperty', 'java.version')",
               "SET spark.hadoop.fs.s3a.secret.key=stolen"]
    safe, unsafe = (_run_pyhive(service.binary.port, escapes + ["SELECT 1 + 1"]) for service in served)
    for sql in escapes:
        assert "refused by the server's safe default" in safe[sql].get("error", ""), safe[sql]
        assert safe[sql]["sqlstate"] == "42000"
    assert safe["SELECT 1 + 1"] == {"rows": [["2"]]}
    assert unsafe[escapes[0]] == {"rows": [["the host's file"]]}
    assert unsafe[escapes[1]]["rows"][0][0].split(".")[0].isdigit()
    assert "error" not in unsafe[escapes[2]]

    # the audit log of the safe server: one line per statement, written as each operation closes
    statements = escapes + ["SELECT 1 + 1"]
    audit = tmp_path / "audit.log"
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline and (not audit.exists() or len(audit.read_text().splitlines()) < 5):
        time.sleep(0.1)
    lines = {entry["statement"]: entry for entry in map(json.loads, audit.read_text().splitlines())}
    assert sorted(lines) == sorted(statements + ["USE `default`"])  # PyHive's connect sends the USE
    for sql in escapes:
        assert lines[sql]["outcome"] == "denied" and lines[sql]["sqlstate"] == "42000", lines[sql]
    ok = lines["SELECT 1 + 1"]
    assert ok["outcome"] == "ok" and ok["rows"] == 1 and ok["sqlstate"] is None and ok["duration_ms"] >= 0
    assert ok["statement_sha256"] == hashlib.sha256(b"SELECT 1 + 1").hexdigest()
    assert lines[escapes[0]]["tables"] == [f"text.{secret}"]
    assert {e["user"] for e in lines.values()} == {"mallory"}
    assert all(e["client"].startswith("127.0.0.1:") and e["session"] and e["time"].endswith("+00:00")
               for e in lines.values())
