"""Hudi's record-key bloom filters (SIMPLE and DYNAMIC_V0), byte-compatible with what Java Hudi stores in the
parquet footer key `org.apache.hudi.bloomfilter`.

The bloom index reads these footers to skip files that cannot hold a key, and Java Hudi reads the footers we
write, so sizing, hashing, bit order, row growth and the serialized layout all follow the Java behaviour
(spec section 7). Bits live in numpy uint8 vectors; keys are hashed all at once, one numpy pass per hash round
(see `murmur.py`): building a file's footer sets all its keys' bits through one boolean mask, probing drops a
key at its first unset bit.
"""
from __future__ import annotations

import base64
import binascii
import math
import struct
from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import Optional, Sequence

import numpy as np

from storage.config import HoodieConfig
from storage.config import WriteConfigKeys as WK

from storage.bloom.murmur import (
    KeysLike,
    PreparedKeys,
    TailOrder,
    murmur2_chain,
    murmur2_rounds,
    prepare_keys,
    small_batch,
    to_int32,
)

BLOOM_FILTER_FOOTER_KEY = "org.apache.hudi.bloomfilter"
BLOOM_FILTER_TYPE_CODE_KEY = "hoodie_bloom_filter_type_code"
MIN_RECORD_KEY_FOOTER = "hoodie_min_record_key"
MAX_RECORD_KEY_FOOTER = "hoodie_max_record_key"

SIMPLE = "SIMPLE"
DYNAMIC_V0 = "DYNAMIC_V0"
JENKINS_HASH = 0
MURMUR_HASH = 1

_FILTER_VERSION = -1  # Hadoop Filter's versioned header marker
_HEADER = struct.Struct(">iibi")  # version, nbHash, hashType, vectorSize
_DYNAMIC_STATE = struct.Struct(">iii")  # nr, currentNbRecord, rows
# Below this many positions per vector bit, scattered ORs beat building a full-size boolean mask.
_SCATTER_DENSITY = 64
_POPCOUNT = np.array([bin(i).count("1") for i in range(256)], dtype=np.uint8)  # bits set in each byte value


def bloom_sizing(num_entries: int, fpp: float) -> tuple[int, int]:
    """(vectorSize, nbHash) for `num_entries` at false-positive rate `fpp`, with Java's double arithmetic
    (same operation order) so that edge cases round the same way."""
    if num_entries <= 0:
        raise ValueError(f"num_entries must be > 0, got {num_entries}")
    if not 0.0 < fpp < 1.0:
        raise ValueError(f"fpp must be in (0, 1), got {fpp}")
    log2_squared = math.log(2) * math.log(2)
    vector_size = math.ceil(num_entries * (-math.log(fpp) / log2_squared))
    num_hashes = math.ceil(math.log(2) * vector_size / num_entries)
    return int(vector_size), int(num_hashes)


def java_positions(h: np.ndarray, vector_size: int) -> np.ndarray:
    """uint32 bit positions of hash words (uint32 holding Java ints): Java's `Math.abs(h % vectorSize)`,
    computed as |h| % vectorSize (the same for a positive divisor). |Integer.MIN_VALUE| wraps to itself in int32,
    whose uint32 view is the true magnitude 2^31; uint32 division costs under half of int64's."""
    return np.remainder(np.absolute(h.view(np.int32)).view(np.uint32), np.uint32(vector_size))


def _prepared(keys: KeysLike, tail: TailOrder) -> PreparedKeys | list[bytes]:
    """Keys ready for hashing (a short list stays a list for the scalar path); empty keys are rejected."""
    small = small_batch(keys)
    if small is not None:
        has_empty = any(len(key) == 0 for key in small)
    else:
        small = prepare_keys(keys, tail)
        has_empty = small.has_empty
    if has_empty:
        raise ValueError("bloom filter keys must not be empty (Java rejects zero-length keys)")
    return small


def _count(keys: PreparedKeys | list[bytes]) -> int:
    return len(keys) if isinstance(keys, list) else keys.size


class BloomHashes:
    """The hash chains of a batch of keys, computed once and tested against any number of filters (the bloom
    index checks a key against every candidate file). `chain[i, j]` is round i of key j (uint32)."""

    def __init__(self, keys: KeysLike, rounds: int, tail: TailOrder = TailOrder.HUDI) -> None:
        prepared = _prepared(keys, tail)
        self.tail_order = tail
        self.chain = murmur2_chain(prepared, rounds, tail).view(np.uint32) if _count(prepared) else \
            np.zeros((rounds, 0), dtype=np.uint32)

    @property
    def size(self) -> int:
        return int(self.chain.shape[1])

    @property
    def rounds(self) -> int:
        return int(self.chain.shape[0])


