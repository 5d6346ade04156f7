"""Hudi's record-key bloom filters (SIMPLE and DYNAMIC_V0), byte-compatible with what Java Hudi stores in the
parquet footer key `org.apache.hudi.bloomfilter`.

The bloom index reads these footers to skip files that cannot hold a key, and Java Hudi reads the footers we
write, so sizing, hashing, bit order, row growth and the serialized layout all follow the Java behaviour
(spec section 7). Bits live in numpy uint8 vectors and keys are hashed in batches (see `murmur.py`).
"""
from __future__ import annotations

import base64
import binascii
import math
import struct
from abc import ABC, abstractmethod
from typing import Optional

import numpy as np

from storage.bloom.murmur import KeysLike, murmur2_chain, prepare_keys, small_batch, to_int32

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


class _HashedKeys:
    """Hash chains of one key batch, shared by every row of a dynamic filter (rows hash identically)."""

    def __init__(self, keys: KeysLike, num_hashes: int) -> None:
        prepared = small_batch(keys)
        if prepared is None:
            prepared = prepare_keys(keys)
            has_empty = prepared.has_empty
        else:
            has_empty = any(len(key) == 0 for key in prepared)
        if has_empty:
            raise ValueError("bloom filter keys must not be empty (Java rejects zero-length keys)")
        self._chain = murmur2_chain(prepared, num_hashes)
        self.size = int(self._chain.shape[1])
        self._positions: dict[tuple[int, int], np.ndarray] = {}

    def positions(self, vector_size: int, num_hashes: int) -> np.ndarray:
        """int64 bit positions, shape (num_hashes, n): Java's `Math.abs(h % vectorSize)`."""
        cache_key = (vector_size, num_hashes)
        if cache_key not in self._positions:
            self._positions[cache_key] = np.abs(self._chain[:num_hashes].astype(np.int64)) % vector_size
        return self._positions[cache_key]


def _set_bits(bits: np.ndarray, positions: np.ndarray) -> None:
    flat = positions.ravel()
    if flat.size * _SCATTER_DENSITY < bits.size * 8:
        np.bitwise_or.at(bits, flat >> 3, np.left_shift(1, flat & 7).astype(np.uint8))
        return
    mask = np.zeros(bits.size * 8, dtype=bool)
    mask[flat] = True
    bits |= np.packbits(mask, bitorder="little")


def _test_bits(bits: np.ndarray, positions: np.ndarray) -> np.ndarray:
    """Per key (column): are all its bits set."""
    hits = (bits[positions >> 3] >> (positions & 7).astype(np.uint8)) & 1
    return hits.all(axis=0)


def _check_hash_type(hash_type: int) -> None:
    if hash_type != MURMUR_HASH:
        raise NotImplementedError(f"only MURMUR (1) bloom hashing is supported, filter uses hash type {hash_type}")


