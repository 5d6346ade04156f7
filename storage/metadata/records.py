"""Payloads of the metadata table's records (Avro `HoodieMetadataRecord`, notes §3) as typed dataclasses, decoded
from and encoded back to the Avro bytes Java writes as HFile cell values.

The writer schema comes with the data (the HFile's `schema` file info entry, or the log block's SCHEMA header) and
is used both ways, so 1.0.x records (no `valueType`, no `ArrayWrapper`) and 1.1 records round-trip to the same
bytes. The record's `key` field is written as "" by Hudi: the real key is the HFile row key, put back here.
"""
from __future__ import annotations

import datetime as dt
import decimal
import enum
import functools
import json
import struct
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from storage.avro.decoder import BinaryDecoder, DatumReader
from storage.avro.encoder import BinaryEncoder, DatumWriter
from storage.avro.schema_compiler import UnionValue
from storage.exception import HoodieCorruptedMetadataError

_MIN_VALUE_PATH = "HoodieMetadataColumnStats.minValue"
_MAX_VALUE_PATH = "HoodieMetadataColumnStats.maxValue"
_ARRAY_ITEMS_PATH = "ArrayWrapper.wrappedValues[]"

# Union branches of minValue/maxValue in both schema versions (1.1 appends ArrayWrapper; index 0 is null).
WRAPPERS = (None, "BooleanWrapper", "IntWrapper", "LongWrapper", "FloatWrapper", "DoubleWrapper", "BytesWrapper",
            "StringWrapper", "DateWrapper", "DecimalWrapper", "TimeMicrosWrapper", "TimestampMicrosWrapper",
            "LocalDateWrapper", "ArrayWrapper")
_EPOCH_DAY = dt.date(1970, 1, 1)
_EPOCH = dt.datetime(1970, 1, 1, tzinfo=dt.UTC)


class MetadataRecordType(enum.IntEnum):
    PARTITION_LIST = 1
    FILE_LIST = 2
    COLUMN_STATS = 3
    BLOOM_FILTER = 4
    RECORD_INDEX = 5
    PARTITION_STATS = 6
    SECONDARY_INDEX = 7


class ValueType(enum.IntEnum):
    """`HoodieValueTypeInfo.typeOrdinal` (1.1): the logical type of a column-stats value."""

    V1 = 0
    NULL = 1
    BOOLEAN = 2
    INT = 3
    LONG = 4
    FLOAT = 5
    DOUBLE = 6
    STRING = 7
    BYTES = 8
    FIXED = 9
    DECIMAL = 10
    UUID = 11
    DATE = 12
    TIME_MILLIS = 13
    TIME_MICROS = 14
    TIMESTAMP_MILLIS = 15
    TIMESTAMP_MICROS = 16
    TIMESTAMP_NANOS = 17
    LOCAL_TIMESTAMP_MILLIS = 18
    LOCAL_TIMESTAMP_MICROS = 19
    LOCAL_TIMESTAMP_NANOS = 20


# ----------------------------------------------------------------------------------------------- payloads


@dataclass(frozen=True, slots=True)
class FileInfo:
    size: int
    is_deleted: bool = False


@dataclass(frozen=True, slots=True)
class FileListing:
    """`filesystemMetadata`: partition name -> info (PARTITION_LIST, sizes 0) or file name -> info (FILE_LIST)."""

    entries: dict[str, FileInfo]


@dataclass(frozen=True, slots=True)
class ValueTypeInfo:
    type_ordinal: int
    additional_info: str | None = None

    @property
    def value_type(self) -> ValueType | None:
        return ValueType(self.type_ordinal) if self.type_ordinal in tuple(ValueType) else None


@dataclass(frozen=True, slots=True)
class WrappedValue:
    """A min/max value as stored: the wrapper record's name and its `value` (a list of WrappedValue|None for
    ArrayWrapper). `to_python` gives the logical value."""

    wrapper: str
    value: Any

    def to_python(self, value_type: ValueTypeInfo | None = None) -> Any:
        return _to_python(self, value_type)


