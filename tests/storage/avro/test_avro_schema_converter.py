"""arrow <-> Avro schema conversion checked against what Java Hudi wrote in every fixture table."""
from __future__ import annotations

import json
import struct
from pathlib import Path

import fastavro
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from fixture_tables import fixture_names
from storage.avro.schema_converter import (
    META_FIELD_NAMES,
    add_meta_fields,
    arrow_to_avro_schema,
    arrow_to_create_schema,
    avro_schema_to_json,
    avro_to_arrow_schema,
    min_bytes_for_precision,
    remove_meta_fields,
)
from storage.table.properties_file import parse_properties
from storage.timeline.commit_metadata import HoodieCommitMetadata

FIXTURES = fixture_names()
# sample_cow_v6_empty has no base file and no commit: only its create schema can be checked (by round trip)
FIXTURES_WITH_DATA = [name for name in FIXTURES if name != "sample_cow_v6_empty"]
COMMIT_SUFFIXES = (".commit", ".deltacommit", ".replacecommit")


# ----------------------------------------------------------------------------------------------- fixture access


def _props(base: Path) -> dict[str, str]:
    return parse_properties((base / ".hoodie" / "hoodie.properties").read_text(encoding="utf-8"))


def _base_files(base: Path) -> list[Path]:
    return sorted(p for p in base.rglob("*.parquet") if ".hoodie" not in p.relative_to(base).parts)


def _data_schema(base: Path) -> pa.Schema:
    """Arrow schema of the data columns of the table's first base file."""
    schema = pq.read_schema(_base_files(base)[0])
    return pa.schema([f for f in schema if f.name not in META_FIELD_NAMES])


def _completed_commit_files(base: Path) -> list[Path]:
    hoodie = base / ".hoodie"
    candidates = list(hoodie.glob("*")) + list((hoodie / "timeline").glob("*"))
    return sorted(p for p in candidates if p.is_file() and p.name.endswith(COMMIT_SUFFIXES))


def _commit_schemas(base: Path) -> list[str]:
    """extraMetadata.schema of every completed commit (v6 JSON or v8 Avro) that has one."""
    schemas = []
    for path in _completed_commit_files(base):
        schema = HoodieCommitMetadata.from_bytes(path.read_bytes()).schema
        if schema:
            schemas.append(schema)
    return schemas


def _log_header_schemas(base: Path) -> list[str]:
    """SCHEMA header (key 2) of every data/delete block in the table's log files."""
    out = []
    for log in sorted(base.rglob(".*.log.*")):
        if ".hoodie" in log.relative_to(base).parts:
            continue
        out.extend(h[2] for h in _block_headers(log.read_bytes()) if 2 in h)
    return out


def _block_headers(data: bytes) -> list[dict[int, str]]:
    headers, pos = [], 0
    while pos < len(data):
        assert data[pos : pos + 6] == b"#HUDI#"
        (length,) = struct.unpack(">q", data[pos + 6 : pos + 14])
        cursor = pos + 22  # magic, length, format version, block type
        (count,) = struct.unpack(">i", data[cursor : cursor + 4])
        cursor += 4
        header = {}
        for _ in range(count):
            key, size = struct.unpack(">ii", data[cursor : cursor + 8])
            header[key] = data[cursor + 8 : cursor + 8 + size].decode("utf-8")
            cursor += 8 + size
        headers.append(header)
        pos += 14 + length
    return headers


# ----------------------------------------------------------------------------------------------- vs Java


@pytest.mark.parametrize("name", FIXTURES_WITH_DATA)
def test_create_schema_matches_hoodie_properties(fixture_table, name: str) -> None:
    base = fixture_table(name)
    props = _props(base)
    ours = arrow_to_create_schema(_data_schema(base), props["hoodie.table.name"])
    assert avro_schema_to_json(ours) == props["hoodie.table.create.schema"]


@pytest.mark.parametrize("name", FIXTURES_WITH_DATA)
def test_commit_schema_matches_extra_metadata(fixture_table, name: str) -> None:
    base = fixture_table(name)
    java_schemas = _commit_schemas(base)
    assert java_schemas, "every fixture with data has a commit carrying extraMetadata.schema"
    ours = avro_schema_to_json(arrow_to_avro_schema(_data_schema(base), _props(base)["hoodie.table.name"]))
    for java in java_schemas:
        assert json.loads(ours) == json.loads(java)
        assert ours == java  # byte for byte, key order included


