"""What the metastore lifecycle tests look for among this machine's processes."""
from __future__ import annotations

import time
from pathlib import Path

import psutil

from catalog.metastore_launcher import METASTORE_MAIN_CLASSES


def wait_until(predicate, timeout_s: float, interval_s: float = 0.1) -> bool:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(interval_s)
    return predicate()


def metastore_jvms_under(directory: Path) -> list[int]:
    """Live metastore JVMs whose command line names a path under `directory`."""
    found = []
    for proc in psutil.process_iter(["pid", "cmdline", "status"]):
        args = proc.info["cmdline"] or []
        if (proc.info["status"] != psutil.STATUS_ZOMBIE and any(c in args for c in METASTORE_MAIN_CLASSES)
                and any(str(directory) in a for a in args)):
            found.append(proc.info["pid"])
    return sorted(found)
