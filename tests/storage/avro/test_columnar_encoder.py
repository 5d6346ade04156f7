"""The columnar encoder of flat Avro records against fastavro's per-record writer (the encoder it replaces on
flat schemas) as the oracle: the same bytes, decodable by the existing decoders, None where it does not apply."""
from __future__ import annotations

import datetime as dt
import json
import math
import random

import numpy as np
import pyarrow as pa
import pytest

from storage.avro.columnar_encoder import encodable_fields, encode_flat_datums
from storage.avro.datum_batch import encode_datums, encode_table_datums
from storage.exception import HoodieAvroEncodeError
from storage.file_group.avro_block_content import (
    decode_avro_dicts,
    decode_avro_records,
    encode_avro_records,
    encode_avro_table,
)
from storage.file_group.log_block import AvroDataBlock

UTC = dt.UTC
# (avro type, arrow type) of every field kind, logical types as the schema converter writes them
KINDS = {
    "boolean": ("boolean", pa.bool_()),
    "int": ("int", pa.int32()),
    "long": ("long", pa.int64()),
    "float": ("float", pa.float32()),
    "double": ("double", pa.float64()),
    "string": ("string", pa.string()),
    "bytes": ("bytes", pa.binary()),
    "date": ({"type": "int", "logicalType": "date"}, pa.date32()),
    "ts_micros": ({"type": "long", "logicalType": "timestamp-micros"}, pa.timestamp("us", tz="UTC")),
    "ts_millis": ({"type": "long", "logicalType": "timestamp-millis"}, pa.timestamp("ms", tz="UTC")),
    "local_micros": ({"type": "long", "logicalType": "local-timestamp-micros"}, pa.timestamp("us")),
    "local_millis": ({"type": "long", "logicalType": "local-timestamp-millis"}, pa.timestamp("ms")),
}


def _value(rng: random.Random, kind: str):
    if kind == "boolean":
        return rng.random() < 0.5
    if kind == "int":
        return rng.choice([0, -1, 1, 63, 64, -64, -65, 2**31 - 1, -(2**31), rng.randint(-10**6, 10**6)])
    if kind == "long":
        return rng.choice([0, -1, 2**63 - 1, -(2**63), 2**56, -(2**56) - 1, rng.randint(-(2**40), 2**40)])
    if kind == "float":
        return float(np.float32(rng.choice([0.0, -0.0, math.nan, math.inf, -math.inf, 3.4e38, rng.uniform(-1e6, 1e6)])))
    if kind == "double":
        return rng.choice([0.0, -0.0, math.nan, math.inf, -math.inf, 1e308, 5e-324, rng.uniform(-1e9, 1e9)])
    if kind == "string":
        return "".join(rng.choice("aé漢😀 \n\0") for _ in range(rng.choice([0, 1, rng.randint(0, 200)])))
    if kind == "bytes":
        return bytes(rng.randint(0, 255) for _ in range(rng.choice([0, rng.randint(0, 140)])))
    if kind == "date":
        return dt.date(1970, 1, 1) + dt.timedelta(days=rng.randint(-700_000, 2_000_000))
    micros = rng.choice([0, -1, rng.randint(-(2**50), 2**50)])
    if kind.endswith("millis"):
        micros -= micros % 1000
    value = dt.datetime(1970, 1, 1) + dt.timedelta(microseconds=micros)
    return value.replace(tzinfo=UTC) if kind.startswith("ts") else value


def _schema(fields: list[dict]) -> str:
    return json.dumps({"type": "record", "name": "r", "namespace": "t", "fields": fields})


def _random_table(rng: random.Random, count: int) -> tuple[pa.Table, str]:
    """Every kind three times: non-nullable, [null, T] and [T, null]; a third of the nullable values null."""
    fields, arrow, rows = [], [], [{} for _ in range(count)]
    for kind, (avro_type, arrow_type) in KINDS.items():
        for prefix, field_type in (("r", avro_type), ("n", ["null", avro_type]), ("m", [avro_type, "null"])):
            name = f"{prefix}_{kind}"
            fields.append({"name": name, "type": field_type})
            arrow.append(pa.field(name, arrow_type))
            for row in rows:
                row[name] = None if prefix != "r" and rng.random() < 0.3 else _value(rng, kind)
    return pa.Table.from_pylist(rows, schema=pa.schema(arrow)), _schema(fields)


