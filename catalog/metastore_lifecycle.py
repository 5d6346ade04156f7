"""When the embedded metastore stops by itself: leases of the processes using it, its lifecycle and activity files.

A metastore nobody started as a service is *on demand*: every process that uses it holds a lease
(``.metastore/leases/<pid>``, holding the process's start time so a reused pid does not count), and the
metastore's own watchdog (in its JVM, catalog/java/LoopbackHiveMetaStore.java) ends it

- once the process that started it is gone (exited, or released its lease) and no other process holds a lease
  or a connection, or
- after ``idle.timeout.s`` (default 10 minutes) without leases, connections or calls.

Whatever its mode, it also ends once its ``.metastore`` directory (or its warehouse) is deleted or replaced:
its Derby database went with it, so nobody can use it again (a call arriving then gets an error naming the
warehouse). `sqlext metastore start` makes it a *service* (``keep.alive``): only its idle timeout, if one was
given, or that deletion ends it. The watchdog checks every ``$SQLEXT_METASTORE_CHECK_INTERVAL_S`` seconds
(default 0.5, at most 60; read when the metastore starts) and reports what it sees in ``activity.properties``
(connections, live leases, last use).

A lease is released when its process exits (nothing to refresh); `release_leases` at interpreter exit only
makes that immediate.
"""
from __future__ import annotations

import atexit
import contextlib
import logging
import os
import threading
import time
from dataclasses import dataclass
from pathlib import Path

from storage.write.heartbeat import pid_alive

log = logging.getLogger(__name__)

DEFAULT_IDLE_TIMEOUT_S = 600
CHECK_INTERVAL_ENV = "SQLEXT_METASTORE_CHECK_INTERVAL_S"
DEFAULT_CHECK_INTERVAL_S = 0.5
MAX_CHECK_INTERVAL_S = 60.0
LIFECYCLE_FILE = "lifecycle.properties"
ACTIVITY_FILE = "activity.properties"
LEASES_DIR = "leases"


def check_interval_s() -> float:
    """How often a metastore started now checks its directory, leases and idle time (seconds)."""
    value = os.environ.get(CHECK_INTERVAL_ENV, "").strip()
    if not value:
        return DEFAULT_CHECK_INTERVAL_S
    try:
        seconds = float(value)
    except ValueError:
        seconds = -1.0
    if not 0 < seconds <= MAX_CHECK_INTERVAL_S:
        log.warning("ignoring %s=%r: expected seconds in (0, %g]; using %g", CHECK_INTERVAL_ENV, value,
                    MAX_CHECK_INTERVAL_S, DEFAULT_CHECK_INTERVAL_S)
        return DEFAULT_CHECK_INTERVAL_S
    return seconds


# ----------------------------------------------------------------------------------------------
# Leases
# ----------------------------------------------------------------------------------------------
def process_start_ticks(pid: int) -> str:
    """The start time of `pid` in clock ticks since boot (/proc/<pid>/stat field 22); "" when unknown."""
    with contextlib.suppress(OSError, IndexError):
        # "pid (comm) STATE ...": comm may hold spaces, so count fields after the last ')'.
        stat = Path(f"/proc/{pid}/stat").read_text()
        fields = stat[stat.rindex(")") + 2:].split()
        if fields[0] != "Z":
            return fields[19]
    return ""


def lease_is_live(lease: Path) -> bool:
    """Whether the process named by the lease file runs and is the one that wrote it."""
    try:
        pid, recorded = int(lease.name), lease.read_text().strip()
    except (OSError, ValueError):
        return False
    if not Path("/proc/self").is_dir():  # no procfs: liveness only
        return pid_alive(pid)
    current = process_start_ticks(pid)
    return bool(current) and (not recorded or current == recorded)


def live_lease_pids(root: Path) -> list[int]:
    leases = root / LEASES_DIR
    if not leases.is_dir():
        return []
    return sorted(int(f.name) for f in leases.iterdir() if f.name.isdigit() and lease_is_live(f))


