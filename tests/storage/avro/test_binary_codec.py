"""The Avro binary codec (storage.avro.decoder / encoder) against fastavro as the oracle: the same bytes for every
kind of value, the same values back, and clear errors naming the field on malformed input."""
from __future__ import annotations

import copy
import datetime as dt
import decimal
import io
import random
import uuid

import fastavro
import pytest

from storage.avro.decoder import BinaryDecoder, DatumReader, decode_datum
from storage.avro.encoder import BinaryEncoder, DatumWriter, encode_datum
from storage.avro.schema_compiler import UnionValue
from storage.exception import HoodieAvroDecodeError, HoodieAvroEncodeError, HoodieAvroSchemaError


def fastavro_bytes(schema, value) -> bytes:
    out = io.BytesIO()
    fastavro.schemaless_writer(out, fastavro.parse_schema(copy.deepcopy(schema)), value)
    return out.getvalue()


def fastavro_value(schema, data: bytes):
    return fastavro.schemaless_reader(io.BytesIO(data), fastavro.parse_schema(copy.deepcopy(schema)), None)


def assert_round_trip(schema, value) -> bytes:
    """Our bytes are fastavro's, and both decoders give the same value back from them."""
    ours = encode_datum(schema, value)
    assert ours == fastavro_bytes(schema, value), (schema, value)
    back = decode_datum(schema, ours)
    assert back == fastavro_value(schema, ours)
    return ours


# ----------------------------------------------------------------------------------------------- primitives

PRIMITIVE_VALUES = {
    "null": [None],
    "boolean": [True, False],
    "int": [0, 1, -1, 63, 64, -64, -65, 8191, 8192, 2**31 - 1, -(2**31)],
    "long": [0, -1, 2**31, -(2**31) - 1, 2**40 + 3, 2**63 - 1, -(2**63)],
    "float": [0.0, -0.0, 1.5, -2.25, 3.4028234663852886e38, float("inf"), float("-inf")],
    "double": [0.0, -0.0, 1e308, -1e-308, 0.1, float("inf")],
    "bytes": [b"", b"\x00", bytes(range(256)) * 3],
    "string": ["", "a", "aé漢😀\n", "x" * 200, "漢" * 100],
}


@pytest.mark.parametrize("kind", sorted(PRIMITIVE_VALUES))
def test_every_primitive_round_trips(kind):
    for value in PRIMITIVE_VALUES[kind]:
        assert_round_trip(kind, value)
        assert decode_datum(kind, encode_datum(kind, value)) == value
        # the same with properties on the type, as Java's compiled schemas spell strings
        assert_round_trip({"type": kind, "avro.java.string": "String"}, value)


def test_nan_round_trips():
    for kind in ("float", "double"):
        assert decode_datum(kind, encode_datum(kind, float("nan"))) != decode_datum(kind, encode_datum(kind, 0.0))
        assert encode_datum(kind, float("nan")) == fastavro_bytes(kind, float("nan"))


def test_varints_are_zigzag_and_minimal():
    assert encode_datum("long", 0) == b"\x00"
    assert encode_datum("long", -1) == b"\x01"
    assert encode_datum("long", 1) == b"\x02"
    assert encode_datum("long", -65) == b"\x81\x01"
    assert encode_datum("long", 2**63 - 1) == b"\xfe" + b"\xff" * 8 + b"\x01"
    assert len(encode_datum("long", -(2**63))) == 10


# ----------------------------------------------------------------------------------------------- logical types

