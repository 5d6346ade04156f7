"""Hudi's MurmurHash 2 with Java `int` semantics, as a scalar and as a numpy-vectorized function.

Hudi's bloom filters hash record keys with exactly this variant, so a filter we write is only usable by Java
Hudi (and vice versa) if every detail matches: `h = seed ^ len`, 4-byte little-endian blocks, tail bytes
*sign-extended* (most other MurmurHash2 ports zero-extend them), mixed in from the end of the key (Hudi's
`MurmurHash`; Hadoop's takes them in the opposite order) and the final avalanche mix.

`TailOrder.HADOOP` is kept only to read the footers this engine wrote before it hashed as Hudi does (see
`storage.index.key_lookup`): those filters stay exact when probed the way they were built.

The vectorized path exists because a base file's filter takes ~30 chained hashes per record key; hashing keys
one by one in Python would dominate write time.
"""
from __future__ import annotations

import enum
import struct
from dataclasses import dataclass
from typing import Iterator, Sequence, Union

import numpy as np
import pyarrow as pa

M = 0x5BD1E995
R = 24
_MASK32 = 0xFFFFFFFF
_M32 = np.uint32(M)
_SCALAR_BATCH = 4  # up to this many keys, pure-Python hashing beats numpy's fixed per-call cost

KeysLike = Union[Sequence[str], Sequence[bytes], pa.Array, pa.ChunkedArray]


class TailOrder(enum.Enum):
    """Where the 1-3 bytes after a key's last 4-byte block land in the hash word."""

    HUDI = "hudi"  # hudi-common's MurmurHash: b[len-3] << 16 ^ b[len-2] << 8 ^ b[len-1] (from the end)
    HADOOP = "hadoop"  # Hadoop's MurmurHash: b[base+2] << 16 ^ b[base+1] << 8 ^ b[base] (this engine before 2026-11)

    def shift(self, index: int, left: int) -> int:
        """Bit shift of tail byte `index` (0-based from the tail's start) of a `left`-byte tail (ints or arrays)."""
        return 8 * (left - 1 - index) if self is TailOrder.HUDI else 8 * index


def to_int32(value: int) -> int:
    """Wrap a Python int to a signed 32-bit value, as a Java `int` would hold it."""
    value &= _MASK32
    return value - (1 << 32) if value & 0x80000000 else value


def _sign_extend_byte(byte: int) -> int:
    return byte - 256 if byte & 0x80 else byte


def _mix_block(k: int) -> int:
    k = (k * M) & _MASK32
    k ^= k >> R
    return (k * M) & _MASK32


def murmur2(data: bytes, seed: int, tail: TailOrder = TailOrder.HUDI) -> int:
    """Hash `data` with Hudi's MurmurHash 2; returns the signed 32-bit result Java would return."""
    length = len(data)
    h = (seed ^ length) & _MASK32
    nblocks = length >> 2
    for k in struct.unpack_from(f"<{nblocks}I", data):
        h = ((h * M) & _MASK32) ^ _mix_block(k)
    base = nblocks << 2
    left = length - base
    if left:
        for i in range(left):
            h ^= (_sign_extend_byte(data[base + i]) << tail.shift(i, left)) & _MASK32
        h = (h * M) & _MASK32
    h ^= h >> 13
    h = (h * M) & _MASK32
    h ^= h >> 15
    return to_int32(h)


@dataclass(frozen=True)
class PreparedKeys:
    """The seed-independent part of hashing a batch of keys, computed once and reused for every chained round.

    Keys are kept sorted by block count (descending) so that, for block index j, the keys that still have a
    j-th block form a prefix `[:block_counts[j]]`: each round then works on contiguous slices, without masks.
    """

    order: np.ndarray  # int64, sorted position -> original index
    lengths: np.ndarray  # uint32 byte lengths, sorted order
    block_counts: tuple[int, ...]  # keys having more than j blocks, per block index j
    mixed_blocks: tuple[np.ndarray, ...]  # uint32 mixed block words of those keys, per block index j
    tail: np.ndarray  # uint32 xor of the sign-extended tail bytes (0 when no tail), sorted order
    tail_mul: np.ndarray  # uint32: M where a tail exists, else 1
    tail_order: TailOrder

    @property
    def size(self) -> int:
        return int(self.order.size)

    @property
    def has_empty(self) -> bool:
        return bool(self.size) and int(self.lengths.min()) == 0