def _set_bits(bits: np.ndarray, positions: np.ndarray) -> None:
    flat = positions.ravel()
    if flat.size * _SCATTER_DENSITY < bits.size * 8:
        np.bitwise_or.at(bits, flat >> 3, np.left_shift(1, flat & 7).astype(np.uint8))
        return
    mask = np.zeros(bits.size * 8, dtype=bool)
    mask[flat] = True
    bits |= np.packbits(mask, bitorder="little")


def _rows_used(row_of: np.ndarray) -> np.ndarray:
    """Sorted distinct row indices (a bincount: far cheaper than np.unique's sort for a few small ints)."""
    return np.flatnonzero(np.bincount(row_of))


def _fill_streamed(rows: Sequence["SimpleBloomFilter"], prep: PreparedKeys, row_of: Optional[np.ndarray]) -> None:
    """Set the bits of all keys at once: the rows they go to share one boolean mask (row r at offset r * stride),
    each hash round is one scatter into it, and one packbits at the end. Rows must share their shape."""
    vector_size, num_hashes = rows[0].vector_size, rows[0].num_hashes
    stride = rows[0].bits.size * 8
    used = np.zeros(1, dtype=np.int64) if row_of is None else _rows_used(row_of)
    offsets = None
    if used.size > 1:
        offsets = np.searchsorted(used, row_of)[prep.order] * stride
    mask = np.zeros(stride * used.size, dtype=bool)
    for h in murmur2_rounds(prep, num_hashes):
        positions = java_positions(h, vector_size)
        mask[positions if offsets is None else positions + offsets] = True
    packed = np.packbits(mask, bitorder="little").reshape(used.size, -1)
    for local, row in enumerate(used.tolist()):
        rows[row]._bits |= packed[local]


def _fill_from_chain(rows: Sequence["SimpleBloomFilter"], keys: PreparedKeys | list[bytes],
                     row_of: Optional[np.ndarray], tail: TailOrder) -> None:
    """Set bits row by row from the keys' whole hash chain: few keys, or rows of different shapes."""
    chain = murmur2_chain(keys, max(row.num_hashes for row in rows), tail).view(np.uint32)
    targets = [(0, slice(None))] if row_of is None else [(r, row_of == r) for r in _rows_used(row_of).tolist()]
    for r, columns in targets:
        row = rows[r]
        _set_bits(row._bits, java_positions(chain[:row.num_hashes, columns], row.vector_size))


def _fill(rows: Sequence["SimpleBloomFilter"], keys: PreparedKeys | list[bytes], row_of: Optional[np.ndarray],
          tail: TailOrder) -> None:
    """Add `keys` to `rows` (key i to row `row_of[i]`, or all to rows[0])."""
    first = rows[0]
    uniform = all((row.vector_size, row.num_hashes) == (first.vector_size, first.num_hashes) for row in rows)
    rows_used = 1 if row_of is None else int(_rows_used(row_of).size)
    dense = _count(keys) * first.num_hashes * _SCATTER_DENSITY >= first.bits.size * 8 * rows_used
    if uniform and dense:
        _fill_streamed(rows, keys if isinstance(keys, PreparedKeys) else prepare_keys(keys, tail), row_of)
    else:
        _fill_from_chain(rows, keys, row_of, tail)


def _probe(rows: Sequence["SimpleBloomFilter"], chain: np.ndarray) -> np.ndarray:
    """Per column of `chain`: might any row hold the key. A key leaves a row's test at its first unset bit,
    so an absent key costs about two rounds instead of nbHash."""
    found = np.zeros(chain.shape[1], dtype=bool)
    for row in rows:
        alive = np.flatnonzero(~found)
        bits = row.bits
        for i in range(row.num_hashes):
            if not alive.size:
                break
            positions = java_positions(chain[i, alive], row.vector_size)
            hit = (bits[positions >> 3] >> (positions & 7).astype(np.uint8)) & 1
            alive = alive[hit.view(bool)]
        found[alive] = True
    return found


