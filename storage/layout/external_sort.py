"""Rows put in a layout order within a memory budget: an external sample sort over Arrow spill files.

Clustering orders a whole clustering group (up to `hoodie.clustering.plan.strategy.max.bytes.per.group`, 2 GB
of parquet by default) before cutting it into files; Hudi leaves that to Spark's sorter, which spills. Here one
task sorts with pyarrow, so `ExternalSorter` bounds what it holds:

- `add(table)` keeps tables in memory while they fit `budget_bytes` (Arrow `nbytes`); past it, they go to a
  spill file (`storage.io.spill_file`) and every later table follows them. A fixed-size uniform sample of the
  sort columns is kept either way (bottom-k of a seeded random priority per row).
- `sorted_tables()` yields the rows in order. Held in memory: one table, ordered at once (what an unbounded sort
  gives). Spilled: the sample's quantiles cut the key space into buckets of about half the budget; each spilled
  batch is split among bucket files by where its rows fall between the cut points; each bucket is then read,
  ordered and yielded in turn.

The order is a function of a table (`storage.layout.space_curve.sort_indices` for the layout's columns) that
must be stable and consistent across tables: a row's place depends only on its own sort values (the curves are
built by Hudi's DIRECT method, which is). A cut point is a sampled row; rows equal to it sort after it (it is put
first, the order is stable), so equal rows share a bucket and ties keep their arrival order, as in the one-table
sort. With no order, rows come back as they were added. A bucket larger than the budget (many rows with one
sort value) is sorted as it is, with a warning.
"""
from __future__ import annotations

import logging
import math
from collections.abc import Callable, Iterator
from dataclasses import dataclass

import numpy as np
import pyarrow as pa

from storage.io.spill_file import SpillDirectory, SpillFile, spill_codec, spill_target

log = logging.getLogger(__name__)

SAMPLE_ROWS = 8192  # sort-column rows sampled to choose the cut points
MAX_BUCKETS = 512  # bucket files open at once


@dataclass
class SortStats:
    spilled_bytes: int = 0  # Arrow bytes of the rows that went to disk (before compression)
    buckets: int = 0  # 0: nothing spilled
    peak_held_bytes: int = 0  # the most the sorter held in memory at once (rows added or a bucket read back)
    largest_bucket_bytes: int = 0


def _concat(tables: list[pa.Table]) -> pa.Table:
    return pa.concat_tables(tables, promote_options="permissive") if len(tables) > 1 else tables[0]


class _SpillFiles:
    """Tables appended to spill files of one name, a new file whenever the schema changes."""

    def __init__(self, directory: SpillDirectory, name: str, compression: str | None):
        self._directory, self._name, self._compression = directory, name, compression
        self.files: list[SpillFile] = []

    def write(self, table: pa.Table) -> None:
        spill_target(self.files, self._directory.make(), self._name, table.schema, self._compression).write(table)

    @property
    def bytes(self) -> int:
        return sum(f.bytes for f in self.files)

    def batches(self) -> Iterator[pa.Table]:
        for f in self.files:
            for batch in f.batches():
                yield pa.Table.from_batches([batch])

    def read(self) -> pa.Table | None:
        tables = [f.read() for f in self.files]
        return _concat(tables) if tables else None

    def remove(self) -> None:
        for f in self.files:
            f.remove()
        self.files = []