@dataclass(frozen=True, slots=True)
class ColumnStats:
    """`HoodieMetadataColumnStats`, for column_stats (file_name = data file) and partition_stats (file_name =
    partition path)."""

    file_name: str | None
    column_name: str | None
    min_value: WrappedValue | None = None
    max_value: WrappedValue | None = None
    value_count: int | None = None
    null_count: int | None = None
    total_size: int | None = None
    total_uncompressed_size: int | None = None
    is_deleted: bool = False
    is_tight_bound: bool = False
    value_type: ValueTypeInfo | None = None  # absent in 1.0.x schemas

    @property
    def min(self) -> Any:
        return None if self.min_value is None else self.min_value.to_python(self.value_type)

    @property
    def max(self) -> Any:
        return None if self.max_value is None else self.max_value.to_python(self.value_type)


@dataclass(frozen=True, slots=True)
class BloomFilterInfo:
    type: str
    timestamp: str
    bloom_filter: bytes
    is_deleted: bool = False


@dataclass(frozen=True, slots=True)
class RecordIndexInfo:
    partition_name: str | None
    file_id_high_bits: int | None
    file_id_low_bits: int | None
    file_index: int | None
    file_id: str | None
    instant_time: int | None  # epoch milliseconds of the instant, in the table's timeline zone
    file_id_encoding: int = 0
    position: int | None = None

    @property
    def file_group_id(self) -> str:
        """`<uuid>-<index>` for encoding 0 (bare UUID when the index is -1), the raw id for encoding 1."""
        if self.file_id_encoding != 0:
            return self.file_id or ""
        high, low = self.file_id_high_bits & (2**64 - 1), self.file_id_low_bits & (2**64 - 1)
        hexed = f"{high:016x}{low:016x}"
        uuid = f"{hexed[:8]}-{hexed[8:12]}-{hexed[12:16]}-{hexed[16:20]}-{hexed[20:]}"
        return uuid if self.file_index == -1 else f"{uuid}-{self.file_index}"


@dataclass(frozen=True, slots=True)
class SecondaryIndexInfo:
    is_deleted: bool = False


Payload = FileListing | ColumnStats | BloomFilterInfo | RecordIndexInfo | SecondaryIndexInfo


@dataclass(frozen=True, slots=True)
class MetaFields:
    """The five `_hoodie_*` fields; Hudi fills only `_hoodie_file_name` (the base HFile's name) in base files."""

    commit_time: str | None = None
    commit_seqno: str | None = None
    record_key: str | None = None
    partition_path: str | None = None
    file_name: str | None = None


@dataclass(frozen=True, slots=True)
class MetadataRecord:
    key: str
    type: MetadataRecordType
    payload: Payload
    meta: MetaFields = field(default_factory=MetaFields)
    stored_key: str = ""  # the `key` field as written (Hudi writes "")


_PAYLOAD_FIELD = {
    MetadataRecordType.PARTITION_LIST: "filesystemMetadata",
    MetadataRecordType.FILE_LIST: "filesystemMetadata",
    MetadataRecordType.COLUMN_STATS: "ColumnStatsMetadata",
    MetadataRecordType.PARTITION_STATS: "ColumnStatsMetadata",
    MetadataRecordType.BLOOM_FILTER: "BloomFilterMetadata",
    MetadataRecordType.RECORD_INDEX: "recordIndexMetadata",
    MetadataRecordType.SECONDARY_INDEX: "SecondaryIndexMetadata",
}
_PAYLOAD_FIELDS = ("filesystemMetadata", "BloomFilterMetadata", "ColumnStatsMetadata", "recordIndexMetadata",
                   "SecondaryIndexMetadata")
_META_FIELDS = ("_hoodie_commit_time", "_hoodie_commit_seqno", "_hoodie_record_key", "_hoodie_partition_path",
                "_hoodie_file_name")


# ----------------------------------------------------------------------------------------------- Avro codecs


