"""Hudi record-key bloom filters (SIMPLE, DYNAMIC_V0), byte-compatible with Java Hudi's parquet footers."""
from storage.bloom.bloom_filter import (
    BLOOM_FILTER_FOOTER_KEY,
    BLOOM_FILTER_TYPE_CODE_KEY,
    DYNAMIC_V0,
    MAX_RECORD_KEY_FOOTER,
    MIN_RECORD_KEY_FOOTER,
    SIMPLE,
    BloomFilter,
    BloomHashes,
    DynamicBloomFilter,
    SimpleBloomFilter,
    bloom_sizing,
    create_bloom_filter,
    deserialize_bloom_filter,
    java_positions,
)
from storage.bloom.murmur import murmur2, murmur2_chain, murmur2_many

__all__ = [
    "BLOOM_FILTER_FOOTER_KEY",
    "BLOOM_FILTER_TYPE_CODE_KEY",
    "DYNAMIC_V0",
    "MAX_RECORD_KEY_FOOTER",
    "MIN_RECORD_KEY_FOOTER",
    "SIMPLE",
    "BloomFilter",
    "BloomHashes",
    "DynamicBloomFilter",
    "SimpleBloomFilter",
    "bloom_sizing",
    "create_bloom_filter",
    "deserialize_bloom_filter",
    "java_positions",
    "murmur2",
    "murmur2_chain",
    "murmur2_many",
]