def _check_hash_type(hash_type: int) -> None:
    if hash_type != MURMUR_HASH:
        raise NotImplementedError(f"only MURMUR (1) bloom hashing is supported, filter uses hash type {hash_type}")


class BloomFilter(ABC):
    """A Hudi bloom filter over record keys (hashed as UTF-8). `tail_order` is how its keys were hashed: Hudi's
    order for every filter but those this engine wrote before it followed Hudi (nothing in the serialized
    filter tells them apart: the reader of a footer decides, see `storage.index.key_lookup`)."""

    def __init__(self, vector_size: int, num_hashes: int, hash_type: int,
                 tail: TailOrder = TailOrder.HUDI) -> None:
        if vector_size <= 0 or num_hashes <= 0:
            raise ValueError(f"invalid bloom filter shape: vectorSize={vector_size}, nbHash={num_hashes}")
        self._vector_size = vector_size
        self._num_hashes = num_hashes
        self._hash_type = hash_type
        self.tail_order = tail

    @property
    @abstractmethod
    def type_code(self) -> str:
        """Value of the footer key `hoodie_bloom_filter_type_code`."""

    @property
    def vector_size(self) -> int:
        return self._vector_size

    @property
    def num_hashes(self) -> int:
        return self._num_hashes

    @property
    def hash_type(self) -> int:
        return self._hash_type

    @property
    def max_hashes(self) -> int:
        """Hash rounds a key needs to be tested against every row (the `rounds` of `BloomHashes`)."""
        return max(row.num_hashes for row in self._row_filters())

    def add(self, key: str) -> None:
        self.add_keys([key])

    def add_keys(self, keys: KeysLike) -> None:
        """Add keys in the given order (order matters for DYNAMIC row filling)."""
        self._check_hash_types()
        prepared = _prepared(keys, self.tail_order)
        if _count(prepared):
            self._add_prepared(prepared)

    def might_contain(self, key: str) -> bool:
        return bool(self.might_contain_many([key])[0])

    def might_contain_many(self, keys: KeysLike) -> np.ndarray:
        """Boolean per key: False means definitely absent."""
        self._check_hash_types()
        return self.might_contain_hashed(BloomHashes(keys, self.max_hashes, self.tail_order))

    def might_contain_hashed(self, hashes: BloomHashes, columns: Optional[np.ndarray] = None) -> np.ndarray:
        """`might_contain_many` for keys hashed already (all of `hashes`, or its key indices `columns`)."""
        self._check_hash_types()
        if hashes.tail_order is not self.tail_order:
            raise ValueError(f"keys hashed with the {hashes.tail_order.value} tail order, the filter uses "
                             f"{self.tail_order.value}")
        if hashes.rounds < self.max_hashes:
            raise ValueError(f"keys hashed {hashes.rounds} times, the filter needs {self.max_hashes}")
        return _probe(self._row_filters(), hashes.chain if columns is None else hashes.chain[:, columns])

    def serialize(self) -> str:
        """Base64 text exactly as Java Hudi stores it in the parquet footer."""
        return base64.b64encode(self.to_bytes()).decode("ascii")

    @abstractmethod
    def to_bytes(self) -> bytes:
        """The Java DataOutput stream of this filter."""

    @abstractmethod
    def keys_held(self) -> int:
        """How many keys were added (an estimate from the bits set, for a filter that does not count them)."""

    def _header(self) -> bytes:
        return _HEADER.pack(_FILTER_VERSION, self._num_hashes, self._hash_type, self._vector_size)

    def _check_hash_types(self) -> None:
        for row in self._row_filters():
            _check_hash_type(row.hash_type)

    @abstractmethod
    def _row_filters(self) -> Sequence["SimpleBloomFilter"]:
        """The bit vectors a key is tested against (any match = might contain)."""

    @abstractmethod
    def _add_prepared(self, keys: PreparedKeys | list[bytes]) -> None: ...


