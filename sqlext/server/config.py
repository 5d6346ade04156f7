"""`sqlext serve` settings, under the HiveServer2 configuration names (`hive.server2.*`) and defaults.

`ServerConfig.from_conf` picks them out of `--conf k=v` pairs; the remaining pairs configure Spark.
"""
from __future__ import annotations

from dataclasses import dataclass, fields, replace

THRIFT_BIND_HOST = "hive.server2.thrift.bind.host"
THRIFT_PORT = "hive.server2.thrift.port"
THRIFT_HTTP_PORT = "hive.server2.thrift.http.port"
THRIFT_HTTP_PATH = "hive.server2.thrift.http.path"
AUTHENTICATION = "hive.server2.authentication"
USERS_FILE = "hive.server2.custom.authentication.users.file"  # ours: the file `sqlext serve --add-user` writes
MAX_MESSAGE_SIZE = "hive.server2.thrift.max.message.size"
MAX_WORKER_THREADS = "hive.server2.thrift.max.worker.threads"
ASYNC_EXEC_THREADS = "hive.server2.async.exec.threads"
MAX_FETCH_SIZE = "hive.server2.thrift.resultset.max.fetch.size"
DEFAULT_FETCH_SIZE = "hive.server2.thrift.resultset.default.fetch.size"
IDLE_SESSION_TIMEOUT = "hive.server2.idle.session.timeout"  # milliseconds, as in Hive
UNSAFE_STATEMENTS = "sqlext.serve.unsafe.statements"  # ours: statement_guard.py's safe default off (true/false)
DATA_ROOTS = "sqlext.serve.data.roots"  # ours: comma-separated directories paths in statements may name
AUDIT_LOG = "sqlext.serve.audit.log"  # ours: audit.py's JSON lines appended to this file
POLICY_FILE = "sqlext.serve.policy.file"  # ours: authorization.py's grants
SSL_CERT = "sqlext.serve.ssl.cert"  # ours (Hive takes a Java keystore): PEM certificate chain; TLS required
SSL_KEY = "sqlext.serve.ssl.key"    # its PEM private key (default: in the certificate file)
# limits (0: none). HiveServer2 has the per-user / per-address ones (Hive 3); a total and the others are ours
MAX_SESSIONS = "sqlext.serve.max.sessions"
SESSIONS_PER_USER = "hive.server2.limit.connections.per.user"
SESSIONS_PER_IPADDRESS = "hive.server2.limit.connections.per.ipaddress"
SESSIONS_PER_USER_IPADDRESS = "hive.server2.limit.connections.per.user.ipaddress"
MAX_OPERATIONS_PER_SESSION = "sqlext.serve.max.operations.per.session"
MAX_RESULT_ROWS = "sqlext.serve.max.result.rows"

AUTH_NOSASL = "nosasl"   # plain binary Thrift, no credentials
AUTH_NONE = "none"       # SASL PLAIN (or plain binary) with any user and password accepted
AUTH_PLAIN = "plain"     # SASL PLAIN / HTTP Basic, checked against the users file (Hive's CUSTOM / LDAP role)
AUTH_MODES = (AUTH_NOSASL, AUTH_NONE, AUTH_PLAIN)
_HIVE_AUTH_NAMES = {"nosasl": AUTH_NOSASL, "none": AUTH_NONE, "plain": AUTH_PLAIN, "custom": AUTH_PLAIN,
                    "ldap": AUTH_PLAIN}