@functools.lru_cache(maxsize=16)
def _reader(schema: str) -> DatumReader:
    return DatumReader(schema, tag_unions={_MIN_VALUE_PATH, _MAX_VALUE_PATH, _ARRAY_ITEMS_PATH})


@functools.lru_cache(maxsize=16)
def _writer(schema: str) -> DatumWriter:
    return DatumWriter(schema)


@functools.lru_cache(maxsize=16)
def _has_value_type(schema: str) -> bool:
    return "HoodieValueTypeInfo" in schema and '"valueType"' in schema


# what damaged bytes or a damaged writer schema make decoding raise (records are untrusted input)
_UNDECODABLE = (ValueError, KeyError, TypeError, AttributeError, IndexError, OverflowError, struct.error)


# Index records (record_index, secondary indexes) repeat one value for many keys - one per file group and instant,
# or just "not deleted" - so their values are decoded and encoded once: a shard of millions of keys is not
# millions of Avro decodes. Bounded: files / column stats values are mostly distinct and are not kept.
_INDEX_TYPES = frozenset({MetadataRecordType.RECORD_INDEX, MetadataRecordType.SECONDARY_INDEX})
_VALUE_CACHE_SIZE = 4096
_decoded_values: dict[tuple[bytes, str], tuple] = {}
_encoded_values: dict[tuple, bytes] = {}


def _remember(cache: dict, key, value) -> None:
    if len(cache) >= _VALUE_CACHE_SIZE:
        cache.clear()
    cache[key] = value


def decode_record(key: bytes | str, value: bytes, schema: str, source: str = "") -> MetadataRecord:
    """The record stored under HFile row `key` as Avro `value` of writer `schema` (JSON text)."""
    known = _decoded_values.get((value, schema))
    if known is not None and (isinstance(key, str) or key.isascii()):
        return MetadataRecord(key.decode("ascii") if isinstance(key, bytes) else key, *known)
    record = _decode_record(key, value, schema, source)
    if record.type in _INDEX_TYPES:
        _remember(_decoded_values, (bytes(value), schema), (record.type, record.payload, record.meta,
                                                            record.stored_key))
    return record


def _decode_record(key: bytes | str, value: bytes, schema: str, source: str = "") -> MetadataRecord:
    where = source or "metadata record"
    try:
        key = key.decode("utf-8") if isinstance(key, bytes) else key
        decoder = BinaryDecoder(value)
        datum = _reader(schema).read(decoder)
        decoder.expect_end(f"metadata record {key!r}")
        record_type = MetadataRecordType(datum["type"])
    except _UNDECODABLE as exc:
        raise HoodieCorruptedMetadataError(f"{where}: record {key!r} cannot be decoded: {exc}") from None
    expected = _PAYLOAD_FIELD[record_type]
    stray = [f for f in _PAYLOAD_FIELDS if f != expected and datum.get(f) is not None]
    if stray or datum.get(expected) is None:
        raise HoodieCorruptedMetadataError(f"{where}: record {key!r} of type "
                                           f"{record_type.name} carries {stray or 'no'} payload {expected}")
    try:
        meta = MetaFields(*(datum.get(f) for f in _META_FIELDS))
        return MetadataRecord(key, record_type, _payload_from_avro(record_type, datum[expected]), meta, datum["key"])
    except _UNDECODABLE as exc:  # a schema whose field names or types were damaged (e.g. a log block's header)
        raise HoodieCorruptedMetadataError(f"{where}: record {key!r} of type {record_type.name} does not have the "
                                           f"fields of a metadata record: {type(exc).__name__} {exc}") from None


def encode_record(record: MetadataRecord, schema: str) -> bytes:
    """The Avro bytes Java writes for `record` with writer `schema`."""
    if record.type not in _INDEX_TYPES:
        return _encode_record(record, schema)
    key = (record.type, record.payload, record.meta, record.stored_key, schema)
    known = _encoded_values.get(key)
    if known is None:
        known = _encode_record(record, schema)
        _remember(_encoded_values, key, known)
    return known


