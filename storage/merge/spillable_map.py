"""A bounded-memory map of the record versions of one file slice (Hudi's ExternalSpillableMap), in Arrow.

Hudi's merged log record scanner keeps log records in a map that holds up to `hoodie.memory.compaction.max.size`
bytes in memory and spills the rest to a disk map under `hoodie.memory.spillable.map.path`. Here the map holds
Arrow tables of record versions of named kinds ("records": base rows then log rows; "deletes": delete records),
each with a key column:

- `put(kind, table)` appends versions. While the tables held stay within `budget_bytes` (Arrow `nbytes`) they
  stay in memory; past it, everything held is hash-partitioned by key and appended to per-partition Arrow IPC
  spill files (lz4 when `hoodie.common.diskmap.compression.enabled`), and memory is free again.
- `partitions()` yields every version exactly once as {kind: table}, grouped so that all versions of a key are
  in one partition, in the order they were put: one partition when nothing spilled, else one per hash partition
  read back from disk. A partition larger than the budget is split again with another hash seed (as a grace hash
  join does), so each partition handed to the merge fits the budget unless one key alone exceeds it.
- `get(key)` returns the versions of one key ({kind: table}, in put order), wherever they are.
- `close()` (or leaving the `with` block, also on error) removes the spill directory.

The merge itself is not here: callers merge each partition with `storage.merge.record_merger.merge_records`, the
one merge of the engine, so spilled and in-memory slices merge alike. What is bounded is what the map holds (plus
the one table being put: a log block is the unit a scanner hands over, bounded by the writer's
`hoodie.logfile.data.block.max.size`).

`merge_memory_budget` resolves the budget as Hudi's IOUtils.getMaxMemoryPerCompaction does, for a Python worker.
"""
from __future__ import annotations

import logging
import math
import os
from dataclasses import dataclass
from typing import Callable, Iterator

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from storage.io.spill_file import SpillDirectory, SpillFile, spill_codec, spill_target

log = logging.getLogger(__name__)

# Hudi's HoodieMemoryConfig.DEFAULT_MAX_MEMORY_FOR_SPILLABLE_MAP_IN_BYTES: the budget when the engine's memory is
# unknown
DEFAULT_BUDGET_BYTES = 1024 * 1024 * 1024
MAX_PARTITIONS = 64  # spill files open at once per kind
MAX_SPLIT_LEVEL = 4  # re-partitioning rounds of an oversized partition before it is merged as it is
_EXPANSION = 3  # decoded Arrow bytes per byte of parquet / Avro on disk, to size the first partitioning


def python_worker_memory() -> int | None:
    """The memory of this Python process as Spark grants it: `spark.executor.pyspark.memory` divided among the
    executor's cores, which Spark hands each Python worker as PYSPARK_EXECUTOR_MEMORY_MB (and enforces as its
    address-space limit). None outside a worker started with that setting."""
    value = os.environ.get("PYSPARK_EXECUTOR_MEMORY_MB", "")
    try:
        mb = int(value)
    except ValueError:
        return None
    return mb * 1024 * 1024 if mb > 0 else None


def merge_memory_budget(max_size: int | None, fraction: float, available: int | None = None) -> int:
    """Bytes of records one file slice merge may hold in memory: `max_size` when set
    (hoodie.memory.compaction.max.size), else `fraction` (hoodie.memory.compaction.fraction) of the memory
    available to this Python worker (`python_worker_memory()`, unless `available` is given), else Hudi's default
    of 1 GiB. Unlike Hudi's JVM formula there is no (1 - spark.memory.fraction) factor and no 100 MB floor: the
    Python worker's memory is its own, and a hard limit."""
    if max_size is not None:
        return max(1, int(max_size))
    available = python_worker_memory() if available is None else available
    if available is None:
        return DEFAULT_BUDGET_BYTES
    return max(1, int(math.floor(available * float(fraction))))


@dataclass
class SpillStats:
    spills: int = 0  # times the in-memory part went to disk
    spilled_bytes: int = 0  # Arrow bytes written to spill files (before compression)
    spill_files: int = 0
    partitions: int = 0  # hash partitions of the first spill (0: nothing spilled)
    splits: int = 0  # oversized partitions split again
    peak_in_memory_bytes: int = 0  # the most the map held in memory at once
    largest_partition_bytes: int = 0  # the largest partition handed out by `partitions()`


