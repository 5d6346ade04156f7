"""Operations: a statement or a catalog request of a client session, its state and its result set.

A statement runs in the RPC's thread (synchronous) or on the server's async pool (`runAsync`); either way
its Spark jobs run under a job group named after the operation, so CancelOperation (or the query timeout,
or the client's connection going away) cancels them for real with `SparkContext.cancelJobGroup`.
"""
from __future__ import annotations

import contextlib
import logging
import threading
import time
import uuid
from concurrent.futures import Executor
from dataclasses import dataclass
from enum import Enum
from typing import Callable

import pyarrow as pa
from pyspark.sql import SparkSession

from sqlext.server import hive_compat
from sqlext.server.audit import statement_entry
from sqlext.server.authorization import SHOW_GRANTS
from sqlext.server.errors import (
    HoodieResultLimitError,
    HoodieServerError,
    HoodieUnsupportedRequestError,
    sqlstate,
)
from sqlext.server.result_set import LocalResultSet, ResultSet, SparkResultSet
from sqlext.server.third_party.tcliservice.ttypes import (
    TFetchOrientation,
    THandleIdentifier,
    TOperationState,
    TOperationType,
)

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Handle:
    """The 16-byte public id and 16-byte secret of a session or operation handle."""

    guid: bytes
    secret: bytes

    @classmethod
    def new(cls) -> "Handle":
        return cls(uuid.uuid4().bytes, uuid.uuid4().bytes)

    @classmethod
    def of(cls, ident: THandleIdentifier) -> "Handle":
        return cls(bytes(ident.guid or b""), bytes(ident.secret or b""))

    def to_thrift(self) -> THandleIdentifier:
        return THandleIdentifier(guid=self.guid, secret=self.secret)

    @property
    def hex(self) -> str:
        return str(uuid.UUID(bytes=self.guid)) if len(self.guid) == 16 else self.guid.hex()


class OperationState(Enum):
    INITIALIZED = TOperationState.INITIALIZED_STATE
    PENDING = TOperationState.PENDING_STATE
    RUNNING = TOperationState.RUNNING_STATE
    FINISHED = TOperationState.FINISHED_STATE
    CANCELED = TOperationState.CANCELED_STATE
    CLOSED = TOperationState.CLOSED_STATE
    ERROR = TOperationState.ERROR_STATE
    TIMEDOUT = TOperationState.TIMEDOUT_STATE

    @property
    def terminal(self) -> bool:
        return self in (OperationState.FINISHED, OperationState.CANCELED, OperationState.CLOSED,
                        OperationState.ERROR, OperationState.TIMEDOUT)


@contextlib.contextmanager
def job_group(spark: SparkSession, group: str, description: str):
    """Spark jobs started by this thread (and threads it starts, e.g. a result stream's server thread) belong
    to `group` until the block ends."""
    sc = spark.sparkContext
    sc.setJobGroup(group, description[:200], interruptOnCancel=True)
    try:
        yield
    finally:
        for key in ("spark.jobGroup.id", "spark.job.description", "spark.job.interruptOnCancel"):
            sc.setLocalProperty(key, None)


