"""The `bloom_filters` partition of the metadata table (`hoodie.metadata.index.bloom.filter.enable`): one record per
base file holding the bloom filter of its record keys, so that the BLOOM index (`hoodie.bloom.index.use.metadata`)
reads filters from a few MDT files instead of one footer per data file (Hudi's HoodieMetadataBloomFilter records,
notes §3.5).

- Key = b64(XXH64(partition)) + b64(MD5(file name)) (`keys.bloom_filter_key`); type 4; payload
  `HoodieMetadataBloomFilter{type, timestamp, bloomFilter, isDeleted}` with `bloomFilter` the UTF-8 bytes of the
  serialized filter exactly as the footer holds it (Hudi's readBloomFilterFromFile -> serializeToString), `type`
  the footer's type code (DYNAMIC_V0, SIMPLE) and `timestamp` the instant that wrote the record.
- Written for every new base file of a commit (and at initialisation for every latest base file), tombstoned
  (isDeleted, empty filter) when a clean deletes the file; a newer record of a key replaces an older one.
- A footer whose filter hashed keys in the legacy order of this engine's early files (storage.bloom.footer) is
  not indexed: without a record the BLOOM index checks that file's keys exactly, as it does for a file without
  a filter.
"""
from __future__ import annotations

import logging

import pyarrow.parquet as pq

from storage.bloom.bloom_filter import (
    BLOOM_FILTER_FOOTER_KEY,
    BLOOM_FILTER_TYPE_CODE_KEY,
    BloomFilter,
    deserialize_bloom_filter,
)
from storage.bloom.footer import footer_tail_order
from storage.bloom.murmur import TailOrder
from storage.metadata.keys import bloom_filter_key
from storage.metadata.records import BloomFilterInfo, MetadataRecord, MetadataRecordType

log = logging.getLogger(__name__)

BLOOM_FILTERS = "bloom_filters"
BLOOM_FILTERS_FILE_GROUP_PREFIX = "bloom-filters-"
DEFAULT_TYPE = "DYNAMIC_V0"


def bloom_filter_record(partition: str, file_name: str, instant: str,
                        footer: pq.FileMetaData) -> MetadataRecord | None:
    """The record of a base file from its parquet footer; None when the footer has no filter this index may hold."""
    meta = footer.metadata or {}
    text = meta.get(BLOOM_FILTER_FOOTER_KEY.encode())
    if text is None:
        return None
    try:
        if footer_tail_order(footer) is not TailOrder.HUDI:
            log.info("bloom filter of %s/%s hashes keys in the legacy order: not indexed", partition, file_name)
            return None
    except ValueError as exc:
        log.warning("bloom filter footer of %s/%s is unusable (%s): not indexed", partition, file_name, exc)
        return None
    type_code = meta.get(BLOOM_FILTER_TYPE_CODE_KEY.encode())
    info = BloomFilterInfo(type_code.decode() if type_code else DEFAULT_TYPE, instant, bytes(text), False)
    return MetadataRecord(bloom_filter_key(partition, file_name), MetadataRecordType.BLOOM_FILTER, info)


def bloom_filter_tombstone(partition: str, file_name: str, instant: str) -> MetadataRecord:
    """The record of a deleted base file (Hudi's createBloomFilterMetadataRecord with isDeleted)."""
    return MetadataRecord(bloom_filter_key(partition, file_name), MetadataRecordType.BLOOM_FILTER,
                          BloomFilterInfo(DEFAULT_TYPE, instant, b"", True))


def bloom_filter_of(info: BloomFilterInfo) -> BloomFilter | None:
    """The filter a live record holds (hashing keys in Hudi's order); None for a tombstone or an unreadable one."""
    if info.is_deleted or not info.bloom_filter:
        return None
    try:
        return deserialize_bloom_filter(info.type, info.bloom_filter, TailOrder.HUDI)
    except (ValueError, NotImplementedError) as exc:
        log.warning("a bloom filter record of the metadata table cannot be read (%s): keys checked exactly", exc)
        return None
