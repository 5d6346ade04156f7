"""Parquet base files as Hudi writes them: five meta columns first, then the data columns, and the
footer entries Hudi's bloom index reads (bloom filter, min/max record key)."""
from __future__ import annotations

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from storage.io.storage import HoodieStorage
from storage.config import HoodieConfig, WriteConfigKeys as WK
from storage.meta_fields import RECORD_KEY
from storage.bloom import (
    BLOOM_FILTER_FOOTER_KEY,
    BLOOM_FILTER_TYPE_CODE_KEY,
    MAX_RECORD_KEY_FOOTER,
    MIN_RECORD_KEY_FOOTER,
    create_bloom_filter,
)

def bloom_options_of(config: HoodieConfig) -> dict:
    """The bloom filter settings of a write (hoodie.bloom.index.filter.type, num_entries, fpp, max entries)."""
    return {"filter_type": config.get(WK.BLOOM_FILTER_TYPE), "num_entries": config.get(WK.BLOOM_NUM_ENTRIES),
            "fpp": config.get(WK.BLOOM_FPP), "max_entries": config.get(WK.BLOOM_DYNAMIC_MAX_ENTRIES)}


def footer_metadata(record_keys: pa.Array, bloom_options: dict) -> dict[bytes, bytes]:
    """Bloom filter and key range over the file's record keys."""
    keys = record_keys.drop_null() if record_keys.null_count else record_keys
    if len(keys) == 0:
        return {}
    bloom = create_bloom_filter(**bloom_options)
    bloom.add_keys(keys)
    bounds = pc.min_max(keys)
    return {
        BLOOM_FILTER_FOOTER_KEY.encode(): bloom.serialize().encode(),
        BLOOM_FILTER_TYPE_CODE_KEY.encode(): bloom.type_code.encode(),
        MIN_RECORD_KEY_FOOTER.encode(): bounds["min"].as_py().encode(),
        MAX_RECORD_KEY_FOOTER.encode(): bounds["max"].as_py().encode(),
    }


def write_base_file(storage: HoodieStorage, path: str, table: pa.Table, bloom_options: dict,
                    compression: str = "snappy", row_group_bytes: int = 128 * 1024 * 1024,
                    populate_meta_fields: bool = True) -> int:
    """Write `table` (meta columns first) to `path`; returns the file size in bytes."""
    meta = footer_metadata(table.column(RECORD_KEY), bloom_options) if populate_meta_fields else {}
    rows_per_group = _rows_per_group(table, row_group_bytes)
    with storage.open_output_stream(path) as out:
        with pq.ParquetWriter(out, table.schema, compression=compression, write_statistics=True) as writer:
            writer.write_table(table, row_group_size=rows_per_group)
            if meta:
                writer.add_key_value_metadata(meta)
        size = out.tell()
    storage.fsync(path)  # the commit that will name this file must not outlive its content (power loss)
    return size


def _rows_per_group(table: pa.Table, row_group_bytes: int) -> int:
    if table.num_rows == 0:
        return 1
    per_row = max(1, table.nbytes // table.num_rows)
    return max(1, min(table.num_rows, row_group_bytes // per_row))
