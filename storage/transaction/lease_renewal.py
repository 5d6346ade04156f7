"""The heartbeat of a lock held as a lease (DynamoDB's record version number, the storage-based lock's
`validUntil`): a daemon thread renews the lease every interval while it is held; a renewal that finds it taken
over marks it lost and ends the heartbeat, so the holder learns it no longer holds the lock."""
from __future__ import annotations

import threading
from collections.abc import Callable


class LeaseRenewal:
    def __init__(self, name: str):
        self.name = name  # the heartbeat thread's name, for thread dumps
        self._stop = threading.Event()
        self._lost = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self, interval_s: float, renew: Callable[[], bool]) -> None:
        """`renew()` every `interval_s` until `stop`; it answers False once the lease is gone (no more tries)."""
        self._stop.clear()
        self._lost.clear()

        def beat() -> None:
            while not self._stop.wait(interval_s):
                if not renew():
                    return

        self._thread = threading.Thread(target=beat, name=self.name, daemon=True)
        self._thread.start()

    def stop(self) -> None:
        """End the heartbeat (before the lease is released, so no renewal races the release)."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=30)
            self._thread = None

    @property
    def stopped(self) -> bool:
        return self._stop.is_set()

    def mark_lost(self) -> None:
        self._lost.set()

    @property
    def lost(self) -> bool:
        """True when another holder took the lease over while this one believed it held it."""
        return self._lost.is_set()
