"""Checks shared by the lock-provider tests: contention that also fails on any error a contending thread met
(`lock_contention.count_overlaps` alone would count a thread that died on an error as no overlap)."""
from __future__ import annotations

from contextlib import contextmanager

from lock_contention import count_overlaps


class _Recording:
    def __init__(self, manager, errors: list):
        self.manager, self.errors = manager, errors

    @contextmanager
    def transaction(self, purpose: str = ""):
        try:
            with self.manager.transaction(purpose):
                yield
        except Exception as exc:
            self.errors.append(exc)
            raise


def assert_exclusive(managers, rounds: int = 15) -> None:
    """`rounds` transactions per manager, each in its own thread: none overlapped and none failed."""
    errors: list = []
    overlaps = count_overlaps([_Recording(m, errors) for m in managers], rounds=rounds)
    assert not errors, f"contending threads failed: {errors[:3]}"
    assert overlaps == 0
