"""Single-record Avro Object Container Files, the form of every Avro instant file Java Hudi writes.

Java's `DataFileWriter` (used by `TimelineMetadataUtils.serializeAvroMetadata`) writes, and the fixtures show:
magic `Obj\\x01`; a metadata map with the single key `avro.schema` (no `avro.codec`: Java omits it for the null
codec); a 16-byte sync marker; one block `count=1, byte size, datum, sync`. The schema text is the compact JSON
of the schema, so with our model schemas a written file equals Java's except for the random sync marker.
"""
from __future__ import annotations

import io
import json
import logging
import os
import zlib
from typing import Any

import fastavro

from storage.avro.encoding import encode_bytes, encode_long
from storage.avro.schema_converter import avro_schema_to_json

logger = logging.getLogger(__name__)

MAGIC = b"Obj\x01"
SYNC_SIZE = 16
SCHEMA_KEY = "avro.schema"
CODEC_KEY = "avro.codec"


# ----------------------------------------------------------------------------------------------- writing


def write_avro_container(schema: dict[str, Any], record: dict[str, Any], *, sync_marker: bytes | None = None) -> bytes:
    """Bytes of an Avro container file holding `record` encoded with `schema` (codec null, one block).

    `sync_marker` (16 bytes) is random unless given; tests pass one to compare with Java's files byte for byte.
    """
    sync = sync_marker if sync_marker is not None else os.urandom(SYNC_SIZE)
    if len(sync) != SYNC_SIZE:
        raise ValueError(f"sync marker must be {SYNC_SIZE} bytes, got {len(sync)}")
    datum = encode_datum(schema, record)
    logger.debug("encoded %s record: %d bytes", schema.get("name"), len(datum))
    return _header(avro_schema_to_json(schema), sync) + _block(datum, sync)


def encode_datum(schema: dict[str, Any], record: dict[str, Any]) -> bytes:
    """Avro binary encoding of one record (no container framing).

    Keys the schema does not know raise ValueError (fastavro would silently drop them, hiding typos).
    """
    _check_known_fields(schema, record, _named_records(schema), schema.get("name", "record"))
    out = io.BytesIO()
    try:
        fastavro.schemaless_writer(out, fastavro.parse_schema(schema), record)
    except (ValueError, TypeError, KeyError, AttributeError) as exc:
        raise ValueError(f"record does not match Avro schema {schema.get('name')!r}: {exc}") from exc
    return out.getvalue()


def _named_records(schema: Any, found: dict[str, dict[str, Any]] | None = None) -> dict[str, dict[str, Any]]:
    """Record definitions inside `schema` by short name, so references by name can be followed."""
    found = {} if found is None else found
    if isinstance(schema, list):
        for branch in schema:
            _named_records(branch, found)
    elif isinstance(schema, dict):
        if schema.get("type") == "record":
            found.setdefault(schema["name"].rsplit(".", 1)[-1], schema)
            for field in schema["fields"]:
                _named_records(field["type"], found)
        _named_records(schema.get("items"), found)
        _named_records(schema.get("values"), found)
    return found


def _check_known_fields(schema: Any, datum: Any, named: dict[str, dict[str, Any]], path: str) -> None:
    if isinstance(schema, str):
        schema = named.get(schema.rsplit(".", 1)[-1], schema)
    if isinstance(schema, list):
        _check_union(schema, datum, named, path)
    elif isinstance(schema, dict) and isinstance(datum, dict) and schema.get("type") == "record":
        known = {f["name"]: f["type"] for f in schema["fields"]}
        unknown = sorted(set(datum) - set(known))
        if unknown:
            raise ValueError(f"{path}: fields {unknown} are not in Avro record {schema['name']!r}")
        for name, value in datum.items():
            _check_known_fields(known[name], value, named, f"{path}.{name}")
    elif isinstance(schema, dict) and schema.get("type") == "array" and isinstance(datum, list):
        for i, item in enumerate(datum):
            _check_known_fields(schema["items"], item, named, f"{path}[{i}]")
    elif isinstance(schema, dict) and schema.get("type") == "map" and isinstance(datum, dict):
        for key, value in datum.items():
            _check_known_fields(schema["values"], value, named, f"{path}[{key!r}]")


def _check_union(branches: list[Any], datum: Any, named: dict[str, dict[str, Any]], path: str) -> None:
    """Follow the one complex branch a value can take (Hudi's unions are [null, T] or [T, null])."""
    complex_branches = [b for b in branches if b not in ("null", "boolean", "int", "long", "float", "double", "bytes")]
    if datum is not None and len(complex_branches) == 1:
        _check_known_fields(complex_branches[0], datum, named, path)


def _header(schema_json: str, sync: bytes) -> bytes:
    meta = (
        encode_long(1)  # one metadata entry: avro.schema
        + encode_bytes(SCHEMA_KEY.encode("utf-8"))
        + encode_bytes(schema_json.encode("utf-8"))
        + encode_long(0)  # end of map
    )
    return MAGIC + meta + sync


def _block(datum: bytes, sync: bytes) -> bytes:
    return encode_long(1) + encode_long(len(datum)) + datum + sync  # record count, byte size




