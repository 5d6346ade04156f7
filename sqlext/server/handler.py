"""The TCLIService handler: one per connection (binary) or request (HTTP); RPCs map onto the session and
operation managers. Every failure is answered as a status carrying a SQLSTATE and a message (for SQL errors
the sqlext message with its `line L:C:` position); unknown RPCs are the processor's business."""
from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Callable

from sqlext.server import metadata
from sqlext.server.errors import (
    HoodieInvalidHandleError,
    HoodieServerError,
    HoodieUnsupportedRequestError,
    message,
    sqlstate,
)
from sqlext.server.operation import Handle, MetadataOperation, OperationState, StatementOperation
from sqlext.server.rowset import string_rowset, to_trowset
from sqlext.server.schema import table_schema
from sqlext.server.third_party.getlog.ttypes import TGetLogResp
from sqlext.server.third_party.tcliservice import TCLIService
from sqlext.server.third_party.tcliservice.ttypes import (
    TCancelDelegationTokenResp,
    TCancelOperationResp,
    TCloseOperationResp,
    TCloseSessionResp,
    TDownloadDataResp,
    TExecuteStatementResp,
    TFetchResultsResp,
    TGetCatalogsResp,
    TGetColumnsResp,
    TGetCrossReferenceResp,
    TGetDelegationTokenResp,
    TGetFunctionsResp,
    TGetInfoResp,
    TGetInfoType,
    TGetInfoValue,
    TGetOperationStatusResp,
    TGetPrimaryKeysResp,
    TGetQueryIdResp,
    TGetResultSetMetadataResp,
    TGetSchemasResp,
    TGetTablesResp,
    TGetTableTypesResp,
    TGetTypeInfoResp,
    TOpenSessionResp,
    TOperationHandle,
    TOperationType,
    TProtocolVersion,
    TRenewDelegationTokenResp,
    TSessionHandle,
    TSetClientInfoResp,
    TStatus,
    TStatusCode,
    TUploadDataResp,
)

log = logging.getLogger(__name__)

MIN_PROTOCOL = TProtocolVersion.HIVE_CLI_SERVICE_PROTOCOL_V6     # columnar row sets
SERVER_PROTOCOL = TProtocolVersion.HIVE_CLI_SERVICE_PROTOCOL_V10  # what Spark's Thrift server answers
FETCH_LOG = 1  # TFetchResultsReq.fetchType: the operation's log instead of its rows
OK = TStatus(statusCode=TStatusCode.SUCCESS_STATUS)


@dataclass
class Connection:
    """Who is on the other end: `user` is set when the transport authenticated someone (SASL PLAIN, HTTP
    Basic); `credentials` is False for transports that carried none (NOSASL)."""

    id: int
    peer: str
    transport: str
    user: str | None = None
    credentials: bool = False


# -- statuses -------------------------------------------------------------------------------------------
def error_status(exc: BaseException) -> TStatus:
    code = TStatusCode.INVALID_HANDLE_STATUS if isinstance(exc, HoodieInvalidHandleError) else TStatusCode.ERROR_STATUS
    return TStatus(statusCode=code, sqlState=sqlstate(exc), errorCode=0, errorMessage=message(exc))


def _peer_ip(peer: str, with_port: bool) -> str:
    """The address of a peer: binary connections name `address:port`, HTTP requests the address alone."""
    return peer.rsplit(":", 1)[0] if with_port and ":" in peer else peer


def _guard(response_cls, **defaults) -> Callable:
    """Decorator: a handler method's exception becomes `response_cls(status=error status, **defaults)`."""
    def wrap(method):
        def guarded(self, req):
            try:
                return method(self, req)
            except Exception as exc:  # noqa: BLE001 - answered as a status, never as a dropped connection
                if not isinstance(exc, HoodieServerError):
                    log.debug("%s failed", method.__name__, exc_info=True)
                return response_cls(status=error_status(exc), **defaults)
        guarded.__name__ = method.__name__
        return guarded
    return wrap


def _catalog_rpc(response_cls, op_type: int, build: Callable, *fields: str) -> Callable:
    """A catalog RPC: `build(spark, *the request's fields)` as a metadata operation of the request's session."""
    name = response_cls.__name__[1:-len("Resp")]

    def rpc(self, req):
        args = [getattr(req, f) for f in fields]
        description = " ".join([name, *(str(a) for a in args)])
        return self._metadata(req, response_cls, op_type, description, lambda spark: build(spark, *args))

    rpc.__name__ = name
    return rpc