class SimpleBloomFilter(BloomFilter):
    """One bit vector (Hudi's SimpleBloomFilter over Hadoop's BloomFilter)."""

    def __init__(self, num_entries: int, fpp: float) -> None:
        vector_size, num_hashes = bloom_sizing(num_entries, fpp)
        self._init_vector(vector_size, num_hashes, MURMUR_HASH, None)

    @classmethod
    def from_parameters(cls, vector_size: int, num_hashes: int, hash_type: int = MURMUR_HASH,
                        bits: Optional[np.ndarray] = None) -> "SimpleBloomFilter":
        """A filter with an explicit shape (dynamic-filter rows, deserialization)."""
        bloom = cls.__new__(cls)
        bloom._init_vector(vector_size, num_hashes, hash_type, bits)
        return bloom

    def _init_vector(self, vector_size: int, num_hashes: int, hash_type: int, bits: Optional[np.ndarray]) -> None:
        BloomFilter.__init__(self, vector_size, num_hashes, hash_type)
        nbytes = (vector_size + 7) // 8
        self._bits = np.zeros(nbytes, dtype=np.uint8) if bits is None else np.array(bits, dtype=np.uint8)
        if self._bits.size != nbytes:
            raise ValueError(f"bit vector has {self._bits.size} bytes, expected {nbytes}")
        self._clear_padding_bits()

    def _clear_padding_bits(self) -> None:
        """Java reads only `vectorSize` bits back, so bits past the end never survive a round trip."""
        extra = self._bits.size * 8 - self._vector_size
        if extra:
            self._bits[-1] &= np.uint8(0xFF >> extra)

    @property
    def type_code(self) -> str:
        return SIMPLE

    @property
    def bits(self) -> np.ndarray:
        """The bit vector (bit i = byte i // 8, mask 1 << i % 8); read-only view."""
        view = self._bits.view()
        view.flags.writeable = False
        return view

    def to_bytes(self) -> bytes:
        return self._header() + self._bits.tobytes()

    def keys_held(self) -> int:
        # Swamidass and Baldi's estimate: n = -(m / k) ln(1 - X / m) with X of the m bits set by k hashes a key
        ones = int(_POPCOUNT[self._bits].sum(dtype=np.int64))
        m, k = self._vector_size, self._num_hashes
        return round(-m / k * math.log1p(-ones / m)) if ones < m else 1 << 62

    def _row_filters(self) -> Sequence["SimpleBloomFilter"]:
        return (self,)

    def _add_prepared(self, keys: PreparedKeys | list[bytes]) -> None:
        _fill((self,), keys, None, self.tail_order)


class DynamicBloomFilter(BloomFilter):
    """Hudi's HoodieDynamicBoundedBloomFilter: rows of `num_entries` keys each, a new row every `num_entries`
    keys while rows * num_entries < max_entries; after that keys go round-robin over the existing rows.
    A key might be present if any row says so."""

    def __init__(self, num_entries: int, fpp: float, max_entries: int) -> None:
        vector_size, num_hashes = bloom_sizing(num_entries, fpp)
        BloomFilter.__init__(self, vector_size, num_hashes, MURMUR_HASH)
        self._nr = num_entries
        self._current = 0
        self._max_entries = max_entries
        self._reached_max = False
        self._round_robin = 0
        self._rows = [self._new_row()]

    @classmethod
    def _from_state(cls, header: tuple[int, int, int], nr: int, current: int,
                    rows: list[SimpleBloomFilter]) -> "DynamicBloomFilter":
        """A deserialized filter. Like Java, the bound is not serialized and reads back as 0, so keys added
        after a full row go round-robin over the existing rows."""
        if nr <= 0:
            raise ValueError(f"invalid dynamic bloom filter: entries per row {nr}")
        bloom = cls.__new__(cls)
        BloomFilter.__init__(bloom, *header)
        bloom._nr, bloom._current, bloom._max_entries = nr, current, 0
        bloom._reached_max, bloom._round_robin = False, 0
        bloom._rows = rows
        return bloom

    @property
    def type_code(self) -> str:
        return DYNAMIC_V0

    @property
    def num_entries(self) -> int:
        """Keys per row (Java `nr`)."""
        return self._nr

    @property
    def max_entries(self) -> int:
        return self._max_entries

    @property
    def current_row_count(self) -> int:
        """Java `currentNbRecord`: keys added since the last row was opened (keeps counting past the bound)."""
        return self._current

    def set_bound(self, max_entries: int) -> None:
        """The bound on rows * entries per row a filter read back lacks, so that it grows as when it was built."""
        self._max_entries = max_entries

    @property
    def rows(self) -> tuple[SimpleBloomFilter, ...]:
        return tuple(self._rows)

    @property
    def num_rows(self) -> int:
        return len(self._rows)

    def keys_held(self) -> int:
        return (len(self._rows) - 1) * self._nr + self._current  # the last row's count runs on past the bound

    def to_bytes(self) -> bytes:
        state = _DYNAMIC_STATE.pack(self._nr, to_int32(self._current), len(self._rows))
        return b"".join([self._header(), state, *(row.to_bytes() for row in self._rows)])

    def _new_row(self) -> SimpleBloomFilter:
        return SimpleBloomFilter.from_parameters(self._vector_size, self._num_hashes, self._hash_type)

    def _row_filters(self) -> Sequence[SimpleBloomFilter]:
        return self._rows

    def _assign_rows(self, count: int) -> np.ndarray:
        """Row index of each of the next `count` keys, advancing the fill state exactly as Java's add()."""
        rows = np.empty(count, dtype=np.int64)
        done = 0
        while done < count and not self._reached_max:
            if self._current < self._nr:
                take = min(count - done, self._nr - self._current)
                rows[done:done + take] = len(self._rows) - 1
                done += take
                self._current += take
            elif to_int32(len(self._rows) * self._nr) < self._max_entries:
                self._rows.append(self._new_row())
                self._current = 0
            else:  # bound reached: this key goes to row 0, later ones round-robin from row 0
                self._reached_max = True
                rows[done] = 0
                done += 1
                self._current += 1
        rest = count - done
        if rest:
            rows[done:] = (self._round_robin + np.arange(rest)) % len(self._rows)
            self._round_robin += rest
            self._current += rest
        return rows

    def _add_prepared(self, keys: PreparedKeys | list[bytes]) -> None:
        rows = self._assign_rows(_count(keys))
        _fill(self._rows, keys, None if (rows == 0).all() else rows, self.tail_order)


