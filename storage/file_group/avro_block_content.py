"""AVRO_DATA_BLOCK content (spec §6.1): int32 version 3, int32 record count, then per record an int32 length and
the record's Avro datum under the block's SCHEMA header (the five meta columns first).

This module frames the datums — the record-bounds walk over the length prefixes, splitting at a size limit;
`storage.avro.datum_batch` encodes and decodes them. Every malformed content raises `HoodieCorruptedLogError`.
"""
from __future__ import annotations

import struct
from typing import Any, Iterable, Mapping

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from storage.arrow_util import large_binary_data, large_binary_offsets
from storage.avro.datum_batch import decode_datums, decode_datums_to_table, encode_datums, encode_table_datums
from storage.exception import HoodieAvroDecodeError, HoodieAvroEncodeError, HoodieCorruptedLogError
from storage.file_group.block_content import PREFIX_SIZE, content_prefix, read_content_prefix

_INT32 = struct.Struct(">i")
_EMPTY = pa.scalar(b"", pa.large_binary())


# ----------------------------------------------------------------------------------------------- encoding


def encode_avro_records(records: Iterable[Mapping[str, Any]], schema_json: str) -> bytes:
    """AVRO_DATA_BLOCK content for `records` (dicts keyed by field name) under Avro schema `schema_json`."""
    datums = encode_datums(records, schema_json)
    pack = _INT32.pack
    return content_prefix(len(datums)) + b"".join(pack(len(datum)) + datum for datum in datums)


def encode_avro_table(table: pa.Table, schema_json: str) -> bytes:
    """AVRO_DATA_BLOCK content for the rows of `table` under Avro schema `schema_json`; the length prefixes are
    joined to the datums by Arrow (no Python loop over rows)."""
    datums = encode_table_datums(table, schema_json)
    count = len(datums)
    offsets = large_binary_offsets(datums)
    lengths = np.diff(offsets)
    if count and lengths.max() > 2**31 - 1:
        raise HoodieAvroEncodeError(f"a record of {lengths.max()} bytes does not fit an int32 length")
    prefixes = pa.Array.from_buffers(pa.large_binary(), count, [
        None, pa.py_buffer(np.arange(count + 1, dtype=np.int64) * 4), pa.py_buffer(lengths.astype(">i4"))])
    framed = pc.binary_join_element_wise(prefixes, datums, _EMPTY)
    return content_prefix(count) + large_binary_data(framed)


# ----------------------------------------------------------------------------------------------- record bounds


def avro_record_count(content: bytes) -> int:
    """The record count of the prefix, checked against the content's size (every record has a 4-byte length)."""
    count = read_content_prefix(content, "avro data block")
    if count < 0 or count * 4 > len(content) - PREFIX_SIZE:
        raise HoodieCorruptedLogError(f"impossible record count {count} in {len(content)} content bytes")
    return count


def avro_record_spans(content: bytes) -> list[tuple[int, int]]:
    """(start, end) of each record datum inside AVRO_DATA_BLOCK content, checked to tile the content exactly."""
    starts, ends = avro_record_bounds(content)
    return list(zip(starts.tolist(), ends.tolist()))


def avro_record_bounds(content: bytes) -> tuple[np.ndarray, np.ndarray]:
    """Start and end offsets of the record datums inside AVRO_DATA_BLOCK content, checked to tile it exactly.

    Each record is `<int32 length><datum>`, so finding the next one needs the length before it: the walk stays a
    loop, kept to one unpack per record; the checks run on the arrays afterwards."""
    count = avro_record_count(content)
    size = len(content)
    unpack, starts, pos = _INT32.unpack_from, [0] * count, PREFIX_SIZE
    try:
        for i in range(count):
            pos += 4 + unpack(content, pos)[0]  # a negative length walks back: caught below
            starts[i] = pos
    except struct.error:
        raise HoodieCorruptedLogError(f"a record length runs past the content ({size} bytes)") from None
    ends = np.array(starts, dtype=np.int64)
    lengths = np.diff(ends, prepend=PREFIX_SIZE) - 4  # the datum sizes, each starting 4 bytes after the previous end
    if np.any(lengths < 0) or (count and (ends.min() < PREFIX_SIZE or ends.max() > size)):
        raise HoodieCorruptedLogError(f"a record length runs outside the content ({size} bytes)")
    last = ends[-1] if count else PREFIX_SIZE
    if last != size:
        raise HoodieCorruptedLogError(f"{size - last} stray bytes after {count} records")
    return ends - lengths, ends


def split_avro_content(content: bytes, max_content_size: int) -> list[bytes]:
    """Cut AVRO_DATA_BLOCK content into consecutive pieces of at most `max_content_size` bytes each."""
    pieces, first, piece_size = [], 0, PREFIX_SIZE
    spans = avro_record_spans(content)
    for i, (start, end) in enumerate(spans):
        record_size = end - start + 4
        if i > first and piece_size + record_size > max_content_size:
            pieces.append(_avro_piece(content, spans[first:i]))
            first, piece_size = i, PREFIX_SIZE
        piece_size += record_size
    pieces.append(_avro_piece(content, spans[first:]))
    return pieces


def _avro_piece(content: bytes, spans: list[tuple[int, int]]) -> bytes:
    # consecutive records are contiguous in the content, length prefixes included
    body = content[spans[0][0] - 4 : spans[-1][1]] if spans else b""
    return content_prefix(len(spans)) + body


# ----------------------------------------------------------------------------------------------- decoding


def decode_avro_records(content: bytes, writer_schema_json: str, reader_schema_json: str | None = None) -> pa.Table:
    """AVRO_DATA_BLOCK content as an Arrow table with the (reader or writer) schema's columns."""
    starts, ends = avro_record_bounds(content)
    try:
        return decode_datums_to_table(content, starts, ends, writer_schema_json, reader_schema_json)
    except HoodieAvroDecodeError as exc:
        raise HoodieCorruptedLogError(str(exc)) from exc


def decode_avro_dicts(content: bytes, writer_schema_json: str, reader_schema_json: str | None = None) -> list[dict]:
    """AVRO_DATA_BLOCK content as one dict per record."""
    starts, ends = avro_record_bounds(content)
    try:
        return decode_datums(content, starts, ends, writer_schema_json, reader_schema_json)
    except HoodieAvroDecodeError as exc:
        raise HoodieCorruptedLogError(str(exc)) from exc
