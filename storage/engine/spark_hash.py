"""Spark SQL's `xxhash64(col)` of a string column, vectorized over the Arrow buffers: the in-process write engine
must place inserts into the same insert shares as the Spark path, which hashes the key with Spark's `xxhash64`
(seed 42, XXH64 over the UTF-8 bytes; a null leaves the seed, 42)."""
from __future__ import annotations

import numpy as np
import pyarrow as pa

SPARK_HASH_SEED = 42
_M64 = (1 << 64) - 1
_P1 = 0x9E3779B185EBCA87
_P2 = 0xC2B2AE3D27D4EB4F
_P3 = 0x165667B19E3779F9
_P4 = 0x85EBCA77C2B2AE63
_P5 = 0x27D4EB2F165667C5
_U = np.uint64
P1, P2, P3, P4, P5 = _U(_P1), _U(_P2), _U(_P3), _U(_P4), _U(_P5)
_SIGN_MASK = np.int64(0x7FFFFFFFFFFFFFFF)
_BLOCK = 16384  # rows hashed together: keeps the temporaries small and in cache


def _rotl(x: np.ndarray, r: int) -> np.ndarray:
    return (x << _U(r)) | (x >> _U(64 - r))


def _rotl_(x: np.ndarray, r: int, tmp: np.ndarray) -> None:
    """x = rotl(x, r) in place."""
    np.right_shift(x, _U(64 - r), out=tmp)
    np.left_shift(x, _U(r), out=x)
    x |= tmp


def _mix_(hs: np.ndarray, k: np.ndarray, r: int, prime: np.uint64, add: np.uint64 | None, tmp: np.ndarray) -> None:
    """hs = rotl(hs ^ k, r) * prime (+ add), in place: the step that folds one word of the tail into the hash."""
    hs ^= k
    _rotl_(hs, r, tmp)
    hs *= prime
    if add is not None:
        hs += add


def _round_(acc: np.ndarray, lane: np.ndarray, tmp: np.ndarray) -> None:
    """acc = XXH64 round(acc, lane) in place (clobbers lane)."""
    lane *= P2
    acc += lane
    _rotl_(acc, 31, tmp)
    acc *= P1


def _unaligned(data: pa.Buffer | None, width: int) -> np.ndarray:
    """Element i is the little-endian `width`-byte word starting at byte i of `data`."""
    size = 0 if data is None else data.size
    count = max(size - width + 1, 0)
    if count == 0:
        return np.zeros(0, dtype=f"<u{width}")
    return np.ndarray((count,), dtype=f"<u{width}", buffer=data, strides=(1,))


def _rows(cond: np.ndarray) -> np.ndarray | None:
    """The rows where cond holds; None when it holds for all."""
    count = int(np.count_nonzero(cond))
    return None if count == cond.size else np.flatnonzero(cond)


