"""A Hive Metastore (HMS) for the catalog: the embedded default and a resilient Thrift client.

`EmbeddedMetastore` runs the standalone HMS Thrift service that ships inside the pyspark wheel
(Hive 2.3 jars + Derby) as a detached background JVM, one per warehouse directory. Its state
lives under ``<warehouse>/.metastore``::

    conf/hive-site.xml     generated settings (Derby database, warehouse URI, logging)
    logs/                  hive.log, derby.log and the JVM's stdout/stderr (metastore.out)
    metastore_db/          the Derby database
    metastore.json         pid + port + uri of the running instance, read by later processes
    metastore.lock         flock held while starting/stopping, so two processes never start two servers
    last_port              the port of the previous instance, preferred on restart so existing
                           clients (and Spark sessions configured with the URI) reconnect

`resolve_metastore` picks the configured metastore (``hive.metastore.uris``) or the embedded one.
`MetastoreClient` wraps `hmsclient.HMSClient`: lazy connect, clear errors naming the URI, and one
transparent reconnect when the connection broke (e.g. the metastore was restarted).

Security note: Hive 2.3's metastore has no bind-host setting (``hive.metastore.thrift.bind.host``
only exists from Hive 4; 2.3 passes a null host to its server socket), so the embedded server
listens on all interfaces. Clients here always connect through 127.0.0.1 and the port is random,
but on a shared network host the metastore (which has no authentication) is reachable by others.
"""
from __future__ import annotations

import contextlib
import fcntl
import json
import logging
import os
import shutil
import signal
import socket
import subprocess
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, TypeVar

from storage.write.heartbeat import pid_alive
from urllib.parse import urlsplit
from xml.sax.saxutils import escape

from hmsclient import HMSClient
from hmsclient.genthrift.hive_metastore.ttypes import (
    AlreadyExistsException,
    Database,
    NoSuchObjectException,
    Partition,
    Table,
)
from thrift.protocol import TBinaryProtocol
from thrift.transport import TSocket, TTransport
from thrift.transport.TTransport import TTransportException
from storage.exception import HoodieError

log = logging.getLogger(__name__)

T = TypeVar("T")

LOOPBACK = "127.0.0.1"
DEFAULT_HMS_PORT = 9083
URI_CONF_KEYS = ("hive.metastore.uris", "spark.hadoop.hive.metastore.uris")
HMS_MAIN_CLASS = "org.apache.hadoop.hive.metastore.HiveMetaStore"


# ----------------------------------------------------------------------------------------------
# Errors
# ----------------------------------------------------------------------------------------------
class MetastoreError(HoodieError, RuntimeError):
    """Base class for metastore problems raised by this module."""


class MetastoreUnavailableError(MetastoreError):
    """The metastore at `uri` cannot be reached (refused, timed out, connection broken)."""

    def __init__(self, uri: str, cause: BaseException | str):
        self.uri = uri
        self.cause = cause
        reason = cause if isinstance(cause, str) else _describe(cause)
        super().__init__(f"Hive metastore at {uri} is unavailable: {reason}")


class MetastoreStartError(MetastoreError):
    """The embedded metastore did not come up; the message carries the tail of its logs."""


def _describe(exc: BaseException) -> str:
    # Thrift wraps the socket error in `.inner`; the inner one is what a user can act on.
    inner = getattr(exc, "inner", None)
    text = f"{type(exc).__name__}: {exc}"
    return f"{text} ({type(inner).__name__}: {inner})" if inner else text


# ----------------------------------------------------------------------------------------------
# URIs
# ----------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class ThriftAddress:
    host: str
    port: int

    @property
    def uri(self) -> str:
        return f"thrift://{self.host}:{self.port}"


def parse_metastore_uris(uris: str) -> list[ThriftAddress]:
    """Parse ``thrift://h1:p1,thrift://h2:p2`` (Hive's list syntax) into addresses, in order."""
    addresses = []
    for part in (p.strip() for p in uris.split(",")):
        if not part:
            continue
        parsed = urlsplit(part if "://" in part else f"thrift://{part}")
        if parsed.scheme != "thrift" or not parsed.hostname:
            raise ValueError(f"not a metastore URI (expected thrift://host:port): {part!r}")
        addresses.append(ThriftAddress(parsed.hostname, parsed.port or DEFAULT_HMS_PORT))
    if not addresses:
        raise ValueError(f"no metastore URI in {uris!r}")
    return addresses