def hash_keys(keys: pa.Array | pa.ChunkedArray, seed: int = 0) -> np.ndarray:
    """A 64-bit hash of each key's UTF-8 bytes (a polynomial hash mixed by splitmix64), vectorised: the same key
    always hashes alike, across tables and processes. Null keys hash to 0."""
    if isinstance(keys, pa.ChunkedArray):
        keys = keys.combine_chunks()
    if not (pa.types.is_large_string(keys.type) or pa.types.is_large_binary(keys.type)):
        keys = pc.cast(keys, pa.large_binary() if pa.types.is_binary(keys.type) else pa.large_string())
    n = len(keys)
    out = np.zeros(n, dtype=np.uint64)
    if n == 0:
        return out
    offsets = np.frombuffer(keys.buffers()[1], dtype=np.int64)[keys.offset: keys.offset + n + 1]
    data_buffer = keys.buffers()[2]
    start, end = int(offsets[0]), int(offsets[-1])
    lengths = np.diff(offsets)
    if end > start:
        data = np.frombuffer(data_buffer, dtype=np.uint8)[start:end].astype(np.uint64) + np.uint64(1)
        owner = np.repeat(np.arange(n), lengths)
        from_end = (offsets[1:][owner] - 1 - (np.arange(start, end))).astype(np.int64)
        powers = np.cumprod(np.full(int(lengths.max()), 1099511628211, dtype=np.uint64), dtype=np.uint64)
        powers = np.concatenate([np.ones(1, dtype=np.uint64), powers[:-1]])
        contributions = data * powers[from_end]
        nonempty = lengths > 0
        out[nonempty] = np.add.reduceat(contributions, (offsets[:-1] - start)[nonempty])
        out += lengths.astype(np.uint64)
    out ^= np.uint64((0x9E3779B97F4A7C15 * (seed + 1)) & 0xFFFFFFFFFFFFFFFF)
    out ^= out >> np.uint64(30)
    out *= np.uint64(0xBF58476D1CE4E5B9)
    out ^= out >> np.uint64(27)
    out *= np.uint64(0x94D049BB133111EB)
    out ^= out >> np.uint64(31)
    if keys.null_count:
        out[np.asarray(keys.is_null())] = 0
    return out


def key_partitions(keys: pa.Array | pa.ChunkedArray, partitions: int, seed: int = 0) -> np.ndarray:
    """The hash partition (0 .. partitions-1) of each key."""
    return (hash_keys(keys, seed) % np.uint64(partitions)).astype(np.int64)


def _concat(tables: list[pa.Table]) -> pa.Table:
    return pa.concat_tables(tables, promote_options="permissive") if len(tables) > 1 else tables[0]