@dataclass(frozen=True)
class ServerConfig:
    host: str = "127.0.0.1"
    port: int = 10000                       # 0: any free port (printed at start-up)
    http_port: int | None = 10001           # None: no HTTP transport
    http_path: str = "cliservice"
    auth: str = AUTH_NONE
    users_file: str | None = None
    max_message_size: int = 104857600       # bytes of one request (Hive's default, 100 MiB)
    max_worker_threads: int = 500           # concurrent connections
    async_exec_threads: int = 100           # statements running asynchronously at once
    max_fetch_size: int = 10000             # rows of one FetchResults answer, whatever the client asks
    default_fetch_size: int = 1000
    idle_session_timeout_ms: int = 7 * 24 * 3600 * 1000  # sessions without a connection (HTTP) expire
    allow_unsafe_statements: bool = False   # statement_guard.py: an administrator's choice
    data_roots: tuple[str, ...] = ()        # beside the warehouse
    audit_log: str | None = None            # a file for audit.py's lines (always logged to sqlext.audit)
    policy_file: str | None = None          # authorization.py's grants (None: every user may do everything)
    ssl_cert: str | None = None             # TLS on both transports, plaintext refused
    ssl_key: str | None = None
    # HTTP sessions outlive their connections (until the idle timeout), so only a session count bounds them
    max_sessions: int = 500                 # open sessions in all (as many as binary worker threads)
    sessions_per_user: int = 0              # Hive's defaults: unlimited
    sessions_per_ipaddress: int = 0
    sessions_per_user_ipaddress: int = 0
    max_operations_per_session: int = 8     # statements pending or running at once in one session
    max_result_rows: int = 0                # a larger result fails (never truncated: that is a wrong answer)

    def __post_init__(self):
        if self.auth not in AUTH_MODES:
            raise ValueError(f"{AUTHENTICATION}: unknown mode {self.auth!r} (one of {', '.join(AUTH_MODES)})")
        if self.auth == AUTH_PLAIN and not self.users_file:
            raise ValueError(f"{AUTHENTICATION}=plain needs a users file (--users FILE)")
        if self.users_file and self.auth != AUTH_PLAIN:
            raise ValueError(f"users are configured ({self.users_file}): {AUTHENTICATION} must be plain, "
                             f"not {self.auth} (NOSASL and NONE would let anyone in)")
        if self.ssl_key and not self.ssl_cert:
            raise ValueError(f"{SSL_KEY} is set without a certificate ({SSL_CERT}, --ssl-cert)")
        for f in LIMIT_FIELDS:
            if getattr(self, f) < 0:
                raise ValueError(f"{f.replace('_', '-')} must be 0 (no limit) or more, got {getattr(self, f)}")
        if self.max_message_size < 1024:
            raise ValueError(f"{MAX_MESSAGE_SIZE} must be at least 1024 bytes, got {self.max_message_size}")

    @classmethod
    def from_conf(cls, conf: dict[str, str], **overrides) -> tuple["ServerConfig", dict[str, str]]:
        """(server settings from the `hive.server2.*` keys of `conf` with `overrides` on top, the other keys)."""
        keys = {THRIFT_BIND_HOST: "host", THRIFT_PORT: "port", THRIFT_HTTP_PORT: "http_port",
                THRIFT_HTTP_PATH: "http_path", AUTHENTICATION: "auth", USERS_FILE: "users_file",
                MAX_MESSAGE_SIZE: "max_message_size", MAX_WORKER_THREADS: "max_worker_threads",
                ASYNC_EXEC_THREADS: "async_exec_threads", MAX_FETCH_SIZE: "max_fetch_size",
                DEFAULT_FETCH_SIZE: "default_fetch_size", IDLE_SESSION_TIMEOUT: "idle_session_timeout_ms",
                UNSAFE_STATEMENTS: "allow_unsafe_statements", DATA_ROOTS: "data_roots", AUDIT_LOG: "audit_log",
                POLICY_FILE: "policy_file", SSL_CERT: "ssl_cert", SSL_KEY: "ssl_key", MAX_SESSIONS: "max_sessions",
                SESSIONS_PER_USER: "sessions_per_user", SESSIONS_PER_IPADDRESS: "sessions_per_ipaddress",
                SESSIONS_PER_USER_IPADDRESS: "sessions_per_user_ipaddress",
                MAX_OPERATIONS_PER_SESSION: "max_operations_per_session", MAX_RESULT_ROWS: "max_result_rows"}
        types = {f.name: f.type for f in fields(cls)}
        values, rest = {}, {}
        for key, value in conf.items():
            name = keys.get(key)
            if name is None:
                rest[key] = value
            elif name == "auth":
                values[name] = _HIVE_AUTH_NAMES.get(value.strip().lower(), value.strip().lower())
            elif name == "allow_unsafe_statements":
                if value.strip().lower() not in ("true", "false"):
                    raise ValueError(f"{key}: expected true or false, got {value!r}")
                values[name] = value.strip().lower() == "true"
            elif name == "data_roots":
                values[name] = tuple(p.strip() for p in value.split(",") if p.strip())
            elif "int" in str(types[name]):
                try:
                    values[name] = int(value)
                except ValueError:
                    raise ValueError(f"{key}: expected a whole number, got {value!r}") from None
            else:
                values[name] = value
        values.update({k: v for k, v in overrides.items() if v is not None})
        if values.get("users_file") and "auth" not in values:
            values["auth"] = AUTH_PLAIN  # a users file means passwords are checked
        return replace(cls(), **values) if values else cls(), rest

    def limits_text(self) -> str:
        """The limits for the start-up log (0 shows as `none`)."""
        return ", ".join(f"{f.replace('_', ' ')} {getattr(self, f) or 'none'}" for f in LIMIT_FIELDS)


LIMIT_FIELDS = ("max_sessions", "sessions_per_user", "sessions_per_ipaddress", "sessions_per_user_ipaddress",
                "max_operations_per_session", "max_result_rows")
# where each limit is set, for the errors that name it (so that they say how to raise it)
LIMIT_SETTINGS = {"max_sessions": f"--max-sessions / {MAX_SESSIONS}", "sessions_per_user": SESSIONS_PER_USER,
                  "sessions_per_ipaddress": SESSIONS_PER_IPADDRESS,
                  "sessions_per_user_ipaddress": SESSIONS_PER_USER_IPADDRESS,
                  "max_operations_per_session": f"--max-operations-per-session / {MAX_OPERATIONS_PER_SESSION}",
                  "max_result_rows": f"--max-result-rows / {MAX_RESULT_ROWS}"}