class Operation:
    """Base: state machine, log, result set and fetching. Subclasses say what `run` computes."""

    op_type = TOperationType.UNKNOWN

    def __init__(self, session, description: str):
        self.session = session
        self.handle = Handle.new()
        self.description = description
        self.state = OperationState.INITIALIZED
        self.error: BaseException | None = None
        self.result: ResultSet | None = None
        self.has_result_set = True
        self.started_ms = int(time.time() * 1000)
        self.completed_ms = 0
        self.log_lines: list[str] = []
        self._log_read = 0
        self._lock = threading.RLock()
        self._running = threading.Event()   # set while `run` executes
        self.rows_fetched = 0

    @property
    def query_id(self) -> str:
        return f"sqlext-{self.handle.hex}"

    # -- running -------------------------------------------------------------------------------------
    def run(self) -> None:
        raise NotImplementedError

    def execute(self, executor: Executor | None = None) -> None:
        """Run now (executor None) or submit to `executor`; errors end in state ERROR with `error` set."""
        if executor is None:
            self._run_guarded()
        else:
            self._set_state(OperationState.PENDING)
            executor.submit(self._run_guarded)

    def _run_guarded(self) -> None:
        if not self._set_state(OperationState.RUNNING):
            return  # cancelled or closed while pending
        self._running.set()
        try:
            with job_group(self.session.spark, self.query_id, self.description):
                self.run()
        except BaseException as exc:  # noqa: BLE001 - every failure becomes the operation's error status
            if self._set_state(OperationState.ERROR):
                self.error = exc
                self.log(f"failed: {exc}")
                log.info("operation %s failed: %s", self.query_id, exc)
            return
        finally:
            self._running.clear()
        self._set_state(OperationState.FINISHED)

    def _set_state(self, new: OperationState) -> bool:
        """Move to `new` unless already in a terminal state (cancel / close win over a late finish)."""
        with self._lock:
            if self.state.terminal and not (new == OperationState.CLOSED and self.state != OperationState.CLOSED):
                return False
            self.state = new
            if new.terminal:
                self.completed_ms = int(time.time() * 1000)
            return True

    def log(self, line: str) -> None:
        self.log_lines.append(f"{time.strftime('%Y-%m-%d %H:%M:%S')} {line}")

    # -- results -------------------------------------------------------------------------------------
    def fetch(self, max_rows: int, orientation: int) -> tuple[pa.Table, int, bool]:
        """(up to `max_rows` rows, offset of the first, whether more rows follow); FETCH_FIRST rewinds."""
        if orientation not in (TFetchOrientation.FETCH_NEXT, TFetchOrientation.FETCH_FIRST):
            raise HoodieUnsupportedRequestError(
                f"fetch orientation {TFetchOrientation._VALUES_TO_NAMES.get(orientation, orientation)} is not "
                f"supported (FETCH_NEXT, FETCH_FIRST)")
        with self._lock:
            if self.state != OperationState.FINISHED or self.result is None:
                raise HoodieServerError(f"cannot fetch results of operation {self.query_id}: it is "
                                        f"{self.state.name.lower()}")
            if orientation == TFetchOrientation.FETCH_FIRST:
                # a rewind runs the query again: its jobs belong to this operation (later partitions' jobs
                # run in the stream's JVM thread, which inherits the job group from the thread starting it)
                with job_group(self.session.spark, self.query_id, self.description):
                    self.result.rewind()
            start = self.result.offset
            try:
                rows = self.result.fetch(max_rows)
                self.rows_fetched += rows.num_rows
                return rows, start, self.result.has_more()
            except HoodieResultLimitError as exc:
                self._fail_finished(exc)
                raise

    def _fail_finished(self, exc: BaseException) -> None:
        """A finished statement whose result turns out too large while fetching: it ends in ERROR (status,
        audit) rather than FINISHED, since its client got only part of the answer."""
        with self._lock:
            self.state, self.error = OperationState.ERROR, exc
        self.log(f"failed: {exc}")
        log.info("operation %s failed: %s", self.query_id, exc)
        self._close_result()

    def fetch_log(self, orientation: int) -> list[str]:
        with self._lock:
            if orientation == TFetchOrientation.FETCH_FIRST:
                self._log_read = 0
            lines = self.log_lines[self._log_read:]
            self._log_read = len(self.log_lines)
            return lines

    # -- ending --------------------------------------------------------------------------------------
    def cancel(self, state: OperationState = OperationState.CANCELED) -> None:
        with self._lock:
            running = not self.state.terminal
            if running:
                self._set_state(state)
        if running:
            self.log(f"{state.name.lower()}")
            self.session.spark.sparkContext.cancelJobGroup(self.query_id)
            if self._running.is_set():  # a statement (a MERGE, say) may start further jobs: cancel them too
                threading.Thread(target=self._cancel_until_stopped, name=f"cancel-{self.query_id}",
                                 daemon=True).start()
            self._close_result()

    def _cancel_until_stopped(self, period_s: float = 0.5, limit_s: float = 120.0) -> None:
        deadline = time.monotonic() + limit_s
        while self._running.is_set() and time.monotonic() < deadline:
            self.session.spark.sparkContext.cancelJobGroup(self.query_id)
            time.sleep(period_s)

    def close(self) -> None:
        self.cancel()
        self._set_state(OperationState.CLOSED)
        self._close_result()

    def _close_result(self) -> None:
        result, self.result = self.result, None
        if result is not None:
            with contextlib.suppress(Exception):
                result.close()


