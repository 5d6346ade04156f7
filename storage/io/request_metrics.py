"""What an operation cost in storage requests: the driver's own (`REQUESTS` of this process) plus its Spark tasks'
(each task adds what it made to an accumulator). Reported at debug level per write, scan and compaction, so a user
on an object store can see the LIST / GET / PUT requests an upsert or a query needs."""
from __future__ import annotations

import logging
from contextlib import contextmanager
from typing import Iterator

from storage.io.storage import REQUESTS

log = logging.getLogger(__name__)


class RequestTally:
    """Counts the requests of one operation, on the driver and in its tasks."""

    def __init__(self, spark) -> None:
        self._spark = spark
        self._accumulator = None
        self._before = REQUESTS.snapshot()

    @property
    def accumulator(self):
        """Created on first use: operations without tasks of their own need none."""
        if self._accumulator is None:
            self._accumulator = self._spark.sparkContext.accumulator(0)
        return self._accumulator

    def report(self, what: str) -> dict[str, int]:
        driver = REQUESTS.snapshot() - self._before
        tasks = int(self._accumulator.value) if self._accumulator is not None else 0
        counts = {"driver": sum(driver.values()), "tasks": tasks, **dict(driver)}
        log.debug("%s: %d storage requests (driver %d: %s; tasks %d)", what, counts["driver"] + counts["tasks"],
                  counts["driver"], ", ".join(f"{k} {v}" for k, v in sorted(driver.items())) or "none",
                  counts["tasks"])
        return counts


@contextmanager
def counted_in_task(accumulator) -> Iterator[None]:
    """Inside a Spark task: add the requests made in the block to the operation's accumulator."""
    if accumulator is None:
        yield
        return
    before = sum(REQUESTS.snapshot().values())
    try:
        yield
    finally:
        accumulator.add(sum(REQUESTS.snapshot().values()) - before)