# ----------------------------------------------------------------------------------------------
# Client
# ----------------------------------------------------------------------------------------------
# Transport-level failures: the connection is unusable, so drop it and (once) reconnect.
# Thrift application exceptions (MetaException, NoSuchObjectException, ...) are answers, not failures.
_TRANSPORT_ERRORS = (TTransportException, OSError, EOFError)


class MetastoreClient:
    """Thin, reconnecting wrapper over `hmsclient.HMSClient` for one metastore URI (or list).

    Connects on the first call. A call that fails on the transport (server restarted, socket reset)
    drops the connection, reconnects once and retries; if that fails too it raises
    `MetastoreUnavailableError` naming the URI. Calls are serialised with a lock because a Thrift
    client is not safe to share between threads.

    `reviver`, if given, is called before reconnecting and returns the URI to use; pass
    ``EmbeddedMetastore.start`` so a dead embedded metastore is restarted instead of just reported.
    Note that a retried write whose first attempt reached a dying server may answer
    AlreadyExists/NoSuchObject on the retry.
    """

    def __init__(self, uri: str, *, connect_timeout_s: float = 5.0, call_timeout_s: float = 60.0,
                 reviver: Callable[[], str] | None = None):
        parse_metastore_uris(uri)  # fail fast on a malformed URI
        self._uri = uri
        self._connect_timeout_s = connect_timeout_s
        self._call_timeout_s = call_timeout_s
        self._reviver = reviver
        self._client: HMSClient | None = None
        self._lock = threading.RLock()

    @property
    def uri(self) -> str:
        return self._uri

    # -- connection management ----------------------------------------------------------------
    def _open(self) -> HMSClient:
        last_error: BaseException | None = None
        for address in parse_metastore_uris(self._uri):
            try:
                return self._open_one(address)
            except OSError as exc:
                last_error = exc
                log.debug("metastore %s not reachable: %s", address.uri, exc)
        assert last_error is not None
        raise MetastoreUnavailableError(self._uri, last_error)

    def _open_one(self, address: ThriftAddress) -> HMSClient:
        # Connect ourselves instead of TSocket.open(): it logs every refused connection at ERROR
        # level, and we want separate connect and call timeouts.
        sock = socket.create_connection((address.host, address.port), timeout=self._connect_timeout_s)
        tsocket = TSocket.TSocket(address.host, address.port)
        tsocket.setHandle(sock)
        tsocket.setTimeout(self._call_timeout_s * 1000)
        protocol = TBinaryProtocol.TBinaryProtocol(TTransport.TBufferedTransport(tsocket))
        log.debug("connected to metastore %s", address.uri)
        return HMSClient(iprot=protocol)

    def close(self) -> None:
        with self._lock:
            client, self._client = self._client, None
            if client is not None:
                with contextlib.suppress(Exception):
                    client.close()

    def __enter__(self) -> MetastoreClient:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def _call(self, fn: Callable[[HMSClient], T]) -> T:
        with self._lock:
            for attempt in (1, 2):
                try:
                    if self._client is None:
                        if attempt == 2 and self._reviver is not None:
                            self._uri = self._reviver()
                        self._client = self._open()
                    return fn(self._client)
                except MetastoreUnavailableError:
                    self.close()
                    if attempt == 2:
                        raise
                except _TRANSPORT_ERRORS as exc:
                    self.close()
                    if attempt == 2 or _is_timeout(exc):
                        # A timed-out call may still be running server-side: do not repeat it.
                        raise MetastoreUnavailableError(self._uri, exc) from exc
                    log.info("metastore %s connection broken (%s); reconnecting", self._uri, exc)
        raise AssertionError("unreachable")

    # -- databases -------------------------------------------------------------------------------
    def get_all_databases(self) -> list[str]:
        return self._call(lambda c: c.get_all_databases())

    def get_database(self, name: str) -> Database | None:
        try:
            return self._call(lambda c: c.get_database(name))
        except NoSuchObjectException:
            return None

    def create_database(self, database: Database | str, *, location: str | None = None,
                        description: str = "", if_not_exists: bool = True) -> bool:
        """Create a database; returns False when it already existed (and `if_not_exists`)."""
        db = database if isinstance(database, Database) else Database(
            name=database, description=description, locationUri=location, parameters={})
        try:
            self._call(lambda c: c.create_database(db))
            return True
        except AlreadyExistsException:
            if not if_not_exists:
                raise
            return False

    def drop_database(self, name: str, *, delete_data: bool = False, cascade: bool = False) -> bool:
        """Drop a database; returns False when it did not exist.

        Checks existence first because Hive 2.3 answers a drop of a missing database with a
        MetaException (a server-side NPE) rather than NoSuchObjectException."""
        if self.get_database(name) is None:
            return False
        try:
            self._call(lambda c: c.drop_database(name, delete_data, cascade))
            return True
        except NoSuchObjectException:
            return False

    # -- tables ----------------------------------------------------------------------------------
    def get_all_tables(self, db: str) -> list[str]:
        return self._call(lambda c: c.get_all_tables(db))

    def get_table(self, db: str, name: str) -> Table | None:
        try:
            return self._call(lambda c: c.get_table(db, name))
        except NoSuchObjectException:
            return None

    def create_table(self, table: Table) -> None:
        self._call(lambda c: c.create_table(table))

    def alter_table(self, db: str, name: str, table: Table, *, cascade: bool = False) -> None:
        """Replace the definition of `db.name` with `table` (a different name in `table` renames).

        `cascade` also applies column changes to every partition's storage descriptor (Hive readers use a
        partition's own columns, so a synced column change must reach them)."""
        if cascade:
            self._call(lambda c: c.alter_table_with_cascade(db, name, table, True))
        else:
            self._call(lambda c: c.alter_table(db, name, table))

    def drop_table(self, db: str, name: str, delete_data: bool = False) -> bool:
        """Drop a table; returns False when it did not exist. External tables never lose data."""
        try:
            self._call(lambda c: c.drop_table(db, name, delete_data))
            return True
        except NoSuchObjectException:
            return False

    # -- partitions ------------------------------------------------------------------------------
    def add_partitions(self, partitions: list[Partition]) -> int:
        """Register partitions (thrift `Partition` objects); returns how many were added."""
        if not partitions:
            return 0
        return self._call(lambda c: c.add_partitions(partitions))

    def drop_partition(self, db: str, table: str, values: list[str], delete_data: bool = False) -> bool:
        """Drop one partition by its values (in partition-key order); False when it did not exist."""
        try:
            return self._call(lambda c: c.drop_partition(db, table, values, delete_data))
        except NoSuchObjectException:
            return False

    def alter_partitions(self, db: str, table: str, partitions: list[Partition]) -> None:
        """Replace the definitions (e.g. the location) of existing partitions."""
        if partitions:
            self._call(lambda c: c.alter_partitions(db, table, partitions))

    def get_partitions(self, db: str, table: str, max_parts: int = -1) -> list[Partition]:
        return self._call(lambda c: c.get_partitions(db, table, max_parts))

    def get_partition_names(self, db: str, table: str, max_parts: int = -1) -> list[str]:
        return self._call(lambda c: c.get_partition_names(db, table, max_parts))


