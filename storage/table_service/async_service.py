"""Table services run in the background of a writer (Hudi's AsyncService): one daemon thread per kind of service
and table at a time; a failure is logged and never fails the commit that started it."""
from __future__ import annotations

import logging
import threading
from collections.abc import Callable

log = logging.getLogger(__name__)

_async_lock = threading.Lock()
_async_services: dict[tuple[str, str], threading.Thread] = {}  # (kind, table base path) -> its background run


def run_in_background(kind: str, base_path: str, work: Callable[[], None]) -> None:
    """`work` in a daemon thread, one run of each `kind` per table at a time: a commit while one runs waits for
    it first (as Hudi's async services are joined before the next one starts). A failure is logged, never raised:
    it must not fail the commit that triggered it."""
    wait_for_background(kind, base_path)

    def run() -> None:
        try:
            work()
        except Exception:
            log.exception("async %s failed on %s", kind, base_path)

    thread = threading.Thread(target=run, name=f"hoodie-{kind}-{base_path}", daemon=True)
    with _async_lock:
        _async_services[(kind, base_path)] = thread
    thread.start()


_rerun: set[tuple[str, str]] = set()  # (kind, table) whose running service must go round once more


def request_background(kind: str, base_path: str, work: Callable[[], None]) -> None:
    """Like `run_in_background`, but never makes the caller wait: while a run of `kind` is going on for the
    table, the request is remembered and that run goes round once more when it ends (work that picks up
    whatever is pending, such as executing every pending compaction plan, needs no second thread)."""
    key = (kind, base_path)
    with _async_lock:
        running = _async_services.get(key)
        if running is not None and running.is_alive():
            _rerun.add(key)
            return

    def run() -> None:
        while True:
            try:
                work()
            except Exception:
                log.exception("async %s failed on %s", kind, base_path)
            with _async_lock:
                if key not in _rerun:
                    if _async_services.get(key) is threading.current_thread():
                        del _async_services[key]  # a request from now on starts a new run
                    return
                _rerun.discard(key)

    thread = threading.Thread(target=run, name=f"hoodie-{kind}-{base_path}", daemon=True)
    with _async_lock:
        _async_services[key] = thread
    thread.start()


def wait_for_background(kind: str, base_path: str | None = None, timeout: float | None = None) -> None:
    """Join the background runs of `kind` on `base_path` (every table when None)."""
    with _async_lock:
        threads = [t for (k, p), t in _async_services.items() if k == kind and (base_path is None or p == base_path)]
    for thread in threads:
        thread.join(timeout)