def _old_content(table: pa.Table, schema: str) -> bytes:
    return encode_avro_records(table.to_pylist(), schema)


def _same_values(got: list[dict], want: list[dict]) -> bool:
    # NaN != NaN: compare the repr of floats
    def norm(v):
        return repr(v) if isinstance(v, float) else v
    return [{k: norm(v) for k, v in r.items()} for r in got] == [{k: norm(v) for k, v in r.items()} for r in want]


@pytest.mark.parametrize("count", [0, 1, 2, 257])
def test_same_bytes_as_the_per_record_encoder(count):
    table, schema = _random_table(random.Random(count), count)
    datums = encode_flat_datums(table, schema)
    assert datums is not None and datums.null_count == 0
    assert datums.to_pylist() == encode_datums(table.to_pylist(), schema)
    content = encode_avro_table(table, schema)
    assert content == _old_content(table, schema)
    # decoded back by both existing decoders
    assert _same_values(decode_avro_dicts(content, schema), table.to_pylist())
    assert _same_values(decode_avro_records(content, schema).to_pylist(), table.to_pylist())


def test_chunked_and_sliced_columns():
    table, schema = _random_table(random.Random(5), 300)
    chunked = pa.concat_tables([table.slice(0, 100), table.slice(100, 150), table.slice(250)])
    assert chunked.column(0).num_chunks == 3
    assert encode_avro_table(chunked, schema) == _old_content(table, schema)
    assert encode_avro_table(table.slice(7, 50), schema) == _old_content(table.slice(7, 50), schema)


@pytest.mark.parametrize("avro_type,column", [
    ("int", pa.array([1, -(2**31), None, 2**31 - 1], pa.int64())),
    ("int", pa.array([1, -128, None], pa.int8())),
    ("int", pa.array([1, 65535, None], pa.uint16())),
    ("long", pa.array([1, 2**32 - 1, None], pa.uint32())),
    ("long", pa.array([0, 2**63 - 1, None], pa.uint64())),
    ("double", pa.array([1.5, None, float("nan"), -0.0], pa.float32())),
    ("string", pa.array(["é", None, ""], pa.large_string())),
    ("string", pa.array(["é", None, "", "x" * 20], pa.string_view())),
    ("string", pa.array(["a", None, "b", "a"]).dictionary_encode()),
    ("bytes", pa.array([b"ab", None, b"\0\1"], pa.binary(2))),
    ("bytes", pa.array([b"ab", None, b""], pa.large_binary())),
    # a timestamp's integer is the instant since the epoch whatever its zone; a naive one is written as UTC
    ({"type": "long", "logicalType": "timestamp-micros"},
     pa.array([dt.datetime(2024, 3, 1, 12, 30, 1, 5), None], pa.timestamp("us"))),
    ({"type": "long", "logicalType": "timestamp-micros"},
     pa.array([dt.datetime(2024, 3, 1, 12, 30, 1, 5, tzinfo=dt.UTC), None], pa.timestamp("us", tz="Asia/Tokyo"))),
    ({"type": "long", "logicalType": "timestamp-millis"},
     pa.array([dt.datetime(1800, 3, 1, 12, 30, 1, 5000), None], pa.timestamp("ms"))),
])
def test_other_arrow_types_of_a_field(avro_type, column):
    schema = _schema([{"name": "a", "type": ["null", avro_type]}])
    table = pa.table({"a": column})
    assert encode_flat_datums(table, schema) is not None
    assert encode_avro_table(table, schema) == _old_content(table, schema)


@pytest.mark.parametrize("field_type", [
    {"type": "array", "items": "int"}, {"type": "map", "values": "long"}, ["null", "string", "int"],
    {"type": "record", "name": "x", "fields": [{"name": "y", "type": "int"}]},
    {"type": "enum", "name": "e", "symbols": ["A"]}, {"type": "fixed", "name": "f", "size": 2},
    {"type": "bytes", "logicalType": "decimal", "precision": 5, "scale": 2},
    {"type": "string", "logicalType": "uuid"}, {"type": "int", "logicalType": "time-millis"},
    {"type": "long", "logicalType": "timestamp-nanos"}, ["null", {"type": "int", "logicalType": "timestamp-micros"}],
    "null"])