def _is_timeout(exc: BaseException) -> bool:
    if isinstance(exc, TTransportException) and exc.type == TTransportException.TIMED_OUT:
        return True
    return isinstance(exc, TimeoutError) or isinstance(getattr(exc, "inner", None), TimeoutError)


# ----------------------------------------------------------------------------------------------
# Embedded metastore: files, process helpers
# ----------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class MetastorePaths:
    """Where the embedded metastore of one warehouse keeps its files."""

    warehouse: Path

    @property
    def root(self) -> Path:
        return self.warehouse / ".metastore"

    @property
    def conf_dir(self) -> Path:
        return self.root / "conf"

    @property
    def hive_site(self) -> Path:
        return self.conf_dir / "hive-site.xml"

    @property
    def logs_dir(self) -> Path:
        return self.root / "logs"

    @property
    def stdout_log(self) -> Path:
        return self.logs_dir / "metastore.out"

    @property
    def hive_log(self) -> Path:
        return self.logs_dir / "hive.log"

    @property
    def derby_log(self) -> Path:
        return self.logs_dir / "derby.log"

    @property
    def derby_db(self) -> Path:
        return self.root / "metastore_db"

    @property
    def state_file(self) -> Path:
        return self.root / "metastore.json"

    @property
    def lock_file(self) -> Path:
        return self.root / "metastore.lock"

    @property
    def last_port_file(self) -> Path:
        return self.root / "last_port"


