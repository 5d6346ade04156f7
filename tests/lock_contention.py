"""Threads contending for table locks: how often two of them were inside a transaction at once."""
from __future__ import annotations

import threading
import time


def count_overlaps(managers, rounds: int = 30, hold_s: float = 0.001) -> int:
    """Each manager's thread runs `rounds` transactions, holding each `hold_s`; returns the overlaps seen
    (0 when the lock really excludes)."""
    inside, overlaps = [0], [0]

    def work(manager):
        for _ in range(rounds):
            with manager.transaction("contention test"):
                inside[0] += 1
                overlaps[0] += inside[0] > 1
                time.sleep(hold_s)
                inside[0] -= 1

    threads = [threading.Thread(target=work, args=(m,)) for m in managers]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    return overlaps[0]
