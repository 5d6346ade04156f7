"""Client sessions: one Spark session each (`sqlext.session.client_session`: own current database, SQL
settings and temporary views, Hudi SQL front end), with the operations opened in it.

Sessions opened over a binary connection end with the connection (a client that vanishes leaves nothing
running); sessions opened over HTTP live until CloseSession or until idle for
`hive.server2.idle.session.timeout`.
"""
from __future__ import annotations

import logging
import threading
import time
from dataclasses import dataclass, field

from pyspark.sql import SparkSession

from sqlext.server.config import LIMIT_SETTINGS, ServerConfig
from sqlext.server.errors import HoodieInvalidHandleError, HoodieOperationLimitError, HoodieSessionLimitError
from sqlext.server.audit import AuditLog
from sqlext.server.authorization import Authorizer
from sqlext.server.operation import Handle, Operation
from sqlext.server.statement_guard import StatementGuard

log = logging.getLogger(__name__)

# OpenSession configuration keys clients send (Hive JDBC: use:database, set:hiveconf:k, set:hivevar:k)
USE_DATABASE = "use:database"
SET_PREFIXES = ("set:hiveconf:", "set:hivevar:", "set:system:")


@dataclass
class ClientSession:
    handle: Handle
    user: str
    protocol: int
    spark: SparkSession
    connection_id: int | None           # None: HTTP (no connection owns it)
    guard: StatementGuard | None = None  # the server's safe default (None: turned off)
    audit: AuditLog | None = None
    authorizer: Authorizer | None = None  # the server's grants (None: every user may do everything)
    peer: str = ""                      # the client's address:port
    ip: str = ""                        # the client's address (for the per-address session limits)
    max_result_rows: int = 0            # a statement's result beyond it fails (0: no limit)
    operations: dict[bytes, Operation] = field(default_factory=dict)
    last_access: float = field(default_factory=time.monotonic)

    def touch(self) -> None:
        self.last_access = time.monotonic()


