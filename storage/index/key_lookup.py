"""The per-file step of the bloom index (Hudi's HoodieKeyLookupHandle / HoodieRangeInfoHandle): read a base
file's footer, let its bloom filter drop the candidate keys the file cannot hold, then check the rest exactly
against the file's `_hoodie_record_key` column. Runs inside Spark tasks.

A footer bloom filter is trusted only if it contains the footer's own min and max record keys (two keys the
writer put in the file). Some Java-written footers do not cover their file's keys (see the fixture xfails in
tests/storage/bloom); a filter that fails this check, or cannot be parsed, is not used: every candidate key of
that file goes to the exact check, so a wrong footer costs a read, never a lost update.
"""
from __future__ import annotations

import logging
from typing import Optional

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from storage.bloom import (
    BLOOM_FILTER_FOOTER_KEY,
    BLOOM_FILTER_TYPE_CODE_KEY,
    MAX_RECORD_KEY_FOOTER,
    MIN_RECORD_KEY_FOOTER,
    BloomFilter,
    deserialize_bloom_filter,
)
from storage.io.parquet import parquet_file
from storage.io.storage import HoodieStorage
from storage.io.storage_options import StorageOptions
from storage.meta_fields import RECORD_KEY

log = logging.getLogger(__name__)


def footer_key_range(path: str, options: StorageOptions) -> tuple[Optional[str], Optional[str]]:
    """(`hoodie_min_record_key`, `hoodie_max_record_key`) of a base file; None where the footer has none."""
    meta = parquet_file(HoodieStorage.for_path(path, options), path).metadata.metadata or {}
    return _text(meta.get(MIN_RECORD_KEY_FOOTER.encode())), _text(meta.get(MAX_RECORD_KEY_FOOTER.encode()))


def _text(value: Optional[bytes]) -> Optional[str]:
    return None if value is None else value.decode("utf-8", errors="replace")


def trusted_bloom_filter(meta: dict[bytes, bytes], path: str) -> Optional[BloomFilter]:
    """The footer's bloom filter, or None when there is none or it is not to be trusted (see module doc)."""
    text = meta.get(BLOOM_FILTER_FOOTER_KEY.encode())
    if text is None:
        return None
    try:
        bloom = deserialize_bloom_filter(meta.get(BLOOM_FILTER_TYPE_CODE_KEY.encode()), text)
    except (ValueError, NotImplementedError) as exc:
        log.warning("bloom filter footer of %s is unusable (%s): checking its keys exactly", path, exc)
        return None
    own = [k for k in (_text(meta.get(MIN_RECORD_KEY_FOOTER.encode())),
                       _text(meta.get(MAX_RECORD_KEY_FOOTER.encode()))) if k]
    if own and not bloom.might_contain_many(own).all():
        log.warning("bloom filter footer of %s does not contain the file's own min/max record keys: "
                    "not used, its keys are checked exactly", path)
        return None
    return bloom


def keys_in_file(path: str, candidates: pa.Array, options: StorageOptions | None = None) -> pa.Array:
    """The distinct `candidates` that the base file at `path` holds."""
    with parquet_file(HoodieStorage.for_path(path, options or StorageOptions()), path) as parquet:
        keys = bloom_candidates(parquet, path, pc.unique(candidates))
        return exact_matches(parquet, keys) if len(keys) else keys


def bloom_candidates(parquet: pq.ParquetFile, path: str, keys: pa.Array) -> pa.Array:
    """The `keys` the file's footer bloom filter does not rule out (all of them without a trusted filter)."""
    bloom = trusted_bloom_filter(parquet.metadata.metadata or {}, path)
    if bloom is None or not len(keys):
        return keys
    return keys.filter(pa.array(bloom.might_contain_many(keys)))


def exact_matches(parquet: pq.ParquetFile, keys: pa.Array) -> pa.Array:
    """The `keys` stored in the file's record key column (the only column read; one thread: a Spark task's). The
    stored keys are probed against the candidates (a hash table of the few candidates, not of the whole file)."""
    stored = parquet.read(columns=[RECORD_KEY], use_threads=False).column(0).combine_chunks().cast(keys.type)
    return pc.unique(stored.filter(pc.is_in(stored, value_set=keys)))  # a file may repeat a key (inserts)