@pytest.mark.parametrize("name", FIXTURES_WITH_DATA)
def test_meta_fields_match_base_file_and_log_headers(fixture_table, name: str) -> None:
    base = fixture_table(name)
    expected = avro_schema_to_json(add_meta_fields(arrow_to_avro_schema(_data_schema(base), _props(base)["hoodie.table.name"])))
    footers = [pq.read_metadata(p).metadata.get(b"parquet.avro.schema") for p in _base_files(base)]
    written = [f.decode("utf-8") for f in footers if f] + _log_header_schemas(base)
    for java in written:
        assert java == expected


@pytest.mark.parametrize("name", FIXTURES)
def test_java_schemas_round_trip_through_arrow(fixture_table, name: str) -> None:
    base = fixture_table(name)
    props = _props(base)
    table = props["hoodie.table.name"]
    create = props["hoodie.table.create.schema"]
    assert avro_schema_to_json(arrow_to_create_schema(avro_to_arrow_schema(create), table)) == create
    for java in _commit_schemas(base):
        assert avro_schema_to_json(arrow_to_avro_schema(avro_to_arrow_schema(java), table)) == java


def test_logs_exist_in_mor_fixture(fixture_table) -> None:
    """Guards the log-header comparison above against silently checking nothing."""
    assert _log_header_schemas(fixture_table("trips_mor_avro_v6_trips_8i1u"))


# ----------------------------------------------------------------------------------------------- Spark types


def _spark_types_schema() -> pa.Schema:
    """One column per Spark SQL type, nested ones included, as arrow holds them."""
    inner = pa.struct([pa.field("a", pa.string()), pa.field("b", pa.int32())])
    return pa.schema(
        [
            pa.field("boolField", pa.bool_()),
            pa.field("intField", pa.int32()),
            pa.field("longField", pa.int64()),
            pa.field("floatField", pa.float32()),
            pa.field("doubleField", pa.float64()),
            pa.field("stringField", pa.string()),
            pa.field("binaryField", pa.binary()),
            pa.field("decimalSmall", pa.decimal128(4, 2)),
            pa.field("decimalField", pa.decimal128(10, 5)),
            pa.field("decimalWide", pa.decimal128(38, 10)),
            pa.field("dateField", pa.date32()),
            pa.field("timestampField", pa.timestamp("us", tz="UTC")),
            pa.field("timestampNtzField", pa.timestamp("us")),
            pa.field("intArray", pa.list_(pa.int32())),
            pa.field("structArray", pa.list_(inner)),
            pa.field("nestedArray", pa.list_(pa.list_(pa.string()))),
            pa.field("stringMap", pa.map_(pa.string(), pa.int64())),
            pa.field("structMap", pa.map_(pa.string(), inner)),
            pa.field("arrayMap", pa.map_(pa.string(), pa.list_(pa.float64()))),
            pa.field("structField", pa.struct([pa.field("x", pa.float64()), pa.field("child", inner)])),
        ]
    )


def test_spark_types_round_trip_arrow_avro_arrow() -> None:
    schema = _spark_types_schema()
    for convert in (arrow_to_avro_schema, arrow_to_create_schema):
        avro = convert(schema, "t")
        fastavro.parse_schema(avro)  # a valid Avro schema
        assert avro_to_arrow_schema(avro) == schema
        assert avro_to_arrow_schema(avro_schema_to_json(avro)) == schema


def test_spark_type_spellings() -> None:
    avro = arrow_to_avro_schema(_spark_types_schema(), "t")
    types = {f["name"]: f["type"][1] for f in avro["fields"]}
    assert types["decimalSmall"] == {
        "type": "fixed", "name": "fixed", "namespace": "hoodie.t.t_record.decimalSmall",
        "size": 2, "logicalType": "decimal", "precision": 4, "scale": 2,
    }
    assert types["decimalWide"]["size"] == 16
    assert types["timestampNtzField"] == {"type": "long", "logicalType": "local-timestamp-micros"}
    assert types["structArray"]["items"][1]["name"] == "structArray"
    assert types["structArray"]["items"][1]["namespace"] == "hoodie.t.t_record"
    assert types["nestedArray"] == {"type": "array", "items": ["null", {"type": "array", "items": ["null", "string"]}]}
    child = types["structField"]["fields"][1]["type"][1]
    assert (child["name"], child["namespace"]) == ("child", "hoodie.t.t_record.structField")
    assert all(f["default"] is None for f in avro["fields"])


