"""Protocol behaviour of `sqlext serve` seen from a raw TCLIService client: asynchronous execution and a
cancel that really stops the Spark job, FETCH_FIRST, hasMoreRows over bounded batches, per-client sessions
(current database, SET, temporary views), error statuses with SQLSTATE and position, GetInfo, GetQueryId and
the protocol version."""
from __future__ import annotations

import time

import pytest

from thrift_server.clients import Raw


@pytest.fixture
def raw(hive_server):
    client = Raw(hive_server.port)
    yield client
    client.transport.close()


def _state(raw: Raw, op) -> int:
    return raw.client.GetOperationStatus(raw.t.TGetOperationStatusReq(op)).operationState


def test_cancel_stops_the_spark_job(hive_server, raw):
    t = raw.t
    op = raw.execute("SELECT count(*) FROM range(0, 50000000000, 1, 2) WHERE rand() < 2", run_async=True)
    deadline = time.monotonic() + 120
    while hive_server.health()["active_spark_jobs"] == 0 and time.monotonic() < deadline:
        time.sleep(0.5)
    assert _state(raw, op) == t.TOperationState.RUNNING_STATE
    assert raw.client.CancelOperation(t.TCancelOperationReq(op)).status.statusCode == 0
    assert _state(raw, op) == t.TOperationState.CANCELED_STATE
    deadline = time.monotonic() + 60
    while hive_server.health()["active_spark_jobs"] and time.monotonic() < deadline:
        time.sleep(0.5)
    assert hive_server.health()["active_spark_jobs"] == 0


def test_async_statement_then_fetch_first_rewinds(raw):
    t = raw.t
    op = raw.execute("SELECT id FROM range(0, 25, 1, 3) ORDER BY id", run_async=True)
    deadline = time.monotonic() + 120
    while _state(raw, op) != t.TOperationState.FINISHED_STATE and time.monotonic() < deadline:
        time.sleep(0.2)
    first, more = raw.fetch(op, 10)
    assert [r[0] for r in first] == list(range(10)) and more
    second, more = raw.fetch(op, 10)
    assert [r[0] for r in second] == list(range(10, 20)) and more
    rewound, _ = raw.fetch(op, 4, orientation=t.TFetchOrientation.FETCH_FIRST)
    assert [r[0] for r in rewound] == [0, 1, 2, 3]
    rest, more = raw.fetch(op, 100)
    assert [r[0] for r in rest] == list(range(4, 25)) and not more
    assert raw.fetch(op, 100) == ([], False)


def test_sessions_are_isolated(hive_server):
    one, two = Raw(hive_server.port), Raw(hive_server.port)
    db = "srv_iso_db"
    one.fetch_all(one.execute(f"CREATE DATABASE IF NOT EXISTS {db}"))
    one.fetch_all(one.execute(f"USE {db}"))
    one.fetch_all(one.execute("SET spark.sql.shuffle.partitions=3"))
    one.fetch_all(one.execute("CREATE TEMPORARY VIEW only_here AS SELECT 1 AS x"))
    assert one.fetch_all(one.execute("SELECT current_database()")) == [[db]]
    assert two.fetch_all(two.execute("SELECT current_database()")) == [["default"]]
    assert one.fetch_all(one.execute("SET spark.sql.shuffle.partitions"))[0][1] == "3"
    assert two.fetch_all(two.execute("SET spark.sql.shuffle.partitions"))[0][1] != "3"
    assert one.fetch_all(one.execute("SELECT x FROM only_here")) == [[1]]
    with pytest.raises(RuntimeError, match="only_here"):
        two.execute("SELECT x FROM only_here")


def test_errors_carry_sqlstate_and_position(raw):
    t = raw.t
    resp = raw.client.ExecuteStatement(t.TExecuteStatementReq(raw.session, "SELECT 1;\nSELECT nope FROM range(1)"))
    assert resp.status.statusCode == t.TStatusCode.ERROR_STATUS
    assert resp.status.sqlState == "42703"
    assert resp.status.errorMessage.startswith("line 2:8: ")
    resp = raw.client.ExecuteStatement(t.TExecuteStatementReq(raw.session, "SELEC 1"))
    assert resp.status.statusCode == t.TStatusCode.ERROR_STATUS and resp.status.sqlState
    bad = t.TOperationHandle(t.THandleIdentifier(b"\x00" * 16, b"\x00" * 16), t.TOperationType.EXECUTE_STATEMENT, True)
    status = raw.client.GetOperationStatus(t.TGetOperationStatusReq(bad)).status
    assert status.statusCode == t.TStatusCode.INVALID_HANDLE_STATUS


def test_get_info_query_id_and_protocol(hive_server, raw):
    t = raw.t
    assert raw.open_resp.serverProtocolVersion == t.TProtocolVersion.HIVE_CLI_SERVICE_PROTOCOL_V10
    info = raw.client.GetInfo(t.TGetInfoReq(raw.session, t.TGetInfoType.CLI_DBMS_NAME))
    assert info.infoValue.stringValue == "Spark SQL"
    unsupported = raw.client.GetInfo(t.TGetInfoReq(raw.session, t.TGetInfoType.CLI_TXN_CAPABLE))
    assert unsupported.status.statusCode == t.TStatusCode.ERROR_STATUS and unsupported.status.sqlState == "0A000"
    op = raw.execute("SELECT 1")
    assert raw.client.GetQueryId(t.TGetQueryIdReq(op)).queryId.startswith("sqlext-")
    old = Raw(hive_server.port, protocol=t.TProtocolVersion.HIVE_CLI_SERVICE_PROTOCOL_V5)
    assert old.open_resp.status.statusCode == t.TStatusCode.ERROR_STATUS
    assert "V6" in old.open_resp.status.errorMessage
