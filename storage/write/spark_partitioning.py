"""Exact bucket-to-task placement on Spark.

`repartition(n, col)` places a row in task `pmod(murmur3(col, 42), n)`. Hashing bucket ids directly
leaves ~1/e of tasks empty and doubles others; instead each bucket gets a key whose hash lands it in its
own task, so n buckets run as n equal tasks.
"""
from __future__ import annotations

SPARK_HASH_SEED = 42
_MASK = 0xFFFFFFFF
EXACT_PLACEMENT_LIMIT = 4096


def _rotl(x: int, r: int) -> int:
    return ((x << r) | (x >> (32 - r))) & _MASK


def murmur3_hash_int(value: int, seed: int = SPARK_HASH_SEED) -> int:
    """Spark's Murmur3_x86_32.hashInt, as a signed 32-bit int."""
    k1 = (value & _MASK) * 0xCC9E2D51 & _MASK
    k1 = _rotl(k1, 15) * 0x1B873593 & _MASK
    h1 = (seed & _MASK) ^ k1
    h1 = (_rotl(h1, 13) * 5 + 0xE6546B64) & _MASK
    h1 ^= 4
    h1 ^= h1 >> 16
    h1 = h1 * 0x85EBCA6B & _MASK
    h1 ^= h1 >> 13
    h1 = h1 * 0xC2B2AE35 & _MASK
    h1 ^= h1 >> 16
    return h1 - (1 << 32) if h1 & 0x80000000 else h1


def placement_keys(num_buckets: int) -> list[int]:
    """keys[b] is an int whose Spark hash partition among `num_buckets` tasks is exactly b."""
    if num_buckets > EXACT_PLACEMENT_LIMIT:
        return list(range(num_buckets))  # with this many tasks, hash collisions no longer matter
    keys: list[int | None] = [None] * num_buckets
    missing = num_buckets
    candidate = 0
    while missing:
        target = murmur3_hash_int(candidate) % num_buckets
        if keys[target] is None:
            keys[target] = candidate
            missing -= 1
        candidate += 1
    return keys  # type: ignore[return-value]
