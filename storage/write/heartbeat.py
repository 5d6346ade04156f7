"""Writer heartbeats (Hudi's HoodieHeartbeatClient): `.hoodie/.heartbeat/<instant>` touched while a write or
table service runs that instant.

A pending instant is only rolled back as failed when its writer is gone: written on this host, by a process that
no longer exists; written elsewhere, older than `hoodie.client.heartbeat.interval_in_ms` x
(`hoodie.client.heartbeat.tolerable.misses` + 1); or there is none. Java Hudi's heartbeat files are empty: their
modification time is the beat.

The heartbeat starts before the instant's requested file exists, so a pending instant without a live
heartbeat is never one whose writer is still starting. A beat that fails (a transient I/O error) is logged and
retried at the next interval; the heartbeat thread never dies of it. Only the heartbeat's owner deletes its
file, and `start` refuses an instant whose heartbeat belongs to another live process.
"""
from __future__ import annotations

import contextlib
import json
import logging
import os
import socket
import threading
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path

from storage.config import HoodieConfig
from storage.config import WriteConfigKeys as WK
from storage.exception import HoodieHeartbeatError
from storage.io.storage import HoodieStorage

log = logging.getLogger(__name__)

HEARTBEAT_FOLDER = ".heartbeat"
DEFAULT_INTERVAL_S = WK.CLIENT_HEARTBEAT_INTERVAL_MS.default / 1000
TOLERABLE_MISSES = WK.CLIENT_HEARTBEAT_TOLERABLE_MISSES.default


def heartbeat_path(meta_path: str, instant_time: str) -> str:
    return f"{meta_path}/{HEARTBEAT_FOLDER}/{instant_time}"


@dataclass(frozen=True)
class HeartbeatSettings:
    interval_s: float = DEFAULT_INTERVAL_S
    tolerable_misses: int = TOLERABLE_MISSES

    @classmethod
    def of(cls, config: HoodieConfig = HoodieConfig()) -> "HeartbeatSettings":
        return cls(config.get(WK.CLIENT_HEARTBEAT_INTERVAL_MS) / 1000, config.get(WK.CLIENT_HEARTBEAT_TOLERABLE_MISSES))

    @property
    def expiry_s(self) -> float:
        return self.interval_s * (self.tolerable_misses + 1)


@dataclass
class Heartbeat:
    storage: HoodieStorage
    meta_path: str
    instant_time: str
    settings: HeartbeatSettings = field(default_factory=HeartbeatSettings)
    _owner: str = field(default_factory=lambda: uuid.uuid4().hex)
    _stop: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None

    @property
    def path(self) -> str:
        return heartbeat_path(self.meta_path, self.instant_time)

    def start(self) -> "Heartbeat":
        """Beat now and every interval; `HoodieHeartbeatError` if another live process beats for this instant."""
        if is_writer_alive(self.storage, self.meta_path, self.instant_time, self.settings):
            raise HoodieHeartbeatError(f"instant {self.instant_time} of {self.meta_path.rsplit('/', 1)[0]} is being "
                                       f"run by another live process (heartbeat {self.path}: {self._read_raw()!r})")
        self._beat()
        self._thread = threading.Thread(target=self._run, name=f"hoodie-heartbeat-{self.instant_time}", daemon=True)
        self._thread.start()
        return self

    def _run(self) -> None:
        while not self._stop.wait(self.settings.interval_s):
            try:
                self._beat()
            except Exception as exc:  # a transient storage error must not end the heartbeat
                log.warning("heartbeat of %s failed (retried in %.0fs): %s", self.instant_time,
                            self.settings.interval_s, exc)

    def _beat(self) -> None:
        content = json.dumps({"host": socket.gethostname(), "pid": os.getpid(), "time": time.time(),
                              "owner": self._owner})
        self.storage.write_atomic(self.path, content.encode())

    def _read_raw(self) -> str:
        try:
            return self.storage.read_text(self.path)
        except (OSError, UnicodeDecodeError):
            return ""

    def stop(self) -> None:
        """Stop beating and delete the heartbeat, unless another process has taken the instant over."""
        self._stop.set()
        if self._thread:
            self._thread.join(timeout=5)
        info = _parse(self._read_raw())
        if info.get("owner") == self._owner:
            self.storage.delete(self.path)


def _parse(text: str) -> dict:
    try:
        value = json.loads(text) if text.strip() else {}
    except ValueError:
        return {}
    return value if isinstance(value, dict) else {}


def pid_alive(pid: int) -> bool:
    """True if `pid` runs; a zombie (exited, not yet reaped by its parent) counts as dead.

    Deliberately no waitpid(): it could reap children that other code (e.g. Spark's launcher) owns."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    with contextlib.suppress(OSError):
        # /proc/<pid>/stat: "pid (comm) STATE ..."; comm may contain spaces, so split after ')'.
        stat = Path(f"/proc/{pid}/stat").read_text()
        return stat.rsplit(")", 1)[1].split()[0] != "Z"
    return True


def is_writer_alive(storage: HoodieStorage, meta_path: str, instant_time: str,
                    settings: HeartbeatSettings | None = None) -> bool:
    settings = settings or HeartbeatSettings()
    path = heartbeat_path(meta_path, instant_time)
    try:
        text = storage.read_text(path)
        mtime = storage.modification_time(path)
    except FileNotFoundError:
        return False
    except (OSError, UnicodeDecodeError):
        text, mtime = "", 0.0
    info = _parse(text)
    if info.get("host") == socket.gethostname() and "pid" in info:
        # on this host the process table is the truth: a late beat of a running (busy) writer is not its death
        with contextlib.suppress(TypeError, ValueError):
            return pid_alive(int(info["pid"]))
    try:
        beat = float(info.get("time", mtime))
    except (TypeError, ValueError):
        beat = mtime
    return time.time() - beat <= settings.expiry_s
