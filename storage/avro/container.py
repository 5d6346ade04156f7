"""Single-record Avro Object Container Files, the form of every Avro instant file Java Hudi writes.

Java's `DataFileWriter` (used by `TimelineMetadataUtils.serializeAvroMetadata`) writes, and the fixtures show:
magic `Obj\\x01`; a metadata map with the single key `avro.schema` (no `avro.codec`: Java omits it for the null
codec); a 16-byte sync marker; one block `count=1, byte size, datum, sync`. The schema text is the compact JSON
of the schema, so with our model schemas a written file equals Java's except for the random sync marker.
"""
from __future__ import annotations

import functools
import json
import logging
import os
import zlib
from typing import Any

from storage.avro.decoder import BinaryDecoder, DatumReader
from storage.avro.encoder import BinaryEncoder, DatumWriter
from storage.avro.schema_converter import avro_schema_to_json
from storage.exception import HoodieAvroDecodeError, HoodieAvroEncodeError, HoodieAvroSchemaError

logger = logging.getLogger(__name__)

MAGIC = b"Obj\x01"
SYNC_SIZE = 16
SCHEMA_KEY = "avro.schema"
CODEC_KEY = "avro.codec"
_METADATA_SCHEMA = {"type": "map", "values": "bytes"}
_METADATA_READER = DatumReader(_METADATA_SCHEMA)
_METADATA_WRITER = DatumWriter(_METADATA_SCHEMA)


# ----------------------------------------------------------------------------------------------- writing


def write_avro_container(schema: dict[str, Any], record: dict[str, Any], *, sync_marker: bytes | None = None) -> bytes:
    """Bytes of an Avro container file holding `record` encoded with `schema` (codec null, one block).

    `sync_marker` (16 bytes) is random unless given; tests pass one to compare with Java's files byte for byte.
    Keys the schema does not know raise HoodieAvroEncodeError (silently dropping them would hide typos).
    """
    sync = sync_marker if sync_marker is not None else os.urandom(SYNC_SIZE)
    if len(sync) != SYNC_SIZE:
        raise HoodieAvroEncodeError(f"sync marker must be {SYNC_SIZE} bytes, got {len(sync)}")
    schema_json = avro_schema_to_json(schema)
    encoder = BinaryEncoder()
    try:
        _writer(schema_json).write(encoder, record)
    except HoodieAvroEncodeError as exc:
        raise HoodieAvroEncodeError(f"record does not match Avro schema {schema.get('name')!r}: {exc}") from exc
    datum = encoder.getvalue()
    logger.debug("encoded %s record: %d bytes", schema.get("name"), len(datum))
    return container_bytes(schema_json, datum, 1, sync)


def container_bytes(schema_json: str, datums: bytes, count: int, sync: bytes) -> bytes:
    """An Avro container file whose one data block holds `count` datums laid end to end (none: no block).

    The header is Java's: the `avro.schema` entry only (the null codec is implied), then the sync marker."""
    encoder = BinaryEncoder()
    encoder.write_fixed(MAGIC)
    _METADATA_WRITER.write(encoder, {SCHEMA_KEY: schema_json.encode("utf-8")})
    encoder.write_fixed(sync)
    if count:
        encoder.write_long(count)
        encoder.write_bytes(datums)  # the block's byte size, then its datums
        encoder.write_fixed(sync)
    return encoder.getvalue()


@functools.lru_cache(maxsize=64)
def _writer(schema_json: str) -> DatumWriter:
    return DatumWriter(schema_json)


# ----------------------------------------------------------------------------------------------- reading


def read_avro_container(data: bytes) -> dict[str, Any]:
    """The first record of an Avro container file; HoodieAvroDecodeError naming the problem if `data` is not one."""
    record, _ = read_avro_container_with_schema(data)
    return record


def read_avro_container_with_schema(data: bytes) -> tuple[dict[str, Any], dict[str, Any]]:
    """The first record of an Avro container file and the writer schema embedded in it (as parsed JSON)."""
    decoder = BinaryDecoder(_as_bytes(data))
    meta, sync = _read_header(decoder)
    schema_text = _writer_schema_text(meta)
    reader = _reader(schema_text)
    payload, count = _read_first_block(decoder, sync, _codec(meta))
    if count < 1:
        raise HoodieAvroDecodeError("Avro container holds no record")
    return _decode_first(reader, payload, count), reader.schema


def _as_bytes(data: bytes) -> bytes:
    if not isinstance(data, (bytes, bytearray, memoryview)):
        raise HoodieAvroDecodeError(f"expected bytes, got {type(data).__name__}")
    data = bytes(data)
    if not data:
        raise HoodieAvroDecodeError("empty data is not an Avro container file")
    if data[:4] != MAGIC:
        raise HoodieAvroDecodeError(f"not an Avro container file: magic is {data[:4]!r}, expected {MAGIC!r}")
    return data


def _read_header(decoder: BinaryDecoder) -> tuple[dict[str, bytes], bytes]:
    decoder.read_fixed(len(MAGIC), "Avro container magic")
    meta = _METADATA_READER.read(decoder)
    return meta, decoder.read_fixed(SYNC_SIZE, "Avro container sync marker")


def _writer_schema_text(meta: dict[str, bytes]) -> str:
    raw = meta.get(SCHEMA_KEY)
    if raw is None:
        raise HoodieAvroDecodeError("Avro container header has no avro.schema")
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise HoodieAvroDecodeError("corrupt Avro container: avro.schema is not UTF-8") from exc


@functools.lru_cache(maxsize=64)
def _reader(schema_text: str) -> DatumReader:
    """The reader of a container's writer schema (timelines repeat a few schema texts many times)."""
    try:
        schema = json.loads(schema_text)
    except json.JSONDecodeError as exc:
        raise HoodieAvroDecodeError(f"avro.schema in container header is not JSON: {exc}") from exc
    if not isinstance(schema, dict) or schema.get("type") != "record":
        raise HoodieAvroDecodeError("avro.schema in container header is not a record schema")
    try:
        return DatumReader(schema)
    except HoodieAvroSchemaError as exc:
        raise HoodieAvroDecodeError(f"avro.schema in container header is not a valid schema: {exc}") from exc


def _codec(meta: dict[str, bytes]) -> str:
    codec = meta.get(CODEC_KEY, b"null").decode("utf-8", errors="replace")
    if codec not in ("null", "deflate"):
        raise HoodieAvroDecodeError(f"unsupported Avro codec {codec!r} (Hudi writes null)")
    return codec


def _read_first_block(decoder: BinaryDecoder, sync: bytes, codec: str) -> tuple[bytes, int]:
    if decoder.at_end():
        raise HoodieAvroDecodeError("Avro container holds no record")
    count = decoder.read_long("Avro container block record count")
    payload = decoder.read_bytes("Avro container data block")
    if decoder.read_fixed(SYNC_SIZE, "Avro container block sync marker") != sync:
        raise HoodieAvroDecodeError("corrupt Avro container: block sync marker differs from the header's")
    if codec == "deflate":
        try:
            payload = zlib.decompress(payload, -15)
        except zlib.error as exc:
            raise HoodieAvroDecodeError(f"corrupt Avro container: deflate data block: {exc}") from exc
    return payload, count


def _decode_first(reader: DatumReader, payload: bytes, count: int) -> dict[str, Any]:
    decoder = BinaryDecoder(payload)
    try:
        record = reader.read(decoder)
        if count == 1:
            decoder.expect_end("the record")
    except HoodieAvroDecodeError as exc:
        raise HoodieAvroDecodeError(f"corrupt Avro container data block: {exc}") from exc
    return record