LOGICAL_CASES = [
    ({"type": "bytes", "logicalType": "decimal", "precision": 30, "scale": 15},
     [decimal.Decimal("0E-15"), decimal.Decimal("-128.500000000000000"), decimal.Decimal("123456789012345.123456789012345"),
      decimal.Decimal("-0.000000000000001")]),
    ({"type": "fixed", "name": "dec8", "size": 8, "logicalType": "decimal", "precision": 18, "scale": 2},
     [decimal.Decimal("0.00"), decimal.Decimal("-1.50"), decimal.Decimal("9999999999999999.99")]),
    ({"type": "int", "logicalType": "date"}, [dt.date(1970, 1, 1), dt.date(2024, 2, 29), dt.date(1, 1, 1)]),
    ({"type": "int", "logicalType": "time-millis"}, [dt.time(0, 0), dt.time(23, 59, 59, 999000)]),
    ({"type": "long", "logicalType": "time-micros"}, [dt.time(0, 0), dt.time(1, 2, 3, 4), dt.time(23, 59, 59, 999999)]),
    ({"type": "long", "logicalType": "timestamp-millis"},
     [dt.datetime(2024, 1, 1, 0, 0, 1, 2000, tzinfo=dt.timezone.utc), dt.datetime(1960, 6, 1, tzinfo=dt.timezone.utc)]),
    ({"type": "long", "logicalType": "timestamp-micros"},
     [dt.datetime(2024, 1, 1, 0, 0, 1, 3, tzinfo=dt.timezone.utc), dt.datetime(1900, 1, 1, tzinfo=dt.timezone.utc)]),
    ({"type": "long", "logicalType": "local-timestamp-millis"}, [dt.datetime(2024, 5, 6, 7, 8, 9, 10000)]),
    ({"type": "long", "logicalType": "local-timestamp-micros"}, [dt.datetime(2024, 5, 6, 7, 8, 9, 10)]),
    ({"type": "string", "logicalType": "uuid"}, [uuid.UUID("6a2f41a3-c54c-fce8-32d2-0324e1c32e22")]),
]


@pytest.mark.parametrize("schema, values", LOGICAL_CASES, ids=[c[0]["logicalType"] + "-" + c[0]["type"]
                                                               for c in LOGICAL_CASES])
def test_logical_types_round_trip(schema, values):
    for value in values:
        assert_round_trip(schema, value)
        assert decode_datum(schema, encode_datum(schema, value)) == value


def test_logical_types_take_the_underlying_value_and_naive_timestamps_as_utc():
    assert encode_datum({"type": "int", "logicalType": "date"}, 19782) == encode_datum("int", 19782)
    ts = {"type": "long", "logicalType": "timestamp-micros"}
    assert encode_datum(ts, dt.datetime(2024, 1, 1)) == encode_datum(ts, dt.datetime(2024, 1, 1, tzinfo=dt.timezone.utc))
    assert encode_datum(ts, 5) == encode_datum("long", 5)


def test_unknown_or_misplaced_logical_types_are_ignored():
    for schema in ({"type": "string", "logicalType": "no-such"}, {"type": "string", "logicalType": "date"},
                   {"type": "bytes", "logicalType": "decimal", "precision": 0}):
        base = schema["type"]
        value = PRIMITIVE_VALUES[base][-1]
        assert encode_datum(schema, value) == encode_datum(base, value)
        assert decode_datum(schema, encode_datum(base, value)) == value


def test_decimal_refuses_what_it_cannot_hold():
    schema = {"type": "bytes", "logicalType": "decimal", "precision": 4, "scale": 2}
    with pytest.raises(HoodieAvroEncodeError, match="fractional digits"):
        encode_datum(schema, decimal.Decimal("1.234"))
    with pytest.raises(HoodieAvroEncodeError, match=r"decimal\(4,2\)"):
        encode_datum(schema, decimal.Decimal("100.00"))
    assert decode_datum(schema, encode_datum(schema, decimal.Decimal("-1.5"))) == decimal.Decimal("-1.50")


# ----------------------------------------------------------------------------------------------- complex types

