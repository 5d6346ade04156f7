"""A base file's bloom filter as its parquet footer holds it, and how its keys were hashed.

Java Hudi, and this engine since it hashes as Hudi does, hash keys in Hudi's tail order. This engine wrote its
footers in Hadoop's order before that (`TailOrder.HADOOP`): such a filter does not hold its keys as Java or
our current code probe them. The serialized filter cannot tell the two apart, so a footer this engine writes now
also carries `hoodie_bloom_filter_tail_order` (Java ignores footer keys it does not know) and the order is decided:
- the footer names it: that order;
- no name, and the file was written by Arrow's parquet writer (`created_by` "parquet-cpp..."): this engine's
  footers before the marker, so Hadoop's order (probed that way they are as exact as when they were written);
- otherwise (Java's parquet-mr, any other writer): Hudi's order.
`CALL repair_bloom_filters` rewrites the legacy footers of a table so that Java writers find its keys too.
"""
from __future__ import annotations

from typing import Optional

import pyarrow.parquet as pq

from storage.bloom.bloom_filter import (
    BLOOM_FILTER_FOOTER_KEY,
    BLOOM_FILTER_TYPE_CODE_KEY,
    MAX_RECORD_KEY_FOOTER,
    MIN_RECORD_KEY_FOOTER,
    BloomFilter,
    deserialize_bloom_filter,
)
from storage.bloom.murmur import TailOrder

BLOOM_FILTER_TAIL_ORDER_KEY = "hoodie_bloom_filter_tail_order"
ARROW_WRITER = "parquet-cpp"  # `created_by` of the parquet files this engine writes (pyarrow)


def written_by_arrow(metadata: pq.FileMetaData) -> bool:
    return str(metadata.created_by or "").startswith(ARROW_WRITER)


def footer_tail_order(metadata: pq.FileMetaData) -> TailOrder:
    """How the keys of this file's footer filter were hashed (module doc)."""
    named = (metadata.metadata or {}).get(BLOOM_FILTER_TAIL_ORDER_KEY.encode())
    if named is not None:
        try:
            return TailOrder(named.decode("ascii", errors="replace").strip().lower())
        except ValueError as exc:
            raise ValueError(f"unknown {BLOOM_FILTER_TAIL_ORDER_KEY} {named!r}") from exc
    return TailOrder.HADOOP if written_by_arrow(metadata) else TailOrder.HUDI


def footer_bloom_filter(metadata: pq.FileMetaData) -> Optional[BloomFilter]:
    """The footer's filter, set to hash keys as it was built; None when the footer has none.
    Raises ValueError / NotImplementedError for a filter that cannot be read."""
    meta = metadata.metadata or {}
    text = meta.get(BLOOM_FILTER_FOOTER_KEY.encode())
    if text is None:
        return None
    return deserialize_bloom_filter(meta.get(BLOOM_FILTER_TYPE_CODE_KEY.encode()), text, footer_tail_order(metadata))


def footer_key_range(metadata: pq.FileMetaData) -> tuple[Optional[str], Optional[str]]:
    """(`hoodie_min_record_key`, `hoodie_max_record_key`) of the footer; None where it has none."""
    meta = metadata.metadata or {}
    values = (meta.get(MIN_RECORD_KEY_FOOTER.encode()), meta.get(MAX_RECORD_KEY_FOOTER.encode()))
    low, high = (None if v is None else v.decode("utf-8", errors="replace") for v in values)
    return low, high


def footer_own_keys(metadata: pq.FileMetaData) -> list[str]:
    """The footer's min and max record keys (two keys its filter must hold), where present."""
    return [k for k in footer_key_range(metadata) if k]


def is_legacy_footer(metadata: pq.FileMetaData) -> bool:
    """A footer filter this engine hashed in Hadoop's order (what `CALL repair_bloom_filters` rewrites)."""
    meta = metadata.metadata or {}
    return BLOOM_FILTER_FOOTER_KEY.encode() in meta and footer_tail_order(metadata) is TailOrder.HADOOP
