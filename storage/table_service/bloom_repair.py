"""Repair of the bloom filter footers this engine wrote in Hadoop's hash order (`storage.bloom.footer`).

Our own reads probe such a footer in the order it was built, so it never loses a key here; Java Hudi probes it
in Hudi's order, misses about half of its keys and would insert duplicates when it upserts into the table. The
repair rewrites each such base file with the same rows, schema and footer entries, its filter rebuilt in Hudi's
order (same type and shape) and marked as such. It runs under the table lock; each file is replaced in one step
(a local rename, one object-store PUT), so a reader sees the old file or the new one, with the same rows.
Files with no footer filter, marked footers and Java's are left alone.
"""
from __future__ import annotations

import logging
from dataclasses import dataclass


from storage.bloom import BLOOM_FILTER_FOOTER_KEY, TailOrder
from storage.bloom.bloom_filter import empty_like
from storage.bloom.footer import BLOOM_FILTER_TAIL_ORDER_KEY, footer_bloom_filter, is_legacy_footer
from storage.config import HoodieConfig
from storage.io.parquet import parquet_file, replace_parquet
from storage.io.storage import HoodieStorage
from storage.meta_fields import RECORD_KEY
from storage.table.fs_view import FileSystemView
from storage.table_service.service_table import service_meta_client
from storage.transaction.transaction_manager import TransactionManager

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class RepairedFile:
    partition_path: str
    file_name: str
    keys: int


def rewrite_footer_filter(storage: HoodieStorage, path: str, tail: TailOrder, mark: bool = True) -> int:
    """Rewrite the base file at `path` with its footer filter rebuilt from its record keys in `tail` order (and the
    order named in the footer when `mark`); rows, schema and the other footer entries unchanged. Returns the
    number of keys hashed."""
    source = parquet_file(storage, path)
    stored = footer_bloom_filter(source.metadata)
    if stored is None:
        raise ValueError(f"{path} has no bloom filter footer to rewrite")
    table = source.read()
    table = table.replace_schema_metadata(None)  # read back, it holds the footer entries: written below instead
    compression = source.metadata.row_group(0).column(0).compression if source.metadata.num_row_groups else "SNAPPY"
    bloom = empty_like(stored, tail)
    keys = table.column(RECORD_KEY).drop_null()
    bloom.add_keys(keys)
    meta = dict(source.metadata.metadata or {})
    meta.pop(b"ARROW:schema", None)  # written again by the writer
    meta[BLOOM_FILTER_FOOTER_KEY.encode()] = bloom.serialize().encode()
    if mark:
        meta[BLOOM_FILTER_TAIL_ORDER_KEY.encode()] = tail.value.encode()
    else:
        meta.pop(BLOOM_FILTER_TAIL_ORDER_KEY.encode(), None)
    group_rows = [source.metadata.row_group(i).num_rows for i in range(source.metadata.num_row_groups)]
    replace_parquet(storage, path, table, meta, compression.lower(), max(group_rows + [1]))  # the source's groups
    return len(keys)


def legacy_footer_files(table, spark=None, config: HoodieConfig = HoodieConfig()) -> list[tuple[str, str]]:
    """(partition path, file path) of every base file in the table's file system view with a legacy footer."""
    meta = service_meta_client(table, "repair_bloom_filters", spark, config)
    found = []
    for group in FileSystemView(meta).file_groups():
        for file_slice in group.ordered_slices():  # older versions too: a restore makes them the latest again
            base = file_slice.base_file
            if base is not None and is_legacy_footer(parquet_file(meta.storage, base.path).metadata):
                found.append((file_slice.partition_path, base.path))
    return sorted(found)


def repair_bloom_filters(table, spark=None, config: HoodieConfig = HoodieConfig(),
                         dry_run: bool = False) -> list[RepairedFile]:
    """Rewrite every legacy footer of the table (module doc); with `dry_run`, only say which files would be."""
    meta = service_meta_client(table, "repair_bloom_filters", spark, config)
    repaired = []
    txn = TransactionManager.for_table(meta, meta.table_config.with_options(config))
    with txn.transaction("repair bloom filters"):
        for partition, path in legacy_footer_files(meta):
            name = path.rsplit("/", 1)[-1]
            keys = -1 if dry_run else rewrite_footer_filter(meta.storage, path, TailOrder.HUDI)
            repaired.append(RepairedFile(partition, name, keys))
    log.info("%s %d legacy bloom filter footers of %s", "found" if dry_run else "repaired", len(repaired),
             meta.base_path)
    return repaired