@dataclass(frozen=True)
class MetastoreState:
    """What `metastore.json` records about a running embedded metastore."""

    pid: int
    port: int
    host: str
    uri: str
    warehouse: str
    started_at: float

    @classmethod
    def load(cls, path: Path) -> MetastoreState | None:
        try:
            return cls(**json.loads(path.read_text()))
        except FileNotFoundError:
            return None
        except (ValueError, TypeError) as exc:  # torn or foreign file: treat as stale
            log.warning("ignoring unreadable metastore state %s: %s", path, exc)
            return None

    def save(self, path: Path) -> None:
        tmp = path.with_suffix(".json.tmp")
        tmp.write_text(json.dumps(asdict(self), indent=2))
        os.replace(tmp, path)  # atomic: readers never see a half-written file


def hive_site_settings(paths: MetastorePaths, extra: Mapping[str, str] | None = None) -> dict[str, str]:
    """The hive-site.xml settings the embedded metastore needs (see platform notes)."""
    settings = {
        "javax.jdo.option.ConnectionURL": f"jdbc:derby:;databaseName={paths.derby_db};create=true",
        "javax.jdo.option.ConnectionDriverName": "org.apache.derby.jdbc.EmbeddedDriver",
        "datanucleus.schema.autoCreateAll": "true",
        "hive.metastore.schema.verification": "false",
        "hive.metastore.warehouse.dir": paths.warehouse.as_uri(),
        # Async logging needs the LMAX disruptor, which pyspark does not ship.
        "hive.async.log.enabled": "false",
        # The default pool (BoneCP) is not shipped either; without this the first drop fails.
        "datanucleus.connectionPoolingType": "HikariCP",
        # The default of 200 pre-sized worker threads is far more than a local catalog needs.
        "hive.metastore.server.min.threads": "4",
        "hive.metastore.server.max.threads": "100",
    }
    settings.update(extra or {})
    return settings


def render_hive_site(settings: Mapping[str, str]) -> str:
    props = "\n".join(
        f"  <property><name>{escape(k)}</name><value>{escape(v)}</value></property>"
        for k, v in settings.items())
    return f'<?xml version="1.0"?>\n<configuration>\n{props}\n</configuration>\n'


def pyspark_jars_dir() -> Path:
    """The jars directory of the installed pyspark (or $SPARK_HOME/jars)."""
    import pyspark

    candidates = [Path(pyspark.__file__).parent / "jars"]
    if os.environ.get("SPARK_HOME"):
        candidates.append(Path(os.environ["SPARK_HOME"]) / "jars")
    for jars in candidates:
        if any(jars.glob("hive-metastore-*.jar")):
            return jars
    raise MetastoreStartError(f"no hive-metastore jar found in {', '.join(map(str, candidates))}")


def java_executable() -> str:
    java_home = os.environ.get("JAVA_HOME")
    if java_home and (Path(java_home) / "bin" / "java").exists():
        return str(Path(java_home) / "bin" / "java")
    found = shutil.which("java")
    if not found:
        raise MetastoreStartError("no java executable on PATH (and JAVA_HOME not set)")
    return found


def port_answers(host: str, port: int, timeout_s: float = 1.0) -> bool:
    try:
        with socket.create_connection((host, port), timeout=timeout_s):
            return True
    except OSError:
        return False


def port_is_free(port: int) -> bool:
    # The JVM binds the wildcard address with SO_REUSEADDR, so test the same way: a port with
    # only TIME_WAIT leftovers from a killed server is free for it.
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind(("", port))
            return True
        except OSError:
            return False


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((LOOPBACK, 0))
        return s.getsockname()[1]


def _cmdline(pid: int) -> list[str] | None:
    try:
        raw = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return None
    return [a.decode(errors="replace") for a in raw.split(b"\0") if a]


