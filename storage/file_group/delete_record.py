"""Hudi's DeleteRecord and DELETE_BLOCK content (spec §6.2): int32 version 3, int32 datum length, then one Avro
datum of HoodieDeleteRecordList — an array of HoodieDeleteRecord {recordKey, partitionPath, orderingVal}.

The datum goes through the Avro codec with orderingVal's union branch tagged: the branch says the type of the
ordering value (int or long, float or double, timestamp in millis or micros, ...), which a Python value alone
does not, so a DeleteRecord carries it as an Arrow type and re-encoding picks the same branch.
"""
from __future__ import annotations

import decimal
import functools
from dataclasses import dataclass
from enum import IntEnum
from typing import Any, Callable, Iterable

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from storage.arrow_util import flat_array, large_binary_data, large_binary_offsets
from storage.avro.decoder import BinaryDecoder, DatumReader
from storage.avro.encoder import BinaryEncoder, DatumWriter
from storage.avro.schema_compiler import UnionValue
from storage.exception import HoodieAvroDecodeError, HoodieAvroEncodeError, HoodieCorruptedLogError
from storage.file_group.block_content import PREFIX_SIZE, content_prefix, read_content_prefix

_DECIMAL_PRECISION, _DECIMAL_SCALE = 30, 15
ORDERING_VALUE_BRANCHES: tuple[Any, ...] = (
    "null", "int", "long", "float", "double", "bytes", "string",
    {"type": "bytes", "logicalType": "decimal", "precision": _DECIMAL_PRECISION, "scale": _DECIMAL_SCALE},
    {"type": "int", "logicalType": "date"},
    {"type": "int", "logicalType": "time-millis"},
    {"type": "long", "logicalType": "time-micros"},
    {"type": "long", "logicalType": "timestamp-millis"},
    {"type": "long", "logicalType": "timestamp-micros"},
)
# HoodieDeleteRecordList as Java Hudi defines it (HoodieDeleteRecordList.avsc)
DELETE_RECORD_LIST_SCHEMA: dict[str, Any] = {
    "type": "record", "name": "HoodieDeleteRecordList", "namespace": "org.apache.hudi.avro.model",
    "fields": [{"name": "deleteRecordList", "type": {"type": "array", "items": {
        "type": "record", "name": "HoodieDeleteRecord", "fields": [
            {"name": "recordKey", "type": ["null", "string"], "default": None},
            {"name": "partitionPath", "type": ["null", "string"], "default": None},
            {"name": "orderingVal", "type": list(ORDERING_VALUE_BRANCHES), "default": None},
        ]}}}],
}
_READER = DatumReader(DELETE_RECORD_LIST_SCHEMA, tag_unions={"HoodieDeleteRecord.orderingVal"})
_WRITER = DatumWriter(DELETE_RECORD_LIST_SCHEMA)


class _Branch(IntEnum):
    """Index of each orderingVal union branch."""

    NULL = 0
    INT = 1
    LONG = 2
    FLOAT = 3
    DOUBLE = 4
    BYTES = 5
    STRING = 6
    DECIMAL = 7
    DATE = 8
    TIME_MILLIS = 9
    TIME_MICROS = 10
    TIMESTAMP_MILLIS = 11
    TIMESTAMP_MICROS = 12


# The Arrow type a decoded orderingVal carries, so re-encoding picks the same branch.
_BRANCH_ARROW_TYPE: dict[_Branch, pa.DataType] = {
    _Branch.NULL: pa.null(), _Branch.INT: pa.int32(), _Branch.LONG: pa.int64(), _Branch.FLOAT: pa.float32(),
    _Branch.DOUBLE: pa.float64(), _Branch.BYTES: pa.binary(), _Branch.STRING: pa.string(),
    _Branch.DECIMAL: pa.decimal128(_DECIMAL_PRECISION, _DECIMAL_SCALE), _Branch.DATE: pa.date32(),
    _Branch.TIME_MILLIS: pa.time32("ms"), _Branch.TIME_MICROS: pa.time64("us"),
    _Branch.TIMESTAMP_MILLIS: pa.timestamp("ms", tz="UTC"), _Branch.TIMESTAMP_MICROS: pa.timestamp("us", tz="UTC"),
}
_DECIMAL_CONTEXT = decimal.Context(prec=80)
_DECIMAL_QUANTUM = decimal.Decimal(1).scaleb(-_DECIMAL_SCALE)


@dataclass(frozen=True)
class DeleteRecord:
    """One deleted key. `ordering_type` (an Arrow type) names the Avro union branch of `ordering_value`;
    when None it is inferred from the value (Python int -> long, float -> double, str -> string, ...)."""

    record_key: str | None
    partition_path: str | None
    ordering_value: Any = None
    ordering_type: pa.DataType | None = None


