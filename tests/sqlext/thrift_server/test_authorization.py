"""Grants of served tables (sqlext/server/authorization.py): what each statement needs, the policy file, and a
matrix of users x privileges x statements through a real client (PyHive, in its own process) against a server
with a policy: allowed or denied (SQLSTATE 42000 naming the privilege and the table) as the policy says, nothing
written on a denial, and the catalog RPCs (impyla's get_tables) listing only the tables a user may SELECT."""
from __future__ import annotations

import json
import subprocess
import sys
import textwrap
import time
import uuid

import pytest

from sqlext.server.authorization import Policy, PolicyFile, required_privileges
from thrift_server.support import beeline_outcomes, beeline_script, client_env, start_beeline_script

DB = "shop"


@pytest.mark.parametrize("statement,needed", [
    ("SELECT * FROM t", [("SELECT", "shop.t")]),
    ("SELECT * FROM other.t JOIN t USING (id)", [("SELECT", "other.t"), ("SELECT", "shop.t")]),
    ("WITH x AS (SELECT * FROM s) SELECT * FROM x", [("SELECT", "shop.s")]),
    ("SELECT * FROM t WHERE id IN (SELECT id FROM spark_catalog.other.s)",
     [("SELECT", "shop.t"), ("SELECT", "other.s")]),
    ("SELECT * FROM hudi.`/data/t`", [("SELECT", "path:/data/t")]),
    ("INSERT INTO t SELECT * FROM s", [("MODIFY", "shop.t"), ("SELECT", "shop.s")]),
    ("INSERT OVERWRITE TABLE t VALUES (1)", [("MODIFY", "shop.t")]),
    ("MERGE INTO t USING s ON t.id = s.id WHEN MATCHED THEN DELETE", [("MODIFY", "shop.t"), ("SELECT", "shop.s")]),
    ("UPDATE t SET a = 1 WHERE id IN (SELECT id FROM s)", [("MODIFY", "shop.t"), ("SELECT", "shop.s")]),
    ("DELETE FROM other.t WHERE id = 1", [("MODIFY", "other.t")]),
    ("CREATE TABLE t2 USING hudi AS SELECT * FROM t", [("ADMIN", "shop.t2"), ("SELECT", "shop.t")]),
    ("CREATE VIEW v AS SELECT * FROM t", [("ADMIN", "shop.v"), ("SELECT", "shop.t")]),
    ("CREATE DATABASE d", [("ADMIN", "d.*")]),
    ("DROP TABLE t", [("ADMIN", "shop.t")]),
    ("DROP DATABASE d CASCADE", [("ADMIN", "d.*")]),
    ("ALTER TABLE t ADD COLUMNS (x int)", [("ADMIN", "shop.t")]),
    ("TRUNCATE TABLE t", [("ADMIN", "shop.t")]),
    ("DESCRIBE t", [("SELECT", "shop.t")]),
    ("SHOW CREATE TABLE other.t", [("SELECT", "other.t")]),
    ("EXPLAIN UPDATE t SET a = 1", [("SELECT", "shop.t")]),
    ("CALL run_compaction(op => 'run', table => 't')", [("MODIFY", "shop.t")]),
    ("CALL run_clean(table => 'other.t')", [("MODIFY", "other.t")]),
    ("CALL show_commits(table => 't', limit => 5)", [("SELECT", "shop.t")]),
    ("CALL rollback_to_instant(table => 't', instant_time => '1')", [("ADMIN", "shop.t")]),
    ("CALL create_savepoint(path => '/data/t', commit_time => '1')", [("ADMIN", "path:/data/t")]),
    ("SHOW TABLES", []), ("USE other", []), ("SET spark.sql.shuffle.partitions=3", []),
    ("CREATE FUNCTION f(x INT) RETURNS INT RETURN x + 1", [("ADMIN", "*")]),
    ("MSCK REPAIR TABLE t", [("ADMIN", "*")]),
    ("CREATE TEMPORARY VIEW v AS SELECT * FROM t", [("SELECT", "shop.t")]),
    ("CREATE GLOBAL TEMPORARY VIEW g AS SELECT * FROM t", [("ADMIN", "global_temp.g"), ("SELECT", "shop.t")]),
    ("SELECT * FROM global_temp.g", [("SELECT", "global_temp.g")]),
    # `tv` is a temporary view of the session (unqualified: Spark resolves it to the view); shop.tv is a table
    ("SELECT * FROM tv JOIN t USING (id)", [("SELECT", "shop.t")]),
    ("SELECT * FROM shop.tv", [("SELECT", "shop.tv")]),
    ("INSERT INTO t SELECT * FROM tv", [("MODIFY", "shop.t")]),
])
def test_what_a_statement_needs(statement, needed):
    assert required_privileges(statement, DB, lambda name: name.lower() == "tv") == needed


