"""A small HiveServer2 client (binary transport) over the generated TCLIService code, for the `sqlext` CLI.

    with HiveServerClient(Endpoint("127.0.0.1", 10000)) as client:          # NOSASL
        result = client.query("SELECT 1 AS one", limit=100)                   # QueryResult(columns, rows)

With `Credentials` the connection logs in with SASL PLAIN (`authzid NUL user NUL password`, status OK, as
Python clients send it), which servers of auth `none` and `plain` accept; without, it speaks plain binary
Thrift (NOSASL), which servers of auth `nosasl` and `none` accept. A statement runs asynchronously and is
polled (GetOperationStatus, every 5 ms at first, then less often), so that an interrupt (Ctrl-C) while it
runs cancels it on the server (CancelOperation) instead of leaving it to finish there. Its rows come back as
columnar row sets (protocol V6 and later), decoded to the Python values PySpark's `collect()` gives for the
column types the server reports: typed columns (BOOLEAN, TINYINT ... BIGINT, FLOAT/DOUBLE, BINARY) as they
are; of the types that travel as strings, DECIMAL as Decimal, DATE as date, TIMESTAMP as a naive datetime (in
the server session's time zone), ARRAY / MAP / STRUCT parsed from their JSON (lists and dicts: a STRUCT's
field names survive Spark's to_json, its NULL fields do not), and any other (intervals, say) as the server
wrote it. NULLs come from each column's bitmap. An error status raises HoodieServerStatusError with the
server's message and SQLSTATE.
"""
from __future__ import annotations

import datetime as dt
import decimal
import getpass
import json
import logging
import socket
import time
from dataclasses import dataclass, field
from typing import Any, Callable

from thrift.transport.TSocket import TSocket
from thrift.transport.TTransport import TBufferedTransport, TTransportException

from sqlext.server.errors import HoodieProtocolError
from sqlext.server.processor import protocol_factory
from sqlext.server.sasl import MECHANISM, SaslStatus, TSaslServerTransport
from sqlext.server.third_party.tcliservice import TCLIService
from sqlext.server.third_party.tcliservice.ttypes import (
    TCancelOperationReq,
    TCloseOperationReq,
    TCloseSessionReq,
    TColumn,
    TColumnDesc,
    TExecuteStatementReq,
    TFetchOrientation,
    TFetchResultsReq,
    TGetOperationStatusReq,
    TGetResultSetMetadataReq,
    TOpenSessionReq,
    TOperationHandle,
    TOperationState,
    TProtocolVersion,
    TRowSet,
    TStatusCode,
    TTypeId,
)
from storage.exception import HoodieError

log = logging.getLogger(__name__)

CLIENT_PROTOCOL = TProtocolVersion.HIVE_CLI_SERVICE_PROTOCOL_V10
MIN_PROTOCOL = TProtocolVersion.HIVE_CLI_SERVICE_PROTOCOL_V6      # the first with columnar row sets
MAX_FETCH_ROWS = 10000          # rows asked for per FetchResults (the server's default cap)
# the largest answer accepted: results come in batches of at most MAX_FETCH_ROWS rows, but rows can be wide
MAX_MESSAGE_SIZE = 1 << 30
LOGIN_TIMEOUT_S = 60.0   # SASL and OpenSession: whatever answers on the port must do so in time
POLL_FIRST_S, POLL_MAX_S = 0.005, 0.1   # a short statement is seen finished soon, a long one costs few polls
_OK_CODES = (TStatusCode.SUCCESS_STATUS, TStatusCode.SUCCESS_WITH_INFO_STATUS)
_UNDER_WAY = (TOperationState.INITIALIZED_STATE, TOperationState.PENDING_STATE, TOperationState.RUNNING_STATE)
_COLUMN_FIELDS = [spec[2] for spec in TColumn.thrift_spec if spec]   # boolVal, byteVal, ..., binaryVal


class HoodieServerStatusError(HoodieError):
    """The server answered an error status (or refused the login): its message and SQLSTATE."""

    def __init__(self, message: str, sqlstate: str = "HY000", code: int = 0):
        super().__init__(message)
        self.message = message
        self.sqlstate = sqlstate
        self.code = code


class HoodieServerConnectionError(HoodieServerStatusError):
    """No answer: the server cannot be reached, or the connection broke."""

    def __init__(self, message: str):
        super().__init__(message, sqlstate="08S01")  # communication link failure


