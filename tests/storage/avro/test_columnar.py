"""The columnar decoder of flat Avro records against fastavro (the general decoder) as the oracle."""
from __future__ import annotations

import json
import random

import numpy as np
import pyarrow as pa
import pytest

from storage.avro.columnar import flat_fields
from storage.exception import HoodieCorruptedLogError
from storage.avro.datum_batch import _arrow_schema
from storage.file_group.avro_block_content import decode_avro_dicts, decode_avro_records, encode_avro_records

FIELDS = [("b", "boolean"), ("i", "int"), ("l", "long"), ("f", "float"), ("d", "double"), ("s", "string"),
          ("y", "bytes")]


def _schema(nullable_first: bool) -> str:
    fields = []
    for name, t in FIELDS:
        fields.append({"name": name, "type": t})
        fields.append({"name": f"n_{name}", "type": ["null", t] if nullable_first else [t, "null"], "default": None}
                      if nullable_first else {"name": f"n_{name}", "type": [t, "null"]})
    return json.dumps({"type": "record", "name": "r", "fields": fields})


def _value(rng: random.Random, t: str):
    if t == "boolean":
        return rng.random() < 0.5
    if t == "int":
        return rng.choice([0, -1, 1, 2 ** 31 - 1, -2 ** 31, rng.randint(-1000, 1000)])
    if t == "long":
        return rng.choice([0, -1, 2 ** 63 - 1, -2 ** 63, rng.randint(-2 ** 40, 2 ** 40)])
    if t == "float":
        return float(np.float32(rng.uniform(-1e6, 1e6)))
    if t == "double":
        return rng.choice([0.0, -0.0, 1e308, rng.uniform(-1e9, 1e9)])
    if t == "string":
        return "".join(rng.choice("aé漢😀 \n") for _ in range(rng.randint(0, 12)))
    return bytes(rng.randint(0, 255) for _ in range(rng.randint(0, 9)))


@pytest.mark.parametrize("nullable_first", [True, False])
@pytest.mark.parametrize("count", [0, 1, 257])
def test_same_table_as_the_general_decoder(nullable_first, count):
    rng = random.Random(count * 2 + nullable_first)
    schema = _schema(nullable_first)
    records = []
    for _ in range(count):
        row = {}
        for name, t in FIELDS:
            row[name] = _value(rng, t)
            row[f"n_{name}"] = None if rng.random() < 0.3 else _value(rng, t)
        records.append(row)
    content = encode_avro_records(records, schema)
    assert flat_fields(schema) is not None
    got = decode_avro_records(content, schema)
    want = pa.Table.from_pylist(decode_avro_dicts(content, schema, None), schema=_arrow_schema(schema))
    assert got.equals(want)
    assert got.to_pylist() == records


@pytest.mark.parametrize("field_type", [
    {"type": "long", "logicalType": "timestamp-micros"}, {"type": "array", "items": "int"},
    ["null", "string", "int"], {"type": "record", "name": "x", "fields": []}, "null"])
def test_other_schemas_take_the_general_decoder(field_type):
    assert flat_fields({"type": "record", "name": "r", "fields": [{"name": "a", "type": field_type}]}) is None


def test_truncated_records_are_corrupt():
    schema = _schema(True)
    content = bytearray(encode_avro_records([{n: _value(random.Random(1), t) for n, t in FIELDS}
                                             | {f"n_{n}": None for n, _ in FIELDS}], schema))
    content[12] ^= 0x7F  # the first field's bytes no longer add up to the record length
    content[13:15] = b"\xff\xff"
    with pytest.raises(HoodieCorruptedLogError):
        decode_avro_records(bytes(content), schema)
