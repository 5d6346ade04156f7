"""Parquet files read through `HoodieStorage` (any scheme), and parquet bytes in memory (log blocks)."""
from __future__ import annotations

from collections.abc import Iterator, Sequence

import pyarrow as pa
import pyarrow.parquet as pq

from storage.io.storage import HoodieStorage


def parquet_file(storage: HoodieStorage, path: str) -> pq.ParquetFile:
    """A parquet file opened for reading (footer read now, column chunks on demand)."""
    return pq.ParquetFile(storage.open_input_file(path))


def read_parquet(storage: HoodieStorage, path: str, columns: Sequence[str] | None = None) -> pa.Table:
    """The file's rows (only `columns` when given; names the file lacks are skipped)."""
    file = parquet_file(storage, path)
    if columns is not None:
        present = set(file.schema_arrow.names)
        columns = [c for c in columns if c in present]
    return file.read(columns=columns)


def open_parquet(storage: HoodieStorage, path: str) -> tuple[pq.ParquetFile, int]:
    """The file opened for reading and its size in bytes (from the same open: no extra request)."""
    source = storage.open_input_file(path)
    return pq.ParquetFile(source), source.size()


def iter_row_groups(file: pq.ParquetFile) -> Iterator[pa.Table]:
    """The file's rows one row group at a time: only one group's columns are decoded at once."""
    for i in range(file.num_row_groups):
        yield file.read_row_group(i)


def read_parquet_schema(storage: HoodieStorage, path: str) -> pa.Schema:
    return parquet_file(storage, path).schema_arrow


def parquet_to_bytes(table: pa.Table, compression: str, key_value_metadata: dict[str, str] | None = None) -> bytes:
    """`table` as the bytes of a parquet file; `key_value_metadata` replaces pyarrow's own footer entries (the
    Arrow schema), as a non-Arrow writer (parquet-avro, say) leaves only its own."""
    out = pa.BufferOutputStream()
    if key_value_metadata is None:
        pq.write_table(table, out, compression=compression)
    else:
        with pq.ParquetWriter(out, table.schema, compression=compression, store_schema=False) as writer:
            writer.write_table(table)
            writer.add_key_value_metadata(key_value_metadata)
    return out.getvalue().to_pybytes()


def replace_parquet(storage: HoodieStorage, path: str, table: pa.Table, key_value_metadata: dict[bytes, bytes],
                    compression: str, row_group_size: int) -> None:
    """Replace the file at `path` with `table` and these footer entries, in one step (a local rename, one
    object-store PUT): a reader sees the old file or the new one."""
    out = pa.BufferOutputStream()
    with pq.ParquetWriter(out, table.schema, compression=compression, write_statistics=True) as writer:
        writer.write_table(table, row_group_size=row_group_size)
        writer.add_key_value_metadata(key_value_metadata)
    storage.write_atomic(path, out.getvalue().to_pybytes())


def parquet_from_bytes(data: bytes) -> pq.ParquetFile:
    return pq.ParquetFile(pa.BufferReader(data))
