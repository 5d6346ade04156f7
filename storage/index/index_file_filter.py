"""Range pruning for the bloom index (Hudi's IndexFileFilter / BloomIndexFileInfo): which base files can hold
a record key, judged by each file's record key range (`hoodie_min_record_key` .. `hoodie_max_record_key`).

Hudi looks every key up in an interval tree. Here one batch of keys is answered at once by sorted search: the
batch's keys and the files' bounds are sorted together (by partition group, then value), so each file's
candidates are one contiguous run of the sorted keys. The cost is a sort of keys + 2 x files plus the pairs
produced, never keys x files, whether ranges overlap (random keys) or not (ordered keys).

Bounds compare as UTF-8 bytes (code point order). Java's footers order keys by `String.compareTo` (UTF-16 code
units); the two agree on every comparison with a bound that holds no character from U+E000 up (UTF-8 lead byte
0xEE and above): a file whose bound does is treated as having no range, like a file without bounds.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

_ORDER_SAFE_MAX_BYTE = 0xED  # UTF-8 lead bytes up to U+DFFF; from U+E000 on UTF-8 and UTF-16 orders may differ
_KEY, _BOUND_MIN, _BOUND_MAX = 1, 0, 2  # tie order at equal values: a min bound before a key, a max after it


@dataclass(frozen=True)
class BloomIndexFileInfo:
    """A latest base file as the bloom index sees it; without both bounds every key of its partition is
    a candidate."""

    partition_path: str
    file_id: str
    path: str
    min_record_key: str | None = None
    max_record_key: str | None = None

    @property
    def has_key_range(self) -> bool:
        return (self.min_record_key is not None and self.max_record_key is not None
                and _order_safe(self.min_record_key) and _order_safe(self.max_record_key)
                and self.min_record_key.encode() <= self.max_record_key.encode())


def _order_safe(bound: str) -> bool:
    return max(bound.encode("utf-8"), default=0) <= _ORDER_SAFE_MAX_BYTE


class IndexFileFilter:
    """Candidate (file, key) pairs of key batches against a fixed list of files: per partition (a global index
    compares every key with every file of the table), pruned by key range where the file has one."""

    def __init__(self, files: list[BloomIndexFileInfo], is_global: bool) -> None:
        self._is_global = is_global
        partitions = sorted({f.partition_path for f in files})
        self._partitions = pa.array(partitions, pa.string())
        group = {p: i for i, p in enumerate(partitions)}
        self._file_group = np.array([0 if is_global else group[f.partition_path] for f in files], dtype=np.int32)
        ranged = [i for i, f in enumerate(files) if f.has_key_range]
        self._ranged = np.array(ranged, dtype=np.int64)
        self._unranged = np.array([i for i, f in enumerate(files) if not f.has_key_range], dtype=np.int64)
        self._mins = pa.array([files[i].min_record_key for i in ranged], pa.string())
        self._maxs = pa.array([files[i].max_record_key for i in ranged], pa.string())
        self._num_files = len(files)

    def candidate_pairs(self, keys: pa.Array, partitions: pa.Array | None) -> tuple[np.ndarray, np.ndarray]:
        """(file index, key index) of every file each key must be checked against; `partitions` (each key's
        partition path) is ignored by a global filter."""
        key_index, groups = self._groups_of(keys, partitions)
        if not key_index.size or not self._num_files:
            return np.zeros(0, np.int64), np.zeros(0, np.int64)
        keys = keys.take(pa.array(key_index))
        sorted_keys, lo, hi = self._runs(keys, groups)
        counts = np.maximum(hi - lo, 0)
        files = np.repeat(np.arange(self._num_files), counts)
        run_start = np.repeat(lo - (np.cumsum(counts) - counts), counts)
        return files, key_index[sorted_keys[np.arange(files.size) + run_start]]

    def _groups_of(self, keys: pa.Array, partitions: pa.Array | None) -> tuple[np.ndarray, np.ndarray]:
        """Indices of the keys that have files to check, and their partition group."""
        if self._is_global:
            return np.arange(len(keys)), np.zeros(len(keys), dtype=np.int32)
        found = pc.index_in(partitions.cast(pa.string()), value_set=self._partitions)
        key_index = np.flatnonzero(found.is_valid().to_numpy(zero_copy_only=False))
        return key_index, found.drop_null().to_numpy().astype(np.int32)

    def _runs(self, keys: pa.Array, groups: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Keys in (group, key) order, and per file the [lo, hi) run of that order it must check."""
        n, ranged = len(keys), self._ranged.size
        if ranged:
            merged = pa.table({
                "g": np.concatenate([groups, self._file_group[self._ranged], self._file_group[self._ranged]]),
                "v": pa.concat_arrays([keys.cast(pa.string()), self._mins, self._maxs]),
                "t": np.repeat(np.array([_KEY, _BOUND_MIN, _BOUND_MAX], dtype=np.int8), [n, ranged, ranged]),
            })
            order = pc.sort_indices(merged, sort_keys=[("g", "ascending"), ("v", "ascending"),
                                                       ("t", "ascending")]).to_numpy()
            is_key = order < n
            keys_before = np.empty(order.size, dtype=np.int64)
            keys_before[order] = np.cumsum(is_key) - is_key
            sorted_keys = order[is_key]
        else:
            sorted_keys = np.argsort(groups, kind="stable")
        lo = np.empty(self._num_files, dtype=np.int64)
        hi = np.empty(self._num_files, dtype=np.int64)
        if ranged:
            lo[self._ranged] = keys_before[n:n + ranged]
            hi[self._ranged] = keys_before[n + ranged:]
        if self._unranged.size:
            sorted_groups = groups[sorted_keys]
            unranged_groups = self._file_group[self._unranged]
            lo[self._unranged] = np.searchsorted(sorted_groups, unranged_groups, side="left")
            hi[self._unranged] = np.searchsorted(sorted_groups, unranged_groups, side="right")
        return sorted_keys, lo, hi