def test_policy_hierarchy_wildcards_and_groups():
    policy = Policy.parse("""
        # analysts read the shop, alice also writes its orders
        GROUP analysts: alice, carol
        GRANT SELECT ON shop.* TO GROUP analysts
        GRANT MODIFY ON shop.orders TO USER alice
        GRANT ADMIN ON * TO USER root
        GRANT SELECT ON path:/data/* TO USER *
    """)
    assert policy.allows("carol", "SELECT", "shop.items") and not policy.allows("carol", "MODIFY", "shop.orders")
    assert policy.allows("alice", "MODIFY", "shop.orders") and policy.allows("alice", "SELECT", "shop.orders")
    assert not policy.allows("alice", "ADMIN", "shop.orders") and not policy.allows("alice", "SELECT", "hr.pay")
    assert policy.allows("root", "ADMIN", "hr.pay") and policy.allows("root", "SELECT", "path:/anywhere")
    assert policy.allows("mallory", "SELECT", "path:/data/t") and not policy.allows("mallory", "SELECT", "shop.x")
    with pytest.raises(ValueError, match=r"policy:2: expected 'GRANT <SELECT\|MODIFY\|ADMIN>"):
        Policy.parse("GRANT SELECT ON shop.* TO USER a\nGRANT ALL ON * TO bob")


def test_grant_and_revoke_edit_the_file_and_the_server_sees_it(tmp_path):
    path = tmp_path / "policy"
    done = subprocess.run([sys.executable, "-m", "sqlext.cli", "serve", "--policy", str(path),
                           "--grant", "SELECT ON shop.* TO USER alice"], capture_output=True, text=True,
                          env=client_env(), timeout=120)
    assert done.returncode == 0, done.stderr
    assert "granted SELECT on shop.* to user alice" in done.stdout
    policy = PolicyFile(str(path))
    assert policy.policy().allows("alice", "SELECT", "shop.orders")
    PolicyFile(str(path)).change("MODIFY ON shop.orders TO USER alice")
    assert policy.policy().allows("alice", "MODIFY", "shop.orders")  # re-read: the file changed
    PolicyFile(str(path)).change("SELECT ON shop.* TO USER alice", revoke=True)
    assert path.read_text() == "GRANT MODIFY ON shop.orders TO USER alice\n"


