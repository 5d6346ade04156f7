"""Many datums of one schema at once: the bulk path of Avro log blocks.

Decoding takes the datums' bounds in a buffer and gives an Arrow table: column by column through the columnar
decoder when every field is a primitive (what Hudi writes for flat tables), else through fastavro's compiled
reader, which also resolves a reader schema. Encoding a table runs column by column through the columnar encoder
when its schema is flat (a merge-on-read write encodes every upserted row), else, like encoding records,
fastavro's compiled writer per record (it measured twice as fast as the pure-Python `DatumWriter`). Every
undecodable input raises `HoodieAvroDecodeError`.
"""
from __future__ import annotations

import functools
import io
import json
import logging
from typing import Any, Iterable, Mapping

import fastavro
import numpy as np
import pyarrow as pa

from storage.avro.columnar import decode_flat, flat_fields
from storage.avro.columnar_encoder import encode_flat_datums
from storage.avro.container import container_bytes
from storage.avro.schema_converter import avro_to_arrow_schema
from storage.exception import HoodieAvroDecodeError

logger = logging.getLogger(__name__)

_CONTAINER_SYNC = b"hudi-log-block!!"  # any 16 bytes: the container only lives in memory


def encode_datums(records: Iterable[Mapping[str, Any]], schema_json: str) -> list[bytes]:
    """The Avro binary datum of each record (a dict keyed by field name) under `schema_json`."""
    parsed = _fastavro_schema(schema_json)
    out, datums = io.BytesIO(), []
    for record in records:
        out.seek(0)
        out.truncate()
        fastavro.schemaless_writer(out, parsed, record)
        datums.append(out.getvalue())
    return datums


def encode_table_datums(table: pa.Table, schema_json: str) -> pa.LargeBinaryArray:
    """The Avro binary datum of each row of `table` under `schema_json`, one value per row."""
    datums = encode_flat_datums(table, schema_json)
    if datums is None:  # not flat, or a column type the columnar encoder leaves to the per-record one
        logger.debug("encoding %d rows per record: the schema or a column type is not flat", table.num_rows)
        # maps as dicts: fastavro wants dicts, arrow would give lists of pairs
        records = table.to_pylist(maps_as_pydicts="strict")
        datums = pa.array(encode_datums(records, schema_json), pa.large_binary())
    return datums


def decode_datums_to_table(data: bytes, starts: np.ndarray, ends: np.ndarray, writer_schema_json: str,
                           reader_schema_json: str | None = None) -> pa.Table:
    """The datums at [starts[i], ends[i]) of `data` as an Arrow table with the (reader or writer) schema's columns."""
    arrow_schema = _arrow_schema(reader_schema_json or writer_schema_json)
    fields = _flat_fields(writer_schema_json) if reader_schema_json is None and arrow_schema is not None else None
    if fields is not None:  # flat records: decoded column by column, no dict per record
        try:
            return decode_flat(data, starts, ends, fields).cast(arrow_schema)
        except pa.ArrowInvalid as exc:
            raise HoodieAvroDecodeError(f"undecodable avro records: {exc}") from exc
    records = decode_datums(data, starts, ends, writer_schema_json, reader_schema_json)
    try:
        # from_pylist converts the dicts in C++ (building each column from a Python list measured ~1.7x slower)
        return pa.Table.from_pylist(records, schema=arrow_schema)
    except Exception as exc:  # arrow raises several types for values that do not fit the column types
        raise HoodieAvroDecodeError(f"avro records do not fit their schema: {exc}") from exc


def decode_datums(data: bytes, starts: np.ndarray, ends: np.ndarray, writer_schema_json: str,
                  reader_schema_json: str | None = None) -> list[dict]:
    """The datums as dicts. fastavro's compiled reader iterates them wrapped in an in-memory container file (one
    data block), instead of one Python-level schemaless_reader call per record."""
    view = memoryview(data)
    datums = b"".join(view[start:end] for start, end in zip(starts.tolist(), ends.tolist()))
    container = container_bytes(writer_schema_json, datums, len(starts), _CONTAINER_SYNC)
    try:
        reader_schema = json.loads(reader_schema_json) if reader_schema_json else None
        records = list(fastavro.reader(io.BytesIO(container), reader_schema=reader_schema))
    except Exception as exc:  # fastavro raises many unrelated types on garbage input or a bad schema text
        raise HoodieAvroDecodeError(f"undecodable avro records: {type(exc).__name__}: {exc}") from exc
    if len(records) != len(starts) or not all(isinstance(r, dict) for r in records):
        raise HoodieAvroDecodeError(f"decoded {len(records)} records, {len(starts)} expected")
    return records


@functools.lru_cache(maxsize=64)
def _fastavro_schema(schema_json: str) -> Any:
    return fastavro.parse_schema(json.loads(schema_json))


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