def _encode_record(record: MetadataRecord, schema: str) -> bytes:
    datum: dict[str, Any] = dict(zip(_META_FIELDS, (record.meta.commit_time, record.meta.commit_seqno,
                                                     record.meta.record_key, record.meta.partition_path,
                                                     record.meta.file_name)))
    datum["key"] = record.stored_key
    datum["type"] = int(record.type)
    for name in _PAYLOAD_FIELDS:
        datum[name] = None
    datum[_PAYLOAD_FIELD[record.type]] = _payload_to_avro(record.payload, _has_value_type(schema))
    encoder = BinaryEncoder()
    _writer(schema).write(encoder, datum)
    return encoder.getvalue()


def _payload_from_avro(record_type: MetadataRecordType, raw: Any) -> Payload:
    if record_type in (MetadataRecordType.PARTITION_LIST, MetadataRecordType.FILE_LIST):
        return FileListing({name: FileInfo(v["size"], v["isDeleted"]) for name, v in raw.items()})
    if record_type in (MetadataRecordType.COLUMN_STATS, MetadataRecordType.PARTITION_STATS):
        vt = raw.get("valueType")
        return ColumnStats(raw["fileName"], raw["columnName"], _unwrap(raw["minValue"]), _unwrap(raw["maxValue"]),
                           raw["valueCount"], raw["nullCount"], raw["totalSize"], raw["totalUncompressedSize"],
                           raw["isDeleted"], raw["isTightBound"],
                           None if vt is None else ValueTypeInfo(vt["typeOrdinal"], vt["additionalInfo"]))
    if record_type is MetadataRecordType.BLOOM_FILTER:
        return BloomFilterInfo(raw["type"], raw["timestamp"], raw["bloomFilter"], raw["isDeleted"])
    if record_type is MetadataRecordType.RECORD_INDEX:
        return RecordIndexInfo(raw["partitionName"], raw["fileIdHighBits"], raw["fileIdLowBits"], raw["fileIndex"],
                               raw["fileId"], raw["instantTime"], raw["fileIdEncoding"], raw.get("position"))
    return SecondaryIndexInfo(raw["isDeleted"])


def _payload_to_avro(payload: Payload, with_value_type: bool) -> dict[str, Any]:
    if isinstance(payload, FileListing):
        return {name: {"size": i.size, "isDeleted": i.is_deleted} for name, i in payload.entries.items()}
    if isinstance(payload, ColumnStats):
        out = {"fileName": payload.file_name, "columnName": payload.column_name,
               "minValue": _wrap(payload.min_value), "maxValue": _wrap(payload.max_value),
               "valueCount": payload.value_count, "nullCount": payload.null_count, "totalSize": payload.total_size,
               "totalUncompressedSize": payload.total_uncompressed_size, "isDeleted": payload.is_deleted,
               "isTightBound": payload.is_tight_bound}
        if with_value_type:  # 1.0.x schemas have no valueType field
            vt = payload.value_type
            out["valueType"] = None if vt is None else {"typeOrdinal": vt.type_ordinal,
                                                        "additionalInfo": vt.additional_info}
        return out
    if isinstance(payload, BloomFilterInfo):
        return {"type": payload.type, "timestamp": payload.timestamp, "bloomFilter": payload.bloom_filter,
                "isDeleted": payload.is_deleted}
    if isinstance(payload, RecordIndexInfo):
        return {"partitionName": payload.partition_name, "fileIdHighBits": payload.file_id_high_bits,
                "fileIdLowBits": payload.file_id_low_bits, "fileIndex": payload.file_index, "fileId": payload.file_id,
                "instantTime": payload.instant_time, "fileIdEncoding": payload.file_id_encoding,
                "position": payload.position}
    return {"isDeleted": payload.is_deleted}


def _unwrap(tagged: Any) -> WrappedValue | None:
    if tagged is None:
        return None
    index, record = tagged
    if record is None:
        return None
    name = WRAPPERS[index]
    if name == "ArrayWrapper":
        items = record["wrappedValues"]
        return WrappedValue(name, None if items is None else [_unwrap(item) for item in items])
    return WrappedValue(name, record["value"])


