"""Limits of `sqlext serve` (config.py): sessions in all and per user (`--max-sessions`,
`hive.server2.limit.connections.per.user`), statements running at once in one session
(`--max-operations-per-session`) and rows of one result (`--max-result-rows`). Each refusal is an error status
with a SQLSTATE and a message naming the limit and the setting that raises it, and the server (and, for the
statement limits, the session) goes on. One server for the module, inside the test process over the test
session's SparkSession (as `auth_server`); clients: the generated TCLIService client and PyHive (a process)."""
from __future__ import annotations

import subprocess
import sys
import time

import pytest

from thrift_server.clients import Raw
from thrift_server.support import ServerProcess, client_env

MAX_SESSIONS, PER_USER, MAX_OPERATIONS, MAX_ROWS = 3, 2, 1, 100
SLOW_QUERY = "SELECT count(*) FROM range(0, 50000000000, 1, 2) WHERE rand() < 2"  # minutes: cancelled first


@pytest.fixture(scope="module")
def limited_server(spark):
    """A server with small limits, the per-user one set by HiveServer2's own `--conf` key."""
    from sqlext.server.config import ServerConfig
    from sqlext.server.server import HiveService

    config, rest = ServerConfig.from_conf(
        {"hive.server2.limit.connections.per.user": str(PER_USER)}, port=0, http_port=0,
        max_sessions=MAX_SESSIONS, max_operations_per_session=MAX_OPERATIONS, max_result_rows=MAX_ROWS)
    assert rest == {} and config.sessions_per_user == PER_USER
    service = HiveService(spark, config).start()
    server = ServerProcess(*service.ports)
    server.service = service
    yield server
    service.stop()


@pytest.fixture
def raw(limited_server):
    """A connection with one session of user `raw` (the module's server counts it)."""
    conn = Raw(limited_server.port)
    yield conn
    _close_all(conn, [conn.session])
    conn.transport.close()


def _open(raw: Raw, user: str):
    """OpenSession over `raw`'s connection as `user` (one connection may hold several sessions)."""
    t = raw.t
    return raw.client.OpenSession(t.TOpenSessionReq(client_protocol=t.TProtocolVersion.HIVE_CLI_SERVICE_PROTOCOL_V10,
                                                    username=user))


def _close_all(raw: Raw, handles) -> None:
    for handle in handles:
        if handle is not None:
            assert raw.client.CloseSession(raw.t.TCloseSessionReq(handle)).status.statusCode == 0


def _wait_for(predicate, timeout: float = 30):
    deadline = time.monotonic() + timeout
    while not predicate() and time.monotonic() < deadline:
        time.sleep(0.2)
    return predicate()


# -- sessions -------------------------------------------------------------------------------------------
def test_sessions_over_a_limit_are_refused_and_a_freed_slot_is_reused(limited_server, raw):
    opened = [_open(raw, "ann")]           # raw's session + ann: 2 of 3
    try:
        assert opened[0].status.statusCode == 0
        second = _open(raw, "ann")         # ann's second: 3 of 3 (and 2 of 2 for ann)
        opened.append(second)
        assert second.status.statusCode == 0
        per_user = _open(raw, "ann")       # the per-user limit is also full, the total one is checked first
        assert per_user.status.statusCode == 3 and per_user.status.sqlState == "08004"
        assert "--max-sessions" in per_user.status.errorMessage
        assert limited_server.health()["sessions"] == MAX_SESSIONS
        _close_all(raw, [opened.pop().sessionHandle])    # a slot frees: ann may open her second again, bob one more
        bob = _open(raw, "bob")
        opened.append(bob)
        assert bob.status.statusCode == 0
        _close_all(raw, [opened.pop().sessionHandle])
        again = _open(raw, "ann")
        opened.append(again)
        assert again.status.statusCode == 0, again.status.errorMessage
    finally:
        _close_all(raw, [r.sessionHandle for r in opened if r.status.statusCode == 0])
    assert raw.fetch_all(raw.execute("SELECT 40 + 2")) == [[42]]  # the refusals touched nobody