def test_non_flat_schemas_are_left_to_the_per_record_encoder(field_type):
    schema = _schema([{"name": "a", "type": field_type}])
    assert encodable_fields(schema) is None
    assert encode_flat_datums(pa.table({"a": pa.nulls(1)}), schema) is None


@pytest.mark.parametrize("avro_type,column", [
    ("long", pa.array(["1"])),                                         # a string for a long
    ("float", pa.array([1.5], pa.float64())),                          # a double would be rounded
    ("double", pa.array([1], pa.int64())),
    ("string", pa.array([b"x"])),
    ("bytes", pa.array(["x"])),
    ("boolean", pa.array([1], pa.int8())),
    ("long", pa.array([dt.datetime(2020, 1, 1)], pa.timestamp("us"))),  # no logical type on the field
    ({"type": "long", "logicalType": "timestamp-micros"}, pa.array([1], pa.int64())),
    ({"type": "long", "logicalType": "timestamp-micros"}, pa.array([1], pa.timestamp("ns", tz="UTC"))),
    ({"type": "long", "logicalType": "timestamp-millis"}, pa.array([1], pa.timestamp("us", tz="UTC"))),
    ({"type": "long", "logicalType": "local-timestamp-micros"}, pa.array([1], pa.timestamp("us", tz="UTC"))),
    ({"type": "int", "logicalType": "date"}, pa.array([1], pa.date64())),
])
def test_mismatched_column_types_fall_back(avro_type, column):
    schema = _schema([{"name": "a", "type": ["null", avro_type]}])
    assert encodable_fields(schema) is not None
    assert encode_flat_datums(pa.table({"a": column}), schema) is None


def test_a_missing_column_falls_back():
    schema = _schema([{"name": "a", "type": ["null", "long"]}, {"name": "b", "type": ["null", "long"]}])
    assert encode_flat_datums(pa.table({"a": [1]}), schema) is None


def test_columns_the_schema_does_not_name_are_ignored():
    schema = _schema([{"name": "a", "type": ["null", "long"]}])
    table = pa.table({"z": ["x"], "a": [5]})
    assert encode_flat_datums(table, schema).to_pylist() == encode_datums([{"a": 5}], schema)


def test_null_in_a_non_nullable_field_raises_naming_it():
    schema = _schema([{"name": "a", "type": "long"}, {"name": "price", "type": "double"}])
    table = pa.table({"a": [1, 2], "price": [1.0, None]})
    with pytest.raises(HoodieAvroEncodeError, match="price"):
        encode_flat_datums(table, schema)
    with pytest.raises(HoodieAvroEncodeError, match="price"):
        AvroDataBlock.from_table(table, schema, "20240101000000000")


@pytest.mark.parametrize("avro_type,column", [
    ("int", pa.array([1, None, 2**31], pa.int64())),
    ("int", pa.array([-(2**31) - 1], pa.int64())),
    ("int", pa.array([2**31], pa.uint32())),
    ("long", pa.array([2**63], pa.uint64())),
])
def test_out_of_range_integers_raise_naming_the_field(avro_type, column):
    schema = _schema([{"name": "qty", "type": ["null", avro_type]}])
    with pytest.raises(HoodieAvroEncodeError, match="qty"):
        encode_flat_datums(pa.table({"qty": column}), schema)


def test_data_block_from_a_table_reads_back():
    table, schema = _random_table(random.Random(11), 100)
    block = AvroDataBlock.from_table(table, schema, "20240101000000000")
    assert block.record_count() == 100
    assert block.read_content() == AvroDataBlock.from_records(table.to_pylist(), schema,
                                                              "20240101000000000").read_content()
    assert _same_values(block.to_table().to_pylist(), table.to_pylist())


def test_data_block_of_a_nested_schema_still_encodes_per_record():
    schema = _schema([{"name": "a", "type": ["null", {"type": "array", "items": "int"}]},
                      {"name": "m", "type": ["null", {"type": "map", "values": "long"}]}])
    table = pa.table({"a": pa.array([[1, 2], None, []]),
                      "m": pa.array([[("k", 1)], None, []], pa.map_(pa.string(), pa.int64()))})
    rows = table.to_pylist(maps_as_pydicts="strict")
    assert encode_table_datums(table, schema).to_pylist() == encode_datums(rows, schema)
    block = AvroDataBlock.from_table(table, schema, "20240101000000000")
    assert list(block.iter_records()) == rows