def _binary_array(keys: KeysLike) -> pa.Array:
    """Keys as one Arrow binary-like array (no per-key Python work for Arrow input)."""
    if isinstance(keys, pa.ChunkedArray):
        chunks = [c.cast(pa.large_binary()) for c in keys.chunks]
        return pa.concat_arrays(chunks) if chunks else pa.array([], pa.large_binary())
    if isinstance(keys, pa.Array):
        return keys
    keys = list(keys)
    if not keys:
        return pa.array([], pa.binary())
    return pa.array(keys, pa.binary() if isinstance(keys[0], (bytes, bytearray, memoryview)) else pa.string())


def key_buffers(keys: KeysLike) -> tuple[np.ndarray, np.ndarray]:
    """(int64 offsets of n+1 entries, uint8 data) of the UTF-8 / raw bytes of `keys`; nulls are rejected."""
    arr = _binary_array(keys)
    if not (pa.types.is_string(arr.type) or pa.types.is_large_string(arr.type)
            or pa.types.is_binary(arr.type) or pa.types.is_large_binary(arr.type)):
        if len(arr) and arr.null_count == len(arr):
            raise ValueError("keys must not be null")
        raise TypeError(f"keys must be strings or bytes, got Arrow type {arr.type}")
    if arr.null_count:
        raise ValueError("keys must not be null")
    n = len(arr)
    _, offsets_buf, data_buf = arr.buffers()[:3]
    offset_type = np.int64 if (pa.types.is_large_string(arr.type) or pa.types.is_large_binary(arr.type)) else np.int32
    if offsets_buf is None:
        offsets = np.zeros(n + 1, dtype=np.int64)
    else:
        offsets = np.frombuffer(offsets_buf, dtype=offset_type)[arr.offset:arr.offset + n + 1].astype(np.int64)
    data = np.frombuffer(data_buf, dtype=np.uint8) if data_buf is not None else np.zeros(0, dtype=np.uint8)
    if n and (offsets[0] or offsets[-1] < data.size):  # a slice: only its own bytes (the hashing copies them)
        data = data[offsets[0]:offsets[-1]]
        offsets = offsets - offsets[0]
    return offsets, data


def _unaligned_words(data: np.ndarray) -> np.ndarray:
    """uint32 view where element i is the little-endian word at byte i (3 zero bytes of padding at the end)."""
    padded = np.zeros(data.size + 8, dtype=np.uint8)
    padded[:data.size] = data
    return np.ndarray(shape=(data.size + 1,), dtype="<u4", buffer=padded, offset=0, strides=(1,))


def _mix_blocks(words: np.ndarray) -> np.ndarray:
    k = words * _M32
    k ^= k >> np.uint32(R)
    k *= _M32
    return k


def _tail_xor(data: np.ndarray, starts: np.ndarray, left: np.ndarray, order: TailOrder) -> np.ndarray:
    """Xor of the sign-extended tail bytes shifted to their place (Java's `(int) data[i] << shift`)."""
    signed = np.concatenate([data.view(np.int8), np.zeros(3, dtype=np.int8)])
    tail = np.zeros(starts.size, dtype=np.int32)
    for j in range(3):
        byte = signed[starts + j].astype(np.int32)
        shift = np.maximum(order.shift(j, left), 0)  # per key (Hudi's order depends on the tail's length)
        tail ^= np.where(left > j, byte << shift, 0).astype(np.int32)
    return tail.view(np.uint32)