def _unsupported_rpc(response_cls, what: str) -> Callable:
    def rpc(self, req):
        return response_cls(status=error_status(HoodieUnsupportedRequestError(f"{what} is not supported")))

    rpc.__name__ = response_cls.__name__[1:-len("Resp")]
    return rpc


class TCLIServiceHandler(TCLIService.Iface):
    def __init__(self, service, connection: Connection):
        self.service = service            # server.HiveService
        self.connection = connection

    @property
    def sessions(self):
        return self.service.sessions

    # -- sessions ------------------------------------------------------------------------------------
    def OpenSession(self, req):
        protocol = min(req.client_protocol or 0, SERVER_PROTOCOL)
        try:
            if req.client_protocol < MIN_PROTOCOL:
                raise HoodieUnsupportedRequestError(
                    f"client protocol V{req.client_protocol + 1} is not supported: this server sends columnar row "
                    f"sets, protocol V6 or later")
            user = self._session_user(req)
            binary = self.connection.transport == "binary"
            session = self.sessions.open(user, protocol, req.configuration, self.connection.id if binary else None,
                                         self.connection.peer, _peer_ip(self.connection.peer, binary))
        except Exception as exc:  # noqa: BLE001
            log.info("OpenSession refused for %s: %s", self.connection.peer, exc)
            return TOpenSessionResp(status=error_status(exc), serverProtocolVersion=protocol)
        return TOpenSessionResp(status=OK, serverProtocolVersion=protocol,
                                sessionHandle=TSessionHandle(sessionId=session.handle.to_thrift()),
                                configuration={"hive.server2.thrift.resultset.default.fetch.size":
                                               str(self.service.config.default_fetch_size)})

    def _session_user(self, req) -> str:
        if self.connection.user is not None:
            return self.connection.user
        self.service.authenticator.refuse_without_credentials()
        return req.username or "anonymous"

    @_guard(TCloseSessionResp)
    def CloseSession(self, req):
        self.sessions.close(Handle.of(req.sessionHandle.sessionId))
        return TCloseSessionResp(status=OK)

    @_guard(TGetInfoResp, infoValue=TGetInfoValue(stringValue=""))
    def GetInfo(self, req):
        self._session(req)
        value = self.service.info(req.infoType)
        if value is None:
            raise HoodieUnsupportedRequestError(
                f"GetInfo type {TGetInfoType._VALUES_TO_NAMES.get(req.infoType, req.infoType)} is not supported")
        info = TGetInfoValue(stringValue=value) if isinstance(value, str) else TGetInfoValue(lenValue=value)
        return TGetInfoResp(status=OK, infoValue=info)

    @_guard(TSetClientInfoResp)
    def SetClientInfo(self, req):
        session = self._session(req)
        log.info("session %s client info: %s", session.handle.hex, req.configuration)
        return TSetClientInfoResp(status=OK)

    def _session(self, req):
        return self.sessions.get(Handle.of(req.sessionHandle.sessionId))

    # -- statements ----------------------------------------------------------------------------------
    @_guard(TExecuteStatementResp)
    def ExecuteStatement(self, req):
        session = self._session(req)
        self.sessions.configure(session, {k if ":" in k else f"set:hiveconf:{k}": v
                                           for k, v in (req.confOverlay or {}).items()})
        op = self.sessions.add_operation(StatementOperation(session, req.statement, req.queryTimeout or 0),
                                         limited=True)
        op.execute(self.service.async_pool if req.runAsync else None)
        if op.state == OperationState.ERROR:
            self.sessions.close_operation(op.handle)
            return TExecuteStatementResp(status=error_status(op.error))
        return TExecuteStatementResp(status=OK, operationHandle=self._op_handle(op))

    @staticmethod
    def _op_handle(op) -> TOperationHandle:
        return TOperationHandle(operationId=op.handle.to_thrift(), operationType=op.op_type,
                                hasResultSet=op.has_result_set)

    def _operation(self, req):
        return self.sessions.operation(Handle.of(req.operationHandle.operationId))

    @_guard(TGetOperationStatusResp)
    def GetOperationStatus(self, req):
        op = self._operation(req)
        resp = TGetOperationStatusResp(status=OK, operationState=op.state.value, operationStarted=op.started_ms,
                                       operationCompleted=op.completed_ms or None,
                                       hasResultSet=op.has_result_set if op.state.terminal else None)
        if op.state == OperationState.ERROR and op.error is not None:
            resp.sqlState, resp.errorCode, resp.errorMessage = sqlstate(op.error), 0, message(op.error)
        return resp

    @_guard(TCancelOperationResp)
    def CancelOperation(self, req):
        self._operation(req).cancel()
        return TCancelOperationResp(status=OK)

    @_guard(TCloseOperationResp)
    def CloseOperation(self, req):
        self.sessions.close_operation(Handle.of(req.operationHandle.operationId))
        return TCloseOperationResp(status=OK)

    @_guard(TGetResultSetMetadataResp)
    def GetResultSetMetadata(self, req):
        op = self._operation(req)
        if op.state == OperationState.ERROR:
            raise op.error
        if op.result is None:
            raise HoodieServerError(f"operation {op.query_id} has no result set ({op.state.name.lower()})")
        # Spark's Thrift server numbers statement result columns from 0, catalog result columns from 1
        first = 0 if op.op_type == TOperationType.EXECUTE_STATEMENT else 1
        return TGetResultSetMetadataResp(status=OK, schema=table_schema(op.result.schema, first))

    @_guard(TFetchResultsResp)
    def FetchResults(self, req):
        op = self._operation(req)
        if req.fetchType == FETCH_LOG:
            return TFetchResultsResp(status=OK, hasMoreRows=False, results=string_rowset(op.fetch_log(req.orientation)))
        limit = self.service.config.max_fetch_size
        max_rows = min(req.maxRows, limit) if req.maxRows and req.maxRows > 0 else self.service.config.default_fetch_size
        table, start, more = op.fetch(max_rows, req.orientation)
        return TFetchResultsResp(status=OK, hasMoreRows=more, results=to_trowset(table, op.result.wires, start))

    def GetQueryId(self, req):
        """The response has no status: an unknown handle gets an empty id."""
        try:
            return TGetQueryIdResp(queryId=self._operation(req).query_id)
        except HoodieInvalidHandleError:
            return TGetQueryIdResp(queryId="")

    @_guard(TGetLogResp, log="")
    def GetLog(self, req):
        op = self._operation(req)
        return TGetLogResp(status=OK, log="\n".join(op.log_lines))

    # -- catalog RPCs --------------------------------------------------------------------------------
    def _metadata(self, req, response_cls, op_type: int, description: str, build: Callable):
        try:
            session = self._session(req)
            op = self.sessions.add_operation(MetadataOperation(session, op_type, description, build))
            op.execute()
            if op.state == OperationState.ERROR:
                self.sessions.close_operation(op.handle)
                return response_cls(status=error_status(op.error))
            return response_cls(status=OK, operationHandle=self._op_handle(op))
        except Exception as exc:  # noqa: BLE001
            return response_cls(status=error_status(exc))

    GetCatalogs = _catalog_rpc(TGetCatalogsResp, TOperationType.GET_CATALOGS, metadata.get_catalogs)
    GetSchemas = _catalog_rpc(TGetSchemasResp, TOperationType.GET_SCHEMAS, metadata.get_schemas, "schemaName")
    GetTables = _catalog_rpc(TGetTablesResp, TOperationType.GET_TABLES, metadata.get_tables, "schemaName", "tableName",
                             "tableTypes")
    GetTableTypes = _catalog_rpc(TGetTableTypesResp, TOperationType.GET_TABLE_TYPES, metadata.get_table_types)
    GetColumns = _catalog_rpc(TGetColumnsResp, TOperationType.GET_COLUMNS, metadata.get_columns, "schemaName",
                              "tableName", "columnName")
    GetTypeInfo = _catalog_rpc(TGetTypeInfoResp, TOperationType.GET_TYPE_INFO, metadata.get_type_info)
    GetFunctions = _catalog_rpc(TGetFunctionsResp, TOperationType.GET_FUNCTIONS, metadata.get_functions,
                                "schemaName", "functionName")
    GetPrimaryKeys = _catalog_rpc(TGetPrimaryKeysResp, TOperationType.UNKNOWN, metadata.get_primary_keys,
                                  "schemaName", "tableName")
    GetCrossReference = _catalog_rpc(TGetCrossReferenceResp, TOperationType.UNKNOWN, metadata.get_cross_reference)

    # -- not supported -------------------------------------------------------------------------------
    GetDelegationToken = _unsupported_rpc(TGetDelegationTokenResp, "GetDelegationToken (no Kerberos)")
    CancelDelegationToken = _unsupported_rpc(TCancelDelegationTokenResp, "CancelDelegationToken (no Kerberos)")
    RenewDelegationToken = _unsupported_rpc(TRenewDelegationTokenResp, "RenewDelegationToken (no Kerberos)")
    UploadData = _unsupported_rpc(TUploadDataResp, "UploadData")
    DownloadData = _unsupported_rpc(TDownloadDataResp, "DownloadData")