class BloomFilter(ABC):
    """A Hudi bloom filter over record keys (hashed as UTF-8)."""

    def __init__(self, vector_size: int, num_hashes: int, hash_type: int) -> None:
        if vector_size <= 0 or num_hashes <= 0:
            raise ValueError(f"invalid bloom filter shape: vectorSize={vector_size}, nbHash={num_hashes}")
        self._vector_size = vector_size
        self._num_hashes = num_hashes
        self._hash_type = hash_type

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

    def add(self, key: str) -> None:
        self.add_keys([key])

    def add_keys(self, keys: KeysLike) -> None:
        """Add keys in the given order (order matters for DYNAMIC row filling)."""
        hashed = self._hash(keys)
        if hashed.size:
            self._add_hashed(hashed)

    def might_contain(self, key: str) -> bool:
        return bool(self.might_contain_many([key])[0])

    def might_contain_many(self, keys: KeysLike) -> np.ndarray:
        """Boolean per key: False means definitely absent."""
        hashed = self._hash(keys)
        if not hashed.size:
            return np.zeros(0, dtype=bool)
        return self._test_hashed(hashed)

    def serialize(self) -> str:
        """Base64 text exactly as Java Hudi stores it in the parquet footer."""
        return base64.b64encode(self.to_bytes()).decode("ascii")

    @abstractmethod
    def to_bytes(self) -> bytes:
        """The Java DataOutput stream of this filter."""

    def _header(self) -> bytes:
        return _HEADER.pack(_FILTER_VERSION, self._num_hashes, self._hash_type, self._vector_size)

    def _hash(self, keys: KeysLike) -> _HashedKeys:
        _check_hash_type(self._hash_type)
        return _HashedKeys(keys, self._max_hashes())

    def _max_hashes(self) -> int:
        return self._num_hashes

    @abstractmethod
    def _add_hashed(self, hashed: _HashedKeys) -> None: ...

    @abstractmethod
    def _test_hashed(self, hashed: _HashedKeys) -> np.ndarray: ...


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

    def _add_hashed(self, hashed: _HashedKeys, columns: Optional[np.ndarray] = None) -> None:
        positions = hashed.positions(self._vector_size, self._num_hashes)
        _set_bits(self._bits, positions if columns is None else positions[:, columns])

    def _test_hashed(self, hashed: _HashedKeys) -> np.ndarray:
        return _test_bits(self._bits, hashed.positions(self._vector_size, self._num_hashes))


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

    @property
    def rows(self) -> tuple[SimpleBloomFilter, ...]:
        return tuple(self._rows)

    @property
    def num_rows(self) -> int:
        return len(self._rows)

    def to_bytes(self) -> bytes:
        state = _DYNAMIC_STATE.pack(self._nr, to_int32(self._current), len(self._rows))
        return b"".join([self._header(), state, *(row.to_bytes() for row in self._rows)])

    def _new_row(self) -> SimpleBloomFilter:
        return SimpleBloomFilter.from_parameters(self._vector_size, self._num_hashes, self._hash_type)

    def _max_hashes(self) -> int:
        for row in self._rows:
            _check_hash_type(row.hash_type)
        return max(row.num_hashes for row in self._rows)

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

    def _add_hashed(self, hashed: _HashedKeys) -> None:
        rows = self._assign_rows(hashed.size)
        if (rows == rows[0]).all():
            self._rows[int(rows[0])]._add_hashed(hashed)
            return
        for row in np.unique(rows).tolist():
            self._rows[row]._add_hashed(hashed, np.flatnonzero(rows == row))

    def _test_hashed(self, hashed: _HashedKeys) -> np.ndarray:
        found = np.zeros(hashed.size, dtype=bool)
        for row in self._rows:
            found |= row._test_hashed(hashed)
        return found


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


def deserialize_bloom_filter(type_code: str | bytes | None, text: str | bytes) -> BloomFilter:
    """Parse a footer bloom filter; `type_code` is the `hoodie_bloom_filter_type_code` value (None = SIMPLE)."""
    try:
        raw = base64.b64decode(text, validate=True)
    except binascii.Error as exc:
        raise ValueError(f"bloom filter is not valid Base64: {exc}") from exc
    reader = _Reader(raw)
    if _normalize_type_code(type_code) == SIMPLE:
        return _read_simple(reader)
    return _read_dynamic(reader)


def create_bloom_filter(filter_type: str = DYNAMIC_V0, num_entries: int = 60000, fpp: float = 1e-9,
                        max_entries: int = 100000) -> BloomFilter:
    """A new, empty filter; defaults are Hudi's (hoodie.bloom.index.filter.type, hoodie.index.bloom.num_entries,
    hoodie.index.bloom.fpp, hoodie.bloom.index.filter.dynamic.max.entries)."""
    if _normalize_type_code(filter_type) == SIMPLE:
        return SimpleBloomFilter(num_entries, fpp)
    return DynamicBloomFilter(num_entries, fpp, max_entries)
