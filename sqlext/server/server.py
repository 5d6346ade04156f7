"""`HiveService`: the HiveServer2-protocol server over one shared SparkSession — its transports (binary
NOSASL/SASL port, HTTP `/cliservice`), the authenticator, client sessions and the pool running asynchronous
statements. `serve()` runs it until SIGTERM / SIGINT, recorded under the warehouse meanwhile (registry.py) so
that the `sqlext` CLI of that warehouse sends its statements here instead of starting Spark."""
from __future__ import annotations

import logging
import signal
import threading
from concurrent.futures import ThreadPoolExecutor

from pyspark.sql import SparkSession

from sqlext.server import registry
from sqlext.server.audit import AuditLog
from sqlext.server.auth import Authenticator, UsersFile
from sqlext.server.authorization import Authorizer, PolicyFile
from sqlext.server.config import AUTH_PLAIN, ServerConfig
from sqlext.server.http import HttpServer
from sqlext.server.statement_guard import StatementGuard
from sqlext.server.session_manager import SessionManager
from sqlext.server.third_party.tcliservice.ttypes import TGetInfoType
from sqlext.server.transport import BinaryServer

log = logging.getLogger(__name__)

SERVER_NAME = "sqlext"
DBMS_NAME = "Spark SQL"      # what clients (JDBC dialect detection, BI tools) expect from a Spark Thrift server
_IDLE_CHECK_S = 60.0


class HiveService:
    def __init__(self, spark: SparkSession, config: ServerConfig):
        self.spark = spark
        self.config = config
        users = UsersFile(config.users_file) if config.users_file else None
        if config.auth == AUTH_PLAIN:
            users.users()  # a missing or malformed users file fails now, not at the first login
        self.authenticator = Authenticator(config.auth, users)
        self.tls = _tls_context(config)  # None: plaintext
        self.sessions = SessionManager(spark, config.idle_session_timeout_ms / 1000.0, _guard(spark, config),
                                       AuditLog(config.audit_log), _authorizer(config), limits=config)
        self.async_pool = ThreadPoolExecutor(config.async_exec_threads, thread_name_prefix="sqlext-async")
        self.binary = BinaryServer(self, config.host, config.port)
        self.http = HttpServer(self, config.host, config.http_port, config.http_path) \
            if config.http_port is not None else None
        self._stopped = threading.Event()
        self._keywords: str | None = None

    # -- life cycle ----------------------------------------------------------------------------------
    def start(self) -> "HiveService":
        self.binary.start()
        if self.http is not None:
            self.http.start()
        threading.Thread(target=self._expire_idle_sessions, name="sqlext-idle-sessions", daemon=True).start()
        log.info("listening on %s:%d (binary, auth %s)%s", self.config.host, self.binary.port, self.config.auth,
                 f", {self.config.host}:{self.http.port}/{self.config.http_path} (http)" if self.http else "")
        log.info("limits: %s", self.config.limits_text())
        return self

    def stop(self) -> None:
        if self._stopped.is_set():
            return
        self._stopped.set()
        self.binary.stop()
        if self.http is not None:
            self.http.stop()
        self.sessions.close_all()
        self.async_pool.shutdown(wait=False, cancel_futures=True)

    def wait(self) -> None:
        self._stopped.wait()

    def _expire_idle_sessions(self) -> None:
        while not self._stopped.wait(_IDLE_CHECK_S):
            try:
                self.sessions.expire_idle()
            except Exception:  # noqa: BLE001 - the reaper keeps running
                log.exception("expiring idle sessions failed")

    # -- GetInfo and health -------------------------------------------------------------------------
    def info(self, info_type: int) -> str | int | None:
        if info_type == TGetInfoType.CLI_SERVER_NAME:
            return SERVER_NAME
        if info_type == TGetInfoType.CLI_DBMS_NAME:
            return DBMS_NAME
        if info_type == TGetInfoType.CLI_DBMS_VER:
            return self.spark.version
        if info_type == TGetInfoType.CLI_ODBC_KEYWORDS:
            return self._odbc_keywords()
        if info_type in (TGetInfoType.CLI_MAX_COLUMN_NAME_LEN, TGetInfoType.CLI_MAX_SCHEMA_NAME_LEN,
                         TGetInfoType.CLI_MAX_TABLE_NAME_LEN):
            return 128
        return None

    def _odbc_keywords(self) -> str:
        if self._keywords is None:
            rows = self.spark.sql("SELECT keyword FROM sql_keywords()").collect()
            self._keywords = ",".join(sorted(r[0] for r in rows))
        return self._keywords

    def stats(self) -> dict[str, int]:
        jobs = len(self.spark.sparkContext.statusTracker().getActiveJobsIds())
        return {**self.sessions.stats(), "connections": self.binary.connections, "active_spark_jobs": jobs}

    @property
    def ports(self) -> tuple[int, int | None]:
        return self.binary.port, self.http.port if self.http is not None else None


def serve(spark: SparkSession, config: ServerConfig, announce=print) -> None:
    """Run the server until SIGTERM or SIGINT; `announce` gets the start-up line naming the ports (by then the
    server is registered, so a CLI started on that line finds it)."""
    service = HiveService(spark, config).start()
    record = None
    try:
        binary, http = service.ports
        record = registry.register(_record(spark, config, binary))
        scheme = "https" if service.tls is not None else "http"
        announce(f"sqlext serve: listening on {config.host}:{binary} (binary, auth {config.auth}"
                 + (", TLS" if service.tls is not None else "") + ")"
                 + (f", {scheme}://{config.host}:{http}/{config.http_path}" if http is not None else ""))
        for sig in (signal.SIGTERM, signal.SIGINT):
            signal.signal(sig, lambda *_: service.stop())
        service.wait()
    finally:
        service.stop()
        registry.unregister(record)


def _guard(spark: SparkSession, config: ServerConfig) -> StatementGuard | None:
    """The safe default of served sessions (statement_guard.py), unless the administrator turned it off."""
    if config.allow_unsafe_statements:
        log.warning("unsafe statements allowed: clients may read any file and call into the JVM of this server")
        return None
    return StatementGuard.for_server(spark.conf.get("spark.sql.warehouse.dir"), config.data_roots,
                                     config.users_file)


def _tls_context(config: ServerConfig):
    """TLS for both transports when a certificate is configured (then plaintext clients are refused)."""
    if not config.ssl_cert:
        return None
    import ssl

    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    try:
        context.load_cert_chain(config.ssl_cert, config.ssl_key)
    except (OSError, ssl.SSLError) as exc:
        raise ValueError(f"cannot load the TLS certificate {config.ssl_cert} / key {config.ssl_key}: {exc}") from exc
    return context


def _authorizer(config: ServerConfig) -> Authorizer | None:
    if config.policy_file is None:
        log.warning("no policy file (--policy): every %s user may read and change every table",
                    "authenticated" if config.auth == AUTH_PLAIN else "connecting")
        return None
    authorizer = Authorizer(PolicyFile(config.policy_file))
    authorizer.policy_file.policy()  # a missing or malformed file fails now, not at the first statement
    return authorizer


def _record(spark: SparkSession, config: ServerConfig, port: int) -> registry.ServerRecord:
    """What a CLI needs to find this server and to tell whether it sees the catalog the CLI would."""
    catalog = getattr(spark, "_sqlext_catalog", None)
    warehouse = catalog.warehouse if catalog is not None else spark.conf.get("spark.sql.warehouse.dir")
    return registry.new_record(config.host, port, config.auth, warehouse.removeprefix("file:"),
                               catalog.uri if catalog is not None else None,
                               catalog is not None and catalog.embedded is not None)