class SpillableMap:
    """Record versions of one file slice by key, bounded in memory (see the module doc).

    `key_columns` names each kind and its key column; `concat` may give a kind its own way of concatenating its
    tables (e.g. delete records whose ordering values differ in type); `size_hint` (bytes, e.g. of the files
    read) sizes the first partitioning."""

    def __init__(self, budget_bytes: int, spill_path: str, key_columns: dict[str, str], *, compression: bool = True,
                 size_hint: int = 0, concat: dict[str, Callable[[list[pa.Table]], pa.Table]] | None = None,
                 seed: int = 0, partitions: int | None = None):
        self.budget = max(1, int(budget_bytes))
        self._dir = SpillDirectory(self, spill_path, "hudi-spillable-map-")
        self.spill_path = self._dir.spill_path
        self.key_columns = dict(key_columns)
        self.compression = spill_codec(compression)
        self.size_hint = size_hint
        self._concat = {kind: (concat or {}).get(kind, _concat) for kind in self.key_columns}
        self.seed = seed
        self._fixed_partitions = partitions
        self._memory: dict[str, list[pa.Table]] = {kind: [] for kind in self.key_columns}
        self.in_memory_bytes = 0
        self.num_rows = 0
        self._num_partitions = 0
        self._segments: dict[tuple[str, int], list[SpillFile]] = {}
        self.stats = SpillStats()

    # -- put ---------------------------------------------------------------------------------------------

    @property
    def spilled(self) -> bool:
        return self._num_partitions > 0

    def put(self, kind: str, table: pa.Table) -> None:
        """Append versions of `kind` (after every version put before)."""
        if table.num_rows == 0:
            return
        self._memory[kind].append(table)
        self.in_memory_bytes += table.nbytes
        self.num_rows += table.num_rows
        self.stats.peak_in_memory_bytes = max(self.stats.peak_in_memory_bytes, self.in_memory_bytes)
        if self.in_memory_bytes > self.budget:
            self.spill()

    def spill(self) -> None:
        """Move everything held in memory to the spill files."""
        if self.in_memory_bytes == 0 and self.spilled:
            return
        if not self.spilled:
            self._start_spilling()
        self.stats.spills += 1
        for kind, tables in self._memory.items():
            if tables:
                self._write_partitioned(kind, self._concat[kind](tables))
            self._memory[kind] = []
        self.in_memory_bytes = 0

    def _start_spilling(self) -> None:
        directory = self._dir.make()
        expected = max(self.size_hint * _EXPANSION, self.in_memory_bytes * 2)
        self._num_partitions = self._fixed_partitions or _partition_count(expected, self.budget)
        self.stats.partitions = self._num_partitions
        log.info("spillable map: %d bytes in memory exceed the budget of %d bytes; spilling to %s in %d "
                 "partitions", self.in_memory_bytes, self.budget, directory, self._num_partitions)

    def _write_partitioned(self, kind: str, table: pa.Table) -> None:
        ids = key_partitions(table[self.key_columns[kind]], self._num_partitions, self.seed)
        order = np.argsort(ids, kind="stable")
        counts = np.bincount(ids, minlength=self._num_partitions)
        table = table.take(pa.array(order))
        start = 0
        for p, count in enumerate(counts.tolist()):
            if count:
                self._segment(kind, p, table.schema).write(table.slice(start, count))
                start += count
        self.stats.spilled_bytes += table.nbytes

    def _segment(self, kind: str, p: int, schema: pa.Schema) -> SpillFile:
        segments = self._segments.setdefault((kind, p), [])
        before = len(segments)
        assert self._dir.path is not None
        target = spill_target(segments, self._dir.path, f"{kind}-{p}", schema, self.compression)
        self.stats.spill_files += len(segments) - before
        return target

    # -- get / iterate -------------------------------------------------------------------------------------

    def get(self, key: str) -> dict[str, pa.Table]:
        """Every version of `key`, per kind, in put order (empty tables for a kind without any)."""
        out: dict[str, pa.Table] = {}
        for kind, column in self.key_columns.items():
            tables = []
            if self.spilled:
                p = int(key_partitions(pa.array([key], pa.string()), self._num_partitions, self.seed)[0])
                tables += [s.read() for s in self._segments.get((kind, p), [])]
            tables += self._memory[kind]
            found = [t.filter(pc.equal(t[column], pa.scalar(key, t.schema.field(column).type))) for t in tables]
            found = [t for t in found if t.num_rows]
            out[kind] = self._concat[kind](found) if found else None
        return out

    def partitions(self) -> Iterator[dict[str, pa.Table | None]]:
        """Every version once, grouped by key partition ({kind: table or None}); see the module doc."""
        if not self.spilled:
            part = {kind: (self._concat[kind](t) if t else None) for kind, t in self._memory.items()}
            self._note_partition(part)
            yield part
            return
        self.spill()  # what is left in memory joins its partitions on disk
        for p in range(self._num_partitions):
            segments = {kind: self._segments.pop((kind, p), []) for kind in self.key_columns}
            size = sum(s.bytes for kind_segments in segments.values() for s in kind_segments)
            if size == 0:
                continue
            if size > self.budget and self.seed < MAX_SPLIT_LEVEL:
                yield from self._split(segments, size)
            else:
                if size > self.budget:
                    log.warning("spillable map: partition of %d bytes exceeds the budget of %d bytes after %d "
                                "splits (few keys with many versions); merging it as it is", size, self.budget,
                                self.seed)
                part = {kind: (self._concat[kind]([s.read() for s in segs]) if segs else None)
                        for kind, segs in segments.items()}
                _remove(segments)
                self._note_partition(part)
                yield part

    def _split(self, segments: dict[str, list[SpillFile]], size: int) -> Iterator[dict[str, pa.Table | None]]:
        """An oversized partition split again by another hash of its keys, read back a batch at a time."""
        self.stats.splits += 1
        child = SpillableMap(self.budget, self._dir.path or self.spill_path, self.key_columns,
                             compression=self.compression is not None, seed=self.seed + 1,
                             partitions=_partition_count(size, self.budget),
                             concat={k: self._concat[k] for k in self.key_columns})
        try:
            for kind, segs in segments.items():
                for segment in segs:
                    for batch in segment.batches():
                        child._memory[kind].append(pa.Table.from_batches([batch]))
                        child.in_memory_bytes += batch.nbytes
                        if child.in_memory_bytes > child.budget:
                            child.spill()
            _remove(segments)
            child.spill()
            for part in child.partitions():
                self._note_partition(part)
                yield part
        finally:
            self.stats.splits += child.stats.splits
            child.close()

    def _note_partition(self, part: dict[str, pa.Table | None]) -> None:
        size = sum(t.nbytes for t in part.values() if t is not None)
        self.stats.largest_partition_bytes = max(self.stats.largest_partition_bytes, size)

    # -- cleanup -------------------------------------------------------------------------------------------

    def close(self) -> None:
        """Drop what is held and remove the spill files."""
        for segs in self._segments.values():
            for s in segs:
                s.finish()
        self._segments.clear()
        self._memory = {kind: [] for kind in self.key_columns}
        self.in_memory_bytes = 0
        self._dir.close()

    def __enter__(self) -> "SpillableMap":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def _partition_count(expected_bytes: int, budget: int) -> int:
    """Partitions whose expected share is half the budget (room for the merge's own work), 2..MAX_PARTITIONS."""
    return int(min(MAX_PARTITIONS, max(2, math.ceil(2 * expected_bytes / max(1, budget)))))


def _remove(segments: dict[str, list[SpillFile]]) -> None:
    for segs in segments.values():
        for s in segs:
            s.remove()