# ----------------------------------------------------------------------------------------------- reading


def read_avro_container(data: bytes) -> dict[str, Any]:
    """The first record of an Avro container file; ValueError naming the problem if `data` is not one."""
    record, _ = read_avro_container_with_schema(data)
    return record


def read_avro_container_with_schema(data: bytes) -> tuple[dict[str, Any], dict[str, Any]]:
    """The first record of an Avro container file and the writer schema embedded in it (as parsed JSON)."""
    buf = _Cursor(_as_bytes(data))
    meta, sync = _read_header(buf)
    schema = _writer_schema(meta)
    payload, count = _read_first_block(buf, sync, _codec(meta))
    if count < 1:
        raise ValueError("Avro container holds no record")
    return _decode_first(payload, count, schema), schema


def _as_bytes(data: bytes) -> bytes:
    if not isinstance(data, (bytes, bytearray, memoryview)):
        raise ValueError(f"expected bytes, got {type(data).__name__}")
    data = bytes(data)
    if not data:
        raise ValueError("empty data is not an Avro container file")
    if data[:4] != MAGIC:
        raise ValueError(f"not an Avro container file: magic is {data[:4]!r}, expected {MAGIC!r}")
    return data


class _Cursor:
    """Reads Avro binary primitives from bytes, failing with ValueError on truncation."""

    def __init__(self, data: bytes, pos: int = 0) -> None:
        self.data, self.pos = data, pos

    def at_end(self) -> bool:
        return self.pos >= len(self.data)

    def take(self, size: int, what: str) -> bytes:
        if size < 0 or self.pos + size > len(self.data):
            raise ValueError(f"truncated Avro container: {what} needs {size} bytes at offset {self.pos}")
        chunk = self.data[self.pos : self.pos + size]
        self.pos += size
        return chunk

    def long(self, what: str) -> int:
        shift, acc = 0, 0
        while True:
            byte = self.take(1, what)[0]
            acc |= (byte & 0x7F) << shift
            if not byte & 0x80:
                return (acc >> 1) ^ -(acc & 1)
            shift += 7
            if shift > 63:
                raise ValueError(f"corrupt Avro container: varint too long in {what} at offset {self.pos}")

    def length_prefixed(self, what: str) -> bytes:
        return self.take(self.long(what), what)


def _read_header(buf: _Cursor) -> tuple[dict[str, bytes], bytes]:
    buf.take(len(MAGIC), "magic")
    meta: dict[str, bytes] = {}
    while True:
        count = buf.long("header metadata count")
        if count == 0:
            break
        if count < 0:  # a negative block count is followed by the block's byte size
            count = -count
            buf.long("header metadata block size")
        for _ in range(count):
            key = buf.length_prefixed("header metadata key")
            meta[_utf8(key, "header metadata key")] = buf.length_prefixed("header metadata value")
    return meta, buf.take(SYNC_SIZE, "sync marker")


def _utf8(raw: bytes, what: str) -> str:
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ValueError(f"corrupt Avro container: {what} is not UTF-8") from exc


def _writer_schema(meta: dict[str, bytes]) -> dict[str, Any]:
    raw = meta.get(SCHEMA_KEY)
    if raw is None:
        raise ValueError("Avro container header has no avro.schema")
    try:
        schema = json.loads(_utf8(raw, "avro.schema"))
    except json.JSONDecodeError as exc:
        raise ValueError(f"avro.schema in container header is not JSON: {exc}") from exc
    if not isinstance(schema, dict) or schema.get("type") != "record":
        raise ValueError("avro.schema in container header is not a record schema")
    return schema


def _codec(meta: dict[str, bytes]) -> str:
    codec = _utf8(meta.get(CODEC_KEY, b"null"), "avro.codec")
    if codec not in ("null", "deflate"):
        raise ValueError(f"unsupported Avro codec {codec!r} (Hudi writes null)")
    return codec


def _read_first_block(buf: _Cursor, sync: bytes, codec: str) -> tuple[bytes, int]:
    if buf.at_end():
        raise ValueError("Avro container holds no record")
    count = buf.long("block record count")
    size = buf.long("block byte size")
    payload = buf.take(size, "data block")
    if buf.take(SYNC_SIZE, "block sync marker") != sync:
        raise ValueError("corrupt Avro container: block sync marker differs from the header's")
    return (zlib.decompress(payload, -15) if codec == "deflate" else payload), count


def _decode_first(payload: bytes, count: int, schema: dict[str, Any]) -> dict[str, Any]:
    stream = io.BytesIO(payload)
    try:
        record = fastavro.schemaless_reader(stream, fastavro.parse_schema(schema), None)
    except Exception as exc:  # fastavro raises many types on corrupt data or a bad schema
        raise ValueError(f"corrupt Avro container data block: {exc}") from exc
    if count == 1 and stream.tell() != len(payload):
        raise ValueError(f"corrupt Avro container: {len(payload) - stream.tell()} stray bytes after the record")
    if not isinstance(record, dict):
        raise ValueError(f"Avro container record is a {type(record).__name__}, not a record")
    return record
