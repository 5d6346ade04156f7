"""Record keys of the metadata table's partitions and how keys map to file groups (notes §2.2, §3.3-§3.7).

column_stats:    b64(XXH64(column)) + b64(XXH64(partition)) + b64(MD5(file name))   (12 + 12 + 24 characters)
partition_stats: b64(XXH64(column)) + b64(XXH64(partition))
bloom_filters:   b64(XXH64(partition)) + b64(MD5(file name))
secondary index: escape(value) + "$" + escape(record key)
XXH64 uses seed 0xDABADABA sign-extended to 64 bits; Base64 is the standard alphabet with padding. A
non-partitioned table's partition is "." throughout the metadata table.
"""
from __future__ import annotations

import base64
import hashlib
import struct

import numpy as np
import pyarrow as pa

from storage.arrow_util import java_string_hashes
from storage.io.hfile.format import java_string_hash

NON_PARTITIONED_NAME = "."
ALL_PARTITIONS_KEY = "__all_partitions__"
XXH64_SEED = 0xFFFFFFFFDABADABA
SECONDARY_KEY_SEPARATOR = "$"
NULL_SECONDARY_VALUE = "\x00"

_M64 = (1 << 64) - 1
_P1, _P2, _P3, _P4, _P5 = (0x9E3779B185EBCA87, 0xC2B2AE3D27D4EB4F, 0x165667B19E3779F9, 0x85EBCA77C2B2AE63,
                           0x27D4EB2F165667C5)


def _rotl(x: int, r: int) -> int:
    return ((x << r) | (x >> (64 - r))) & _M64


def _round(acc: int, lane: int) -> int:
    return (_rotl((acc + lane * _P2) & _M64, 31) * _P1) & _M64


def xxh64(data: bytes, seed: int = XXH64_SEED) -> int:
    """XXH64 of `data` (unsigned). Pure Python: keys hash short strings (column names, partitions)."""
    n, pos = len(data), 0
    if n >= 32:
        v = [(seed + _P1 + _P2) & _M64, (seed + _P2) & _M64, seed & _M64, (seed - _P1) & _M64]
        while pos + 32 <= n:
            lanes = struct.unpack_from("<4Q", data, pos)
            v = [_round(a, lane) for a, lane in zip(v, lanes)]
            pos += 32
        h = (_rotl(v[0], 1) + _rotl(v[1], 7) + _rotl(v[2], 12) + _rotl(v[3], 18)) & _M64
        for a in v:
            h = (((h ^ _round(0, a)) * _P1) + _P4) & _M64
    else:
        h = (seed + _P5) & _M64
    h = (h + n) & _M64
    while pos + 8 <= n:
        (lane,) = struct.unpack_from("<Q", data, pos)
        h = (_rotl(h ^ _round(0, lane), 27) * _P1 + _P4) & _M64
        pos += 8
    if pos + 4 <= n:
        (word,) = struct.unpack_from("<I", data, pos)
        h = (_rotl(h ^ (word * _P1 & _M64), 23) * _P2 + _P3) & _M64
        pos += 4
    while pos < n:
        h = (_rotl(h ^ (data[pos] * _P5 & _M64), 11) * _P1) & _M64
        pos += 1
    h ^= h >> 33
    h = h * _P2 & _M64
    h ^= h >> 29
    h = h * _P3 & _M64
    return h ^ (h >> 32)


def _b64(raw: bytes) -> str:
    return base64.b64encode(raw).decode("ascii")


def hash_id(text: str) -> str:
    """The 12-character id of a column or partition name: Base64 of its XXH64, big-endian."""
    return _b64(struct.pack(">Q", xxh64(text.encode("utf-8"))))


def file_name_id(file_name: str) -> str:
    """The 24-character id of a bare file name: Base64 of its MD5."""
    return _b64(hashlib.md5(file_name.encode("utf-8")).digest())


def mdt_partition_name(partition_path: str) -> str:
    """The data partition's name inside the metadata table ("." for a non-partitioned table)."""
    return partition_path or NON_PARTITIONED_NAME


def column_stats_key(column: str, partition_path: str, file_name: str) -> str:
    return hash_id(column) + hash_id(mdt_partition_name(partition_path)) + file_name_id(file_name)


def column_stats_prefix(column: str, partition_path: str | None = None) -> str:
    """Prefix of the column_stats keys of a column (and partition): what lookups by column scan for."""
    prefix = hash_id(column)
    return prefix if partition_path is None else prefix + hash_id(mdt_partition_name(partition_path))


def partition_stats_key(column: str, partition_path: str) -> str:
    return hash_id(column) + hash_id(mdt_partition_name(partition_path))


def bloom_filter_key(partition_path: str, file_name: str) -> str:
    return hash_id(mdt_partition_name(partition_path)) + file_name_id(file_name)


def escape_secondary(text: str) -> str:
    """Escape `\\`, `$` and NUL with a backslash, so that `$` separates value and record key unambiguously."""
    return "".join("\\" + c if c in "\\$\x00" else c for c in text)


def secondary_index_key(secondary_value: str | None, record_key: str) -> str:
    value = NULL_SECONDARY_VALUE if secondary_value is None else escape_secondary(secondary_value)
    return value + SECONDARY_KEY_SEPARATOR + escape_secondary(record_key)


def secondary_index_prefix(secondary_value: str | None) -> str:
    value = NULL_SECONDARY_VALUE if secondary_value is None else escape_secondary(secondary_value)
    return value + SECONDARY_KEY_SEPARATOR


def file_group_index(hash_input: str, file_group_count: int) -> int:
    """`abs(abs(h) % n)` in Java int arithmetic, h = Java String hash (abs(MIN_VALUE) stays negative)."""
    h = java_string_hash(hash_input)
    first = h if h == -(1 << 31) else abs(h)
    return abs(int(_java_rem(first, file_group_count)))


def file_group_indexes(hash_inputs: pa.Array, file_group_count: int) -> np.ndarray:
    """`file_group_index` of every string of `hash_inputs` at once (int64): abs(h) in 64 bits already equals
    Java's abs(abs(h) % n), abs(MIN_VALUE) included."""
    return np.abs(java_string_hashes(hash_inputs).astype(np.int64)) % file_group_count


def _java_rem(a: int, b: int) -> int:
    """Java's % (the sign follows the dividend)."""
    r = abs(a) % abs(b)
    return -r if a < 0 else r


def file_group_id(prefix: str, index: int) -> str:
    """e.g. file_group_id("col-stats-", 1) == "col-stats-0001-0"."""
    return f"{prefix}{index:04d}-0"
