"""TEMPORARY stub (replaced by the curves branch): linear order only."""
from __future__ import annotations

from enum import Enum

import pyarrow as pa
import pyarrow.compute as pc

from storage.exception import HoodieConfigError


class LayoutOptimizationStrategy(Enum):
    LINEAR = "linear"
    ZORDER = "z-order"
    HILBERT = "hilbert"

    @classmethod
    def of(cls, text: str) -> "LayoutOptimizationStrategy":
        t = str(text).strip().lower()
        for s in cls:
            if t == s.value or t == s.value.replace("-", ""):
                return s
        raise HoodieConfigError(f"unknown hoodie.layout.optimize.strategy {text!r}")


def sort_indices(table: pa.Table, columns: list[str], strategy: LayoutOptimizationStrategy) -> pa.Array:
    return pc.sort_indices(table, [(c, "ascending") for c in columns])