def prepare_keys(keys: KeysLike | PreparedKeys, tail: TailOrder = TailOrder.HUDI) -> PreparedKeys:
    """Precompute block words, tails and ordering for `keys` (str are hashed as UTF-8)."""
    if isinstance(keys, PreparedKeys):
        if keys.tail_order is not tail:
            raise ValueError(f"keys were prepared for the {keys.tail_order.value} tail order, not {tail.value}")
        return keys
    offsets, data = key_buffers(keys)
    lengths = np.diff(offsets)
    nblocks = lengths >> 2
    order = np.argsort(-nblocks, kind="stable")
    starts = offsets[:-1][order]
    lengths_sorted = lengths[order]
    counts = np.cumsum(np.bincount(nblocks, minlength=1)[::-1])[::-1][1:] if lengths.size else np.zeros(0, np.int64)
    words = _unaligned_words(data)
    mixed = tuple(_mix_blocks(words[starts[:c] + 4 * j]) for j, c in enumerate(counts.tolist()))
    left = (lengths_sorted & 3).astype(np.int64)
    tail_starts = starts + (lengths_sorted - left)
    return PreparedKeys(
        order=order,
        lengths=lengths_sorted.astype(np.uint32),
        block_counts=tuple(counts.tolist()),
        mixed_blocks=mixed,
        tail=_tail_xor(data, tail_starts, left, tail),
        tail_mul=np.where(left > 0, _M32, np.uint32(1)).astype(np.uint32),
        tail_order=tail,
    )


def _hash_sorted(prep: PreparedKeys, seeds: np.ndarray) -> np.ndarray:
    """One MurmurHash2 round over all keys, in sorted order; `seeds` is uint32 in sorted order."""
    h = seeds ^ prep.lengths
    for count, mixed in zip(prep.block_counts, prep.mixed_blocks):
        head = h[:count]
        head *= _M32
        head ^= mixed
    h ^= prep.tail
    h *= prep.tail_mul
    h ^= h >> np.uint32(13)
    h *= _M32
    h ^= h >> np.uint32(15)
    return h


def murmur2_many(keys: KeysLike | PreparedKeys, seeds: np.ndarray | int,
                 tail: TailOrder = TailOrder.HUDI) -> np.ndarray:
    """Vectorized `murmur2`: hash key i with seed i (or one seed for all); returns int32 in key order."""
    prep = prepare_keys(keys, tail)
    seeds_u32 = np.broadcast_to(np.asarray(seeds, dtype=np.int64), (prep.size,)).astype(np.int32).view(np.uint32)
    out = np.empty(prep.size, dtype=np.uint32)
    out[prep.order] = _hash_sorted(prep, seeds_u32[prep.order])
    return out.view(np.int32)


def small_batch(keys: object) -> list[bytes] | None:
    """The keys as bytes when they are a short Python list: numpy's per-call overhead exceeds the work there."""
    if not isinstance(keys, (list, tuple)) or len(keys) > _SCALAR_BATCH:
        return None
    if not all(isinstance(k, (str, bytes)) for k in keys):
        return None
    return [k.encode("utf-8") if isinstance(k, str) else k for k in keys]


def _scalar_chain(keys: list[bytes], rounds: int, tail: TailOrder) -> np.ndarray:
    out = np.empty((rounds, len(keys)), dtype=np.int32)
    for j, data in enumerate(keys):
        h = 0
        for i in range(rounds):
            h = murmur2(data, h, tail)
            out[i, j] = h
    return out


def murmur2_rounds(prep: PreparedKeys, rounds: int) -> Iterator[np.ndarray]:
    """The bloom hash chain, one round at a time: round 0 uses seed 0, round i seeds with round i-1's hash.

    Yields uint32 arrays in the *sorted* order of `prep` (`prep.order` maps back to key order): a filter's bits
    do not depend on key order, so building one never pays for un-sorting."""
    h = np.zeros(prep.size, dtype=np.uint32)
    for _ in range(rounds):
        h = _hash_sorted(prep, h)
        yield h


def murmur2_chain(keys: KeysLike | PreparedKeys, rounds: int, tail: TailOrder = TailOrder.HUDI) -> np.ndarray:
    """The whole chain of `murmur2_rounds`: int32 of shape (rounds, n), in key order."""
    small = small_batch(keys)
    if small is not None:
        return _scalar_chain(small, rounds, tail)
    prep = prepare_keys(keys, tail)
    out = np.empty((rounds, prep.size), dtype=np.uint32)
    for i, h in enumerate(murmur2_rounds(prep, rounds)):
        out[i, prep.order] = h
    return out.view(np.int32)
