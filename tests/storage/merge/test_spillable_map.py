"""The spillable map (storage/merge/spillable_map.py): it holds record versions in memory up to its budget and
spills the rest hash-partitioned by key to Arrow IPC files; get/put/iterate keep every version, grouped by key,
in put order; the spill files go away when it closes, also on error; the budget is resolved as Hudi's
IOUtils.getMaxMemoryPerCompaction does, from the Python worker's memory."""
from __future__ import annotations

import os

import numpy as np
import pyarrow as pa
import pytest

from storage.merge import spillable_map as sm
from storage.merge.spillable_map import SpillableMap, hash_keys, key_partitions, merge_memory_budget

KEYS = {"records": "k", "deletes": "record_key"}


def _records(start: int, n: int, seq: int, pad: int = 40) -> pa.Table:
    ids = np.arange(start, start + n) % 500  # keys repeat across puts: several versions per key
    return pa.table({"k": pa.array([f"key-{i:05d}" for i in ids]), "v": pa.array(np.full(n, seq)),
                     "pad": pa.array(["x" * pad] * n), "_hoodie_write_seq": pa.array(np.full(n, seq))})


def _deletes(keys: list[str], seq: int) -> pa.Table:
    return pa.table({"record_key": pa.array(keys), "ordering_value": pa.array([0] * len(keys)),
                     "_hoodie_write_seq": pa.array([seq] * len(keys))})


def _spill_files(root) -> list[str]:
    return [os.path.join(d, f) for d, _, files in os.walk(root) for f in files]


def test_stays_in_memory_within_the_budget(tmp_path):
    with SpillableMap(1 << 20, str(tmp_path), KEYS) as m:
        m.put("records", _records(0, 100, 0))
        m.put("deletes", _deletes(["key-00001"], 1))
        assert not m.spilled and m.stats.spills == 0 and not _spill_files(tmp_path)
        parts = list(m.partitions())
    assert len(parts) == 1 and parts[0]["records"].num_rows == 100 and parts[0]["deletes"].num_rows == 1


