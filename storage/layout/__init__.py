"""Record layout for clustering: the orders (linear, z-order, Hilbert) that rewritten file groups are sorted in."""
from storage.layout.space_curve import (
    LayoutOptimizationStrategy,
    curve_keys,
    sort_indices,
)

__all__ = ["LayoutOptimizationStrategy", "curve_keys", "sort_indices"]