def _wrap(value: WrappedValue | None) -> Any:
    if value is None:
        return None
    index = WRAPPERS.index(value.wrapper)
    if value.wrapper == "ArrayWrapper":
        items = None if value.value is None else [_wrap(v) for v in value.value]
        return UnionValue(index, {"wrappedValues": items})
    return UnionValue(index, {"value": value.value})


def iter_records(cells: Iterator[Any], schema: str, source: str = "") -> Iterator[MetadataRecord]:
    """Records of HFile cells (objects with `key` and `value` bytes)."""
    for cell in cells:
        yield decode_record(cell.key, cell.value, schema, source)


def schema_fields(schema: str) -> list[str]:
    return [f["name"] for f in json.loads(schema)["fields"]]


# ----------------------------------------------------------------------------------------------- logical values


def _to_python(wrapped: WrappedValue, value_type: ValueTypeInfo | None) -> Any:
    """The logical value: by `valueType` (1.1) or, without it or with ordinal V1, by the wrapper (1.0.x)."""
    raw, wrapper = wrapped.value, wrapped.wrapper
    if wrapper == "ArrayWrapper":
        return None if raw is None else [None if v is None else v.to_python(value_type) for v in raw]
    vt = value_type.value_type if value_type is not None else None
    if vt is None or vt is ValueType.V1:
        return _legacy_to_python(wrapper, raw)
    if vt is ValueType.NULL:
        return None
    if vt is ValueType.DECIMAL:
        scale = int((value_type.additional_info or "0,0").split(",")[1])
        return _decimal(raw, scale) if isinstance(raw, (bytes, bytearray)) else raw
    if vt is ValueType.DATE:
        return _EPOCH_DAY + dt.timedelta(days=raw)
    if vt is ValueType.TIME_MILLIS:
        return _time_of_day(raw * 1000)
    if vt is ValueType.TIME_MICROS:
        return _time_of_day(raw)
    if vt in (ValueType.TIMESTAMP_MILLIS, ValueType.TIMESTAMP_MICROS, ValueType.TIMESTAMP_NANOS):
        return _EPOCH + dt.timedelta(microseconds=_micros(raw, vt.name))
    if vt in (ValueType.LOCAL_TIMESTAMP_MILLIS, ValueType.LOCAL_TIMESTAMP_MICROS, ValueType.LOCAL_TIMESTAMP_NANOS):
        return (_EPOCH + dt.timedelta(microseconds=_micros(raw, vt.name))).replace(tzinfo=None)
    return raw


def _legacy_to_python(wrapper: str, raw: Any) -> Any:
    if wrapper in ("DateWrapper", "LocalDateWrapper") and isinstance(raw, int):
        return _EPOCH_DAY + dt.timedelta(days=raw)
    if wrapper == "TimestampMicrosWrapper" and isinstance(raw, int):
        return _EPOCH + dt.timedelta(microseconds=raw)
    if wrapper == "TimeMicrosWrapper" and isinstance(raw, int):
        return _time_of_day(raw)
    return raw  # DecimalWrapper / TimeMicrosWrapper arrive converted by their Avro logical types


def _micros(raw: int, name: str) -> int:
    if name.endswith("MILLIS"):
        return raw * 1000
    return raw // 1000 if name.endswith("NANOS") else raw  # datetime holds microseconds; nanos are truncated


def _time_of_day(micros: int) -> dt.time:
    return (dt.datetime.min + dt.timedelta(microseconds=micros)).time()


def _decimal(unscaled: bytes, scale: int) -> decimal.Decimal:
    return decimal.Decimal(int.from_bytes(unscaled, "big", signed=True)).scaleb(-scale)


