"""`EmbeddedMetastore`: the Hive Metastore of one warehouse directory, started on demand and shared.

One metastore serves a warehouse (Derby allows one process per database): the first process that needs it
starts it (`catalog.metastore_launcher`), later processes find it through ``.metastore/metastore.json`` and
reuse it. Starting and stopping run under a file lock, so two processes never start two servers. Each process
using it holds a lease, and the metastore stops by itself when unused (`catalog.metastore_lifecycle`) unless it
was started as a service (``start(keep_alive=True)``, `sqlext metastore start`); either way it stops once its
warehouse is deleted. `embedded_metastores()` lists this user's metastores (`catalog.metastore_registry`), orphans
included: JVMs whose warehouse (or ``.metastore`` directory) was deleted or replaced, until they notice it.
"""
from __future__ import annotations

import contextlib
import fcntl
import json
import logging
import os
import time
from collections.abc import Iterator, Mapping
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from catalog import metastore_registry
from catalog.metastore_client import (
    WAREHOUSE_GONE_PREFIX,
    MetastoreError,
    MetastoreWarehouseGoneError,
    ThriftAddress,
)
from catalog.metastore_launcher import (
    LOOPBACK,
    MetastoreLauncher,
    MetastorePaths,
    MetastoreProcess,
    directory_identity,
    free_port,
    is_metastore_process,
    metastore_pids,
    metastore_processes,
    port_answers,
    port_is_free,
    process_cwd_identity,
    terminate,
)
from catalog.metastore_lifecycle import (
    DEFAULT_IDLE_TIMEOUT_S,
    MetastoreActivity,
    MetastoreLifecycle,
    acquire_lease,
    live_lease_pids,
    release_lease,
)
from catalog.metastore_server import SERVER_CLASS

log = logging.getLogger(__name__)


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


@dataclass(frozen=True)
class MetastoreOrphan:
    """A metastore JVM of a warehouse whose ``.metastore`` directory it started in is gone (deleted, or replaced by a
    new one): nobody can use it again, and it stops by itself at its next check."""

    pid: int
    port: int | None
    problem: str


def directory_gone(paths: MetastorePaths, replaced: bool) -> str:
    """What happened to the metastore directory, naming it (and the warehouse when that went too)."""
    if replaced:
        return f"its directory {paths.root} was replaced by another one"
    if directory_identity(paths.warehouse) is None:
        return f"its warehouse directory {paths.warehouse} was deleted"
    return f"its directory {paths.root} was deleted"


def orphan_problem(paths: MetastorePaths, pid: int) -> str | None:
    """Why the metastore JVM `pid` of this warehouse is an orphan; None when it runs in the current directory."""
    current = directory_identity(paths.root)
    if current is None:
        return directory_gone(paths, replaced=False)
    started_in = process_cwd_identity(pid)  # the launcher starts the JVM in its metastore directory
    if started_in is None or started_in == current:
        return None
    return directory_gone(paths, replaced=True)


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