def is_metastore_process(pid: int, conf_dir: Path) -> bool:
    """Guard against pid reuse: the pid must be a HiveMetaStore JVM using *our* conf dir."""
    args = _cmdline(pid)
    if args is None:  # no /proc (not Linux): best effort
        return pid_alive(pid)
    # A zombie has an empty cmdline, so it never matches: an exited JVM counts as gone.
    return HMS_MAIN_CLASS in args and any(str(conf_dir) in a for a in args) and pid_alive(pid)


def metastore_pids(conf_dir: Path) -> list[int]:
    """All live HiveMetaStore JVMs started for this conf dir (finds orphans without a state file)."""
    proc = Path("/proc")
    if not proc.is_dir():
        return []
    return [int(p.name) for p in proc.iterdir() if p.name.isdigit()
            and is_metastore_process(int(p.name), conf_dir)]


def terminate(pid: int, timeout_s: float = 20.0) -> None:
    """SIGTERM (Hive shuts down cleanly on it), wait, then SIGKILL."""
    for sig, wait_s in ((signal.SIGTERM, timeout_s), (signal.SIGKILL, 5.0)):
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, sig)
        deadline = time.monotonic() + wait_s
        while time.monotonic() < deadline:
            if not pid_alive(pid):
                return
            time.sleep(0.05)
        log.warning("metastore pid %d did not exit on %s", pid, sig.name)
    raise MetastoreError(f"could not stop metastore process {pid}")


def log_tail(path: Path, lines: int = 30) -> str:
    try:
        text = path.read_text(errors="replace").splitlines()
    except OSError:
        return f"(no {path.name})"
    return "\n".join(text[-lines:])


def _size(path: Path) -> int:
    try:
        return path.stat().st_size
    except OSError:
        return 0


def _read_from(path: Path, offset: int) -> str:
    try:
        with open(path, "rb") as f:
            f.seek(offset)
            return f.read().decode(errors="replace")
    except OSError:
        return ""


@contextlib.contextmanager
def file_lock(path: Path, timeout_s: float) -> Iterator[None]:
    """Exclusive flock on `path` (works across processes and across threads with separate opens).

    The lock dies with its holder, so a crashed starter never leaves it behind."""
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        deadline = time.monotonic() + timeout_s
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() > deadline:
                    raise MetastoreError(f"timed out after {timeout_s:.0f}s waiting for lock {path}") from None
                time.sleep(0.1)
        yield
    finally:
        os.close(fd)  # closing the descriptor releases the lock