class SessionManager:
    def __init__(self, root: SparkSession, idle_timeout_s: float, guard: StatementGuard | None = None,
                 audit: AuditLog | None = None, authorizer: Authorizer | None = None,
                 limits: ServerConfig | None = None):
        self.root = root
        self.limits = limits or ServerConfig()  # its max_* / *_per_* fields
        self.guard = guard
        self.audit = audit
        self.authorizer = authorizer
        self.idle_timeout_s = idle_timeout_s
        self._sessions: dict[bytes, ClientSession] = {}
        self._operations: dict[bytes, Operation] = {}
        self._opening: list[tuple[str, str]] = []  # (user, ip) of sessions being opened: they count too
        self._lock = threading.Lock()

    # -- sessions ------------------------------------------------------------------------------------
    def open(self, user: str, protocol: int, configuration: dict[str, str] | None,
             connection_id: int | None, peer: str = "", ip: str = "") -> ClientSession:
        from sqlext.session import client_session

        slot = self._reserve_slot(user, ip)
        try:
            spark = client_session(self.root)
            session = ClientSession(Handle.new(), user, protocol, spark, connection_id, guard=self.guard,
                                    audit=self.audit, authorizer=self.authorizer, peer=peer, ip=ip,
                                    max_result_rows=self.limits.max_result_rows)
            self.configure(session, configuration or {})
            with self._lock:
                self._sessions[session.handle.guid] = session
        finally:
            with self._lock:
                self._opening.remove(slot)
        log.info("session %s opened for %s (protocol V%d)", session.handle.hex, user, protocol + 1)
        return session

    def _reserve_slot(self, user: str, ip: str) -> tuple[str, str]:
        """Count a session being opened against the limits (under the lock, so that concurrent OpenSessions
        cannot both take the last slot), or refuse it naming the limit that is full."""
        slot = (user, ip)
        with self._lock:
            occupied = [(s.user, s.ip) for s in self._sessions.values()] + self._opening
            full = _full_session_limit(self.limits, occupied, slot)
            if full is None:
                self._opening.append(slot)
                return slot
        name, limit = full
        log.warning("OpenSession refused for %s from %s: %s (%d) reached", user, ip or "?", name, limit)
        raise HoodieSessionLimitError(
            f"too many sessions: {_LIMIT_WHO[name].format(user=user, ip=ip)} has {limit} open, the limit; close "
            f"one (idle HTTP sessions end after hive.server2.idle.session.timeout) or raise {LIMIT_SETTINGS[name]}")

    @staticmethod
    def configure(session: ClientSession, configuration: dict[str, str]) -> None:
        """Apply OpenSession configuration / a statement's confOverlay: `set:hiveconf:k` and the like set
        Spark (and hoodie.*) settings of the session, `use:database` switches its database."""
        for key, value in configuration.items():
            setting = next((key[len(p):] for p in SET_PREFIXES if key.startswith(p)), None)
            if setting and session.guard is not None:
                session.guard.check_setting(setting)
            if setting:
                try:
                    session.spark.conf.set(setting, value)
                except Exception as exc:  # a static Spark setting, for instance: the session still opens
                    log.warning("session %s: cannot set %s: %s", session.handle.hex, setting, exc)
        db = configuration.get(USE_DATABASE)
        if db and db.lower() != "default":
            session.spark.sql(f"USE `{db.replace('`', '``')}`")  # fails OpenSession for an unknown database

    def get(self, handle: Handle) -> ClientSession:
        with self._lock:
            session = self._sessions.get(handle.guid)
        if session is None or session.handle.secret != handle.secret:
            raise HoodieInvalidHandleError(f"invalid session handle {handle.hex}: unknown or closed session")
        session.touch()
        return session

    def close(self, handle: Handle) -> None:
        session = self.get(handle)
        with self._lock:
            self._sessions.pop(handle.guid, None)
            ops = [self._operations.pop(g) for g in list(session.operations) if g in self._operations]
        for op in ops:
            op.close()
        session.operations.clear()
        log.info("session %s closed (%d operations)", handle.hex, len(ops))

    def close_connection(self, connection_id: int) -> int:
        """Close the sessions opened over a binary connection that ended; how many there were."""
        with self._lock:
            handles = [s.handle for s in self._sessions.values() if s.connection_id == connection_id]
        for handle in handles:
            try:
                self.close(handle)
            except HoodieInvalidHandleError:
                pass  # closed concurrently
        return len(handles)

    def expire_idle(self) -> int:
        now = time.monotonic()
        with self._lock:
            idle = [s.handle for s in self._sessions.values()
                    if s.connection_id is None and now - s.last_access > self.idle_timeout_s
                    and not any(not op.state.terminal for op in s.operations.values())]
        for handle in idle:
            log.info("session %s expired after %.0f s idle", handle.hex, self.idle_timeout_s)
            try:
                self.close(handle)
            except HoodieInvalidHandleError:
                pass
        return len(idle)

    def close_all(self) -> None:
        with self._lock:
            handles = [s.handle for s in self._sessions.values()]
        for handle in handles:
            try:
                self.close(handle)
            except HoodieInvalidHandleError:
                pass

    # -- operations ----------------------------------------------------------------------------------
    def add_operation(self, op: Operation, limited: bool = False) -> Operation:
        """Register `op`; `limited` (statements; catalog RPCs are short and synchronous) refuses it when its
        session already runs max_operations_per_session statements."""
        with self._lock:
            if op.session.handle.guid not in self._sessions:
                raise HoodieInvalidHandleError(f"session {op.session.handle.hex} was closed")
            if limited:
                self._check_operation_limit(op.session)
            self._operations[op.handle.guid] = op
            op.session.operations[op.handle.guid] = op
        return op

    def _check_operation_limit(self, session: ClientSession) -> None:
        limit = self.limits.max_operations_per_session
        running = sum(1 for o in session.operations.values() if not o.state.terminal)
        if limit and running >= limit:
            log.info("session %s: statement refused, %d running (limit %d)", session.handle.hex, running, limit)
            raise HoodieOperationLimitError(
                f"too many statements running in this session: {running}, the limit; wait for one to finish or "
                f"cancel one (the session stays open), or raise {LIMIT_SETTINGS['max_operations_per_session']}")

    def operation(self, handle: Handle) -> Operation:
        with self._lock:
            op = self._operations.get(handle.guid)
        if op is None or op.handle.secret != handle.secret:
            raise HoodieInvalidHandleError(f"invalid operation handle {handle.hex}: unknown or closed operation")
        op.session.touch()
        return op

    def close_operation(self, handle: Handle) -> None:
        op = self.operation(handle)
        with self._lock:
            self._operations.pop(handle.guid, None)
            op.session.operations.pop(handle.guid, None)
        op.close()

    def stats(self) -> dict[str, int]:
        with self._lock:
            running = sum(1 for op in self._operations.values() if not op.state.terminal)
            return {"sessions": len(self._sessions), "operations": len(self._operations), "running": running}


_LIMIT_WHO = {"max_sessions": "the server", "sessions_per_user": "user {user}",
              "sessions_per_ipaddress": "address {ip}", "sessions_per_user_ipaddress": "user {user} from {ip}"}


def _full_session_limit(limits: ServerConfig, occupied: list[tuple[str, str]],
                        slot: tuple[str, str]) -> tuple[str, int] | None:
    """(name, value) of the first session limit that one more session `slot` = (user, ip) would exceed."""
    user, ip = slot
    counts = {"max_sessions": len(occupied),
              "sessions_per_user": sum(1 for u, _ in occupied if u == user),
              "sessions_per_ipaddress": sum(1 for _, i in occupied if i == ip),
              "sessions_per_user_ipaddress": sum(1 for s in occupied if s == slot)}
    for name, count in counts.items():
        limit = getattr(limits, name)
        if limit and count >= limit:
            return name, limit
    return None
