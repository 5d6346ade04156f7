"""Writer heartbeats: `.hoodie/.heartbeat/<instant>` touched while a write runs.

A pending instant is only rolled back as failed when its writer is gone: its heartbeat is older than
the tolerance, or it was written on this host by a process that no longer exists.
"""
from __future__ import annotations

import contextlib
import json
import os
import socket
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

from storage.io.storage import HoodieStorage

HEARTBEAT_FOLDER = ".heartbeat"
DEFAULT_INTERVAL_S = 60.0
TOLERABLE_MISSES = 2


def heartbeat_path(meta_path: str, instant_time: str) -> str:
    return f"{meta_path}/{HEARTBEAT_FOLDER}/{instant_time}"


@dataclass
class Heartbeat:
    storage: HoodieStorage
    meta_path: str
    instant_time: str
    interval_s: float = DEFAULT_INTERVAL_S
    _stop: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None

    def start(self) -> "Heartbeat":
        self._beat()
        self._thread = threading.Thread(target=self._run, name=f"hoodie-heartbeat-{self.instant_time}", daemon=True)
        self._thread.start()
        return self

    def _run(self) -> None:
        while not self._stop.wait(self.interval_s):
            self._beat()

    def _beat(self) -> None:
        content = json.dumps({"host": socket.gethostname(), "pid": os.getpid(), "time": time.time()})
        self.storage.write_atomic(heartbeat_path(self.meta_path, self.instant_time), content.encode())

    def stop(self) -> None:
        self._stop.set()
        if self._thread:
            self._thread.join(timeout=5)
        self.storage.delete(heartbeat_path(self.meta_path, self.instant_time))


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
                    interval_s: float = DEFAULT_INTERVAL_S) -> bool:
    path = heartbeat_path(meta_path, instant_time)
    if not storage.exists(path):
        return False
    try:
        info = json.loads(storage.read_text(path))
    except (ValueError, OSError):
        return False
    if info.get("host") == socket.gethostname() and not pid_alive(int(info.get("pid", -1))):
        return False
    return time.time() - float(info.get("time", 0)) <= interval_s * (TOLERABLE_MISSES + 1)
