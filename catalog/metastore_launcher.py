"""The embedded metastore's server process: its files, its JVM command line, launching it and telling it apart.

`MetastoreLauncher` starts the HMS Thrift service of the Hive 2.3 jars inside the pyspark wheel (with Derby) as
a JVM detached from the calling process, and waits until it answers a Thrift call. The JVM runs
`catalog.metastore_server`'s class: the metastore has no authentication and Hive 2.3 no bind-host setting, so
that class binds it to 127.0.0.1 (reachable from this machine only) and stops it when unused
(`catalog.metastore_lifecycle`). The process helpers find the JVMs of one warehouse (`metastore_pids`) and every
metastore JVM of this user and registry (`metastore_processes`, also those whose warehouse is gone), guard
against pid reuse (`is_metastore_process`) and end them (`terminate`). Which metastore to reuse or start is
`catalog.embedded_metastore`'s business.
"""
from __future__ import annotations

import contextlib
import logging
import os
import signal
import socket
import stat
import subprocess
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from xml.sax.saxutils import escape

from catalog.metastore_client import (
    MetastoreClient,
    MetastoreError,
    MetastoreStartError,
    MetastoreUnavailableError,
    ThriftAddress,
    parse_metastore_uris,
)
from catalog import metastore_registry
from catalog.metastore_lifecycle import ACTIVITY_FILE, LEASES_DIR, LIFECYCLE_FILE, check_interval_s
from catalog.metastore_server import SERVER_CLASS, location_only_fs_settings, server_classes
from storage.write.heartbeat import pid_alive
from storage.io.class_data_sharing import java_binary

log = logging.getLogger(__name__)

LOOPBACK = "127.0.0.1"
HMS_MAIN_CLASS = "org.apache.hadoop.hive.metastore.HiveMetaStore"  # what earlier versions ran (all interfaces)
METASTORE_MAIN_CLASSES = (SERVER_CLASS, HMS_MAIN_CLASS)
CHECK_INTERVAL_PROPERTY = "sqlext.metastore.check.interval.ms"  # read by the watchdog of LoopbackHiveMetaStore


class _PortTaken(Exception):
    """Internal: the JVM could not bind the chosen port."""


# ----------------------------------------------------------------------------------------------
# Files
# ----------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class MetastorePaths:
    """Where the embedded metastore of one warehouse keeps its files (under ``<warehouse>/.metastore``)::

        conf/hive-site.xml     generated settings (Derby database, warehouse URI, logging)
        logs/                  hive.log, derby.log and the JVM's stdout/stderr (metastore.out)
        metastore_db/          the Derby database
        metastore.json         pid + port + uri of the running instance, read by later processes
        metastore.lock         flock held while starting/stopping, so two processes never start two servers
        last_port              the port of the previous instance, preferred on restart so existing
                               clients (and Spark sessions configured with the URI) reconnect
        leases/<pid>           one per process using it; lifecycle.properties, activity.properties: when it
                               stops by itself (catalog.metastore_lifecycle)
    """

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

    @property
    def leases_dir(self) -> Path:
        return self.root / LEASES_DIR

    @property
    def lifecycle_file(self) -> Path:
        return self.root / LIFECYCLE_FILE

    @property
    def activity_file(self) -> Path:
        return self.root / ACTIVITY_FILE


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
        # Hive 2.3 creates its lock tables (HIVE_LOCKS, NEXT_LOCK_ID, ...) in Derby only in this mode; without
        # them the HMS `lock` call that Hudi's HiveMetastoreBasedLockProvider uses fails.
        "hive.in.test": "true",
        **location_only_fs_settings(),
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
    found = java_binary()
    if found is None:
        raise MetastoreStartError("no java executable on PATH (and JAVA_HOME not set)")
    return str(found)


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


# ----------------------------------------------------------------------------------------------
# Ports and processes
# ----------------------------------------------------------------------------------------------
def port_answers(host: str, port: int, timeout_s: float = 1.0) -> bool:
    try:
        with socket.create_connection((host, port), timeout=timeout_s):
            return True
    except OSError:
        return False