@dataclass(frozen=True)
class Endpoint:
    host: str
    port: int

    def __str__(self) -> str:
        return f"{self.host}:{self.port}"

    @classmethod
    def parse(cls, text: str) -> Endpoint:
        """`HOST:PORT` (`[v6-address]:PORT` too); ValueError when malformed."""
        host, sep, port = text.rpartition(":")
        if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
            raise ValueError(f"{text!r}: expected HOST:PORT")
        return cls(host.strip("[]"), int(port))


@dataclass(frozen=True)
class Credentials:
    user: str
    password: str = field(repr=False)


@dataclass(frozen=True)
class ColumnInfo:
    name: str
    type_id: int            # TTypeId: how the values of a string column are read


@dataclass(frozen=True)
class QueryResult:
    """A statement's columns (none for DDL and other statements without a result set) and rows."""

    columns: list[ColumnInfo]
    rows: list[tuple]

    @property
    def names(self) -> list[str]:
        return [c.name for c in self.columns]


# -- decoding columnar row sets ----------------------------------------------------------------------------
# string-typed columns, whose text the server formats as Spark's CAST(... AS STRING) / to_json do (timestamps
# `yyyy-MM-dd HH:mm:ss[.fraction]`)
_FROM_STRING: dict[int, Callable[[str], Any]] = {
    TTypeId.DECIMAL_TYPE: decimal.Decimal,
    TTypeId.DATE_TYPE: dt.date.fromisoformat,
    TTypeId.TIMESTAMP_TYPE: dt.datetime.fromisoformat,
    TTypeId.TIMESTAMPLOCALTZ_TYPE: dt.datetime.fromisoformat,
    TTypeId.ARRAY_TYPE: json.loads,
    TTypeId.MAP_TYPE: json.loads,
    TTypeId.STRUCT_TYPE: json.loads,
}


def null_flags(bitmap: bytes, count: int) -> list[bool]:
    """Bit i of byte i // 8, least significant bit first, says whether value i is NULL."""
    bits = int.from_bytes(bitmap or b"", "little")
    return [bool(bits >> i & 1) for i in range(count)] if bits else [False] * count


def _converter(type_id: int, wire_field: str) -> Callable[[Any], Any] | None:
    return _FROM_STRING.get(type_id) if wire_field == "stringVal" else None


def _convert(convert: Callable[[Any], Any], value: Any) -> Any:
    try:
        return convert(value)
    except (ValueError, TypeError, ArithmeticError):
        # e.g. a year Python's datetime cannot hold: the server's text is still the value
        return value


def decode_column(column: TColumn, info: ColumnInfo) -> list:
    """One TColumn as Python values (None where the nulls bitmap says so)."""
    wire_field = next((f for f in _COLUMN_FIELDS if getattr(column, f) is not None), None)
    if wire_field is None:
        raise HoodieServerStatusError(f"column {info.name!r}: the row set carries no values", sqlstate="08S01")
    typed = getattr(column, wire_field)
    values, convert = list(typed.values), _converter(info.type_id, wire_field)
    nulls = null_flags(typed.nulls, len(values))
    return [None if null else (_convert(convert, v) if convert else v) for v, null in zip(values, nulls)]


def decode_rowset(rowset: TRowSet | None, columns: list[ColumnInfo]) -> list[tuple]:
    if rowset is None or not columns:
        return []
    if rowset.columns is None or len(rowset.columns) != len(columns):
        raise HoodieServerStatusError(f"expected a columnar row set of {len(columns)} columns (protocol V6 or "
                                      f"later), got {len(rowset.columns or [])}", sqlstate="08S01")
    return list(zip(*(decode_column(c, info) for c, info in zip(rowset.columns, columns))))


def column_info(desc: TColumnDesc) -> ColumnInfo:
    entry = desc.typeDesc.types[0].primitiveEntry if desc.typeDesc and desc.typeDesc.types else None
    return ColumnInfo(desc.columnName, entry.type if entry is not None else TTypeId.STRING_TYPE)


# -- the transport -------------------------------------------------------------------------------------------
class TSaslPlainClientTransport(TSaslServerTransport):
    """SASL PLAIN, the client's side. Data frames (a 4-byte length and the payload) are the same both ways, so
    the server transport's framing is used as it is; only the negotiation is the client's."""

    def __init__(self, trans: TSocket, credentials: Credentials, max_frame_size: int):
        super().__init__(trans, authenticate=None, max_frame_size=max_frame_size)
        self._credentials = credentials

    def open(self) -> None:
        if not self._trans.isOpen():
            self._trans.open()
        self._send(SaslStatus.START, MECHANISM)
        creds = self._credentials
        self._send(SaslStatus.OK, b"\0" + creds.user.encode() + b"\0" + creds.password.encode())
        status, payload = self._read_negotiation_frame()
        if status != SaslStatus.COMPLETE:
            reason = payload.decode("utf-8", "replace") or f"SASL status {status}"
            raise HoodieServerStatusError(f"login refused: {reason}", sqlstate="28000")