def _hash_block(start: np.ndarray, length: np.ndarray, data: pa.Buffer | None) -> np.ndarray:
    n = start.size
    words = _unaligned(data, 8)
    scratch = np.empty(n, dtype=np.uint64)
    h = np.full(n, (SPARK_HASH_SEED + _P5) & _M64, dtype=np.uint64)

    # 32-byte stripes: rows ordered by stripe count (descending), so stripe s runs over a prefix of them
    stripes = length >> 5
    long_rows = np.flatnonzero(stripes)
    if long_rows.size:
        long_rows = long_rows[np.argsort(-stripes[long_rows], kind="stable")]
        row_stripes = stripes[long_rows]
        at_least = np.bincount(row_stripes)[::-1].cumsum()[::-1]  # at_least[c]: rows with >= c stripes
        pos = start[long_rows]
        seed = SPARK_HASH_SEED
        v = [np.full(long_rows.size, x & _M64, dtype=np.uint64)
             for x in (seed + _P1 + _P2, seed + _P2, seed, seed - _P1)]
        for s in range(int(row_stripes[0])):
            m = int(at_least[s + 1])
            p = pos[:m] + 32 * s
            for lane in range(4):
                _round_(v[lane][:m], words[p + 8 * lane], scratch[:m])
        acc = _rotl(v[0], 1) + _rotl(v[1], 7) + _rotl(v[2], 12) + _rotl(v[3], 18)
        for lane in v:
            acc ^= _rotl(lane * P2, 31) * P1
            acc *= P1
            acc += P4
        h[long_rows] = acc
    h += length.astype(np.uint64)

    # the rest: 8-byte words, then a 4-byte word, then single bytes
    pos = start + (stripes << 5)
    rest = length & 31
    for j in range(int(rest.max()) >> 3):
        rows = _rows(rest >= 8 * (j + 1))
        hs, tmp = _view(h, scratch, rows)
        k = words[pos + 8 * j if rows is None else pos[rows] + 8 * j]
        k *= P2
        _rotl_(k, 31, tmp)
        k *= P1
        _mix_(hs, k, 27, P1, P4, tmp)
        _put(h, rows, hs)
    pos += rest & ~7
    if (rest & 4).any():
        rows = _rows(rest & 4)
        hs, tmp = _view(h, scratch, rows)
        k = _unaligned(data, 4)[pos if rows is None else pos[rows]].astype(np.uint64)
        k *= P1
        _mix_(hs, k, 23, P2, P3, tmp)
        _put(h, rows, hs)
        pos += rest & 4
    tail = rest & 3
    data_bytes = np.frombuffer(data, dtype=np.uint8) if data is not None else np.zeros(0, dtype=np.uint8)
    for b in range(int(tail.max())):
        rows = _rows(tail > b)
        hs, tmp = _view(h, scratch, rows)
        k = data_bytes[pos + b if rows is None else pos[rows] + b].astype(np.uint64)
        k *= P5
        _mix_(hs, k, 11, P1, None, tmp)
        _put(h, rows, hs)

    # avalanche
    for shift, prime in ((33, P2), (29, P3)):
        np.right_shift(h, _U(shift), out=scratch)
        h ^= scratch
        h *= prime
    np.right_shift(h, _U(32), out=scratch)
    h ^= scratch
    return h.view(np.int64)


def _hash_chunk(arr: pa.Array) -> np.ndarray:
    n = len(arr)
    if n == 0:
        return np.zeros(0, dtype=np.int64)
    if pa.types.is_string(arr.type):
        offset_type = np.int32
    elif pa.types.is_large_string(arr.type):
        offset_type = np.int64
    else:
        raise TypeError(f"xxhash64_strings takes string or large_string values, not {arr.type}")
    _, offsets_buf, data = arr.buffers()
    offsets = np.frombuffer(offsets_buf, dtype=offset_type, count=n + 1, offset=arr.offset * offset_type().itemsize)
    out = np.empty(n, dtype=np.int64)
    with np.errstate(over="ignore"):
        for i in range(0, n, _BLOCK):
            block = offsets[i: i + _BLOCK + 1].astype(np.int64)
            out[i: i + _BLOCK] = _hash_block(block[:-1], np.diff(block), data)
    if arr.null_count:
        out[np.asarray(arr.is_null())] = SPARK_HASH_SEED  # Spark skips a null value: the hash stays the seed
    return out


def xxhash64_strings(values: pa.Array | pa.ChunkedArray) -> np.ndarray:
    """Spark's `xxhash64(col)` (seed 42) of each string, as Spark's signed int64; a null gives 42."""
    if isinstance(values, pa.ChunkedArray):
        if values.num_chunks == 0:
            return np.zeros(0, dtype=np.int64)
        return np.concatenate([_hash_chunk(chunk) for chunk in values.chunks])
    return _hash_chunk(values)


def uniform_position(values: pa.Array | pa.ChunkedArray) -> np.ndarray:
    """`(xxhash64(col) & 0x7FFFFFFFFFFFFFFF) / 2**63` in [0, 1], computed as Spark computes it (double division)."""
    return (xxhash64_strings(values) & _SIGN_MASK).astype(np.float64) / float(2 ** 63)


def _view(h: np.ndarray, scratch: np.ndarray, rows: np.ndarray | None) -> tuple[np.ndarray, np.ndarray]:
    """The hashes of `rows` (all when None) to update, and scratch space of their size."""
    return (h, scratch) if rows is None else (h[rows], scratch[: rows.size])


def _put(h: np.ndarray, rows: np.ndarray | None, hs: np.ndarray) -> None:
    """Stores the updated hashes of `rows` (a view of all of them needs no copy back)."""
    if rows is not None:
        h[rows] = hs