def port_is_free(port: int) -> bool:
    # The JVM binds with SO_REUSEADDR, so test the same way: a port with only TIME_WAIT leftovers from a
    # killed server is free for it. The wildcard address: a port someone listens on anywhere is taken.
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


def is_metastore_process(pid: int, conf_dir: Path, main_classes: tuple[str, ...] = METASTORE_MAIN_CLASSES) -> bool:
    """Guard against pid reuse: the pid must be a metastore JVM (of `main_classes`) using *our* conf dir."""
    args = _cmdline(pid)
    if args is None:  # no /proc (not Linux): best effort
        return pid_alive(pid)
    # A zombie has an empty cmdline, so it never matches: an exited JVM counts as gone.
    return (any(c in args for c in main_classes) and any(str(conf_dir) in a for a in args)
            and pid_alive(pid))


def _owned_by_me(pid: int) -> bool:
    # Only this user's processes: another user's metastore of a same-named path is not ours to list or stop.
    try:
        return os.stat(f"/proc/{pid}").st_uid == os.getuid()
    except OSError:
        return False


def _pids() -> list[int]:
    proc = Path("/proc")
    return [int(p.name) for p in proc.iterdir() if p.name.isdigit()] if proc.is_dir() else []


def metastore_pids(conf_dir: Path) -> list[int]:
    """All live metastore JVMs of this user started for this conf dir (finds orphans without a state file, and
    JVMs that earlier versions started with HiveMetaStore's own main)."""
    return [pid for pid in _pids() if is_metastore_process(pid, conf_dir) and _owned_by_me(pid)]


@dataclass(frozen=True)
class MetastoreProcess:
    """A metastore JVM found by its command line: what it was started for, whatever became of that directory."""

    pid: int
    port: int | None
    metastore_dir: Path  # <warehouse>/.metastore, as the path read when it started

    @property
    def warehouse(self) -> Path:
        return self.metastore_dir.parent


def _option(args: list[str], name: str) -> str | None:
    return next((a.split("=", 1)[1] for a in args if a.startswith(f"-D{name}=")), None)


def _parse_metastore_process(pid: int, args: list[str]) -> MetastoreProcess | None:
    if SERVER_CLASS in args:  # LoopbackHiveMetaStore <port> <metastore dir>
        i = args.index(SERVER_CLASS)
        with contextlib.suppress(IndexError, ValueError):
            return MetastoreProcess(pid, int(args[i + 1]), Path(args[i + 2]))
        return None
    home = _option(args, "derby.system.home")  # HiveMetaStore's own main, as earlier versions ran it
    if HMS_MAIN_CLASS not in args or home is None:
        return None
    port = args[args.index("-p") + 1] if "-p" in args[:-1] else ""
    return MetastoreProcess(pid, int(port) if port.isdigit() else None, Path(home))


def metastore_processes(*, this_registry_only: bool = True) -> list[MetastoreProcess]:
    """Every live metastore JVM of this user on this machine (that belongs to this registry, by its command
    line's tag, unless `this_registry_only` is False), including those whose warehouse was deleted."""
    found = []
    for pid in _pids():
        args = _cmdline(pid)
        if (not args or not any(c in args for c in METASTORE_MAIN_CLASSES) or not _owned_by_me(pid)
                or (this_registry_only and not metastore_registry.tagged_for_this_registry(args))):
            continue
        process = _parse_metastore_process(pid, args)
        if process is not None and pid_alive(pid):
            found.append(process)
    return found


def directory_identity(path: Path | str) -> tuple[int, int] | None:
    """(device, inode) of a directory; None when there is none at `path`."""
    try:
        st = os.stat(path)
    except OSError:
        return None
    return (st.st_dev, st.st_ino) if stat.S_ISDIR(st.st_mode) else None