KIND = {"type": "enum", "name": "Kind", "symbols": ["A", "B", "C"]}
ITEM = {"type": "record", "name": "Item", "fields": [
    {"name": "id", "type": "long"},
    {"name": "tag", "type": ["null", "string"], "default": None},
    {"name": "kind", "type": KIND},
    {"name": "digest", "type": {"type": "fixed", "name": "Digest", "size": 4}},
]}
SCHEMA = {"type": "record", "name": "Outer", "namespace": "org.example", "fields": [
    {"name": "items", "type": {"type": "array", "items": ITEM}},
    {"name": "byName", "type": {"type": "map", "values": {"type": "array", "items": "Item"}}},
    {"name": "choice", "type": ["null", "string", "long", "double", "Item", {"type": "array", "items": "int"},
                                {"type": "map", "values": "boolean"}, "Kind"]},
    {"name": "first", "type": ["org.example.Item", "null"]},
    {"name": "version", "type": ["int", "null"], "default": 1},
    {"name": "nested", "type": {"type": "record", "name": "Nested", "namespace": "other", "fields": [
        {"name": "flag", "type": "boolean"}, {"name": "blob", "type": "bytes"}]}},
]}


def _item(rng: random.Random) -> dict:
    return {"id": rng.randint(-(2**62), 2**62), "tag": rng.choice([None, "", "t", "漢字" * rng.randint(0, 40)]),
            "kind": rng.choice(KIND["symbols"]), "digest": rng.randbytes(4)}


def _outer(rng: random.Random) -> dict:
    choices = [None, "s", rng.randint(-(2**40), 2**40), rng.random(), _item(rng), [rng.randint(-9, 9) for _ in range(3)],
               {"x": True, "y": False}, "C"]
    return {
        "items": [_item(rng) for _ in range(rng.randint(0, 5))],
        "byName": {f"k{i}": [_item(rng) for _ in range(rng.randint(0, 2))] for i in range(rng.randint(0, 3))},
        "choice": rng.choice(choices),
        "first": rng.choice([None, _item(rng)]),
        "version": rng.choice([None, 1, 7]),
        "nested": {"flag": rng.random() < 0.5, "blob": rng.randbytes(rng.randint(0, 300))},
    }


def test_records_arrays_maps_unions_enums_fixed_match_fastavro():
    rng = random.Random(19)
    for _ in range(200):
        value = _outer(rng)
        assert_round_trip(SCHEMA, value)
        assert decode_datum(SCHEMA, encode_datum(SCHEMA, value)) == value


def test_union_branch_is_the_first_that_takes_the_value():
    schema = ["null", "string", "long", "double", "Kind", KIND]
    # "Kind" is only defined by the last branch: the walk must fail on the forward reference
    with pytest.raises(HoodieAvroSchemaError, match="unknown Avro type 'Kind'"):
        DatumWriter(schema)
    schema = ["null", KIND, "string", "long", "double"]
    assert encode_datum(schema, "B")[:1] == b"\x02"  # a symbol goes to the enum
    assert encode_datum(schema, "other")[:1] == b"\x04"  # any other string to string
    assert encode_datum(schema, 3)[:1] == b"\x06"
    assert encode_datum(schema, 3.0)[:1] == b"\x08"
    assert encode_datum(["double", "long"], 3) == fastavro_bytes(["double", "long"], 3)  # as fastavro chooses


def test_tagged_unions_say_and_choose_the_branch():
    schema = {"type": "record", "name": "R", "fields": [{"name": "v", "type": ["null", "int", "long"]}]}
    as_long = encode_datum(schema, {"v": UnionValue(2, 7)})
    assert as_long == b"\x04\x0e" and encode_datum(schema, {"v": 7}) == b"\x02\x0e"
    assert DatumReader(schema, tag_unions=True).read(BinaryDecoder(as_long)) == {"v": UnionValue(2, 7)}
    assert decode_datum(schema, as_long) == {"v": 7}
    assert DatumReader(schema, tag_unions={"R.v"}).read(BinaryDecoder(as_long)) == {"v": UnionValue(2, 7)}
    assert DatumReader(schema, tag_unions={"R.w"}).read(BinaryDecoder(as_long)) == {"v": 7}
    with pytest.raises(HoodieAvroEncodeError, match="union branch 3 does not exist"):
        encode_datum(schema, {"v": UnionValue(3, 7)})


def test_missing_fields_take_their_default():
    value = {"items": [], "byName": {}, "choice": None, "first": None,
             "nested": {"flag": True, "blob": b""}}
    assert decode_datum(SCHEMA, encode_datum(SCHEMA, value)) == {**value, "version": 1}
    assert encode_datum(SCHEMA, value) == fastavro_bytes(SCHEMA, value)