class StatementOperation(Operation):
    """ExecuteStatement: the statement runs through the session's `spark.sql` (the Hudi SQL front end)."""

    op_type = TOperationType.EXECUTE_STATEMENT

    def __init__(self, session, statement: str, timeout_s: int = 0):
        super().__init__(session, statement)
        self.statement = statement
        self.timeout_s = timeout_s
        self._timer: threading.Timer | None = None

    def execute(self, executor: Executor | None = None) -> None:
        if self.timeout_s > 0:
            self._timer = threading.Timer(self.timeout_s, self.cancel, kwargs={"state": OperationState.TIMEDOUT})
            self._timer.daemon = True
            self._timer.start()
        super().execute(executor)

    def run(self) -> None:
        self.log(f"executing: {self.statement[:1000]}")
        if self.session.guard is not None:
            self.session.guard.check_statement(self.statement)
        if SHOW_GRANTS.match(self.statement):
            self.result = LocalResultSet(*grants_table(self.session))
            return
        if self.session.authorizer is not None:
            self.session.authorizer.check(self.session.user, self.statement,
                                          self.session.spark.catalog.currentDatabase(), self._is_temp_view)
        df = hive_compat.run(self.session.spark.sql, self.statement)
        if not df.columns:  # DDL and commands without output
            self.has_result_set = False
            self.result = LocalResultSet(df.schema, pa.table({}))
            self.log("done (no result set)")
            return
        result = SparkResultSet(df, self.session.max_result_rows)
        with self._lock:
            if self.state.terminal:
                return
            self.result = result
        result.start()
        self.log("result set ready")

    def _is_temp_view(self, name: str) -> bool:
        catalog = self.session.spark._jsparkSession.sessionState().catalog()
        return bool(catalog.getTempView(name).isDefined())

    def _set_state(self, new: OperationState) -> bool:
        changed = super()._set_state(new)
        if changed and new.terminal and self._timer is not None:
            self._timer.cancel()
        return changed

    def close(self) -> None:
        ended, ended_ms = self.state, self.completed_ms or int(time.time() * 1000)
        super().close()
        if self.session.audit is not None and ended != OperationState.CLOSED:
            self.session.audit.write(self._audit_entry(ended, ended_ms))

    def _audit_entry(self, ended: OperationState, ended_ms: int) -> dict:
        from sqlext.server.statement_guard import HoodieAccessDeniedError

        outcomes = {OperationState.FINISHED: "ok", OperationState.CANCELED: "canceled",
                    OperationState.TIMEDOUT: "timedout", OperationState.ERROR: "error"}
        outcome = outcomes.get(ended, "closed")
        if isinstance(self.error, HoodieAccessDeniedError):
            outcome = "denied"
        return statement_entry(
            started_ms=self.started_ms, user=self.session.user, client=self.session.peer,
            session=self.session.handle.hex, operation=self.query_id, statement=self.statement, outcome=outcome,
            sqlstate=sqlstate(self.error) if self.error is not None else None, rows=self.rows_fetched,
            duration_ms=ended_ms - self.started_ms)


def grants_table(session) -> tuple:
    """(Spark schema, Arrow table) of SHOW GRANTS: the grants that apply to the session's user."""
    from pyspark.sql.types import StringType, StructField, StructType

    names = ("privilege", "object", "principal_type", "principal")
    rows = session.authorizer.show_grants(session.user) if session.authorizer is not None \
        else [("ADMIN", "*", "USER", "*")]  # no policy file: everyone may do everything
    schema = StructType([StructField(n, StringType()) for n in names])
    return schema, pa.table({n: pa.array([r[i] for r in rows], pa.string()) for i, n in enumerate(names)})


class MetadataOperation(Operation):
    """A catalog RPC (GetTables, GetColumns, ...): `build(spark)` returns (Spark schema, Arrow table)."""

    def __init__(self, session, op_type: int, description: str, build: Callable):
        super().__init__(session, description)
        self.op_type = op_type
        self._build = build

    def run(self) -> None:
        schema, table = self._build(self.session.spark)
        if self.session.authorizer is not None and {"TABLE_SCHEM", "TABLE_NAME"} <= set(table.column_names):
            shown = self.session.authorizer.listing_filter(self.session.user)
            keep = [shown(db, name)
                    for db, name in zip(table.column("TABLE_SCHEM").to_pylist(), table.column("TABLE_NAME").to_pylist())]
            table = table.filter(pa.array(keep, pa.bool_()))
        self.result = LocalResultSet(schema, table)