def arrow_type(value_type: ValueTypeInfo | None):
    """The pyarrow type of a 1.1 column-stats value type (None when not known)."""
    import pyarrow as pa

    vt = value_type.value_type if value_type is not None else None
    if vt is ValueType.DECIMAL:
        precision, scale = (int(x) for x in (value_type.additional_info or "38,0").split(","))
        return pa.decimal128(precision, scale)
    return {ValueType.BOOLEAN: pa.bool_(), ValueType.INT: pa.int32(), ValueType.LONG: pa.int64(),
            ValueType.FLOAT: pa.float32(), ValueType.DOUBLE: pa.float64(), ValueType.STRING: pa.string(),
            ValueType.UUID: pa.string(), ValueType.BYTES: pa.binary(), ValueType.FIXED: pa.binary(),
            ValueType.DATE: pa.date32(), ValueType.TIME_MILLIS: pa.time32("ms"), ValueType.TIME_MICROS: pa.time64("us"),
            ValueType.TIMESTAMP_MILLIS: pa.timestamp("ms", "UTC"), ValueType.TIMESTAMP_MICROS: pa.timestamp("us", "UTC"),
            ValueType.TIMESTAMP_NANOS: pa.timestamp("ns", "UTC"), ValueType.LOCAL_TIMESTAMP_MILLIS: pa.timestamp("ms"),
            ValueType.LOCAL_TIMESTAMP_MICROS: pa.timestamp("us"), ValueType.LOCAL_TIMESTAMP_NANOS: pa.timestamp("ns"),
            ValueType.NULL: pa.null()}.get(vt)


# ----------------------------------------------------------------------------------------------- building values

_WRAPPER_OF = {
    ValueType.BOOLEAN: "BooleanWrapper", ValueType.INT: "IntWrapper", ValueType.DATE: "IntWrapper",
    ValueType.TIME_MILLIS: "IntWrapper", ValueType.LONG: "LongWrapper", ValueType.TIME_MICROS: "LongWrapper",
    ValueType.FLOAT: "FloatWrapper", ValueType.DOUBLE: "DoubleWrapper", ValueType.STRING: "StringWrapper",
    ValueType.UUID: "StringWrapper", ValueType.BYTES: "BytesWrapper", ValueType.FIXED: "BytesWrapper",
    ValueType.DECIMAL: "BytesWrapper",
}


def wrap_value(value: Any, value_type: ValueTypeInfo) -> WrappedValue | None:
    """The 1.1 stored form of a logical min/max value (the inverse of `WrappedValue.to_python`)."""
    if value is None:
        return None
    vt = value_type.value_type
    if vt is ValueType.DECIMAL:
        scale = int((value_type.additional_info or "0,0").split(",")[1])
        unscaled = int(decimal.Decimal(value).scaleb(scale).to_integral_exact())
        return WrappedValue("BytesWrapper", _twos_complement(unscaled))
    if vt is ValueType.DATE and isinstance(value, dt.date):
        return WrappedValue("IntWrapper", (value - _EPOCH_DAY).days)
    if vt in (ValueType.TIME_MILLIS, ValueType.TIME_MICROS) and isinstance(value, dt.time):
        micros = ((value.hour * 60 + value.minute) * 60 + value.second) * 1_000_000 + value.microsecond
        return WrappedValue(_WRAPPER_OF[vt], micros // 1000 if vt is ValueType.TIME_MILLIS else micros)
    if vt is not None and vt.name.endswith(("TIMESTAMP_MILLIS", "TIMESTAMP_MICROS", "TIMESTAMP_NANOS")) \
            and isinstance(value, dt.datetime):
        aware = value if value.tzinfo is not None else value.replace(tzinfo=dt.UTC)
        micros = (aware - _EPOCH) // dt.timedelta(microseconds=1)
        scaled = micros // 1000 if vt.name.endswith("MILLIS") else micros * 1000 if vt.name.endswith("NANOS") \
            else micros
        return WrappedValue("LongWrapper", scaled)
    if vt not in _WRAPPER_OF:
        raise ValueError(f"no 1.1 wrapper for value type {value_type}")
    return WrappedValue(_WRAPPER_OF[vt], value)


def _twos_complement(unscaled: int) -> bytes:
    """Minimal big-endian two's complement (Java BigInteger.toByteArray)."""
    return unscaled.to_bytes(unscaled.bit_length() // 8 + 1, "big", signed=True)