# -- the matrix: one table of cases, run through PyHive and through beeline ------------------------------------
def matrix(n: dict[str, str], located: str) -> tuple[dict[str, str], dict[str, set[str]]]:
    """(statement by key, per user the keys the policy_server policy allows); `n`: the fixture's names,
    `located`: the base path of the open table. Alice (analysts: SELECT on open; MODIFY on rw; ADMIN on her
    authz_view_* views), bob (nothing), root (ADMIN on *, running the reads and one write of its own)."""
    o, rw, s = n["open"], n["rw"], n["secret"]
    statements = {
        "select open": f"SELECT count(*) FROM {o}",
        "select secret": f"SELECT count(*) FROM {s}",
        "cte over secret": f"WITH x AS (SELECT * FROM {s}) SELECT count(*) FROM x",
        "subquery over secret": f"SELECT count(*) FROM {o} WHERE id IN (SELECT id FROM {s})",
        "merge rw from open": f"MERGE INTO {rw} t USING (SELECT id, 'merged' AS v, 2 AS ts FROM {o}) src "
                              f"ON t.id = src.id WHEN MATCHED THEN UPDATE SET *",
        "merge rw from secret": f"MERGE INTO {rw} t USING (SELECT id, 'leak' AS v, 3 AS ts FROM {s}) src "
                                f"ON t.id = src.id WHEN MATCHED THEN UPDATE SET *",
        "update secret": f"UPDATE {s} SET v = 'hacked' WHERE id = 1",
        "delete open": f"DELETE FROM {o} WHERE id = 2",
        "insert rw": f"INSERT INTO {rw} VALUES (3, 'new', 1)",
        "drop secret": f"DROP TABLE {s}",
        "clean rw": f"CALL run_clean(table => '{rw}')",
        "commits secret": f"CALL show_commits(table => '{s}')",
        # IF NOT EXISTS / OR REPLACE: beeline runs the matrix again after PyHive, on the same tables
        "create table": f"CREATE TABLE IF NOT EXISTS {n['new']} (id INT, v STRING) USING hudi "
                        f"TBLPROPERTIES (primaryKey = 'id')",
        "rollback rw": f"CALL rollback_to_instant(table => '{rw}', instant_time => '1')",
        "path read open": f"SELECT count(*) FROM hudi.`{located}`",
        "temp view over open": f"CREATE TEMPORARY VIEW mine AS SELECT * FROM {o}",
        "select temp view": "SELECT count(*) FROM mine",
        "temp view over secret": f"CREATE TEMPORARY VIEW leak AS SELECT * FROM {s}",
        "view over open": f"CREATE OR REPLACE VIEW {n['view_open']} AS SELECT id, v FROM {o}",
        "view over secret": f"CREATE OR REPLACE VIEW {n['view_secret']} AS SELECT id, v FROM {s}",
        "select view": f"SELECT count(*) FROM {n['view_open']}",  # a new statement: Spark expands the stored view
    }
    allowed = {  # per user, the statements the policy allows
        "alice": {"select open", "merge rw from open", "insert rw", "clean rw", "temp view over open",
                  "select temp view", "view over open", "select view"},
        "bob": set(),
        # root (ADMIN on *) runs the reads and one write of its own; the tables then tell what the others wrote
        "root": {"select open", "select secret", "cte over secret", "subquery over secret", "commits secret",
                 "create table", "path read open", "select view"},
    }
    return statements, allowed


# -- the matrix through PyHive ----------------------------------------------------------------------------------
_CLIENT = textwrap.dedent("""
    import json, sys
    from pyhive import hive
    from thrift.protocol import TBinaryProtocol
    from thrift.transport import TSocket, TTransport
    from sqlext.server.third_party.tcliservice import TCLIService, ttypes as t

    def listed_tables(port, user):
        # the catalog RPC GetTables (what a BI tool's table list calls), over a NOSASL connection as `user`
        transport = TTransport.TBufferedTransport(TSocket.TSocket("127.0.0.1", port))
        transport.open()
        client = TCLIService.Client(TBinaryProtocol.TBinaryProtocol(transport))
        session = client.OpenSession(t.TOpenSessionReq(client_protocol=t.TProtocolVersion.HIVE_CLI_SERVICE_PROTOCOL_V10,
                                                       username=user)).sessionHandle
        op = client.GetTables(t.TGetTablesReq(session, schemaName="default", tableName="authz_%")).operationHandle
        names = client.FetchResults(t.TFetchResultsReq(op, 0, 1000)).results.columns[2].stringVal.values
        transport.close()
        return sorted(names)

    args = json.loads(sys.argv[1])
    out = {}
    for user, statements in args["runs"].items():
        cursor = hive.connect(host="127.0.0.1", port=args["port"], auth="NONE", username=user).cursor()
        for sql in statements:
            try:
                cursor.execute(sql)
                fetched = cursor.fetchall() if cursor.description else []  # DDL answers no result set
                out[f"{user}|{sql}"] = {"rows": [list(map(str, r)) for r in fetched]}
            except Exception as exc:
                status = getattr(getattr(exc, "args", [None])[0], "status", None)
                out[f"{user}|{sql}"] = {"error": str(getattr(status, "errorMessage", exc)),
                                        "sqlstate": getattr(status, "sqlState", None)}
        out[f"{user}|tables"] = listed_tables(args["port"], user)
    print(json.dumps(out))
""")


