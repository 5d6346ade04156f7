"""The per-file step of the bloom index (Hudi's HoodieKeyLookupHandle / HoodieRangeInfoHandle): read a base
file's footer, let its bloom filter drop the candidate keys the file cannot hold, then check the rest exactly
against the file's `_hoodie_record_key` column. Runs inside Spark tasks.

A footer filter is probed the way its keys were hashed (`storage.bloom.footer`: Hudi's order, or Hadoop's for
the footers this engine wrote before it followed Hudi). It is trusted only if it holds the footer's own min and
max record keys: two probes a file, kept because a footer we cannot vouch for (a corrupt one, or an Arrow-written
one that does not name its order) must cost a read, never a lost update. A filter that fails this check, or
cannot be parsed, is not used: every candidate key of that file goes to the exact check.
"""
from __future__ import annotations

import copy
import logging
import threading
from collections import OrderedDict
from typing import Optional

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from storage.bloom import BloomFilter, TailOrder, footer
from storage.bloom.footer import BLOOM_FILTER_TAIL_ORDER_KEY, footer_bloom_filter, footer_own_keys
from storage.io.parquet import parquet_file
from storage.io.storage import HoodieStorage
from storage.io.storage_options import StorageOptions
from storage.meta_fields import RECORD_KEY

log = logging.getLogger(__name__)


def footer_key_range(path: str, options: StorageOptions) -> tuple[Optional[str], Optional[str]]:
    """(`hoodie_min_record_key`, `hoodie_max_record_key`) of a base file; None where the footer has none."""
    return footer.footer_key_range(parquet_file(HoodieStorage.for_path(path, options), path).metadata)


_DECODED = 16  # footer filters kept decoded per process (each up to ~1 MB)
_decoded: OrderedDict[tuple, Optional[BloomFilter]] = OrderedDict()
_decoded_lock = threading.Lock()


def trusted_bloom_filter(metadata: pq.FileMetaData, path: str) -> Optional[BloomFilter]:
    """The footer's bloom filter (the caller's own copy: it may add keys to it), or None when there is none or it
    is not to be trusted (see module doc). A write decodes a file's filter twice, for the lookup and for the file
    that replaces it, and decoding is most of the cost: the last few are kept decoded, keyed by path and footer (a
    base file is never rewritten in place, except by the bloom repair, whose new footer differs in size)."""
    key = (path, metadata.serialized_size, metadata.num_rows)
    with _decoded_lock:
        if key in _decoded:
            _decoded.move_to_end(key)
            kept = _decoded[key]
            return copy.deepcopy(kept) if kept is not None else None
    bloom = _trusted_bloom_filter(metadata, path)
    with _decoded_lock:
        _decoded[key] = copy.deepcopy(bloom) if bloom is not None else None
        while len(_decoded) > _DECODED:
            _decoded.popitem(last=False)
    return bloom


def _trusted_bloom_filter(metadata: pq.FileMetaData, path: str) -> Optional[BloomFilter]:
    try:
        bloom = footer_bloom_filter(metadata)
    except (ValueError, NotImplementedError) as exc:
        log.warning("bloom filter footer of %s is unusable (%s): checking its keys exactly", path, exc)
        return None
    if bloom is None:
        return None
    own = footer_own_keys(metadata)
    if bloom.tail_order is TailOrder.HADOOP and BLOOM_FILTER_TAIL_ORDER_KEY.encode() not in metadata.metadata:
        return _unmarked_arrow_filter(bloom, own, path)
    if not own or bloom.might_contain_many(own).all():
        return bloom
    log.warning("bloom filter footer of %s does not contain the file's own min/max record keys: "
                "not used, its keys are checked exactly", path)
    return None


def _unmarked_arrow_filter(bloom: BloomFilter, own: list[str], path: str) -> Optional[BloomFilter]:
    """An Arrow-written footer that does not name its hash order: this engine's before it hashed as Hudi does
    (Hadoop's order), or another Arrow-based writer's (Hudi's). Its own min/max keys decide, when exactly one order
    holds them; keys of 0 or 1 bytes past their last 4-byte block hash alike in both orders and cannot, and then the
    filter is not used (`CALL repair_bloom_filters` makes such footers trusted again)."""
    holds = []
    for order in (TailOrder.HADOOP, TailOrder.HUDI):
        bloom.tail_order = order
        if own and bloom.might_contain_many(own).all():
            holds.append(order)
    if len(holds) == 1:
        bloom.tail_order = holds[0]
        return bloom
    log.info("bloom filter footer of %s does not name its hash order and its min/max keys do not tell: its keys "
             "are checked exactly", path)
    return None


def keys_in_file(path: str, candidates: pa.Array, options: StorageOptions | None = None,
                 bloom: BloomFilter | None = None, probe_bloom: bool = True) -> pa.Array:
    """The distinct `candidates` that the base file at `path` holds. `bloom`: the file's filter as the metadata
    table holds it (else the footer's is read); when it rules every candidate out the file is not opened.
    `probe_bloom` False: no filter, the key column is read (the simple index)."""
    keys = pc.unique(candidates)
    if bloom is not None and len(keys):
        keys = keys.filter(pa.array(bloom.might_contain_many(keys)))
        if not len(keys):
            return keys
    with parquet_file(HoodieStorage.for_path(path, options or StorageOptions()), path) as parquet:
        if bloom is None and probe_bloom:
            keys = bloom_candidates(parquet, path, keys)
        return exact_matches(parquet, keys) if len(keys) else keys


def bloom_candidates(parquet: pq.ParquetFile, path: str, keys: pa.Array) -> pa.Array:
    """The `keys` the file's footer bloom filter does not rule out (all of them without a trusted filter)."""
    bloom = trusted_bloom_filter(parquet.metadata, path)
    if bloom is None or not len(keys):
        return keys
    return keys.filter(pa.array(bloom.might_contain_many(keys)))


def exact_matches(parquet: pq.ParquetFile, keys: pa.Array) -> pa.Array:
    """The `keys` stored in the file's record key column (the only column read; one thread: a Spark task's). The
    stored keys are probed against the candidates (a hash table of the few candidates, not of the whole file)."""
    stored = parquet.read(columns=[RECORD_KEY], use_threads=False).column(0).combine_chunks().cast(keys.type)
    return pc.unique(stored.filter(pc.is_in(stored, value_set=keys)))  # a file may repeat a key (inserts)