class _Reader:
    """Big-endian reads from a Java DataOutput byte stream."""

    def __init__(self, data: bytes) -> None:
        self._data = data
        self._pos = 0

    def unpack(self, fmt: struct.Struct) -> tuple:
        values = fmt.unpack_from(self._data, self._pos) if self._pos + fmt.size <= len(self._data) else None
        if values is None:
            raise ValueError("truncated bloom filter")
        self._pos += fmt.size
        return values

    def take(self, size: int) -> bytes:
        if self._pos + size > len(self._data):
            raise ValueError("truncated bloom filter")
        chunk = self._data[self._pos:self._pos + size]
        self._pos += size
        return chunk


_INT = struct.Struct(">i")
_BYTE = struct.Struct(">b")


def _read_header(reader: _Reader) -> tuple[int, int, int]:
    """(vectorSize, nbHash, hashType); a positive first int is Hadoop's old unversioned layout (Jenkins)."""
    (version,) = reader.unpack(_INT)
    if version == _FILTER_VERSION:
        (num_hashes,) = reader.unpack(_INT)
        (hash_type,) = reader.unpack(_BYTE)
    elif version > 0:
        num_hashes, hash_type = version, JENKINS_HASH
    else:
        raise ValueError(f"unsupported bloom filter version {version}")
    (vector_size,) = reader.unpack(_INT)
    return vector_size, num_hashes, hash_type