def process_cwd_identity(pid: int) -> tuple[int, int] | None:
    """(device, inode) of a process's working directory (the launcher starts the JVM in its metastore dir, so
    this is the directory it was started in, even after that one was deleted or replaced)."""
    return directory_identity(f"/proc/{pid}/cwd")


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


# ----------------------------------------------------------------------------------------------
# The launcher
# ----------------------------------------------------------------------------------------------
class MetastoreLauncher:
    """Starts the metastore JVM of one warehouse on a port and waits until it answers.

    The child runs in its own session (Ctrl-C in the caller must not kill a metastore other processes
    share) and is kept as `proc` so the starting process can reap it."""

    def __init__(self, paths: MetastorePaths, *, heap: str = "512m", start_timeout_s: float = 120.0,
                 extra_conf: Mapping[str, str] | None = None, java: str | None = None,
                 jars_dir: Path | None = None):
        self.paths = paths
        self.heap = heap
        self.start_timeout_s = start_timeout_s
        self.extra_conf = dict(extra_conf or {})
        self._java = java
        self._jars_dir = jars_dir
        self.proc: subprocess.Popen[bytes] | None = None

    def reap(self) -> None:
        # If this launcher started the JVM, collect its exit status so no zombie is left behind.
        if self.proc is not None and self.proc.poll() is not None:
            self.proc = None

    def launch(self, choose_port: Callable[[], int], attempts: int = 3) -> tuple[int, int]:
        """Write the configuration, start the JVM on a port from `choose_port`; returns (pid, port)."""
        self._write_conf()
        for attempt in range(1, attempts + 1):
            port = choose_port()
            try:
                return self._launch_on(port), port
            except _PortTaken:
                # Another program grabbed the port between our probe and the JVM's bind.
                log.warning("port %d was taken while starting (attempt %d/%d)", port, attempt, attempts)
                self.paths.last_port_file.unlink(missing_ok=True)
        raise MetastoreStartError(f"could not bind a port for the metastore after {attempts} attempts")

    def _write_conf(self) -> None:
        settings = hive_site_settings(self.paths, self.extra_conf)
        self.paths.hive_site.write_text(render_hive_site(settings))

    def _command(self, port: int) -> list[str]:
        jars = self._jars_dir or pyspark_jars_dir()
        java = self._java or java_executable()
        return [
            java,
            f"-Xmx{self.heap}",
            # an IPv4 socket: bound to 127.0.0.1 itself, not to its IPv4-mapped IPv6 form
            "-Djava.net.preferIPv4Stack=true",
            f"-Dhive.log.dir={self.paths.logs_dir}",
            "-Dhive.log.file=hive.log",
            f"-Dderby.stream.error.file={self.paths.derby_log}",
            f"-Dderby.system.home={self.paths.root}",
            f"-D{CHECK_INTERVAL_PROPERTY}={max(1, round(check_interval_s() * 1000))}",
            metastore_registry.jvm_tag(),  # how `sqlext metastore status|stop --all` find it, warehouse or not
            "-cp", os.pathsep.join([str(server_classes(jars, java)), f"{jars}/*", str(self.paths.conf_dir)]),
            SERVER_CLASS, str(port), str(self.paths.root),
        ]

    def _launch_on(self, port: int) -> int:
        cmd = self._command(port)
        env = {**os.environ, "HIVE_CONF_DIR": str(self.paths.conf_dir)}  # never pick up a foreign hive-site
        log.info("starting embedded Hive metastore on port %d for %s", port, self.paths.warehouse)
        started = time.monotonic()
        log_offsets = {path: _size(path) for path in (self.paths.stdout_log, self.paths.hive_log)}
        with open(self.paths.stdout_log, "ab") as out:
            self.proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT,
                                         cwd=self.paths.root, env=env, start_new_session=True, close_fds=True)
        uri = ThriftAddress(LOOPBACK, port).uri
        self._wait_ready(self.proc, uri, started + self.start_timeout_s, log_offsets)
        log.info("metastore %s ready in %.1fs (pid %d)", uri, time.monotonic() - started, self.proc.pid)
        return self.proc.pid

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
