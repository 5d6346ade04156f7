"""Metadata-table records in and out of HFiles: a base file (`.hfile`, with the record-key bloom filter and
min/max keys) or the HFile of an HFILE_DATA_BLOCK log block (schema only), as Java Hudi writes them.

Bloom filter of base files: DYNAMIC_V0, fpp 1e-9, 10,000 entries per row in 1.1 files and 60,000 (Hudi's
`hoodie.index.bloom.num_entries` default) in 1.0.x files - both reproduced bit for bit on the fixtures.
"""
from __future__ import annotations

import logging
from collections.abc import Iterable, Iterator

import pyarrow as pa

from storage.bloom.bloom_filter import DYNAMIC_V0, create_bloom_filter
from storage.io.hfile.format import (
    BLOOM_FILTER_META_BLOCK,
    FileInfoKey,
    HoodieHFileError,
)
from storage.io.hfile.reader import HFileReader
from storage.io.hfile.writer import CellArrays, Flavor, HFileWriteOptions, write_hfile
from storage.metadata.records import MetadataRecord, decode_record, encode_record

log = logging.getLogger(__name__)

BLOOM_ENTRIES_1_1 = 10_000
BLOOM_ENTRIES_1_0 = 60_000
BLOOM_FPP = 1e-9
DEFAULT_OPTIONS = HFileWriteOptions()


def read_records(reader: HFileReader, schema: str | None = None) -> Iterator[MetadataRecord]:
    """All records of an MDT HFile in key order, decoded with its `schema` file info (or `schema`)."""
    schema = schema or reader.schema
    if not schema:
        raise HoodieHFileError(f"{reader.source}: no `schema` file info entry to decode the records with")
    for cell in reader.cells():
        yield decode_record(cell.key, cell.value, schema, reader.source)


def write_records(records: Iterable[MetadataRecord], schema: str, *, base_file: bool,
                  create_time_ms: int | None = None, options: HFileWriteOptions = DEFAULT_OPTIONS,
                  bloom_entries: int | None = None) -> bytes:
    """HFile bytes holding `records` (sorted by key here). Base files get Hudi's bloom filter of the keys and
    min/max record keys; log-block HFiles only the schema."""
    cells = sorted(((r.key.encode("utf-8"), encode_record(r, schema)) for r in records), key=lambda c: c[0])
    return write_cells(cells, schema, base_file=base_file, create_time_ms=create_time_ms, options=options,
                       bloom_entries=bloom_entries)


def write_cells(cells: list[tuple[bytes, bytes]] | CellArrays, schema: str, *, base_file: bool,
                create_time_ms: int | None = None, options: HFileWriteOptions = DEFAULT_OPTIONS,
                bloom_entries: int | None = None) -> bytes:
    """`write_records` of cells already encoded and sorted by key (pairs, or Arrow arrays of an index's keys)."""
    file_info = [(FileInfoKey.SCHEMA, schema.encode("utf-8"))]
    meta_blocks = []
    if base_file:
        if bloom_entries is None:
            bloom_entries = BLOOM_ENTRIES_1_0 if options.flavor is Flavor.HBASE_1_0 else BLOOM_ENTRIES_1_1
        bloom = create_bloom_filter(DYNAMIC_V0, num_entries=bloom_entries, fpp=BLOOM_FPP)
        if isinstance(cells, CellArrays):
            keys = cells.rows.cast(pa.string()).to_pylist()
            first, last = (keys[0].encode("utf-8"), keys[-1].encode("utf-8")) if keys else (b"", b"")
        else:
            keys = [k.decode("utf-8") for k, _ in cells]
            first, last = (cells[0][0], cells[-1][0]) if cells else (b"", b"")
        bloom.add_keys(keys)
        file_info += [(FileInfoKey.BLOOM_FILTER_TYPE_CODE, DYNAMIC_V0.encode()),
                      (FileInfoKey.MIN_RECORD_KEY, first), (FileInfoKey.MAX_RECORD_KEY, last)]
        meta_blocks.append((BLOOM_FILTER_META_BLOCK, bloom.serialize().encode("ascii")))
    log.debug("writing %d metadata records into an HFile (base file: %s)", len(cells), base_file)
    return write_hfile(cells, file_info=file_info, meta_blocks=meta_blocks, create_time_ms=create_time_ms,
                       options=options)