_HELD: set[Path] = set()
_HELD_LOCK = threading.Lock()


def acquire_lease(root: Path) -> None:
    """Record that this process uses the metastore under `root` (idempotent); released at interpreter exit."""
    pid = os.getpid()
    lease = root / LEASES_DIR / str(pid)
    with _HELD_LOCK:
        if lease in _HELD and lease.exists():
            return
        lease.parent.mkdir(parents=True, exist_ok=True)
        tmp = lease.with_name(f".{pid}.tmp")
        tmp.write_text(process_start_ticks(pid))
        os.replace(tmp, lease)  # the watchdog never reads a half-written lease
        if not _HELD:
            atexit.register(release_leases)
        _HELD.add(lease)


def release_lease(root: Path) -> None:
    lease = root / LEASES_DIR / str(os.getpid())
    with _HELD_LOCK:
        _HELD.discard(lease)
    lease.unlink(missing_ok=True)


def release_leases() -> None:
    """Drop every lease this process holds (at exit: an on-demand metastore it started may stop now)."""
    with _HELD_LOCK:
        held = [lease for lease in _HELD if lease.name == str(os.getpid())]  # a forked child holds none
        _HELD.clear()
    for lease in held:
        lease.unlink(missing_ok=True)


# ----------------------------------------------------------------------------------------------
# Lifecycle and activity files (Java properties: the JVM reads and writes them)
# ----------------------------------------------------------------------------------------------
def read_properties(path: Path) -> dict[str, str]:
    try:
        lines = path.read_text().splitlines()
    except OSError:
        return {}
    pairs = (line.split("=", 1) for line in lines if "=" in line and not line.lstrip().startswith(("#", "!")))
    return {k.strip(): v.strip() for k, v in pairs}


@dataclass(frozen=True)
class MetastoreLifecycle:
    """How the watchdog treats the metastore: a service (`keep_alive`) or on demand of `owner_pid`."""

    keep_alive: bool
    idle_timeout_s: int
    owner_pid: int = 0

    @property
    def mode(self) -> str:
        return "service" if self.keep_alive else "on-demand"

    @classmethod
    def load(cls, root: Path) -> MetastoreLifecycle | None:
        props = read_properties(root / LIFECYCLE_FILE)
        if not props:
            return None
        return cls(keep_alive=props.get("keep.alive") == "true", idle_timeout_s=int(props.get("idle.timeout.s", 0)),
                   owner_pid=int(props.get("owner.pid", 0)))

    def save(self, root: Path) -> None:
        text = (f"keep.alive={str(self.keep_alive).lower()}\nidle.timeout.s={int(self.idle_timeout_s)}\n"
                f"owner.pid={self.owner_pid}\n")
        tmp = root / f".{LIFECYCLE_FILE}.{os.getpid()}.tmp"
        tmp.write_text(text)
        os.replace(tmp, root / LIFECYCLE_FILE)


@dataclass(frozen=True)
class MetastoreActivity:
    """What the watchdog last reported: open connections, live leases and when the metastore was last used."""

    pid: int
    connections: int
    leases: int
    in_use: bool
    last_used_ms: int
    check_interval_ms: int = 0  # 0: written by a metastore that did not report it

    @classmethod
    def load(cls, root: Path) -> MetastoreActivity | None:
        props = read_properties(root / ACTIVITY_FILE)
        try:
            return cls(pid=int(props["pid"]), connections=int(props["connections"]), leases=int(props["leases"]),
                       in_use=props.get("in.use") == "true", last_used_ms=int(props["last.used.ms"]),
                       check_interval_ms=int(props.get("check.interval.ms", 0)))
        except (KeyError, ValueError):
            return None

    def idle_s(self, now: float | None = None) -> float:
        """Seconds since the metastore was last used (0 while a lease or a connection is open)."""
        if self.in_use:
            return 0.0
        return max(0.0, (now if now is not None else time.time()) - self.last_used_ms / 1000)
