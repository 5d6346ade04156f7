"""Parquet base files as Hudi writes them: five meta columns first, then the data columns, and the
footer entries Hudi's bloom index reads (bloom filter, min/max record key)."""
from __future__ import annotations

from dataclasses import dataclass

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from storage.io.storage import HoodieStorage
from storage.meta_fields import RECORD_KEY
from storage.bloom import (
    BLOOM_FILTER_FOOTER_KEY,
    BloomFilter,
    BloomFilterSettings,
    BLOOM_FILTER_TYPE_CODE_KEY,
    MAX_RECORD_KEY_FOOTER,
    MIN_RECORD_KEY_FOOTER,
)
from storage.bloom.bloom_filter import DynamicBloomFilter
from storage.bloom.footer import BLOOM_FILTER_TAIL_ORDER_KEY


@dataclass(frozen=True)
class BloomSeed:
    """A merge's head start on its file's bloom filter: the filter of the base file it rewrites, which holds the
    keys of the file's first `rows` rows (the stored records it keeps) already."""

    bloom: BloomFilter
    rows: int


class KeyFooter:
    """The footer entries of a file's record keys, gathered as keys are written (bloom filter and key range).
    With a `seed`, the seeded rows' keys only widen the key range, and later keys the filter may hold already
    (updated records) are not added twice: the filter holds every key of the file, as one built afresh does."""

    def __init__(self, bloom_settings: BloomFilterSettings, seed: BloomSeed | None = None):
        self._bloom = seed.bloom if seed is not None else bloom_settings.new_filter()
        self._seeded = seed.rows if seed is not None else 0
        self._probe = seed is not None
        self._min: str | None = None
        self._max: str | None = None

    def add(self, record_keys: pa.Array | pa.ChunkedArray) -> KeyFooter:
        keys = record_keys.drop_null() if record_keys.null_count else record_keys
        if len(keys) == 0:
            return self
        skip = min(self._seeded, len(keys))
        self._seeded -= skip
        fresh = keys.slice(skip) if skip else keys
        if self._probe and len(fresh):
            fresh = fresh.filter(pa.array(~self._bloom.might_contain_many(fresh)))
        if len(fresh):
            self._bloom.add_keys(fresh)
        bounds = pc.min_max(keys)
        low, high = bounds["min"].as_py(), bounds["max"].as_py()
        self._min = low if self._min is None else min(self._min, low)
        self._max = high if self._max is None else max(self._max, high)
        return self

    def estimated_bytes(self) -> int:
        """About the bytes these entries add to the footer (the bloom filter's Base64 text dominates), without
        serializing the filter."""
        keys = len(self._min) + len(self._max) if self._min is not None else 0
        return 4 * -(-len(self._bloom.to_bytes()) // 3) + keys + 160

    def growth_bytes(self, more_keys: int) -> int:
        """The bytes `more_keys` further keys would add to the footer: a dynamic bloom filter opens a new row of
        bits every `num_entries` keys (up to its bound); a simple one keeps its size."""
        bloom = self._bloom
        more_keys -= self._seeded  # the seed's keys are in the filter already
        if not isinstance(bloom, DynamicBloomFilter) or more_keys <= 0:
            return 0
        nr = max(1, bloom.num_entries)
        rows = bloom.num_rows
        bound = max(rows, -(-bloom.max_entries // nr)) if bloom.max_entries > 0 else rows
        total = (rows - 1) * nr + bloom.current_row_count + more_keys
        after = min(bound, max(rows, -(-total // nr)))
        return 4 * (after - rows) * self._row_bytes() // 3

    def _row_bytes(self) -> int:
        return self._bloom.vector_size // 8 + 16

    def metadata(self) -> dict[bytes, bytes]:
        if self._min is None:
            return {}
        return {
            BLOOM_FILTER_FOOTER_KEY.encode(): self._bloom.serialize().encode(),
            BLOOM_FILTER_TYPE_CODE_KEY.encode(): self._bloom.type_code.encode(),
            BLOOM_FILTER_TAIL_ORDER_KEY.encode(): self._bloom.tail_order.value.encode(),
            MIN_RECORD_KEY_FOOTER.encode(): self._min.encode(),
            MAX_RECORD_KEY_FOOTER.encode(): self._max.encode(),
        }


def footer_metadata(record_keys: pa.Array, bloom_settings: BloomFilterSettings) -> dict[bytes, bytes]:
    """Bloom filter and key range over the file's record keys."""
    return KeyFooter(bloom_settings).add(record_keys).metadata()


_DICTIONARY_SAMPLE = 1024  # rows judged: enough to tell repeating values from unique ones, at a quarter the cost
_FOOTER_BYTES_PER_CHUNK = 160  # parquet metadata of one column chunk (offsets, sizes, min/max statistics)


def dictionary_columns(table: pa.Table) -> list[str] | bool:
    """The columns worth dictionary encoding: those whose first rows repeat values (at most half distinct).
    A column of unique values (record keys, sequence numbers, random strings) fills a dictionary page, then falls
    back to plain encoding at the writer's expense: skipping it halves the parquet write time of a typical Hudi
    file and makes it smaller. Tables with nested columns keep the writer's default (every column)."""
    sample = table.slice(0, _DICTIONARY_SAMPLE)
    chosen = []
    for name, column in zip(sample.column_names, sample.columns):
        if pa.types.is_nested(column.type):
            return True
        if len(column) and pc.count_distinct(column, mode="all").as_py() * 2 <= len(column):
            chosen.append(name)
    return chosen


def write_base_file(storage: HoodieStorage, path: str, table: pa.Table, bloom_settings: BloomFilterSettings,
                    compression: str = "snappy", row_group_bytes: int = 128 * 1024 * 1024,
                    populate_meta_fields: bool = True, bloom_seed: BloomSeed | None = None) -> int:
    """Write `table` (meta columns first) to `path`; returns the file size in bytes."""
    writer = BaseFileWriter(storage, path, table.schema, bloom_settings, compression, row_group_bytes,
                            populate_meta_fields, bloom_seed)
    try:
        writer.write(table)
    except BaseException:
        writer.abort()
        raise
    return writer.close()


def _rows_per_group(table: pa.Table, row_group_bytes: int) -> int:
    if table.num_rows == 0:
        return 1
    per_row = max(1, table.nbytes // table.num_rows)
    return max(1, min(table.num_rows, row_group_bytes // per_row))


class BaseFileWriter:
    """A base file written in parts (one open parquet writer): each `write` adds row groups, and the footer's
    bloom filter and key range cover every key written when `close` finishes the file. For merges that do not
    hold the whole file in memory; `write_base_file` is the one-table case."""

    def __init__(self, storage: HoodieStorage, path: str, schema: pa.Schema, bloom_settings: BloomFilterSettings,
                 compression: str = "snappy", row_group_bytes: int = 128 * 1024 * 1024,
                 populate_meta_fields: bool = True, bloom_seed: BloomSeed | None = None):
        self._storage, self._path, self._row_group_bytes = storage, path, row_group_bytes
        self._schema, self._compression = schema, compression
        self._footer = KeyFooter(bloom_settings, bloom_seed) if populate_meta_fields else None
        self._out = storage.open_output_stream(path)
        self._opened: pq.ParquetWriter | None = None  # opened on the first rows: they choose the dictionary columns
        self.num_rows = 0
        self.num_row_groups = 0
        self.footer_bytes = 0  # once closed: the bytes the footer took (parquet metadata, bloom filter, key range)
        self.key_footer_bytes = 0  # once closed: the bytes of the key entries (bloom filter, key range) in it

    def _writer(self, first: pa.Table | None = None) -> pq.ParquetWriter:
        if self._opened is None:
            self._opened = pq.ParquetWriter(self._out, self._schema, compression=self._compression,
                                            write_statistics=True,
                                            use_dictionary=dictionary_columns(first) if first is not None else True)
        return self._opened

    def write(self, table: pa.Table) -> None:
        if table.num_rows == 0:
            return
        if self._footer is not None:
            self._footer.add(table.column(RECORD_KEY))
        rows_per_group = _rows_per_group(table, self._row_group_bytes)
        self._writer(table).write_table(table, row_group_size=rows_per_group)
        self.num_rows += table.num_rows
        self.num_row_groups += -(-table.num_rows // rows_per_group)

    @property
    def bytes_written(self) -> int:
        """Bytes of the file so far: the row groups written (each reaches the stream whole as `write` returns);
        the footer comes at `close`."""
        return self._out.tell()

    def footer_estimate(self, bytes_per_column_chunk: int = _FOOTER_BYTES_PER_CHUNK) -> int:
        """About the bytes `close` will add: the parquet metadata (schema, then per row group and column the chunk's
        offsets and statistics, `bytes_per_column_chunk` each) and the key footer."""
        chunks = self.num_row_groups * len(self._schema)
        keys = self._footer.estimated_bytes() if self._footer is not None else 0
        return self.schema_footer_estimate() + chunks * bytes_per_column_chunk + keys

    def schema_footer_estimate(self) -> int:
        """About the bytes of the footer's schema part and fixed fields."""
        return 256 + 48 * len(self._schema)

    def footer_growth(self, more_rows: int) -> int:
        """The bytes `more_rows` further rows would add to the footer's key entries (a growing bloom filter)."""
        return self._footer.growth_bytes(more_rows) if self._footer is not None else 0

    def close(self) -> int:
        """Finish the file (footer, fsync); returns its size in bytes."""
        writer = self._writer()
        meta = self._footer.metadata() if self._footer is not None else {}
        if meta:
            writer.add_key_value_metadata(meta)
            self.key_footer_bytes = sum(len(k) + len(v) for k, v in meta.items())
        before = self._out.tell()
        writer.close()
        size = self._out.tell()
        self.footer_bytes = size - before
        self._out.close()
        self._storage.fsync(self._path)
        return size

    def abort(self) -> None:
        """Close the streams of a write that failed (the partial file is left for rollback, as its marker says)."""
        try:
            if self._opened is not None:
                self._opened.close()
        finally:
            self._out.close()
