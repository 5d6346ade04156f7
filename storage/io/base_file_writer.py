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


class KeyFooter:
    """The footer entries of a file's record keys, gathered as keys are written (bloom filter and key range)."""

    def __init__(self, bloom_options: dict):
        self._bloom = create_bloom_filter(**bloom_options)
        self._min: str | None = None
        self._max: str | None = None

    def add(self, record_keys: pa.Array | pa.ChunkedArray) -> KeyFooter:
        keys = record_keys.drop_null() if record_keys.null_count else record_keys
        if len(keys) == 0:
            return self
        self._bloom.add_keys(keys)
        bounds = pc.min_max(keys)
        low, high = bounds["min"].as_py(), bounds["max"].as_py()
        self._min = low if self._min is None else min(self._min, low)
        self._max = high if self._max is None else max(self._max, high)
        return self

    def metadata(self) -> dict[bytes, bytes]:
        if self._min is None:
            return {}
        return {
            BLOOM_FILTER_FOOTER_KEY.encode(): self._bloom.serialize().encode(),
            BLOOM_FILTER_TYPE_CODE_KEY.encode(): self._bloom.type_code.encode(),
            MIN_RECORD_KEY_FOOTER.encode(): self._min.encode(),
            MAX_RECORD_KEY_FOOTER.encode(): self._max.encode(),
        }


def footer_metadata(record_keys: pa.Array, bloom_options: dict) -> dict[bytes, bytes]:
    """Bloom filter and key range over the file's record keys."""
    return KeyFooter(bloom_options).add(record_keys).metadata()


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


class BaseFileWriter:
    """A base file written in parts (one open parquet writer): each `write` adds row groups, and the footer's
    bloom filter and key range cover every key written when `close` finishes the file. For merges that do not
    hold the whole file in memory; `write_base_file` is the one-table case."""

    def __init__(self, storage: HoodieStorage, path: str, schema: pa.Schema, bloom_options: dict,
                 compression: str = "snappy", row_group_bytes: int = 128 * 1024 * 1024,
                 populate_meta_fields: bool = True):
        self._storage, self._path, self._row_group_bytes = storage, path, row_group_bytes
        self._footer = KeyFooter(bloom_options) if populate_meta_fields else None
        self._out = storage.open_output_stream(path)
        self._writer = pq.ParquetWriter(self._out, schema, compression=compression, write_statistics=True)
        self.num_rows = 0

    def write(self, table: pa.Table) -> None:
        if table.num_rows == 0:
            return
        if self._footer is not None:
            self._footer.add(table.column(RECORD_KEY))
        self._writer.write_table(table, row_group_size=_rows_per_group(table, self._row_group_bytes))
        self.num_rows += table.num_rows

    def close(self) -> int:
        """Finish the file (footer, fsync); returns its size in bytes."""
        meta = self._footer.metadata() if self._footer is not None else {}
        if meta:
            self._writer.add_key_value_metadata(meta)
        self._writer.close()
        size = self._out.tell()
        self._out.close()
        self._storage.fsync(self._path)
        return size

    def abort(self) -> None:
        """Close the streams of a write that failed (the partial file is left for rollback, as its marker says)."""
        try:
            self._writer.close()
        finally:
            self._out.close()
