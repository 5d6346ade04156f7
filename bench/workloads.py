"""Deterministic data and the workloads W1..W6.

Rows: id int64 (record key), ts int64 (precombine), dt string partition (10 values, fixed by id so an update
stays in its partition), f1..f3 float64, s1, s2 strings of 16 chars, n1 int32. Everything comes from a numpy
generator seeded per purpose, so every engine gets the same bytes in every run.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pyarrow as pa

N_PARTITIONS = 10
PARTITIONS = [f"2026-01-{d:02d}" for d in range(1, N_PARTITIONS + 1)]
NEWEST = N_PARTITIONS - 1
KEY, PRECOMBINE, PARTITION, SUM_COLUMN = "id", "ts", "dt", "f1"
LOOKUP_KEYS = 100

# id, title, what is timed
WORKLOADS = {
    "W1": "bulk load",
    "W2": "upsert, uniform (batch/2 updates everywhere + batch/2 inserts)",
    "W3": "upsert, recent-skewed (updates only in the newest partition)",
    "W4": "delete 1% of keys",
    "W5": "snapshot scan after W2: count(*) + sum(f1)",
    "W5L": "point lookup of 100 keys after W2",
    "C": "MOR compaction of the logs left by W2 (ours only)",
    "W5C": "snapshot scan after compaction (MOR)",
    "W6": "W2 batch into tables of rows/2, rows, 2*rows",
}
ORDER = ["W1", "W2", "W5", "W5L", "C", "W5C", "W3", "W4", "W6"]


def schema() -> pa.Schema:
    return pa.schema([("id", pa.int64()), ("ts", pa.int64()), ("dt", pa.string()), ("f1", pa.float64()),
                      ("f2", pa.float64()), ("f3", pa.float64()), ("s1", pa.string()), ("s2", pa.string()),
                      ("n1", pa.int32())])


def _strings(rng: np.random.Generator, n: int) -> pa.Array:
    # 16 lowercase letters per value, built as one buffer (no per-row Python)
    chars = rng.integers(97, 123, size=n * 16, dtype=np.uint8)
    offsets = np.arange(0, (n + 1) * 16, 16, dtype=np.int32)
    return pa.StringArray.from_buffers(n, pa.py_buffer(offsets), pa.py_buffer(chars.tobytes()))


def make_rows(ids: np.ndarray, ts: int, seed: int) -> pa.Table:
    rng = np.random.default_rng(seed)
    n = len(ids)
    dt = pa.array(np.array(PARTITIONS, dtype=object)[ids % N_PARTITIONS], pa.string())
    return pa.table([
        pa.array(ids, pa.int64()), pa.array(np.full(n, ts, dtype=np.int64)), dt,
        pa.array(rng.random(n) * 100), pa.array(rng.random(n) * 1000), pa.array(rng.normal(size=n)),
        _strings(rng, n), _strings(rng, n), pa.array(rng.integers(0, 1 << 30, n, dtype=np.int32)),
    ], schema=schema())


@dataclass
class DataSet:
    rows: int
    batch: int
    seed: int = 42

    def base(self, rows: int | None = None) -> pa.Table:
        """W1: ids 0..rows-1, ts=1."""
        return make_rows(np.arange(rows or self.rows, dtype=np.int64), 1, self.seed)

    def uniform_batch(self, rows: int | None = None) -> pa.Table:
        """W2: batch/2 distinct existing ids drawn uniformly (so every file is touched) + batch/2 new ids."""
        rows = rows or self.rows
        rng = np.random.default_rng(self.seed + 1)
        half = self.batch // 2
        updates = np.sort(rng.choice(rows, size=min(half, rows), replace=False)).astype(np.int64)
        inserts = np.arange(rows, rows + self.batch - len(updates), dtype=np.int64)
        return make_rows(np.concatenate([updates, inserts]), 2, self.seed + 2)

    def skewed_batch(self) -> pa.Table:
        """W3: batch/2 updates of ids of the newest partition (late-arriving data) + batch/2 new ids there too."""
        rng = np.random.default_rng(self.seed + 3)
        newest = np.arange(NEWEST, self.rows, N_PARTITIONS, dtype=np.int64)
        half = min(self.batch // 2, len(newest))
        updates = np.sort(rng.choice(newest, size=half, replace=False))
        start = (self.rows + self.batch) // N_PARTITIONS * N_PARTITIONS + N_PARTITIONS + NEWEST  # past W2's inserts
        inserts = np.arange(start, start + (self.batch - half) * N_PARTITIONS, N_PARTITIONS, dtype=np.int64)
        return make_rows(np.concatenate([updates, inserts]), 3, self.seed + 4)

    def delete_keys(self) -> pa.Table:
        """W4: 1% of the original keys, as full rows (some engines delete by row, some by key)."""
        rng = np.random.default_rng(self.seed + 5)
        ids = np.sort(rng.choice(self.rows, size=max(1, self.rows // 100), replace=False)).astype(np.int64)
        return make_rows(ids, 4, self.seed + 6)

    def lookup_keys(self) -> list[int]:
        rng = np.random.default_rng(self.seed + 7)
        return sorted(int(i) for i in rng.choice(self.rows, size=min(LOOKUP_KEYS, self.rows), replace=False))

    def growth_sizes(self) -> list[int]:
        return [max(self.rows // 2, self.batch), self.rows, self.rows * 2]


def expected_after_w2(data: DataSet) -> tuple[int, float]:
    """(count, sum(f1)) of the table after W1 + W2, computed independently in Arrow (the cross-check oracle)."""
    import pyarrow.compute as pc

    base, batch = data.base(), data.uniform_batch()
    kept = base.filter(pc.invert(pc.is_in(base["id"], value_set=batch["id"])))
    return kept.num_rows + batch.num_rows, pc.sum(kept["f1"]).as_py() + pc.sum(batch["f1"]).as_py()