def _check(resp, what: str) -> None:
    status = resp.status
    if status.statusCode not in _OK_CODES:
        raise HoodieServerStatusError(status.errorMessage or f"{what} failed (status {status.statusCode})",
                                      status.sqlState or "HY000", status.errorCode or 0)


class HiveServerClient:
    """One connection and one session; `query` runs statements in it. Not thread-safe (one RPC at a time)."""

    def __init__(self, endpoint: Endpoint, credentials: Credentials | None = None,
                 configuration: dict[str, str] | None = None, connect_timeout_s: float = 5.0):
        self.endpoint = endpoint
        self.credentials = credentials
        self.configuration = dict(configuration or {})
        self.connect_timeout_s = connect_timeout_s
        self._socket: TSocket | None = None
        self._transport = None
        self._client: TCLIService.Client | None = None
        self._session = None

    # -- life cycle --------------------------------------------------------------------------------------
    def open(self) -> HiveServerClient:
        self._socket = TSocket()
        self._socket.setHandle(self._connect())
        # the socket is connected: the buffered transport needs no open(), the SASL one logs in
        self._transport = TSaslPlainClientTransport(self._socket, self.credentials, MAX_MESSAGE_SIZE) \
            if self.credentials else TBufferedTransport(self._socket)
        try:
            self._socket.handle.settimeout(LOGIN_TIMEOUT_S)
            if self.credentials:
                self._transport.open()
            self._client = TCLIService.Client(protocol_factory(MAX_MESSAGE_SIZE).getProtocol(self._transport))
            self._open_session()
            self._socket.handle.settimeout(None)  # statements take as long as they take
        except (TTransportException, OSError, HoodieProtocolError) as exc:
            self._drop()
            raise HoodieServerConnectionError(f"cannot log in to {self.endpoint}: {exc}") from exc
        except BaseException:
            self._drop()
            raise
        return self

    def _connect(self) -> socket.socket:
        """A connected socket (not TSocket.open, which logs every refused connection as an error)."""
        try:
            sock = socket.create_connection((self.endpoint.host, self.endpoint.port), self.connect_timeout_s)
        except OSError as exc:
            raise HoodieServerConnectionError(f"cannot connect to {self.endpoint}: {exc.strerror or exc}") from exc
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)  # requests are small: no Nagle delays
        return sock

    def _open_session(self) -> None:
        user = self.credentials.user if self.credentials else getpass.getuser()
        req = TOpenSessionReq(client_protocol=CLIENT_PROTOCOL, username=user,
                              password=self.credentials.password if self.credentials else None,
                              configuration={f"set:hiveconf:{k}": v for k, v in self.configuration.items()})
        resp = self._rpc("OpenSession", req)
        _check(resp, "OpenSession")
        if resp.serverProtocolVersion < MIN_PROTOCOL:
            raise HoodieServerStatusError(f"the server speaks protocol V{resp.serverProtocolVersion + 1}; this "
                                          f"client reads columnar row sets (V6 or later)", sqlstate="08001")
        self._session = resp.sessionHandle
        log.debug("session opened on %s (protocol V%d)", self.endpoint, resp.serverProtocolVersion + 1)

    def close(self) -> None:
        """Close the session (best effort: the server closes it with the connection anyway) and disconnect."""
        if self._session is not None and self._client is not None:
            try:
                self._client.CloseSession(TCloseSessionReq(sessionHandle=self._session))
            except Exception as exc:  # noqa: BLE001 - a server already gone has closed it
                log.debug("CloseSession failed: %s", exc)
        self._drop()

    def _drop(self) -> None:
        self._session = self._client = None
        if self._transport is not None:
            try:
                self._transport.close()
            except Exception as exc:  # noqa: BLE001 - closing a broken socket
                log.debug("closing the transport: %s", exc)
        self._transport = self._socket = None

    def __enter__(self) -> HiveServerClient:
        return self.open() if self._client is None else self

    def __exit__(self, *exc) -> None:
        self.close()

    def _rpc(self, name: str, req):
        """Call RPC `name`; a transport failure becomes HoodieServerConnectionError."""
        if self._client is None:
            raise HoodieServerConnectionError(f"not connected to {self.endpoint}")
        try:
            return getattr(self._client, name)(req)
        except (TTransportException, OSError, EOFError) as exc:
            self._drop()
            raise HoodieServerConnectionError(f"connection to {self.endpoint} lost during {name}: {exc}") from exc
        except KeyboardInterrupt:
            # interrupted inside a call: the connection is out of step with the server, which closes the
            # sessions of a connection that went away, cancelling their statements
            self._drop()
            raise

    # -- statements --------------------------------------------------------------------------------------
    def query(self, statement: str, limit: int | None = None) -> QueryResult:
        """Run `statement` and fetch up to `limit` rows of its result (all when None), then close it."""
        handle = self.execute(statement)
        try:
            if not handle.hasResultSet:
                return QueryResult([], [])
            columns = self.result_columns(handle)
            return QueryResult(columns, self.fetch(handle, columns, limit))
        finally:
            self.close_operation(handle)

    def execute(self, statement: str) -> TOperationHandle:
        """Run `statement` to its end; the handle of the finished operation (`hasResultSet` as the server
        knows it then). A failure, or an interrupt while waiting, cancels and closes the operation."""
        resp = self._rpc("ExecuteStatement", TExecuteStatementReq(sessionHandle=self._session, statement=statement,
                                                                  runAsync=True))
        _check(resp, "ExecuteStatement")
        handle = resp.operationHandle
        try:
            handle.hasResultSet = self._wait(handle)
        except BaseException:
            self._abandon(handle)
            raise
        return handle

    def _wait(self, handle: TOperationHandle) -> bool:
        """Poll until the operation ends; whether it has a result set. Its error status is raised."""
        delay = POLL_FIRST_S
        while True:
            resp = self._rpc("GetOperationStatus", TGetOperationStatusReq(operationHandle=handle))
            _check(resp, "GetOperationStatus")
            state = resp.operationState
            if state == TOperationState.FINISHED_STATE:
                return handle.hasResultSet if resp.hasResultSet is None else resp.hasResultSet
            if state == TOperationState.ERROR_STATE:
                raise HoodieServerStatusError(resp.errorMessage or "the statement failed", resp.sqlState or "HY000",
                                              resp.errorCode or 0)
            if state not in _UNDER_WAY:
                name = TOperationState._VALUES_TO_NAMES.get(state, str(state))
                raise HoodieServerStatusError(f"the statement ended in state {name}", "HY008")  # cancelled
            time.sleep(delay)
            delay = min(2 * delay, POLL_MAX_S)

    def _abandon(self, handle: TOperationHandle) -> None:
        """Cancel and close an operation no longer waited for (best effort: without a connection the server
        has done both)."""
        if self._client is None:
            return
        try:
            self._client.CancelOperation(TCancelOperationReq(operationHandle=handle))
            self._client.CloseOperation(TCloseOperationReq(operationHandle=handle))
        except Exception as exc:  # noqa: BLE001 - the error being raised matters more
            log.debug("abandoning an operation: %s", exc)

    def result_columns(self, handle: TOperationHandle) -> list[ColumnInfo]:
        resp = self._rpc("GetResultSetMetadata", TGetResultSetMetadataReq(operationHandle=handle))
        _check(resp, "GetResultSetMetadata")
        return [column_info(desc) for desc in (resp.schema.columns if resp.schema else None) or []]

    def fetch(self, handle: TOperationHandle, columns: list[ColumnInfo], limit: int | None = None) -> list[tuple]:
        """Rows until `limit` or an empty batch (servers differ in how reliably they set hasMoreRows)."""
        rows: list[tuple] = []
        while limit is None or len(rows) < limit:
            want = MAX_FETCH_ROWS if limit is None else min(MAX_FETCH_ROWS, limit - len(rows))
            resp = self._rpc("FetchResults", TFetchResultsReq(operationHandle=handle, maxRows=want,
                                                              orientation=TFetchOrientation.FETCH_NEXT))
            _check(resp, "FetchResults")
            batch = decode_rowset(resp.results, columns)
            if not batch:
                break
            rows.extend(batch)
        return rows

    def close_operation(self, handle: TOperationHandle) -> None:
        """Close an operation (which also stops a result stream not read to its end)."""
        if self._client is None:
            return  # the connection is gone, and with it the operation
        resp = self._rpc("CloseOperation", TCloseOperationReq(operationHandle=handle))
        _check(resp, "CloseOperation")