# ----------------------------------------------------------------------------------------------
# Embedded metastore
# ----------------------------------------------------------------------------------------------
class EmbeddedMetastore:
    """The HMS Thrift service from pyspark's jars, one per warehouse, shared by later processes.

    `start()` reuses a running instance recorded in ``.metastore/metastore.json`` (pid alive, is
    our JVM, port answering), otherwise cleans up stale state and starts a new JVM detached from
    this process (it outlives it). `stop()` ends it. All of this runs under a file lock.
    """

    def __init__(self, warehouse_dir: Path | str, *, heap: str = "512m", start_timeout_s: float = 120.0,
                 extra_conf: Mapping[str, str] | None = None, java: str | None = None,
                 jars_dir: Path | None = None):
        self.paths = MetastorePaths(Path(warehouse_dir).expanduser().absolute())
        self.heap = heap
        self.start_timeout_s = start_timeout_s
        self.extra_conf = dict(extra_conf or {})
        self._java = java
        self._jars_dir = jars_dir
        self._proc: subprocess.Popen[bytes] | None = None  # kept so our own child gets reaped

    def __repr__(self) -> str:
        return f"EmbeddedMetastore({str(self.paths.warehouse)!r})"

    # -- public API ------------------------------------------------------------------------------
    @property
    def uri(self) -> str:
        """URI of the running instance; raises `MetastoreError` when none runs."""
        state = self._live_state()
        if state is None:
            raise MetastoreError(f"embedded metastore for {self.paths.warehouse} is not running")
        return state.uri

    def is_running(self) -> bool:
        return self._live_state() is not None

    def start(self) -> str:
        """Start the metastore, or reuse the running one; returns its thrift URI."""
        state = self._live_state()
        if state is not None:  # fast path without the lock
            return state.uri
        self._ensure_dirs()
        with file_lock(self.paths.lock_file, self.start_timeout_s + 30):
            state = self._live_state()  # someone may have started it while we waited
            if state is not None:
                log.debug("reusing metastore %s (pid %d)", state.uri, state.pid)
                return state.uri
            self._clean_stale()
            self._reap()
            state = self._launch()
            state.save(self.paths.state_file)
            self.paths.last_port_file.write_text(str(state.port))
            return state.uri

    def stop(self, timeout_s: float = 20.0) -> bool:
        """Stop the running instance (SIGTERM, then SIGKILL); False if none was running."""
        if not self.paths.root.exists():
            return False
        with file_lock(self.paths.lock_file, self.start_timeout_s + 30):
            state = MetastoreState.load(self.paths.state_file)
            pids = set(metastore_pids(self.paths.conf_dir))
            if state is not None and is_metastore_process(state.pid, self.paths.conf_dir):
                pids.add(state.pid)
            for pid in sorted(pids):
                log.info("stopping metastore pid %d (%s)", pid, self.paths.warehouse)
                terminate(pid, timeout_s)
            self.paths.state_file.unlink(missing_ok=True)
            self._reap()
            return bool(pids)

    def status(self) -> dict[str, Any]:
        state = MetastoreState.load(self.paths.state_file)
        info: dict[str, Any] = {
            "running": False,
            "warehouse": str(self.paths.warehouse),
            "metastore_dir": str(self.paths.root),
            "log_file": str(self.paths.hive_log),
        }
        if state is None:
            return info
        alive = is_metastore_process(state.pid, self.paths.conf_dir)
        answering = alive and port_answers(state.host, state.port)
        info.update(pid=state.pid, port=state.port, uri=state.uri, started_at=state.started_at,
                    alive=alive, answering=answering, running=answering, stale=not answering)
        return info

    # -- internals -------------------------------------------------------------------------------
    def _reap(self) -> None:
        # If this object started the JVM, collect its exit status so no zombie is left behind.
        if self._proc is not None and self._proc.poll() is not None:
            self._proc = None

    def _ensure_dirs(self) -> None:
        for d in (self.paths.root, self.paths.conf_dir, self.paths.logs_dir):
            d.mkdir(parents=True, exist_ok=True)

    def _live_state(self) -> MetastoreState | None:
        state = MetastoreState.load(self.paths.state_file)
        if state is None:
            return None
        if is_metastore_process(state.pid, self.paths.conf_dir) and port_answers(state.host, state.port):
            return state
        return None

    def _clean_stale(self) -> None:
        """Remove a stale state file and end leftover JVMs of this warehouse.

        A leftover JVM (hung, or orphaned by a starter that crashed before writing the state)
        would still hold the Derby database lock, so a new server could not boot."""
        state = MetastoreState.load(self.paths.state_file)
        if state is not None:
            log.info("cleaning stale metastore state (pid %d, %s)", state.pid, state.uri)
        for pid in metastore_pids(self.paths.conf_dir):
            log.warning("ending leftover metastore process %d", pid)
            terminate(pid)
        self.paths.state_file.unlink(missing_ok=True)

    def _choose_port(self) -> int:
        # Prefer the previous port: clients and Spark sessions holding the old URI then reconnect.
        with contextlib.suppress(OSError, ValueError):
            last = int(self.paths.last_port_file.read_text().strip())
            if port_is_free(last):
                return last
        return free_port()

    def _write_conf(self) -> None:
        settings = hive_site_settings(self.paths, self.extra_conf)
        self.paths.hive_site.write_text(render_hive_site(settings))

    def _command(self, port: int) -> list[str]:
        jars = self._jars_dir or pyspark_jars_dir()
        return [
            self._java or java_executable(),
            f"-Xmx{self.heap}",
            f"-Dhive.log.dir={self.paths.logs_dir}",
            "-Dhive.log.file=hive.log",
            f"-Dderby.stream.error.file={self.paths.derby_log}",
            f"-Dderby.system.home={self.paths.root}",
            "-cp", f"{jars}/*{os.pathsep}{self.paths.conf_dir}",
            HMS_MAIN_CLASS, "-p", str(port),
        ]

    def _launch(self, attempts: int = 3) -> MetastoreState:
        self._write_conf()
        for attempt in range(1, attempts + 1):
            port = self._choose_port()
            try:
                return self._launch_on(port)
            except _PortTaken:
                # Another program grabbed the port between our probe and the JVM's bind.
                log.warning("port %d was taken while starting (attempt %d/%d)", port, attempt, attempts)
                self.paths.last_port_file.unlink(missing_ok=True)
        raise MetastoreStartError(f"could not bind a port for the metastore after {attempts} attempts")

    def _launch_on(self, port: int) -> MetastoreState:
        cmd = self._command(port)
        env = {**os.environ, "HIVE_CONF_DIR": str(self.paths.conf_dir)}  # never pick up a foreign hive-site
        log.info("starting embedded Hive metastore on port %d for %s", port, self.paths.warehouse)
        started = time.monotonic()
        log_offsets = {path: _size(path) for path in (self.paths.stdout_log, self.paths.hive_log)}
        with open(self.paths.stdout_log, "ab") as out:
            # start_new_session: Ctrl-C in the CLI must not kill a metastore other processes share.
            self._proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT,
                                          cwd=self.paths.root, env=env, start_new_session=True, close_fds=True)
        uri = ThriftAddress(LOOPBACK, port).uri
        self._wait_ready(self._proc, uri, started + self.start_timeout_s, log_offsets)
        log.info("metastore %s ready in %.1fs (pid %d)", uri, time.monotonic() - started, self._proc.pid)
        return MetastoreState(pid=self._proc.pid, port=port, host=LOOPBACK, uri=uri,
                              warehouse=str(self.paths.warehouse), started_at=time.time())

    def _wait_ready(self, proc: subprocess.Popen[bytes], uri: str, deadline: float,
                    log_offsets: Mapping[Path, int]) -> None:
        """Ready = the port accepts connections AND a real Thrift call answers."""
        address = parse_metastore_uris(uri)[0]
        while True:
            code = proc.poll()
            if code is not None:
                # Only this launch's log lines count: the logs are appended across restarts.
                if any("BindException" in _read_from(path, offset) for path, offset in log_offsets.items()):
                    raise _PortTaken()
                raise MetastoreStartError(self._failure(f"exited with code {code} during start-up"))
            if port_answers(address.host, address.port, 0.5) and self._thrift_answers(uri):
                return
            if time.monotonic() > deadline:
                terminate(proc.pid)
                raise MetastoreStartError(self._failure(f"not ready after {self.start_timeout_s:.0f}s"))
            time.sleep(0.2)

    @staticmethod
    def _thrift_answers(uri: str) -> bool:
        try:
            with MetastoreClient(uri, connect_timeout_s=2.0, call_timeout_s=30.0) as client:
                client.get_all_databases()
            return True
        except MetastoreUnavailableError as exc:
            log.debug("metastore not ready yet: %s", exc)
            return False

    def _failure(self, what: str) -> str:
        return (f"embedded Hive metastore for {self.paths.warehouse} {what}.\n"
                f"--- {self.paths.stdout_log} (tail) ---\n{log_tail(self.paths.stdout_log, 15)}\n"
                f"--- {self.paths.hive_log} (tail) ---\n{log_tail(self.paths.hive_log, 30)}")


class _PortTaken(Exception):
    """Internal: the JVM could not bind the chosen port."""


# ----------------------------------------------------------------------------------------------
# Resolution
# ----------------------------------------------------------------------------------------------
def configured_metastore_uri(conf: Mapping[str, str] | None) -> str | None:
    """The metastore URI set in `conf` (``hive.metastore.uris`` or its ``spark.hadoop.`` form)."""
    for key in URI_CONF_KEYS:
        value = (conf or {}).get(key)
        if value and str(value).strip():
            return str(value).strip()
    return None


def default_warehouse() -> Path:
    """The warehouse sqlext uses when none is given: ./spark-warehouse."""
    return (Path.cwd() / "spark-warehouse").absolute()


def resolve_metastore(conf: Mapping[str, str] | None, warehouse_dir: Path | str) -> str:
    """Thrift URI to use: the configured metastore (nothing started) or the embedded one.

    The embedded metastore of `warehouse_dir` is reused when running, otherwise started."""
    configured = configured_metastore_uri(conf)
    if configured is not None:
        parse_metastore_uris(configured)  # validate early, with a clear message
        log.debug("using configured metastore %s", configured)
        return configured
    return EmbeddedMetastore(warehouse_dir).start()