@pytest.fixture
def policy_server(spark, tmp_path):
    from sqlext.server.config import ServerConfig
    from sqlext.server.server import HiveService

    suffix = uuid.uuid4().hex[:6]
    names = {k: f"authz_{k}_{suffix}" for k in ("open", "rw", "secret", "new", "view_open", "view_secret")}
    for key in ("open", "rw", "secret"):
        spark.sql(f"CREATE TABLE {names[key]} (id INT, v STRING, ts INT) USING hudi "
                  f"TBLPROPERTIES (primaryKey = 'id', preCombineField = 'ts')")
        spark.sql(f"INSERT INTO {names[key]} VALUES (1, '{key}', 1), (2, '{key}', 1)")
    policy = tmp_path / "policy"
    policy.write_text(f"GROUP analysts: alice\n"
                      f"GRANT SELECT ON default.{names['open']} TO GROUP analysts\n"
                      f"GRANT MODIFY ON default.{names['rw']} TO USER alice\n"
                      f"GRANT ADMIN ON default.authz_view_*_{suffix} TO USER alice\n"  # her persistent views
                      f"GRANT ADMIN ON * TO USER root\n")
    service = HiveService(spark, ServerConfig(port=0, http_port=None, policy_file=str(policy),
                                              audit_log=str(tmp_path / "audit.log"))).start()
    yield service.binary.port, names, tmp_path / "audit.log"
    service.stop()
    for key in ("view_open", "view_secret"):
        spark.sql(f"DROP VIEW IF EXISTS {names[key]}")
    for key in ("open", "rw", "secret", "new"):
        spark.sql(f"DROP TABLE IF EXISTS {names[key]}")


