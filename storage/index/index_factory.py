"""`hoodie.index.type` -> index (Hudi's SparkHoodieIndexFactory)."""
from __future__ import annotations

from typing import Callable

from storage.config import HoodieConfig, WriteConfigKeys as WK
from storage.exception import HoodieIndexError
from storage.index.bloom_index import HoodieBloomIndex
from storage.index.bucket_index import BucketSpec, HoodieSimpleBucketIndex
from storage.io.storage_options import StorageOptions
from storage.index.hoodie_index import HoodieIndex
from storage.index.record_level_index import HoodieRecordIndex
from storage.index.simple_index import HoodieSimpleIndex


def _bloom(is_global: bool) -> Callable[..., HoodieIndex]:
    def make(update_partition_path: bool, config: HoodieConfig, key_fields: list[str], **location) -> HoodieIndex:
        return HoodieBloomIndex(is_global=is_global, update_partition_path=update_partition_path, **location,
                                prune_by_ranges=config.get(WK.BLOOM_INDEX_PRUNE_BY_RANGES),
                                use_caching=config.get(WK.BLOOM_INDEX_USE_CACHING),
                                parallelism=config.get(WK.BLOOM_INDEX_PARALLELISM),
                                use_metadata=config.get(WK.BLOOM_INDEX_USE_METADATA))
    return make


def _simple(is_global: bool) -> Callable[..., HoodieIndex]:
    def make(update_partition_path: bool, config: HoodieConfig, key_fields: list[str], **location) -> HoodieIndex:
        return HoodieSimpleIndex(is_global=is_global, update_partition_path=update_partition_path, **location)
    return make


def _bucket(update_partition_path: bool, config: HoodieConfig, key_fields: list[str], **location) -> HoodieIndex:
    """`hoodie.index.bucket.engine` SIMPLE; `key_fields`: the table's record key fields (the default hash fields)."""
    return HoodieSimpleBucketIndex(update_partition_path=update_partition_path, **location,
                                   spec=BucketSpec.of(config, key_fields))


def _record_index(update_partition_path: bool, config: HoodieConfig, key_fields: list[str],
                  **location) -> HoodieIndex:
    """The metadata table's record_index (GLOBAL_SIMPLE while the table has none)."""
    return HoodieRecordIndex(update_partition_path=update_partition_path, **location)


INDEXES: dict[str, Callable[..., HoodieIndex]] = {
    "SIMPLE": _simple(is_global=False),
    "GLOBAL_SIMPLE": _simple(is_global=True),
    "BLOOM": _bloom(is_global=False),
    "GLOBAL_BLOOM": _bloom(is_global=True),
    "BUCKET": _bucket,
    "RECORD_INDEX": _record_index,
}
GLOBAL_INDEXES = frozenset({"GLOBAL_SIMPLE", "GLOBAL_BLOOM", "RECORD_INDEX"})
# each type's own hoodie.*.update.partition.path option
_UPDATE_PARTITION_PATH = {"BLOOM": WK.BLOOM_INDEX_UPDATE_PARTITION_PATH,
                          "GLOBAL_BLOOM": WK.BLOOM_INDEX_UPDATE_PARTITION_PATH,
                          "RECORD_INDEX": WK.RECORD_INDEX_UPDATE_PARTITION_PATH}


def is_global_index(config: HoodieConfig) -> bool:
    """Whether the configured index finds a record key in any partition (Hudi's HoodieIndex.isGlobal): the one
    definition, for the write path and the SQL planners alike."""
    return (config.get(WK.INDEX_TYPE) or "").strip().upper() in GLOBAL_INDEXES


def create_index(index_type: str, update_partition_path: bool | None = None,
                 config: HoodieConfig = HoodieConfig(), base_path: str = "",
                 storage_options: StorageOptions | None = None,
                 record_key_fields: list[str] | None = None) -> HoodieIndex:
    """The index of `index_type` for the table at `base_path` (reached with `storage_options`), set up from
    `config` (the `hoodie.bloom.index.*` and `hoodie.bucket.index.*` options; `record_key_fields`: the table's, which
    the bucket index hashes).
    `update_partition_path` defaults to the type's own option (`hoodie.simple.index.update.partition.path` /
    `hoodie.bloom.index.update.partition.path` / `hoodie.record.index.update.partition.path`)."""
    key = (index_type or "").strip().upper()
    if key not in INDEXES:
        raise HoodieIndexError(f"unsupported index type {index_type!r} ({WK.INDEX_TYPE.key}); "
                               f"supported: {', '.join(sorted(INDEXES))}")
    if update_partition_path is None:
        update_partition_path = config.get(_UPDATE_PARTITION_PATH.get(key, WK.SIMPLE_INDEX_UPDATE_PARTITION_PATH))
    return INDEXES[key](update_partition_path, config, list(record_key_fields or []), base_path=base_path,
                        storage_options=storage_options or StorageOptions())