def as_delete_record(record: DeleteRecord | tuple) -> DeleteRecord:
    return record if isinstance(record, DeleteRecord) else DeleteRecord(*record)


# ----------------------------------------------------------------------------------------------- encoding


def encode_delete_records(records: Iterable[DeleteRecord]) -> bytes:
    """DELETE_BLOCK content for `records`."""
    items = [{"recordKey": _text(r.record_key), "partitionPath": _text(r.partition_path),
              "orderingVal": _ordering_value(r.ordering_value, r.ordering_type)} for r in records]
    encoder = BinaryEncoder()
    _WRITER.write(encoder, {"deleteRecordList": items})
    return content_prefix(encoder.tell()) + encoder.getvalue()


def encode_delete_columns(keys: pa.Array, partition_path: str, ordering: pa.Array | None) -> bytes:
    """DELETE_BLOCK content for the deletes of one partition (record keys and their ordering values, None: none),
    the same bytes as `encode_delete_records` gives, encoded column by column (storage.avro.columnar_encoder)
    when the ordering values' type has a flat Avro spelling, else record by record."""
    keys = flat_array(keys)
    n = len(keys)
    ordering = pa.nulls(n) if ordering is None else flat_array(ordering)
    content = _columnar_delete_list(keys, partition_path, ordering) if n else None
    if content is None:
        otype = ordering.type if not pa.types.is_null(ordering.type) else None
        return encode_delete_records(DeleteRecord(k, partition_path, v, otype if v is not None else None)
                                     for k, v in zip(keys.to_pylist(), ordering.to_pylist()))
    return content_prefix(len(content)) + content


# the orderingVal branches whose values the columnar encoder writes, as the flat Avro type it writes them with
_COLUMNAR_BRANCH: dict[_Branch, Any] = {
    _Branch.INT: "int", _Branch.LONG: "long", _Branch.FLOAT: "float", _Branch.DOUBLE: "double",
    _Branch.STRING: "string", _Branch.DATE: {"type": "int", "logicalType": "date"},
    _Branch.TIMESTAMP_MILLIS: {"type": "long", "logicalType": "timestamp-millis"},
    _Branch.TIMESTAMP_MICROS: {"type": "long", "logicalType": "timestamp-micros"},
}
_EMPTY = pa.scalar(b"", pa.large_binary())
_KEY_FIELDS = {"type": "record", "name": "k", "fields": [{"name": "recordKey", "type": ["null", "string"]},
                                                         {"name": "partitionPath", "type": ["null", "string"]}]}


def _columnar_delete_list(keys: pa.Array, partition_path: str, ordering: pa.Array) -> bytes | None:
    """The Avro datum of the HoodieDeleteRecordList (one array block of every record), or None when the
    ordering values' type is not one `_COLUMNAR_BRANCH` writes."""
    from storage.avro.columnar_encoder import encode_flat_datums

    n = len(keys)
    head = encode_flat_datums(pa.table({"recordKey": keys, "partitionPath": pa.repeat(partition_path, n)}),
                              _KEY_FIELDS)
    if head is None:
        return None
    if pa.types.is_null(ordering.type) or ordering.null_count == n:
        tail = pa.repeat(pa.scalar(bytes([_Branch.NULL * 2]), pa.large_binary()), n)
    else:
        kind = _COLUMNAR_BRANCH.get(_branch_for(ordering.type))
        schema = {"type": "record", "name": "o", "fields": [{"name": "v", "type": ["null", kind]}]}
        values = encode_flat_datums(pa.table({"v": ordering}), schema) if kind is not None else None
        if values is None:
            return None
        tail = _with_branch(values, _branch_for(ordering.type))
    encoder = BinaryEncoder()
    encoder.write_long(n)
    body = pc.binary_join_element_wise(head, tail, _EMPTY)
    return encoder.getvalue() + large_binary_data(body) + b"\x00"


def _with_branch(datums: pa.Array, branch: _Branch) -> pa.Array:
    """Datums of a [null, kind] union with the orderingVal union's branch index in place of index 1 (both one
    zig-zag byte, each datum's first)."""
    offsets = large_binary_offsets(datums)
    data = np.frombuffer(datums.buffers()[2], dtype=np.uint8).copy()
    starts = offsets[:-1]
    data[starts[data[starts] == 2]] = branch * 2
    return pa.Array.from_buffers(pa.large_binary(), len(datums), [None, pa.py_buffer(offsets - offsets[0]),
                                                                  pa.py_buffer(data[offsets[0]:offsets[-1]])])


def _text(value: Any) -> str | None:
    return None if value is None else str(value)