def test_users_privileges_statements_through_pyhive(spark, policy_server):
    port, n, audit = policy_server
    o, rw, s = n["open"], n["rw"], n["secret"]
    located = {r[0]: r[1] for r in spark.sql(f"DESCRIBE TABLE EXTENDED {o}").collect()}["Location"]
    statements, allowed = matrix(n, located.removeprefix("file:"))
    order = list(statements)
    root_update = f"UPDATE {s} SET v = 'root' WHERE id = 2"
    runs = {user: [statements[k] for k in order if user != "root" or k in allowed["root"]] + ["SHOW GRANTS"]
            for user in allowed}
    runs["root"].append(root_update)
    before = {t: sorted(tuple(r) for r in spark.sql(f"SELECT id, v FROM {t}").collect()) for t in (o, s)}
    done = subprocess.run([sys.executable, "-c", _CLIENT, json.dumps({"port": port, "runs": runs})],
                          capture_output=True, text=True, timeout=600, env=client_env())
    assert done.returncode == 0, done.stderr[-4000:]
    got = json.loads(done.stdout.strip().splitlines()[-1])
    for user in ("alice", "bob"):
        for key in order:
            answer = got[f"{user}|{statements[key]}"]
            if key in allowed[user]:
                assert "error" not in answer, (user, key, answer)
            else:
                assert answer.get("sqlstate") == "42000" and f"user {user} lacks the" in answer["error"], \
                    (user, key, answer)
    assert "lacks the SELECT privilege on default." + s in got[f"alice|{statements['merge rw from secret']}"]["error"]
    assert "lacks the MODIFY privilege on default." + rw in got[f"bob|{statements['insert rw']}"]["error"]
    assert all("error" not in got[f"root|{statements[k]}"] for k in allowed["root"])
    assert got["alice|SHOW GRANTS"]["rows"] == [["SELECT", f"default.{o}", "GROUP", "analysts"],
                                                ["MODIFY", f"default.{rw}", "USER", "alice"],
                                                ["ADMIN", f"default.authz_view_*_{n['new'][-6:]}", "USER", "alice"]]
    assert got["bob|SHOW GRANTS"] == {"rows": []}
    # catalog listings show only what the user may SELECT
    assert got["alice|tables"] == sorted([o, rw, n["view_open"]]) and got["bob|tables"] == []
    assert got["root|tables"] == sorted([o, rw, s, n["new"], n["view_open"]])
    assert "lacks the ADMIN privilege on default." + rw in got[f"alice|{statements['rollback rw']}"]["error"]
    assert "lacks the SELECT privilege on path:/" in got[f"alice|{statements['path read open']}"]["error"]
    assert got[f"root|{statements['path read open']}"] == {"rows": [["2"]]}
    assert got[f"alice|{statements['select temp view']}"] == {"rows": [["2"]]}  # her view over a granted table
    assert "error" not in got[f"root|{root_update}"]
    # nothing written on a denial: the secret table holds root's update only, the open one is as it was
    assert sorted(tuple(r) for r in spark.sql(f"SELECT id, v FROM {s}").collect()) == [(1, "secret"), (2, "root")]
    assert sorted(tuple(r) for r in spark.sql(f"SELECT id, v FROM {o}").collect()) == before[o]
    assert sorted(tuple(r) for r in spark.sql(f"SELECT id, v FROM {rw}").collect()) == \
        [(1, "merged"), (2, "merged"), (3, "new")]
    assert before[s] == [(1, "secret"), (2, "secret")]
    # one audit line per statement: its user, and denied exactly where the matrix says
    deadline = time.monotonic() + 20
    expected_lines = sum(len(v) for v in runs.values()) + len(runs)  # + PyHive's USE per connection
    while time.monotonic() < deadline and (not audit.exists() or len(audit.read_text().splitlines()) < expected_lines):
        time.sleep(0.1)
    lines = [json.loads(line) for line in audit.read_text().splitlines()]
    assert len(lines) == expected_lines
    outcomes = {(e["user"], e["statement"]): e["outcome"] for e in lines}
    for user in ("alice", "bob"):
        for key in order:
            want = "ok" if key in allowed[user] else "denied"
            assert outcomes[(user, " ".join(statements[key].split()))] == want, (user, key)
    assert "lacks the SELECT privilege on default." + s in got[f"alice|{statements['view over secret']}"]["error"]
    assert got[f"alice|{statements['select view']}"] == {"rows": [["2"]]}  # her persistent view, read back
    assert not spark.catalog.tableExists(n["view_secret"])  # the denied CREATE VIEW made nothing
    # the same matrix through beeline (Hive JDBC): allowed or denied alike, and still nothing written on a denial
    beeline = _matrix_through_beeline(port, statements, allowed, audit.parent)
    for user, answers in beeline.items():
        for key, answer in answers.items():
            if key in allowed[user]:
                assert "error" not in answer, ("beeline", user, key, answer)
            else:
                assert "state=42000" in answer.get("error", "") and f"user {user} lacks the" in answer["error"], \
                    ("beeline", user, key, answer)
    assert f"lacks the SELECT privilege on default.{s}" in beeline["alice"]["view over secret"]["error"]
    assert beeline["alice"]["select view"]["rows"][-1] == "2" and beeline["root"]["select open"]["rows"][-1] == "2"
    assert sorted(tuple(r) for r in spark.sql(f"SELECT id, v FROM {s}").collect()) == [(1, "secret"), (2, "root")]
    assert sorted(tuple(r) for r in spark.sql(f"SELECT id, v FROM {o}").collect()) == before[o]
    assert sorted(tuple(r) for r in spark.sql(f"SELECT id, v FROM {rw}").collect()) == \
        [(1, "merged"), (2, "merged"), (3, "new")]
    assert not spark.catalog.tableExists(n["view_secret"])


def _matrix_through_beeline(port: int, statements: dict[str, str], allowed: dict[str, set[str]],
                            workdir) -> dict[str, dict[str, dict]]:
    """user -> statement key -> beeline's outcome. One beeline process per user (a JVM each, all three at once)
    running its statements as one script, instead of a JVM per statement; root runs only what it may."""
    url = f"jdbc:hive2://127.0.0.1:{port}/default"
    runs = {user: [k for k in statements if user != "root" or k in allowed["root"]] for user in allowed}
    started = {}
    for user, keys in runs.items():
        script = workdir / f"beeline-{user}.sql"
        script.write_text(beeline_script([statements[k] for k in keys]))
        started[user] = start_beeline_script(url, user, script)
    out = {}
    for user, proc in started.items():
        output, _ = proc.communicate(timeout=300)
        out[user] = dict(zip(runs[user], beeline_outcomes(output, len(runs[user]))))
    return out
