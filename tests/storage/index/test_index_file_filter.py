"""Range pruning of the bloom index: the sorted search finds exactly the (file, key) pairs a brute-force range
check finds, per partition or globally, with overlapping, disjoint and missing ranges."""
from __future__ import annotations

import random

import numpy as np
import pyarrow as pa
import pytest

from storage.index.index_file_filter import BloomIndexFileInfo, IndexFileFilter

ALPHABET = "0123456789abcXYZ:-_é中\ue000\U0001F600"


def _key(rnd: random.Random) -> str:
    return "".join(rnd.choice(ALPHABET) for _ in range(rnd.randint(1, 8)))


def _brute_force(files: list[BloomIndexFileInfo], keys: list[str], partitions: list[str], is_global: bool) -> set:
    pairs = set()
    for k, (key, partition) in enumerate(zip(keys, partitions)):
        for f, info in enumerate(files):
            if not is_global and info.partition_path != partition:
                continue
            if info.has_key_range and not (info.min_record_key.encode() <= key.encode()
                                           <= info.max_record_key.encode()):
                continue
            pairs.add((f, k))
    return pairs


def _files(rnd: random.Random, partitions: list[str], count: int) -> list[BloomIndexFileInfo]:
    files = []
    for i in range(count):
        lo, hi = sorted([_key(rnd), _key(rnd)], key=str.encode)
        kind = rnd.random()
        if kind < 0.15:
            lo = hi = None  # no footer range
        elif kind < 0.25:
            lo, hi = hi, lo  # inverted (corrupt) range: treated as none
        files.append(BloomIndexFileInfo(rnd.choice(partitions), f"f{i}", f"/t/f{i}.parquet", lo, hi))
    return files


@pytest.mark.parametrize("is_global", [False, True])
@pytest.mark.parametrize("seed", range(6))
def test_sorted_search_equals_brute_force(seed, is_global):
    rnd = random.Random(seed)
    partitions = ["p0", "p1", "p2", "dt=2024/01"]
    files = _files(rnd, partitions, rnd.randint(1, 40))
    keys = [_key(rnd) for _ in range(rnd.randint(1, 400))]
    key_partitions = [rnd.choice(partitions + ["no-files-here"]) for _ in keys]
    got_files, got_keys = IndexFileFilter(files, is_global).candidate_pairs(
        pa.array(keys), pa.array(key_partitions))
    got = list(zip(got_files.tolist(), got_keys.tolist()))
    assert len(got) == len(set(got))
    assert set(got) == _brute_force(files, keys, key_partitions, is_global)


def test_ordered_keys_prune_to_one_file_each():
    files = [BloomIndexFileInfo("p", f"f{i}", f"/t/f{i}", f"k{i * 100:06d}", f"k{i * 100 + 99:06d}")
             for i in range(50)]
    keys = [f"k{i:06d}" for i in range(0, 5000, 7)]
    got_files, got_keys = IndexFileFilter(files, False).candidate_pairs(pa.array(keys), pa.array(["p"] * len(keys)))
    assert got_keys.size == len(keys)  # one candidate per key out of 50 files
    assert (got_files == np.array([int(keys[k][1:]) // 100 for k in got_keys])).all()


def test_bounds_beyond_u_e000_disable_pruning():
    # Java orders '\ue000' after '\U0001F600' (UTF-16 surrogates are D800-DFFF), UTF-8 bytes the other way round
    info = BloomIndexFileInfo("p", "f", "/t/f", "a\U0001F600", "a\ue000")
    assert not info.has_key_range
    assert BloomIndexFileInfo("p", "f", "/t/f", "a", "aé中").has_key_range


def test_no_files_or_no_matching_partition():
    assert IndexFileFilter([], False).candidate_pairs(pa.array(["a"]), pa.array(["p"]))[0].size == 0
    files = [BloomIndexFileInfo("p", "f", "/t/f", "a", "z")]
    assert IndexFileFilter(files, False).candidate_pairs(pa.array(["b"]), pa.array(["q"]))[0].size == 0
    assert IndexFileFilter(files, True).candidate_pairs(pa.array(["b"]), pa.array(["q"]))[0].tolist() == [0]
