"""Timing of footer bloom filters (not a test): build for one base file's keys, serialize, parse, probe.

    PYTHONPATH=. python tests/storage/bloom/bloom_timing.py [--keys 66000] [--repeat 7]

Prints the best of `--repeat` runs in CPU time of this process (numpy runs single-threaded here, so on an idle
machine that is the wall time; on a shared one the minimum CPU time is the least disturbed measure).
"""
from __future__ import annotations

import argparse
import time

import numpy as np
import pyarrow as pa

from storage.bloom import BloomFilterSettings, deserialize_bloom_filter
from storage.io.base_file_writer import footer_metadata

HUDI_DEFAULTS = BloomFilterSettings("DYNAMIC_V0", 60000, 1e-9, 100000)


def best_ms(fn, repeat: int) -> float:
    fn()
    times = []
    for _ in range(repeat):
        start = time.process_time()
        fn()
        times.append(time.process_time() - start)
    return min(times) * 1000


def key_sets(n: int) -> dict[str, pa.Array]:
    rng = np.random.default_rng(1)
    ids = rng.choice(n * 30, n, replace=False)
    return {
        "int ids": pa.array(ids.astype(str)),
        "uuids": pa.array([f"{a:016x}-{b:016x}" for a, b in rng.integers(0, 2**62, (n, 2))]),
    }


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--keys", type=int, default=66000)
    parser.add_argument("--repeat", type=int, default=7)
    args = parser.parse_args()
    probes = pa.array(np.arange(200_000).astype(str))
    for name, keys in key_sets(args.keys).items():
        footer = best_ms(lambda: footer_metadata(keys, HUDI_DEFAULTS), args.repeat)
        bloom = HUDI_DEFAULTS.new_filter()
        bloom.add_keys(keys)
        text = bloom.serialize()
        parse = best_ms(lambda: deserialize_bloom_filter("DYNAMIC_V0", text), args.repeat)
        probe_in = best_ms(lambda: bloom.might_contain_many(keys), args.repeat)
        probe_out = best_ms(lambda: bloom.might_contain_many(probes), args.repeat)
        print(f"{name:8} {len(keys)} keys: footer build {footer:6.1f} ms | parse {parse:5.1f} ms | "
              f"probe {len(keys)} present {probe_in:6.1f} ms | probe {len(probes)} mostly absent {probe_out:6.1f} ms")


if __name__ == "__main__":
    main()