def test_spills_at_the_budget_and_keeps_every_version_in_put_order(tmp_path):
    budget = 64 * 1024
    puts = [_records(i * 300, 300, i) for i in range(40)]  # ~40 x 20 KB: ~12x the budget
    total = sum(t.nbytes for t in puts)
    assert total > 10 * budget
    with SpillableMap(budget, str(tmp_path), KEYS, size_hint=total // 3) as m:
        held_before_spill = []
        for t in puts:
            m.put("records", t)
            held_before_spill.append(m.in_memory_bytes)
            assert m.in_memory_bytes <= budget  # past the budget everything went to disk
        m.put("deletes", _deletes(["key-00007", "key-00300"], 99))
        assert m.spilled and m.stats.spills >= 10 and m.stats.partitions >= 2
        assert _spill_files(tmp_path)
        assert m.stats.peak_in_memory_bytes <= budget + max(t.nbytes for t in puts)

        # get: every version of one key, in put order, from disk and memory
        versions = m.get("key-00007")["records"]
        expected = [i for i, t in enumerate(puts) for k in t["k"].to_pylist() if k == "key-00007"]
        assert versions["v"].to_pylist() == expected and len(expected) > 5
        assert m.get("key-00007")["deletes"]["_hoodie_write_seq"].to_pylist() == [99]
        assert m.get("no-such-key") == {"records": None, "deletes": None}

        parts = list(m.partitions())
        assert len(parts) > 1
        assert m.stats.largest_partition_bytes <= budget  # each partition handed to the merge fits the budget
        seen_keys: set[str] = set()
        all_rows = []
        for part in parts:
            keys = set(part["records"]["k"].to_pylist())
            assert not keys & seen_keys  # a key's versions are all in one partition
            seen_keys |= keys
            all_rows += part["records"].select(["k", "v"]).to_pylist()
            # within a partition, versions keep their put order
            v = part["records"]["v"].to_numpy()
            assert (np.diff(v) >= 0).all()
        assert sorted((r["k"], r["v"]) for r in all_rows) == sorted(
            (k, v) for t in puts for k, v in zip(t["k"].to_pylist(), t["v"].to_pylist()))
        deletes = [p["deletes"] for p in parts if p["deletes"] is not None]
        assert sorted(k for d in deletes for k in d["record_key"].to_pylist()) == ["key-00007", "key-00300"]
    assert not _spill_files(tmp_path) and not os.listdir(tmp_path)  # close removed the spill directory


def test_oversized_partitions_are_split_again(tmp_path):
    budget = 32 * 1024
    puts = [_records(i * 500, 500, i) for i in range(12)]
    with SpillableMap(budget, str(tmp_path), KEYS, partitions=2) as m:  # far too few partitions on purpose
        for t in puts:
            m.put("records", t)
        parts = list(m.partitions())
        assert m.stats.splits >= 1 and len(parts) > 2
        assert sum(p["records"].num_rows for p in parts) == sum(t.num_rows for t in puts)
        assert m.stats.largest_partition_bytes <= budget
    assert not os.listdir(tmp_path)


def test_spill_files_are_removed_on_error(tmp_path):
    with pytest.raises(RuntimeError, match="merge failed"):
        with SpillableMap(8 * 1024, str(tmp_path), KEYS) as m:
            for i in range(10):
                m.put("records", _records(i * 100, 100, i))
            assert _spill_files(tmp_path)
            for _ in m.partitions():
                raise RuntimeError("merge failed")
    assert not os.listdir(tmp_path)


def test_delete_segments_with_different_ordering_types_use_the_kind_concat(tmp_path):
    calls = []

    def concat(tables):
        calls.append(len(tables))
        return pa.concat_tables([t.set_column(1, "ordering_value", pa.nulls(t.num_rows)) for t in tables])

    with SpillableMap(1024, str(tmp_path), KEYS, concat={"deletes": concat}) as m:
        m.put("deletes", _deletes([f"key-{i:05d}" for i in range(100)], 1))
        m.put("deletes", pa.table({"record_key": pa.array(["key-00001"]), "ordering_value": pa.array(["a"]),
                                   "_hoodie_write_seq": pa.array([2])}))
        m.put("records", _records(0, 200, 3))
        rows = sum(p["deletes"].num_rows for p in m.partitions() if p["deletes"] is not None)
    assert rows == 101 and calls


def test_hash_is_stable_and_spreads_keys():
    keys = pa.array([f"id-{i}" for i in range(10000)] + ["", None])
    h = hash_keys(keys)
    assert (h == hash_keys(keys.slice(0))).all()
    # the same key hashes alike whatever table or offset it sits in
    assert hash_keys(keys.slice(5, 3)).tolist() == h[5:8].tolist()
    assert hash_keys(pa.chunked_array([keys.slice(0, 7), keys.slice(7)])).tolist() == h.tolist()
    assert h[-1] == 0 and h[-2] != 0  # null -> 0, empty string hashes
    assert len(set(h[:10000].tolist())) == 10000
    parts = key_partitions(keys.slice(0, 10000), 16)
    counts = np.bincount(parts, minlength=16)
    assert counts.min() > 500 and counts.max() < 750  # ~625 each
    assert (key_partitions(keys, 16, seed=1) != key_partitions(keys, 16)).any()


def test_budget_resolution(monkeypatch):
    monkeypatch.delenv("PYSPARK_EXECUTOR_MEMORY_MB", raising=False)
    assert merge_memory_budget(65536, 0.6) == 65536  # hoodie.memory.compaction.max.size wins
    assert merge_memory_budget(None, 0.6) == sm.DEFAULT_BUDGET_BYTES  # unknown memory: Hudi's 1 GiB
    monkeypatch.setenv("PYSPARK_EXECUTOR_MEMORY_MB", "512")  # what Spark gives a worker (pyspark.memory / cores)
    assert merge_memory_budget(None, 0.5) == 256 * 1024 * 1024
    assert merge_memory_budget(None, 0.6, available=1000) == 600