def _ordering_value(value: Any, arrow_type: pa.DataType | None) -> UnionValue:
    """The orderingVal union value: the branch of the Arrow type (or of the value), the value made to fit it."""
    if isinstance(value, pa.Scalar):
        arrow_type = arrow_type or value.type
        value = value.as_py()
    if value is None:
        return UnionValue(_Branch.NULL, None)
    branch = _branch_for(arrow_type if arrow_type is not None else _infer_arrow_type(value))
    try:
        return UnionValue(branch, _BRANCH_VALUE.get(branch, _same)(value))
    except (TypeError, ValueError, ArithmeticError) as exc:
        raise HoodieAvroEncodeError(f"ordering value {value!r} cannot be written as {branch.name}: {exc}") from exc


def _infer_arrow_type(value: Any) -> pa.DataType:
    if isinstance(value, bool):  # pa.scalar would say bool, which has no branch; be explicit
        raise HoodieAvroEncodeError("boolean ordering values have no HoodieDeleteRecord orderingVal branch")
    try:
        return pa.scalar(value).type
    except (pa.ArrowException, TypeError, ValueError) as exc:
        raise HoodieAvroEncodeError(f"cannot tell the Avro type of ordering value {value!r}") from exc


@functools.lru_cache(maxsize=64)
def _branch_for(arrow_type: pa.DataType) -> _Branch:
    """The orderingVal union branch of an Arrow type (Spark's byte/short/int -> int, bigint -> long, ...)."""
    t = pa.types
    checks: tuple[tuple[Callable[[pa.DataType], bool], _Branch], ...] = (
        (t.is_null, _Branch.NULL),
        (lambda x: x in (pa.int8(), pa.int16(), pa.int32(), pa.uint8(), pa.uint16()), _Branch.INT),
        (lambda x: x in (pa.int64(), pa.uint32(), pa.uint64()), _Branch.LONG),
        (lambda x: x in (pa.float16(), pa.float32()), _Branch.FLOAT),
        (t.is_float64, _Branch.DOUBLE),
        (lambda x: t.is_binary(x) or t.is_large_binary(x) or t.is_fixed_size_binary(x), _Branch.BYTES),
        (lambda x: t.is_string(x) or t.is_large_string(x), _Branch.STRING),
        (t.is_decimal, _Branch.DECIMAL),
        (t.is_date, _Branch.DATE),
        (t.is_time32, _Branch.TIME_MILLIS),
        (t.is_time64, _Branch.TIME_MICROS),
        (lambda x: t.is_timestamp(x) and x.unit in ("s", "ms"), _Branch.TIMESTAMP_MILLIS),
        (t.is_timestamp, _Branch.TIMESTAMP_MICROS),
    )
    for check, branch in checks:
        if check(arrow_type):
            return branch
    raise HoodieAvroEncodeError(f"ordering values of type {arrow_type} have no HoodieDeleteRecord orderingVal branch")


def _same(value: Any) -> Any:
    return value


def _decimal(value: Any) -> decimal.Decimal:
    """Any decimal rounded (half up) to the branch's scale: Spark's decimals come in every scale."""
    return decimal.Decimal(value).quantize(_DECIMAL_QUANTUM, decimal.ROUND_HALF_UP, _DECIMAL_CONTEXT)


# Values of the Python type each branch's Avro type takes (Spark hands e.g. a float for a float32 column).
_BRANCH_VALUE: dict[_Branch, Callable[[Any], Any]] = {
    _Branch.INT: int, _Branch.LONG: int, _Branch.FLOAT: float, _Branch.DOUBLE: float, _Branch.BYTES: bytes,
    _Branch.STRING: str, _Branch.DECIMAL: _decimal,
}


# ----------------------------------------------------------------------------------------------- decoding


def decode_delete_records(content: bytes) -> list[DeleteRecord]:
    """DELETE_BLOCK content as DeleteRecords (orderingVal typed by the union branch it was written with)."""
    length = read_content_prefix(content, "delete block")
    if length != len(content) - PREFIX_SIZE:
        raise HoodieCorruptedLogError(f"delete list of {length} bytes in {len(content) - PREFIX_SIZE} content bytes")
    decoder = BinaryDecoder(content, PREFIX_SIZE)
    try:
        datum = _READER.read(decoder)
        decoder.expect_end("the delete list")
    except HoodieAvroDecodeError as exc:
        raise HoodieCorruptedLogError(f"undecodable delete block content: {exc}") from exc
    return [_delete_record(item) for item in datum["deleteRecordList"]]


def _delete_record(item: dict[str, Any]) -> DeleteRecord:
    branch, value = item["orderingVal"]
    return DeleteRecord(item["recordKey"], item["partitionPath"], value, _BRANCH_ARROW_TYPE[branch])