def test_recursive_types():
    schema = {"type": "record", "name": "Node", "fields": [
        {"name": "value", "type": "int"}, {"name": "next", "type": ["null", "Node"]}]}
    value = {"value": 1, "next": {"value": 2, "next": {"value": 3, "next": None}}}
    assert_round_trip(schema, value)


def test_collections_in_several_blocks_and_with_byte_sizes():
    """Java's encoders may write an array or map as several blocks, a negative count followed by a byte size."""
    enc = BinaryEncoder()
    for count, items in ((2, [1, 2]), (-1, [3])):
        enc.write_long(count)
        if count < 0:
            enc.write_long(1)  # byte size of the block
        for item in items:
            enc.write_long(item)
    enc.write_long(0)
    assert decode_datum({"type": "array", "items": "long"}, enc.getvalue()) == [1, 2, 3]
    assert fastavro_value({"type": "array", "items": "long"}, enc.getvalue()) == [1, 2, 3]
    enc = BinaryEncoder()
    enc.write_long(-1)
    enc.write_long(3)
    enc.write_string("k")
    enc.write_boolean(True)
    enc.write_long(0)
    assert decode_datum({"type": "map", "values": "boolean"}, enc.getvalue()) == {"k": True}


def test_items_that_take_no_bytes():
    for schema, value in (({"type": "array", "items": "null"}, [None] * 1000),
                          ({"type": "array", "items": {"type": "record", "name": "E", "fields": []}}, [{}] * 3),
                          ({"type": "map", "values": "null"}, {"a": None, "b": None})):
        assert_round_trip(schema, value)


def test_schema_text_and_named_references_across_namespaces():
    text = ('{"type":"record","name":"a.A","fields":[{"name":"b","type":{"type":"record","name":"B","fields":'
            '[{"name":"x","type":"int"}]}},{"name":"again","type":"a.B"},{"name":"short","type":"B"}]}')
    value = {"b": {"x": 1}, "again": {"x": 2}, "short": {"x": 3}}
    assert decode_datum(text, encode_datum(text, value)) == value
    with pytest.raises(HoodieAvroSchemaError, match="defined twice"):
        DatumReader({"type": "record", "name": "R", "fields": [
            {"name": "a", "type": {"type": "fixed", "name": "F", "size": 1}},
            {"name": "b", "type": {"type": "fixed", "name": "F", "size": 2}}]})
    with pytest.raises(HoodieAvroSchemaError, match="not JSON"):
        DatumReader('{"type": ')
    with pytest.raises(HoodieAvroSchemaError, match="has no 'fields'"):
        DatumReader({"type": "record", "name": "R"})


# ----------------------------------------------------------------------------------------------- decode errors


def test_every_truncation_names_what_was_read():
    value = _outer(random.Random(3))
    data = encode_datum(SCHEMA, value)
    reader = DatumReader(SCHEMA)
    for cut in range(len(data)):
        with pytest.raises(HoodieAvroDecodeError, match="truncated|items announced") as err:
            reader.read(BinaryDecoder(data[:cut]))
        assert any(name in str(err.value) for name in ("Outer.", "Item.", "Nested.")), str(err.value)


def test_truncation_in_a_field_names_the_field():
    schema = {"type": "record", "name": "HoodieDeleteRecord", "fields": [
        {"name": "recordKey", "type": ["null", "string"]}, {"name": "orderingVal", "type": ["null", "double"]}]}
    data = encode_datum(schema, {"recordKey": "k", "orderingVal": 1.5})
    with pytest.raises(HoodieAvroDecodeError, match=r"HoodieDeleteRecord\.orderingVal: truncated Avro data: 8 bytes"):
        decode_datum(schema, data[:-1])
    with pytest.raises(HoodieAvroDecodeError, match=r"HoodieDeleteRecord\.recordKey: truncated"):
        decode_datum(schema, data[:2])