def _read_simple(reader: _Reader) -> SimpleBloomFilter:
    vector_size, num_hashes, hash_type = _read_header(reader)
    if vector_size <= 0:
        raise ValueError(f"invalid bloom filter vector size {vector_size}")
    bits = np.frombuffer(reader.take((vector_size + 7) // 8), dtype=np.uint8)
    return SimpleBloomFilter.from_parameters(vector_size, num_hashes, hash_type, bits)


def _read_dynamic(reader: _Reader) -> DynamicBloomFilter:
    header = _read_header(reader)
    nr, current, count = reader.unpack(_DYNAMIC_STATE)
    if count <= 0:
        raise ValueError(f"invalid dynamic bloom filter row count {count}")
    rows = [_read_simple(reader) for _ in range(count)]
    return DynamicBloomFilter._from_state(header, nr, current, rows)


def _normalize_type_code(type_code: str | bytes | None) -> str:
    if isinstance(type_code, bytes):
        type_code = type_code.decode("utf-8")
    code = (type_code or SIMPLE).strip().upper()
    if code not in (SIMPLE, DYNAMIC_V0):
        raise ValueError(f"unknown bloom filter type code {type_code!r}")
    return code


def deserialize_bloom_filter(type_code: str | bytes | None, text: str | bytes,
                             tail: TailOrder = TailOrder.HUDI) -> BloomFilter:
    """Parse a footer bloom filter; `type_code` is the `hoodie_bloom_filter_type_code` value (None = SIMPLE),
    `tail` how its keys were hashed (Hudi's order unless the footer says otherwise)."""
    try:
        raw = base64.b64decode(text, validate=True)
    except binascii.Error as exc:
        raise ValueError(f"bloom filter is not valid Base64: {exc}") from exc
    reader = _Reader(raw)
    bloom = _read_simple(reader) if _normalize_type_code(type_code) == SIMPLE else _read_dynamic(reader)
    bloom.tail_order = tail
    return bloom


def continued_bloom_filter(stored: BloomFilter, filter_type: str = DYNAMIC_V0, num_entries: int = 60000,
                           fpp: float = 1e-9, max_entries: int = 100000) -> Optional[BloomFilter]:
    """`stored` (a file's footer filter) ready to take more keys as a filter of these settings being built would,
    or None when it was built with other settings. A dynamic filter gets back its bound on rows (Java does not
    serialize it: read back, it would put every further key into its existing rows)."""
    fresh = create_bloom_filter(filter_type, num_entries, fpp, max_entries)
    if (type(fresh) is not type(stored) or stored.tail_order is not fresh.tail_order
            or (fresh.vector_size, fresh.num_hashes, fresh.hash_type) != (stored.vector_size, stored.num_hashes,
                                                                          stored.hash_type)):
        return None
    if isinstance(stored, DynamicBloomFilter):
        if stored.num_entries != fresh.num_entries:
            return None
        stored.set_bound(fresh.max_entries)
    return stored


def empty_like(stored: BloomFilter, tail: TailOrder = TailOrder.HUDI) -> BloomFilter:
    """An empty filter of `stored`'s type and shape hashing in `tail` order: the same keys added in the same order
    give it `stored`'s rows (a dynamic filter bounded at the rows it has, as its unserialized bound must have been
    or its keys filled)."""
    if isinstance(stored, DynamicBloomFilter):
        header = (stored.vector_size, stored.num_hashes, stored.hash_type)
        fresh = DynamicBloomFilter._from_state(header, stored.num_entries, 0, [stored._new_row()])
        fresh.set_bound(stored.num_rows * stored.num_entries)
    else:
        fresh = SimpleBloomFilter.from_parameters(stored.vector_size, stored.num_hashes, stored.hash_type)
    fresh.tail_order = tail
    return fresh


def create_bloom_filter(filter_type: str = DYNAMIC_V0, num_entries: int = 60000, fpp: float = 1e-9,
                        max_entries: int = 100000) -> BloomFilter:
    """A new, empty filter; defaults are Hudi's (hoodie.bloom.index.filter.type, hoodie.index.bloom.num_entries,
    hoodie.index.bloom.fpp, hoodie.bloom.index.filter.dynamic.max.entries)."""
    if _normalize_type_code(filter_type) == SIMPLE:
        return SimpleBloomFilter(num_entries, fpp)
    return DynamicBloomFilter(num_entries, fpp, max_entries)


@dataclass(frozen=True)
class BloomFilterSettings:
    """How the record-key bloom filter of a file is built: a write's hoodie.bloom.index.filter.type,
    hoodie.index.bloom.num_entries, hoodie.index.bloom.fpp and hoodie.bloom.index.filter.dynamic.max.entries
    (defaults Hudi's). Small and picklable: task contexts carry it."""

    filter_type: str = DYNAMIC_V0
    num_entries: int = 60000
    fpp: float = 1e-9
    max_entries: int = 100000

    @classmethod
    def of(cls, config: HoodieConfig) -> "BloomFilterSettings":
        return cls(config.get(WK.BLOOM_FILTER_TYPE), config.get(WK.BLOOM_NUM_ENTRIES), config.get(WK.BLOOM_FPP),
                   config.get(WK.BLOOM_DYNAMIC_MAX_ENTRIES))

    def new_filter(self) -> BloomFilter:
        return create_bloom_filter(self.filter_type, self.num_entries, self.fpp, self.max_entries)

    def continued(self, stored: BloomFilter) -> Optional[BloomFilter]:
        """`continued_bloom_filter` of `stored` with these settings."""
        return continued_bloom_filter(stored, self.filter_type, self.num_entries, self.fpp, self.max_entries)