def test_sessions_per_user_are_limited_by_hives_key(limited_server, raw):
    opened = [_open(raw, "carl"), _open(raw, "carl")]  # with raw's session: 3 of 3, carl's 2 of 2
    try:
        assert [r.status.statusCode for r in opened] == [0, 0]
        _close_all(raw, [raw.session])     # a slot free in all, none for carl
        raw.session = None
        third = _open(raw, "carl")
        assert third.status.statusCode == 3 and third.status.sqlState == "08004"
        message = third.status.errorMessage
        assert "user carl" in message and "hive.server2.limit.connections.per.user" in message, message
        other = _open(raw, "erin")         # the free slot is anybody else's
        opened.append(other)
        assert other.status.statusCode == 0
    finally:
        _close_all(raw, [r.sessionHandle for r in opened if r.status.statusCode == 0])


def test_a_binary_connection_ending_frees_its_sessions(limited_server):
    before = limited_server.health()["sessions"]
    conn = Raw(limited_server.port)
    assert conn.open_resp.status.statusCode == 0
    conn.transport.close()                 # no CloseSession: the connection's end closes it
    assert _wait_for(lambda: limited_server.health()["sessions"] == before)


# -- statements running at once ---------------------------------------------------------------------------
def test_statements_over_the_session_limit_are_refused_and_the_session_goes_on(limited_server, raw):
    t = raw.t
    slow = raw.execute(SLOW_QUERY, run_async=True)
    try:
        refused = raw.client.ExecuteStatement(t.TExecuteStatementReq(raw.session, "SELECT 1"))
        assert refused.status.statusCode == 3 and refused.status.sqlState == "53000"
        assert "--max-operations-per-session" in refused.status.errorMessage
        assert "session stays open" in refused.status.errorMessage
        other = Raw(limited_server.port)   # the limit is per session: another session runs statements
        try:
            assert other.fetch_all(other.execute("SELECT 7")) == [[7]]
        finally:
            _close_all(other, [other.session])
            other.transport.close()
    finally:
        raw.client.CancelOperation(t.TCancelOperationReq(slow))
    assert raw.fetch_all(raw.execute("SELECT 40 + 2")) == [[42]]  # the slot freed with the cancel


# -- rows of a result -----------------------------------------------------------------------------------
PYHIVE_QUERIES = """
import json, sys
from pyhive import hive
cursor = hive.connect(host="127.0.0.1", port={port}, auth="NOSASL", username="dana").cursor()
out = {{}}
for name, sql in json.loads(sys.argv[1]).items():
    try:
        cursor.execute(sql)
        out[name] = {{"rows": len(cursor.fetchall())}}
    except Exception as exc:
        out[name] = {{"error": str(exc)}}
print(json.dumps(out))
"""


def test_results_over_the_row_limit_fail_and_others_come_whole(limited_server):
    queries = {
        "at_limit": f"SELECT id FROM range(0, {MAX_ROWS}, 1, 4)",           # four partitions, 100 rows
        "one_over": f"SELECT id FROM range(0, {MAX_ROWS + 1}, 1, 4)",       # over in the last partition
        # 200 million rows in 2,000 partitions: collecting them would take minutes, far longer than the bound
        # below, so an answer in time shows the stream stopped at the first batch over the limit
        "huge": "SELECT id FROM range(0, 200000000, 1, 2000)",
    }
    import json

    started = time.monotonic()
    done = subprocess.run([sys.executable, "-c", PYHIVE_QUERIES.format(port=limited_server.port), json.dumps(queries)],
                          capture_output=True, text=True, timeout=120, env=client_env())
    assert done.returncode == 0, done.stderr[-3000:]
    out = json.loads(done.stdout.strip().splitlines()[-1])
    assert out["at_limit"] == {"rows": MAX_ROWS}
    for name in ("one_over", "huge"):
        error = out[name].get("error", "")
        assert f"more than {MAX_ROWS} rows" in error and "--max-result-rows" in error, out[name]
        assert "54000" in error, error
    assert time.monotonic() - started < 40
    assert _wait_for(lambda: limited_server.health()["active_spark_jobs"] == 0)