class EmbeddedMetastore:
    """The HMS Thrift service from pyspark's jars, one per warehouse, shared by later processes.

    `start()` takes a lease for this process and reuses a running instance recorded in
    ``.metastore/metastore.json`` (pid alive, is our JVM, port answering), otherwise cleans up stale state and
    starts a new JVM detached from this process. An instance started on demand stops by itself once this
    process is gone and nobody else uses it, or after `idle_timeout_s` unused; `start(keep_alive=True)` runs
    (or turns the running one into) a service that only its idle timeout (none by default) or `stop()` ends.
    """

    def __init__(self, warehouse_dir: Path | str, *, heap: str = "512m", start_timeout_s: float = 120.0,
                 extra_conf: Mapping[str, str] | None = None, java: str | None = None,
                 jars_dir: Path | None = None):
        self.paths = MetastorePaths(Path(warehouse_dir).expanduser().absolute())
        self.start_timeout_s = start_timeout_s
        self._launcher = MetastoreLauncher(self.paths, heap=heap, start_timeout_s=start_timeout_s,
                                           extra_conf=extra_conf, java=java, jars_dir=jars_dir)
        # The metastore directory this object last started or reused, and its URI: a later start() (a client
        # reviving a dead metastore) must not recreate a warehouse that was deleted meanwhile.
        self._attached: tuple[int, int] | None = None
        self._attached_uri = ""

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

    def start(self, *, keep_alive: bool = False, idle_timeout_s: int | None = None) -> str:
        """Start the metastore, or reuse the running one; returns its thrift URI.

        On demand (default): this process holds a lease on it until it exits (or `release()`), and it stops
        `idle_timeout_s` (default 10 minutes) after its last use. `keep_alive`: a service (no lease), stopped
        after `idle_timeout_s` unused when given, else only by `stop()`. Either way it stops once its warehouse
        is deleted; a later `start()` of this object then raises `MetastoreWarehouseGoneError`."""
        self._refuse_deleted_warehouse()
        uri = self._start(keep_alive, idle_timeout_s)
        self._attached, self._attached_uri = directory_identity(self.paths.root), uri
        return uri

    def _refuse_deleted_warehouse(self) -> None:
        current = directory_identity(self.paths.root)
        if self._attached is None or current == self._attached:
            return
        what = directory_gone(self.paths, replaced=current is not None)
        raise MetastoreWarehouseGoneError(
            self._attached_uri, f"{WAREHOUSE_GONE_PREFIX}{self.paths.warehouse} stopped: {what} while this process "
            f"used it; no new, empty one is started there (stop() it first to start afresh)")

    def _start(self, keep_alive: bool, idle_timeout_s: int | None) -> str:
        self._ensure_dirs()
        if not keep_alive:
            acquire_lease(self.paths.root)  # before looking: a metastore about to stop sees this process
            state = self._live_state()
            if state is not None:  # fast path without the lock
                return state.uri
        with file_lock(self.paths.lock_file, self.start_timeout_s + 30):
            state = self._live_state()  # someone may have started it while we waited
            if state is not None:
                log.debug("reusing metastore %s (pid %d)", state.uri, state.pid)
                if keep_alive:
                    self._lifecycle(keep_alive, idle_timeout_s).save(self.paths.root)
                return state.uri
            self._clean_stale()
            self._launcher.reap()
            self._lifecycle(keep_alive, idle_timeout_s).save(self.paths.root)
            pid, port = self._launcher.launch(self._choose_port)
            state = MetastoreState(pid=pid, port=port, host=LOOPBACK, uri=ThriftAddress(LOOPBACK, port).uri,
                                   warehouse=str(self.paths.warehouse), started_at=time.time())
            state.save(self.paths.state_file)
            self.paths.last_port_file.write_text(str(state.port))
            metastore_registry.register(self.paths.warehouse)
            return state.uri

    def release(self) -> None:
        """This process no longer uses the metastore (an on-demand one it started may stop now)."""
        release_lease(self.paths.root)

    def stop(self, timeout_s: float = 20.0) -> bool:
        """Stop the running instance and any orphan of this warehouse (SIGTERM, then SIGKILL); False if none ran."""
        self._attached = None  # stopped on purpose: a later start() may begin afresh
        if not self.paths.root.exists():
            return self._stop_orphans(timeout_s)
        with file_lock(self.paths.lock_file, self.start_timeout_s + 30):
            state = MetastoreState.load(self.paths.state_file)
            pids = set(metastore_pids(self.paths.conf_dir))
            if state is not None and is_metastore_process(state.pid, self.paths.conf_dir):
                pids.add(state.pid)
            for pid in sorted(pids):
                log.info("stopping metastore pid %d (%s)", pid, self.paths.warehouse)
                terminate(pid, timeout_s)
            self.paths.state_file.unlink(missing_ok=True)
            self._launcher.reap()
            metastore_registry.unregister(self.paths.warehouse)
            return bool(pids)

    def orphans(self, processes: list[MetastoreProcess] | None = None) -> list[MetastoreOrphan]:
        """This warehouse's metastore JVMs whose directory is gone (of `processes`, default: every JVM of this
        user)."""
        if processes is None:
            processes = metastore_processes(this_registry_only=False)
        found = []
        for process in processes:
            if process.metastore_dir != self.paths.root:
                continue
            problem = orphan_problem(self.paths, process.pid)
            if problem is not None:
                found.append(MetastoreOrphan(process.pid, process.port, problem))
        return found

    def status(self) -> dict[str, Any]:
        """running, pid, port, uri, mode (on-demand / service / orphan), idle_s, leases, connections, log_file,
        orphans (JVMs of this warehouse whose directory is gone: pid, port, problem), ..."""
        info: dict[str, Any] = {
            "running": False,
            "warehouse": str(self.paths.warehouse),
            "metastore_dir": str(self.paths.root),
            "log_file": str(self.paths.hive_log),
        }
        orphans = self.orphans()
        info["orphans"] = [asdict(o) for o in orphans]
        self._add_state(info)
        if not info["running"] and orphans:  # what `sqlext metastore status` shows for it
            info.update(pid=orphans[0].pid, port=orphans[0].port, mode="orphan", problem=orphans[0].problem,
                        leases=[])
        return info

    def _add_state(self, info: dict[str, Any]) -> None:
        state = MetastoreState.load(self.paths.state_file)
        if state is None:
            return
        alive = is_metastore_process(state.pid, self.paths.conf_dir)
        answering = alive and port_answers(state.host, state.port)
        info.update(pid=state.pid, port=state.port, uri=state.uri, started_at=state.started_at,
                    alive=alive, answering=answering, running=answering, stale=not answering)
        lifecycle = MetastoreLifecycle.load(self.paths.root)
        if lifecycle is not None:
            info.update(mode=lifecycle.mode, idle_timeout_s=lifecycle.idle_timeout_s,
                        owner_pid=lifecycle.owner_pid or None)
        info["leases"] = live_lease_pids(self.paths.root)
        activity = MetastoreActivity.load(self.paths.root)
        if activity is not None and activity.pid == state.pid:
            info.update(connections=activity.connections, idle_s=round(activity.idle_s(), 1))
            if activity.check_interval_ms:
                info["check_interval_s"] = activity.check_interval_ms / 1000

    # -- internals -------------------------------------------------------------------------------
    def _lifecycle(self, keep_alive: bool, idle_timeout_s: int | None) -> MetastoreLifecycle:
        if keep_alive:  # a service: no idle timeout unless asked for
            return MetastoreLifecycle(keep_alive=True, idle_timeout_s=int(idle_timeout_s or 0))
        idle = DEFAULT_IDLE_TIMEOUT_S if idle_timeout_s is None else int(idle_timeout_s)
        return MetastoreLifecycle(keep_alive=False, idle_timeout_s=idle, owner_pid=os.getpid())

    def _ensure_dirs(self) -> None:
        for d in (self.paths.root, self.paths.conf_dir, self.paths.logs_dir):
            d.mkdir(parents=True, exist_ok=True)

    def _live_state(self) -> MetastoreState | None:
        state = MetastoreState.load(self.paths.state_file)
        if state is None:
            return None
        # Only our loopback server counts: a JVM an earlier version started (all interfaces, no watchdog) is
        # ended and replaced.
        if (is_metastore_process(state.pid, self.paths.conf_dir, (SERVER_CLASS,))
                and port_answers(state.host, state.port)):
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

    def _stop_orphans(self, timeout_s: float) -> bool:
        # No directory, so no lock to take: nobody can start a metastore here without creating it again.
        pids = metastore_pids(self.paths.conf_dir)
        for pid in pids:
            log.info("stopping orphaned metastore pid %d (%s)", pid, directory_gone(self.paths, replaced=False))
            terminate(pid, timeout_s)
        metastore_registry.unregister(self.paths.warehouse)
        return bool(pids)

    def _choose_port(self) -> int:
        # Prefer the previous port: clients and Spark sessions holding the old URI then reconnect.
        with contextlib.suppress(OSError, ValueError):
            last = int(self.paths.last_port_file.read_text().strip())
            if port_is_free(last):
                return last
        return free_port()


def embedded_metastores() -> list[EmbeddedMetastore]:
    """The running embedded metastores of this user on this machine, orphans included (`status()` says
    ``mode: orphan``, `stop()` ends them): the registry's warehouses and every metastore JVM tagged with this
    registry, whose warehouse may be gone. Registry entries of stopped ones are dropped."""
    processes = metastore_processes()
    warehouses = dict.fromkeys([*metastore_registry.registered_warehouses(), *(p.warehouse for p in processes)])
    running = []
    for warehouse in warehouses:
        metastore = EmbeddedMetastore(warehouse)
        if metastore.is_running() or metastore.orphans(processes):
            running.append(metastore)
        else:
            metastore_registry.unregister(warehouse)
    return running