class ExternalSorter:
    """See the module doc. `order(table)` -> int64 row indices of `table` in order (None: keep arrival order);
    `columns`: the columns it reads (the sample keeps only these)."""

    def __init__(self, order: Callable[[pa.Table], pa.Array | np.ndarray] | None, columns: list[str],
                 budget_bytes: int, spill_path: str, *, compression: bool = True, sample_rows: int = SAMPLE_ROWS):
        self.order, self.columns = order, list(columns)
        self.budget = max(1, int(budget_bytes))
        self._dir = SpillDirectory(self, spill_path, "hudi-external-sort-")
        self._codec = spill_codec(compression)
        self._held: list[pa.Table] = []
        self._held_bytes = 0
        self._spilled: _SpillFiles | None = None
        self._sample: pa.Table | None = None
        self._priority = np.empty(0, dtype=np.uint64)
        self._sample_rows = sample_rows
        self._rng = np.random.default_rng(0)
        self.num_rows = 0
        self.stats = SortStats()

    @property
    def spilled(self) -> bool:
        return self._spilled is not None

    def add(self, table: pa.Table) -> None:
        if table.num_rows == 0:
            return
        self.num_rows += table.num_rows
        if self.order is not None:
            self._add_to_sample(table.select(self.columns))
        if self._spilled is not None:
            self._spilled.write(table)
            self.stats.spilled_bytes += table.nbytes
            return
        self._held.append(table)
        self._held_bytes += table.nbytes
        self._note_held(self._held_bytes)
        if self._held_bytes > self.budget:
            self._spilled = _SpillFiles(self._dir, "rows", self._codec)
            log.info("external sort: %d bytes held exceed the budget of %d bytes; spilling to %s",
                     self._held_bytes, self.budget, self._dir.make())
            for held in self._held:
                self._spilled.write(held)
            self.stats.spilled_bytes += self._held_bytes
            self._held, self._held_bytes = [], 0

    def _add_to_sample(self, keys: pa.Table) -> None:
        """Bottom-k sampling: every row gets a random priority; the k lowest seen so far are the sample."""
        priority = self._rng.integers(0, np.iinfo(np.uint64).max, keys.num_rows, dtype=np.uint64, endpoint=True)
        if self._sample is not None:
            keys = _concat([self._sample, keys])
            priority = np.concatenate([self._priority, priority])
        if keys.num_rows > self._sample_rows:
            keep = np.sort(np.argpartition(priority, self._sample_rows)[:self._sample_rows])
            keys, priority = keys.take(pa.array(keep)), priority[keep]
        self._sample, self._priority = keys, priority

    def _note_held(self, size: int) -> None:
        self.stats.peak_held_bytes = max(self.stats.peak_held_bytes, size)

    # -- output ----------------------------------------------------------------------------------------------

    def sorted_tables(self) -> Iterator[pa.Table]:
        """The rows added, in order (see the module doc); call once."""
        if self._spilled is None:
            if self._held:
                rows = _concat(self._held)
                self._held, self._held_bytes = [], 0
                yield rows if self.order is None else rows.take(self.order(rows))
            return
        if self.order is None:
            yield from self._spilled.batches()
            return
        yield from self._bucketed()

    def _bucketed(self) -> Iterator[pa.Table]:
        assert self._spilled is not None and self._sample is not None
        count = int(min(MAX_BUCKETS, max(2, math.ceil(2 * self._spilled.bytes / self.budget))))
        cuts = self._cut_points(count)
        self.stats.buckets = cuts.num_rows + 1
        buckets = [_SpillFiles(self._dir, f"bucket-{b}", self._codec) for b in range(cuts.num_rows + 1)]
        for table in self._spilled.batches():
            self._split(table, cuts, buckets)
        self._spilled.remove()
        for bucket in buckets:
            rows = bucket.read()
            bucket.remove()
            if rows is None:
                continue
            self._note_held(rows.nbytes)
            self.stats.largest_bucket_bytes = max(self.stats.largest_bucket_bytes, rows.nbytes)
            if rows.nbytes > self.budget:
                log.warning("external sort: a bucket of %d bytes exceeds the budget of %d bytes (many rows share "
                            "their sort values); sorting it as it is", rows.nbytes, self.budget)
            yield rows.take(self.order(rows))

    def _cut_points(self, buckets: int) -> pa.Table:
        """`buckets - 1` sampled rows at even quantiles of the sample (fewer when the sample is small)."""
        assert self._sample is not None and self.order is not None
        ordered = self._sample.take(self.order(self._sample))
        n = ordered.num_rows
        picks = sorted({min(n - 1, (n * i) // buckets) for i in range(1, buckets)})
        return ordered.take(pa.array(picks, pa.int64()))

    def _split(self, table: pa.Table, cuts: pa.Table, buckets: list[_SpillFiles]) -> None:
        ids = self._bucket_ids(table.select(self.columns), cuts)
        by_bucket = np.argsort(ids, kind="stable")  # arrival order kept inside each bucket
        counts = np.bincount(ids, minlength=len(buckets))
        table = table.take(pa.array(by_bucket))
        start = 0
        for b, n in enumerate(counts.tolist()):
            if n:
                buckets[b].write(table.slice(start, n))
                start += n

    def _bucket_ids(self, keys: pa.Table, cuts: pa.Table) -> np.ndarray:
        """The bucket of each row: how many cut points sort before it (or equal it: cuts come first)."""
        assert self.order is not None
        both = _concat([cuts, keys.cast(cuts.schema) if not keys.schema.equals(cuts.schema) else keys])
        order = np.asarray(self.order(both))
        is_cut = order < cuts.num_rows
        rank = np.cumsum(is_cut)
        ids = np.empty(keys.num_rows, dtype=np.int64)
        ids[order[~is_cut] - cuts.num_rows] = rank[~is_cut]
        return ids

    def close(self) -> None:
        if self._spilled is not None:
            self._spilled.remove()
        self._held, self._held_bytes = [], 0
        self._dir.close()

    def __enter__(self) -> "ExternalSorter":
        return self

    def __exit__(self, *exc) -> None:
        self.close()