@pytest.mark.parametrize("schema, data, message", [
    ("long", b"\xff" * 11, "over ten bytes"),
    ("long", b"\xff" * 9 + b"\x7f", "over 64 bits"),
    ("int", encode_datum("long", 2**31), "int out of range"),
    ("boolean", b"\x02", "boolean byte 2 out of range"),
    ("string", b"\x04\xff\xfe", "not UTF-8"),
    ("bytes", b"\x03", "negative length"),
    (["null", "string"], b"\x04", r"index 2 out of range \(0\.\.1\)"),
    (KIND, b"\x06", r"Kind: index 3 out of range"),
    ({"type": "array", "items": "long"}, b"\xfe\xff\xff\xff\x0f", "items announced"),
    ({"type": "map", "values": "null"}, b"\x06\x00", "items announced"),
    ({"type": "array", "items": "null"}, encode_datum("long", 2**40), "items announced"),
    ({"type": "long", "logicalType": "timestamp-micros"}, encode_datum("long", 2**62), "out of range"),
    ({"type": "long", "logicalType": "time-micros"}, encode_datum("long", -1), "out of range"),
    ("int", b"\x02\x00", "stray bytes"),
])
def test_malformed_data_raises_decode_error(schema, data, message):
    with pytest.raises(HoodieAvroDecodeError, match=message):
        decode_datum(schema, data)


def test_random_bytes_only_ever_raise_decode_errors():
    rng = random.Random(7)
    reader = DatumReader(SCHEMA)
    valid = encode_datum(SCHEMA, _outer(rng))
    for case in range(400):
        if case % 2:
            data = rng.randbytes(rng.randint(0, 200))
        else:  # a valid datum with a few bytes flipped
            damaged = bytearray(valid)
            for _ in range(rng.randint(1, 4)):
                damaged[rng.randrange(len(damaged))] = rng.randrange(256)
            data = bytes(damaged)
        try:
            reader.read(BinaryDecoder(data))
        except HoodieAvroDecodeError:
            pass


# ----------------------------------------------------------------------------------------------- encode errors


@pytest.mark.parametrize("value, message", [
    ({"v": {"id": 1, "kind": "A", "digest": b"1234", "extra": 1}}, r"Outer\.v: fields \['extra'\] are not in Avro record 'Item'"),
    ({"v": {"id": "1", "kind": "A", "digest": b"1234"}}, r"Item\.id: expected an Avro long"),
    ({"v": {"id": 2**63, "kind": "A", "digest": b"1234"}}, r"Item\.id: expected an Avro long"),
    ({"v": {"id": 1, "kind": "Z", "digest": b"1234"}}, r"Item\.kind: expected a symbol of enum Kind"),
    ({"v": {"id": 1, "kind": "A", "digest": b"123"}}, r"Item\.digest: expected 4 bytes"),
    ({"v": {"id": 1, "kind": "A", "digest": b"1234", "tag": 5}}, r"Item\.tag: expected a string"),
    ({"v": None, "n": [1, "x"]}, r"Outer\.n\[\]: expected an Avro int"),
    ({"v": None, "n": [], "m": {1: True}}, r"Outer\.m key: expected a string"),
    ({"v": None, "f": 1e39}, r"Outer\.f: .* does not fit an Avro float"),
    ({"v": None, "s": "\ud800"}, r"Outer\.s: string cannot be UTF-8 encoded"),
    ({"v": None, "b": True}, r"Outer\.b: expected a value of one of the 3 union branches"),
])
def test_values_that_do_not_fit_name_the_field(value, message):
    schema = {"type": "record", "name": "Outer", "fields": [
        {"name": "v", "type": ["null", ITEM]},
        {"name": "n", "type": {"type": "array", "items": "int"}, "default": []},
        {"name": "m", "type": {"type": "map", "values": "boolean"}, "default": {}},
        {"name": "f", "type": "float", "default": 0.0},
        {"name": "s", "type": "string", "default": ""},
        {"name": "b", "type": ["int", "string", "null"], "default": 0},
    ]}
    with pytest.raises(HoodieAvroEncodeError, match=message):
        encode_datum(schema, value)
