"""The external sample sort of storage/layout/external_sort.py: past its budget it spills and buckets, and what it
yields equals the one-table sort exactly (rows and the order of ties), for every layout; its memory stays near the
budget; its spill files go when it closes, also after an error."""
from __future__ import annotations

import os

import numpy as np
import pyarrow as pa
import pytest

from storage.layout.external_sort import ExternalSorter
from storage.layout.space_curve import sort_indices


def _table(n: int, seed: int = 1, distinct: int | None = None) -> pa.Table:
    rng = np.random.default_rng(seed)
    a = rng.integers(0, distinct or 1_000_000, n)
    f = rng.normal(size=n)
    f[rng.random(n) < 0.01] = np.nan
    s = np.array([f"k{v % 997:04d}" for v in rng.integers(0, 10**6, n)], dtype=object)
    s[rng.random(n) < 0.02] = None
    return pa.table({"a": pa.array(a, pa.int64()), "f": pa.array(f), "s": pa.array(s, pa.string()),
                     "row": pa.array(np.arange(n), pa.int64()), "pad": pa.array(["x" * 40] * n)})


def _same(a: pa.Table, b: pa.Table) -> bool:
    """The same rows in the same order (each row carries its original position; NaN never equals itself)."""
    return a.num_rows == b.num_rows and a["row"].to_pylist() == b["row"].to_pylist()


def _pieces(table: pa.Table, size: int):
    return [table.slice(i, size) for i in range(0, table.num_rows, size)]


def _sorted(table, columns, layout, budget, spill_dir, piece=500):
    order = (lambda t: sort_indices(t, columns, layout)) if columns else None
    with ExternalSorter(order, columns, budget, str(spill_dir)) as sorter:
        for p in _pieces(table, piece):
            sorter.add(p)
        out = pa.concat_tables(list(sorter.sorted_tables()))
        return out, sorter.spilled, sorter.stats


@pytest.mark.parametrize("columns,layout", [(["a"], "linear"), (["s", "f"], "linear"), (["a", "f"], "z-order"),
                                            (["a", "s"], "hilbert")])
def test_spilled_sort_equals_the_in_memory_sort(tmp_path, columns, layout):
    table = _table(20_000)
    expected = table.take(sort_indices(table, columns, layout))
    budget = table.nbytes // 10
    out, spilled, stats = _sorted(table, columns, layout, budget, tmp_path)
    assert spilled and stats.buckets >= 10
    assert _same(out, expected)  # the same rows, ties in the same (arrival) order
    # what it held at once: the pieces up to the budget, then one bucket (about half the budget each)
    assert stats.peak_held_bytes <= budget + table.slice(0, 500).nbytes
    assert stats.largest_bucket_bytes <= budget
    assert not os.listdir(tmp_path)
    unbounded, spilled, _ = _sorted(table, columns, layout, 10 * table.nbytes, tmp_path)
    assert not spilled and _same(unbounded, expected)


def test_many_equal_keys_and_no_order(tmp_path):
    table = _table(12_000, distinct=3)  # three values: buckets cannot split them
    expected = table.take(sort_indices(table, ["a"], "linear"))
    out, spilled, stats = _sorted(table, ["a"], "linear", table.nbytes // 8, tmp_path)
    assert spilled and _same(out, expected)
    assert stats.largest_bucket_bytes > table.nbytes // 8  # oversized, sorted as it is
    out, spilled, _ = _sorted(table, [], "linear", table.nbytes // 8, tmp_path)
    assert spilled and _same(out, table)  # no order: arrival order, streamed from the spill file


def test_spill_files_removed_after_an_error(tmp_path):
    table = _table(5_000)
    order = lambda t: sort_indices(t, ["a"], "linear")  # noqa: E731
    sorter = ExternalSorter(order, ["a"], table.nbytes // 6, str(tmp_path))
    with pytest.raises(RuntimeError):
        with sorter:
            for p in _pieces(table, 500):
                sorter.add(p)
            tables = sorter.sorted_tables()
            next(tables)
            assert os.listdir(tmp_path)
            raise RuntimeError("writer failed")
    assert not os.listdir(tmp_path)
