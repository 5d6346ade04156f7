"""AVRO_DATA_BLOCK content (spec §6.1): int32 version 3, int32 record count, then per record an int32 length and
the record's Avro datum under the block's SCHEMA header (the five meta columns first).

Records are written by fastavro's compiled writer (a merge-on-read write encodes every upserted row here; it
measured twice as fast as our pure-Python `DatumWriter`). They are read column by column by the columnar decoder
when every field is a primitive (what Hudi writes for flat tables), else by fastavro's compiled reader, which also
resolves a reader schema. Both start from the record bounds found by one walk over the length prefixes.
Every malformed content raises `HoodieCorruptedLogError`.
"""
from __future__ import annotations

import functools
import io
import json
import logging
import struct
from typing import Any, Iterable, Mapping

import fastavro
import numpy as np
import pyarrow as pa

from storage.avro.columnar import decode_flat, flat_fields
from storage.avro.container import container_bytes
from storage.avro.schema_converter import avro_to_arrow_schema
from storage.exception import HoodieAvroDecodeError, HoodieCorruptedLogError
from storage.file_group.block_content import PREFIX_SIZE, content_prefix, read_content_prefix

logger = logging.getLogger(__name__)

_INT32 = struct.Struct(">i")
_CONTAINER_SYNC = b"hudi-log-block!!"  # any 16 bytes: the container only lives in memory


# ----------------------------------------------------------------------------------------------- encoding


def encode_avro_records(records: Iterable[Mapping[str, Any]], schema_json: str) -> bytes:
    """AVRO_DATA_BLOCK content for `records` (dicts keyed by field name) under Avro schema `schema_json`."""
    parsed = _fastavro_schema(schema_json)
    out = io.BytesIO()
    out.write(bytes(PREFIX_SIZE))  # version and count, patched once the count is known
    count = 0
    for record in records:
        start = out.tell()
        out.write(bytes(4))
        fastavro.schemaless_writer(out, parsed, record)
        end = out.tell()
        out.seek(start)
        out.write(_INT32.pack(end - start - 4))
        out.seek(end)
        count += 1
    out.seek(0)
    out.write(content_prefix(count))
    return out.getvalue()


@functools.lru_cache(maxsize=64)
def _fastavro_schema(schema_json: str) -> Any:
    return fastavro.parse_schema(json.loads(schema_json))


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
    arrow_schema = _arrow_schema(reader_schema_json or writer_schema_json)
    fields = _flat_fields(writer_schema_json) if reader_schema_json is None and arrow_schema is not None else None
    if fields is not None:  # flat records: decoded column by column, no dict per record
        starts, ends = avro_record_bounds(content)
        try:
            table = decode_flat(content, starts, ends, fields)
            return table.cast(arrow_schema)
        except (HoodieAvroDecodeError, pa.ArrowInvalid) as exc:
            raise HoodieCorruptedLogError(f"undecodable avro records: {exc}") from exc
    records = decode_avro_dicts(content, writer_schema_json, reader_schema_json)
    try:
        # from_pylist converts the dicts in C++ (building each column from a Python list measured ~1.7x slower)
        return pa.Table.from_pylist(records, schema=arrow_schema)
    except Exception as exc:  # arrow raises several types for values that do not fit the column types
        raise HoodieCorruptedLogError(f"avro records do not fit their schema: {exc}") from exc


def decode_avro_dicts(content: bytes, writer_schema_json: str, reader_schema_json: str | None = None) -> list[dict]:
    """The records as dicts. fastavro's compiled reader iterates the datums wrapped in an in-memory container
    file (one data block), instead of one Python-level schemaless_reader call per record."""
    spans = avro_record_spans(content)
    view = memoryview(content)
    datums = b"".join(view[start:end] for start, end in spans)
    container = container_bytes(writer_schema_json, datums, len(spans), _CONTAINER_SYNC)
    try:
        reader_schema = json.loads(reader_schema_json) if reader_schema_json else None
        records = list(fastavro.reader(io.BytesIO(container), reader_schema=reader_schema))
    except Exception as exc:  # fastavro raises many unrelated types on garbage input or a bad schema text
        raise HoodieCorruptedLogError(f"undecodable avro records: {type(exc).__name__}: {exc}") from exc
    if len(records) != len(spans) or not all(isinstance(r, dict) for r in records):
        raise HoodieCorruptedLogError(f"decoded {len(records)} records, the block announces {len(spans)}")
    return records


@functools.lru_cache(maxsize=64)
def _flat_fields(schema_json: str):
    return flat_fields(schema_json)


def _arrow_schema(schema_json: str) -> pa.Schema | None:
    """Arrow schema of a record schema, or None when it has no Arrow equivalent (types are then inferred)."""
    try:
        return avro_to_arrow_schema(schema_json)
    except Exception as exc:  # noqa: BLE001 - any schema text the converter cannot handle means "infer"
        logger.debug("avro schema has no arrow equivalent (%s); inferring column types", exc)
        return None