def test_byte_and_short_become_int() -> None:
    schema = pa.schema([pa.field("b", pa.int8()), pa.field("s", pa.int16())])
    avro = arrow_to_avro_schema(schema, "t")
    assert [f["type"] for f in avro["fields"]] == [["null", "int"], ["null", "int"]]
    assert avro_to_arrow_schema(avro) == pa.schema([pa.field("b", pa.int32()), pa.field("s", pa.int32())])


def test_large_and_dictionary_types_map_to_their_plain_forms() -> None:
    schema = pa.schema(
        [
            pa.field("s", pa.large_string()),
            pa.field("d", pa.dictionary(pa.int32(), pa.string())),
            pa.field("l", pa.large_list(pa.int64())),
            pa.field("f", pa.binary(8)),
        ]
    )
    types = [f["type"][1] for f in arrow_to_avro_schema(schema, "t")["fields"]]
    assert types == ["string", "string", {"type": "array", "items": ["null", "long"]}, "bytes"]


def test_nullability_kept_when_not_forced() -> None:
    schema = pa.schema([pa.field("id", pa.int32(), nullable=False), pa.field("v", pa.string())])
    fields = arrow_to_avro_schema(schema, "t", force_nullable=False)["fields"]
    assert fields == [{"name": "id", "type": "int"}, {"name": "v", "type": ["null", "string"], "default": None}]


@pytest.mark.parametrize(
    "dtype",
    [pa.uint64(), pa.time64("us"), pa.duration("s"), pa.map_(pa.int32(), pa.string()), pa.float16()],
)
def test_types_without_spark_equivalent_are_rejected(dtype: pa.DataType) -> None:
    with pytest.raises(ValueError, match="f"):
        arrow_to_avro_schema(pa.schema([pa.field("f", dtype)]), "t")


@pytest.mark.parametrize(
    ("precision", "size"), [(1, 1), (2, 1), (3, 2), (9, 4), (10, 5), (18, 8), (19, 9), (38, 16)]
)
def test_min_bytes_for_precision(precision: int, size: int) -> None:
    assert min_bytes_for_precision(precision) == size


def test_avro_to_arrow_resolves_named_references_and_rejects_bad_input() -> None:
    avro = {
        "type": "record", "name": "r", "namespace": "n",
        "fields": [
            {"name": "a", "type": ["null", {"type": "record", "name": "inner", "fields": [{"name": "x", "type": "int"}]}]},
            {"name": "b", "type": ["null", "n.inner"], "default": None},
            {"name": "c", "type": {"type": "enum", "name": "e", "symbols": ["A"]}},
            {"name": "d", "type": {"type": "bytes", "logicalType": "decimal", "precision": 40, "scale": 2}},
        ],
    }
    inner = pa.struct([pa.field("x", pa.int32())])
    assert avro_to_arrow_schema(avro) == pa.schema(
        [pa.field("a", inner), pa.field("b", inner), pa.field("c", pa.string()), pa.field("d", pa.decimal256(40, 2))]
    )
    with pytest.raises(ValueError):
        avro_to_arrow_schema({"type": "array", "items": "int"})
    with pytest.raises(ValueError):
        avro_to_arrow_schema({"type": "record", "name": "r", "fields": [{"name": "u", "type": ["int", "string"]}]})


# ----------------------------------------------------------------------------------------------- meta fields


def test_add_meta_fields_puts_the_five_columns_first() -> None:
    data = arrow_to_avro_schema(pa.schema([pa.field("id", pa.int32())]), "t")
    with_meta = add_meta_fields(data)
    assert [f["name"] for f in with_meta["fields"]] == [*META_FIELD_NAMES, "id"]
    assert with_meta["fields"][0] == {"name": "_hoodie_commit_time", "type": ["null", "string"], "doc": "", "default": None}
    assert [f["name"] for f in data["fields"]] == ["id"]  # input untouched
    assert add_meta_fields(with_meta) == with_meta  # idempotent
    assert remove_meta_fields(with_meta) == data
