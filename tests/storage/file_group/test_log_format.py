"""Hudi log files: blocks of the Java-written fixtures read (and re-encoded byte for byte), written and read back,
split at the data block size limit, and damaged in every way a dying writer or a bad disk can damage them."""
from __future__ import annotations

import contextlib
import dataclasses
import datetime as dt
import decimal
import io
import json
import random
import signal
import struct
from pathlib import Path

import fastavro
import pyarrow as pa
import pytest

from hudi_oracle import hudi_rs_read
from storage.config import HoodieConfig
from storage.file_group.delete_record import DELETE_RECORD_LIST_SCHEMA, DeleteRecord, decode_delete_records
from storage.file_group.log_block import (
    AvroDataBlock,
    BoundedReader,
    CommandBlock,
    CommandBlockType,
    CorruptBlock,
    DeleteBlock,
    HeaderMetadataType,
    HoodieCorruptedLogError,
    HoodieLogBlock,
    HoodieLogBlockType,
    ParquetDataBlock,
    data_block_schema,
    decode_header,
    encode_metadata,
)
from storage.file_group.log_format import (
    DATA_BLOCK_MAX_SIZE,
    LOG_FILE_MAX_SIZE,
    MAGIC,
    HoodieLogFileReader,
    HoodieLogFormatWriter,
    create_new_log_file,
    read_log_blocks,
    serialize_block,
)

T = HoodieLogBlockType
H = HeaderMetadataType

# fixture -> {log file name prefix (file id + base instant + version): block types}
FIXTURE_LOGS = {
    "sample_mor_parquet_v6_nonpartitioned": {
        ".d206069c-22c8-4532-b9ea-3cf4282342c4-0_20250117083125837.log.1": [T.PARQUET_DATA_BLOCK],
    },
    "sample_mor_parquet_v6_nonpartitioned_rollback": {
        ".0712b9f9-d2d5-4cae-bcf4-8fd7146af503-0_20250126040823628.log.1": [T.PARQUET_DATA_BLOCK],
        ".0712b9f9-d2d5-4cae-bcf4-8fd7146af503-0_20250126040823628.log.2": [T.COMMAND_BLOCK],
        ".0712b9f9-d2d5-4cae-bcf4-8fd7146af503-0_20250126040823628.log.3": [T.PARQUET_DATA_BLOCK],
    },
    "trips_mor_avro_v6_trips_8i1u": {
        ".d0304c53-6fd2-4b7a-a9d6-5ff632f79224-0_20250331030642808.log.1": [T.AVRO_DATA_BLOCK],
    },
    "trips_mor_avro_v8_trips_8i3u1d": {
        ".036ded81-9ed4-479f-bcea-7145dfa0079b-0_20251220210123755.log.1": [T.AVRO_DATA_BLOCK],
        ".8aa68f7e-afd6-4c94-b86c-8a886552e08d-0_20251220210125441.log.1": [T.DELETE_BLOCK],
        ".6e1d5cc4-c487-487d-abbe-fe9b30b1c0cc-0_20251220210127080.log.1": [T.AVRO_DATA_BLOCK],
        ".6e1d5cc4-c487-487d-abbe-fe9b30b1c0cc-0_20251220210128625.log.1": [T.DELETE_BLOCK],
        ".8aa68f7e-afd6-4c94-b86c-8a886552e08d-0_20251220210130911.log.1": [T.AVRO_DATA_BLOCK],
    },
}
DATA_TYPES = (T.AVRO_DATA_BLOCK, T.PARQUET_DATA_BLOCK)
META = ["_hoodie_commit_time", "_hoodie_commit_seqno", "_hoodie_record_key", "_hoodie_partition_path",
        "_hoodie_file_name"]


def log_files(base: Path) -> list[Path]:
    """Data-table log files of a table: dot-files with '.log.' in partition dirs, not the metadata table's."""
    return sorted(p for p in base.rglob(".*.log.*") if ".hoodie" not in p.relative_to(base).parts)


def _by_prefix(files: list[Path]) -> dict[str, Path]:
    return {f.name.rsplit("_", 1)[0]: f for f in files}


def data_rows(block: HoodieLogBlock) -> list[dict]:
    return block.to_table().to_pylist()  # type: ignore[attr-defined]


# ----------------------------------------------------------------------------------------------- fixtures


@pytest.mark.parametrize("name", sorted(FIXTURE_LOGS))
def test_fixture_block_types_and_headers(fixture_table, name):
    files = _by_prefix(log_files(fixture_table(name)))
    assert sorted(files) == sorted(FIXTURE_LOGS[name])
    for prefix, expected_types in FIXTURE_LOGS[name].items():
        blocks = read_log_blocks(files[prefix])
        assert [b.block_type for b in blocks] == expected_types
        for block in blocks:
            assert block.offset == 0 and block.size == files[prefix].stat().st_size
            assert block.footer == {}
            if block.block_type in DATA_TYPES + (T.DELETE_BLOCK,):
                assert set(block.header) == {H.INSTANT_TIME, H.SCHEMA}
                assert META == [f["name"] for f in _json(block.schema_json)["fields"][:5]]
            # v6 logs are named after the slice's base instant, v8 logs after their own deltacommit
            if "v8" in name:
                assert prefix.split("_")[1].startswith(block.instant_time)


def _json(text):
    return json.loads(text)


def test_fixture_avro_records_match_hudi_rs(fixture_table):
    base = fixture_table("trips_mor_avro_v6_trips_8i1u")
    [block] = read_log_blocks(log_files(base)[0])
    assert isinstance(block, AvroDataBlock) and block.record_count() == 1
    [row] = data_rows(block)
    assert row["rider"] == "rider-D" and row["fare"] == 25.0 and row["ts"] == 1695046462179
    assert row["_hoodie_commit_time"] == block.instant_time == "20250331030645735"
    assert row["_hoodie_file_name"] == "d0304c53-6fd2-4b7a-a9d6-5ff632f79224-0"  # the file id only in log records
    _assert_rows_in_snapshot(base, [row])


def _assert_rows_in_snapshot(base: Path, rows: list[dict]) -> None:
    """Each log row is the row hudi-rs returns for its key (all data columns, commit time and seqno)."""
    snapshot = {r["_hoodie_record_key"]: r for r in hudi_rs_read(base).to_pylist()}
    for row in rows:
        expected = snapshot[row["_hoodie_record_key"]]
        for column, value in row.items():
            if column != "_hoodie_file_name":
                assert value == expected[column], column


def test_fixture_v8_avro_and_delete_blocks_match_hudi_rs(fixture_table):
    base = fixture_table("trips_mor_avro_v8_trips_8i3u1d")
    blocks = [b for f in log_files(base) for b in read_log_blocks(f)]
    rows = {r["rider"]: r for b in blocks if isinstance(b, AvroDataBlock) for r in data_rows(b)}
    deletes = [d for b in blocks if isinstance(b, DeleteBlock) for d in b.delete_records()]
    assert sorted(rows) == ["rider-A", "rider-G", "rider-J"]
    assert all(r["fare"] == 0.0 for r in rows.values())
    assert sorted(d.record_key for d in deletes) == ["c8abbe79-8d89-47ea-b4ce-4d224bae5bfa",
                                                     "e3cf430c-889d-4015-bc98-59bdce1e530c"]
    for d in deletes:  # Spark SQL DELETE writes orderingVal = long 0 for a bigint ordering field
        assert d.ordering_value == 0 and d.ordering_type == pa.int64()
        assert d.partition_path in ("city=chennai", "city=sao_paulo")
    snapshot_keys = set(hudi_rs_read(base).column("_hoodie_record_key").to_pylist())
    assert snapshot_keys.isdisjoint(d.record_key for d in deletes)
    _assert_rows_in_snapshot(base, [rows["rider-A"], rows["rider-G"]])  # rider-J's update was deleted later


def test_fixture_parquet_block_matches_hudi_rs(fixture_table):
    base = fixture_table("sample_mor_parquet_v6_nonpartitioned")
    [block] = read_log_blocks(log_files(base)[0])
    assert isinstance(block, ParquetDataBlock) and block.record_count() == 1
    content = block.read_content()
    assert content[:4] == content[-4:] == b"PAR1"
    [row] = data_rows(block)
    assert (row["id"], row["name"], row["decimalField"]) == (1, "Alice", decimal.Decimal("12345.67890"))
    _assert_rows_in_snapshot(base, [row])


def test_fixture_rollback_command_block(fixture_table):
    base = fixture_table("sample_mor_parquet_v6_nonpartitioned_rollback")
    first, command, third = (read_log_blocks(f)[0] for f in log_files(base))
    assert isinstance(command, CommandBlock)
    assert list(command.header) == [H.INSTANT_TIME, H.COMMAND_BLOCK_TYPE, H.TARGET_INSTANT_TIME]
    assert command.command_type == CommandBlockType.ROLLBACK_BLOCK
    assert command.read_content() == b""
    assert command.target_instant_time == first.instant_time == "20250126040826878"
    assert command.instant_time == "20250126040936578"
    # the rolled-back block's commit is not in the snapshot; the later block's row is
    snapshot = hudi_rs_read(base)
    assert first.instant_time not in set(snapshot.column("_hoodie_commit_time").to_pylist())
    assert list(first.header) == [H.SCHEMA, H.INSTANT_TIME]  # Java's header order varies between files
    _assert_rows_in_snapshot(base, data_rows(third))


def _all_fixture_logs(fixture_table) -> list[Path]:
    return [f for name in sorted(FIXTURE_LOGS) for f in log_files(fixture_table(name))]


def test_fixture_blocks_reencode_byte_for_byte(fixture_table):
    for path in _all_fixture_logs(fixture_table):
        data = path.read_bytes()
        blocks = read_log_blocks(path)
        assert b"".join(serialize_block(b) for b in blocks) == data, path.name
        for block in blocks:
            rebuilt = _reencode_typed(block)
            rebuilt.header = dict(block.header)  # keep Java's header order
            assert serialize_block(rebuilt) == data[block.offset : block.offset + block.size], path.name


def _reencode_typed(block: HoodieLogBlock) -> HoodieLogBlock:
    """The block rebuilt from its decoded form (not from its content bytes)."""
    if isinstance(block, AvroDataBlock):
        return AvroDataBlock.from_table(block.to_table(), block.schema_json, block.instant_time)
    if isinstance(block, DeleteBlock):
        return DeleteBlock.from_records(block.delete_records(), block.instant_time, block.schema_json)
    if isinstance(block, CommandBlock):
        return CommandBlock.rollback(block.instant_time, block.target_instant_time)
    assert isinstance(block, ParquetDataBlock)  # parquet bytes are Spark's; only the framing is ours
    return ParquetDataBlock(header=dict(block.header), content=block.read_content())


def test_fixture_reverse_iteration(fixture_table):
    for path in _all_fixture_logs(fixture_table):
        with HoodieLogFileReader(path) as reader:
            forward = [(b.offset, b.size, b.block_type) for b in reader]
            backward = [(b.offset, b.size, b.block_type) for b in reader.reverse_blocks()]
        assert backward == forward[::-1]


# ----------------------------------------------------------------------------------------------- write, read back

DATA_SCHEMA = pa.schema([("id", pa.int32()), ("ts", pa.int64()), ("fare", pa.float64()), ("rider", pa.string()),
                         ("active", pa.bool_())])
SCHEMA_JSON = data_block_schema(DATA_SCHEMA, "trips")


def _table(n: int, start: int = 0, instant: str = "20250101000000000") -> pa.Table:
    ids = list(range(start, start + n))
    columns = {
        "_hoodie_commit_time": [instant] * n,
        "_hoodie_commit_seqno": [f"{instant}_0_{i}" for i in ids],
        "_hoodie_record_key": [str(i) for i in ids],
        "_hoodie_partition_path": ["city=x" if i % 2 else "" for i in ids],
        "_hoodie_file_name": ["fg-0"] * n,
        "id": pa.array([None if i % 7 == 3 else i for i in ids], pa.int32()),
        "ts": pa.array([None if i % 5 == 4 else 1_700_000_000_000 + i for i in ids], pa.int64()),
        "fare": [None if i % 6 == 5 else i * 1.25 for i in ids],
        "rider": [None if i % 4 == 2 else f"rider-{i}-é" for i in ids],
        "active": [None if i % 3 == 1 else i % 2 == 0 for i in ids],
    }
    return pa.table(columns, schema=pa.schema([pa.field(m, pa.string()) for m in META] + list(DATA_SCHEMA)))


def _sample_blocks() -> list[HoodieLogBlock]:
    deletes = [DeleteRecord("1", "city=x", 5, pa.int64()), DeleteRecord("2", None, None),
               DeleteRecord(None, "", "b", None)]
    return [
        AvroDataBlock.from_table(_table(20), SCHEMA_JSON, "20250101000000000"),
        DeleteBlock.from_records(deletes, "20250101000000001", SCHEMA_JSON),
        CommandBlock.rollback("20250101000000003", "20250101000000002"),
        ParquetDataBlock.from_table(_table(3, 100), SCHEMA_JSON, "20250101000000004"),
        AvroDataBlock.from_table(_table(0), SCHEMA_JSON, "20250101000000005"),
    ]


def test_avro_block_types_and_nulls_round_trip(tmp_path):
    table = _table(50)
    path = tmp_path / ".fg-0_20250101000000000.log.1_0-1-0"
    with HoodieLogFormatWriter(path) as writer:
        [result] = writer.append_block(AvroDataBlock.from_table(table, SCHEMA_JSON, "20250101000000000"))
    assert (result.offset, result.size) == (0, path.stat().st_size)
    [block] = read_log_blocks(path)
    assert isinstance(block, AvroDataBlock) and block.record_count() == 50
    assert block.header == {H.INSTANT_TIME: "20250101000000000", H.SCHEMA: SCHEMA_JSON}
    assert block.to_table().equals(table)
    # every datum is plain Avro binary under the header schema
    parsed = fastavro.parse_schema(_json(SCHEMA_JSON))
    content = block.read_content()
    first_len = struct.unpack_from(">i", content, 8)[0]
    first = fastavro.schemaless_reader(io.BytesIO(content[12 : 12 + first_len]), parsed, None)
    assert first == table.slice(0, 1).to_pylist()[0]


def test_new_log_files_never_share_a_name(tmp_path):
    """Two writers that planned the same next version with the same write token (tokens repeat across Spark
    applications) get two files: create-if-absent gives the name to the first, the second takes the next one."""
    from storage.io.storage import HoodieStorage

    storage, taken = HoodieStorage.for_path(str(tmp_path)), []
    first = create_new_log_file(storage, str(tmp_path), "fg-0", "20250101000000000", 3, "0-7-9",
                                [AvroDataBlock.from_table(_table(5), SCHEMA_JSON, "20250101000000001")])
    second = create_new_log_file(storage, str(tmp_path), "fg-0", "20250101000000000", 3, "0-7-9",
                                 [AvroDataBlock.from_table(_table(7), SCHEMA_JSON, "20250101000000002")],
                                 on_taken=taken.append)
    assert (first.name, first.version) == (".fg-0_20250101000000000.log.3_0-7-9", 3)
    assert (second.name, second.version) == (".fg-0_20250101000000000.log.4_0-7-9", 4)
    assert taken == [first.name]
    [a] = read_log_blocks(tmp_path / first.name)
    [b] = read_log_blocks(tmp_path / second.name)
    assert (a.instant_time, a.record_count(), b.instant_time, b.record_count()) == \
        ("20250101000000001", 5, "20250101000000002", 7)
    assert second.size == (tmp_path / second.name).stat().st_size


def test_avro_block_reader_schema_evolution():
    block = AvroDataBlock.from_table(_table(4), SCHEMA_JSON, "1")
    evolved = _json(SCHEMA_JSON)
    evolved["fields"].append({"name": "tip", "type": ["null", "double"], "default": None})
    table = block.to_table(reader_schema_json=_json_text(evolved))
    assert table.column("tip").to_pylist() == [None] * 4
    assert table.column("rider").to_pylist() == _table(4).column("rider").to_pylist()


def _json_text(value) -> str:
    return json.dumps(value)


def test_complex_types_round_trip_through_avro_block(fixture_table):
    """The parquet fixture's row (decimal, date, timestamp, binary, array, map, struct) through an avro block."""
    [parquet] = read_log_blocks(log_files(fixture_table("sample_mor_parquet_v6_nonpartitioned"))[0])
    table = parquet.to_table()
    avro = AvroDataBlock.from_table(table, parquet.schema_json, parquet.instant_time)
    again = read_log_blocks(serialize_block(avro))[0]
    assert again.to_table().to_pylist() == table.to_pylist()


ORDERING_CASES = [  # value, arrow type (None = inferred), union branch index, decoded value
    (7, pa.int32(), 1, 7),
    (7, None, 2, 7),  # a Python int is a long, like Spark's bigint
    (-(2**40), pa.int64(), 2, -(2**40)),
    (1.5, pa.float32(), 3, 1.5),
    (2.25, None, 4, 2.25),
    (b"\x00\xff", None, 5, b"\x00\xff"),
    ("zz", None, 6, "zz"),
    (decimal.Decimal("-128.5"), None, 7, decimal.Decimal("-128.500000000000000")),
    (dt.date(2024, 2, 29), None, 8, dt.date(2024, 2, 29)),
    (dt.time(1, 2, 3, 4000), pa.time32("ms"), 9, dt.time(1, 2, 3, 4000)),
    (dt.time(1, 2, 3, 5), None, 10, dt.time(1, 2, 3, 5)),
    (dt.datetime(2024, 1, 1, 0, 0, 1, 2000, tzinfo=dt.timezone.utc), pa.timestamp("ms"), 11,
     dt.datetime(2024, 1, 1, 0, 0, 1, 2000, tzinfo=dt.timezone.utc)),
    (dt.datetime(2024, 1, 1, 0, 0, 1, 3), None, 12, dt.datetime(2024, 1, 1, 0, 0, 1, 3, tzinfo=dt.timezone.utc)),
    (pa.scalar(9, pa.int16()), None, 1, 9),
    (None, pa.int64(), 0, None),
]


@pytest.mark.parametrize("value, arrow_type, branch, decoded", ORDERING_CASES)
def test_delete_ordering_value_branches(value, arrow_type, branch, decoded):
    block = DeleteBlock.from_records([("k", "p", value, arrow_type)], "1")
    content = block.read_content()
    # datum: array count 1, key branch 1 + len 1 + "k", partition branch 1 + len 1 + "p", then the union index
    assert content[8:15] == b"\x02\x02\x02k\x02\x02p"
    assert content[15] == branch * 2  # zig-zag
    [record] = read_log_blocks(serialize_block(block))[0].delete_records()
    assert (record.record_key, record.partition_path, record.ordering_value) == ("k", "p", decoded)
    # an independent Avro decoder agrees on the value (fastavro with the HoodieDeleteRecordList schema)
    datum = fastavro.schemaless_reader(io.BytesIO(content[8:]), fastavro.parse_schema(DELETE_RECORD_LIST_SCHEMA),
                                       None)
    [item] = datum["deleteRecordList"]
    assert item["orderingVal"] == decoded
    # re-encoding the decoded record picks the same branch
    assert DeleteBlock.from_records([record], "1").read_content() == content


def test_delete_block_rejects_unencodable_values():
    for value, arrow_type in ((True, None), (2**31, pa.int32()), (object(), None), ([1], pa.list_(pa.int32()))):
        with pytest.raises(ValueError):
            DeleteBlock.from_records([("k", "p", value, arrow_type)], "1")


def test_damaged_delete_list_names_the_field():
    content = DeleteBlock.from_records([("k", "p", 1.5, None)], "1").read_content()
    datum = content[8:-3]  # the list's end and two bytes of the double
    with pytest.raises(HoodieCorruptedLogError, match=r"HoodieDeleteRecord\.orderingVal: truncated Avro data"):
        decode_delete_records(struct.pack(">ii", 3, len(datum)) + datum)
    branch = content.index(b"\x08", 13)  # orderingVal's branch index: 4 (double), zig-zag 8
    bad = content[:branch] + b"\x1a" + content[branch + 1 :]
    with pytest.raises(HoodieCorruptedLogError, match=r"HoodieDeleteRecord\.orderingVal: index 13 out of range"):
        decode_delete_records(bad)


COLUMN_ORDERINGS = [  # ordering columns of a delete block written column by column (None: no ordering field)
    None,
    pa.array([3, None, -(2**40), 0, 7], pa.int64()),
    pa.array([3, 1, None, -8, 2], pa.int32()),
    pa.array([1.5, None, -2.25, 0.0, 1e300]),
    pa.array([1.5, 2.5, None, 0.0, -1.0], pa.float32()),
    pa.array(["b", None, "", "é", "zz"]),
    pa.array([dt.date(2024, 2, 29), None, dt.date(1970, 1, 1), dt.date(1969, 12, 31), dt.date(2038, 1, 19)]),
    pa.array([0, 1, None, -1, 2**40], pa.timestamp("ms", tz="UTC")),
    pa.array([0, 1, None, -1, 2**50], pa.timestamp("us")),
    pa.array([0, 1, None, 2, 3], pa.timestamp("s")),  # no flat spelling: record by record
    pa.array([decimal.Decimal("1.5"), None, decimal.Decimal("-2"), decimal.Decimal("0"), decimal.Decimal("3")]),
    pa.nulls(5, pa.int64()),
]


@pytest.mark.parametrize("ordering", COLUMN_ORDERINGS, ids=lambda o: "none" if o is None else str(o.type))
def test_delete_block_from_columns_equals_the_record_encoding(ordering):
    keys = pa.chunked_array([["k1", "k2é"], ["", "k4", "k5"]])
    block = DeleteBlock.from_columns(keys, "dt=2024/x", ordering, "1")
    values = ordering.to_pylist() if ordering is not None else [None] * 5
    otype = ordering.type if ordering is not None else None
    records = [DeleteRecord(k, "dt=2024/x", v, otype if v is not None else None)
               for k, v in zip(keys.to_pylist(), values)]
    assert block.read_content() == DeleteBlock.from_records(records, "1").read_content()
    datum = fastavro.schemaless_reader(io.BytesIO(block.read_content()[8:]),
                                       fastavro.parse_schema(DELETE_RECORD_LIST_SCHEMA), None)
    assert [item["recordKey"] for item in datum["deleteRecordList"]] == keys.to_pylist()
    assert DeleteBlock.from_columns(pa.array([], pa.string()), "p", None, "1").read_content() == \
        DeleteBlock.from_records([], "1").read_content()


def test_empty_delete_block():
    block = DeleteBlock.from_records([], "1")
    assert block.read_content() == struct.pack(">ii", 3, 1) + b"\x00"
    assert read_log_blocks(serialize_block(block))[0].delete_records() == []


def test_multi_block_file_and_appends_to_existing(tmp_path):
    path = tmp_path / "log"
    blocks = _sample_blocks()
    with HoodieLogFormatWriter(path) as writer:
        first = writer.append_blocks(blocks[:3])
        assert writer.size() == path.stat().st_size
    with HoodieLogFormatWriter(path) as writer:  # a second writer appends after what is there
        second = writer.append_blocks(blocks[3:])
    results = first + second
    assert [r.offset for r in results] == [0] + [sum(r.size for r in results[:i]) for i in range(1, 5)]
    read = read_log_blocks(path)
    assert [(b.offset, b.size, b.block_type) for b in read] == [(r.offset, r.size, r.block.block_type)
                                                                for r in results]
    assert [b.header for b in read] == [b.header for b in blocks]
    assert read[0].to_table().equals(_table(20))
    assert read[1].delete_records()[0] == DeleteRecord("1", "city=x", 5, pa.int64())
    assert read[1].delete_records()[2].ordering_type == pa.string()
    assert read[2].target_instant_time == "20250101000000002"
    assert read[3].to_table().equals(_table(3, 100))
    assert read[4].record_count() == 0 and read[4].to_table().num_rows == 0
    assert path.read_bytes() == b"".join(serialize_block(b) for b in blocks)


def test_lazy_reading_loads_content_on_demand(tmp_path):
    path = tmp_path / "log"
    with HoodieLogFormatWriter(path) as writer:
        writer.append_blocks(_sample_blocks())
    with HoodieLogFileReader(path) as reader:
        lazy = reader.blocks()
    assert all(b.content is None for b in lazy)
    assert lazy[0].record_count() == 20  # loads after the reader is closed
    assert lazy[0].content is not None and lazy[1].content is None
    eager = read_log_blocks(path)
    assert [b.read_content() for b in lazy] == [b.content for b in eager]


def test_data_block_split_at_max_size(tmp_path):
    table = _table(300)
    block = AvroDataBlock.from_table(table, SCHEMA_JSON, "20250101000000000")
    max_size = 2000
    path = tmp_path / "log"
    with HoodieLogFormatWriter(path, data_block_max_size=max_size) as writer:
        results = writer.append_block(block)
        writer.append_block(CommandBlock.rollback("2", "1"))  # other blocks are never split
    assert len(results) >= len(block.read_content()) // max_size + 1
    read = read_log_blocks(path)
    assert len(read) == len(results) + 1
    pieces = read[:-1]
    assert all(len(p.read_content()) <= max_size for p in pieces)
    assert all(p.header == block.header for p in pieces)
    assert pa.concat_tables(p.to_table() for p in pieces).equals(table)
    assert sum(p.record_count() for p in pieces) == 300


def test_split_keeps_an_oversized_record_alone():
    block = AvroDataBlock.from_table(_table(5), SCHEMA_JSON, "1")
    pieces = block.split(1)
    assert [p.record_count() for p in pieces] == [1] * 5
    assert block.split(len(block.read_content())) == [block]


def test_writer_size_limits_and_config(tmp_path):
    path = tmp_path / "log"
    config = HoodieConfig.of({DATA_BLOCK_MAX_SIZE.key: "1000", LOG_FILE_MAX_SIZE.key: "3000"})
    with HoodieLogFormatWriter.from_config(path, config) as writer:
        assert (writer.data_block_max_size, writer.log_file_max_size) == (1000, 3000)
        assert writer.size() == 0 and not writer.should_roll_over()
        writer.append_block(AvroDataBlock.from_table(_table(60), SCHEMA_JSON, "1"))
        assert writer.size() == path.stat().st_size and writer.should_roll_over()
    assert DATA_BLOCK_MAX_SIZE.default == 256 * 1024 * 1024 and LOG_FILE_MAX_SIZE.default == 1024**3
    with pytest.raises(ValueError):
        writer.append_block(CommandBlock.rollback("2", "1"))
    with pytest.raises(ValueError):
        serialize_block(CorruptBlock(content=b"x"))


def test_header_map_codec_and_unknown_keys():
    header = {H.SCHEMA: "{}", H.INSTANT_TIME: "1", 42: "future key", H.IS_PARTIAL: "ünïcode"}
    encoded = encode_metadata(header)
    assert encoded[:4] == b"\x00\x00\x00\x04"
    decoded = decode_header(BoundedReader.over(encoded))
    assert decoded == header and list(decoded) == list(header)
    with pytest.raises(HoodieCorruptedLogError):
        decode_header(BoundedReader.over(encoded[:-1]))


def test_empty_file_has_no_blocks(tmp_path):
    (tmp_path / "empty").write_bytes(b"")
    assert read_log_blocks(tmp_path / "empty") == []
    assert read_log_blocks(b"") == []


# ----------------------------------------------------------------------------------------------- corruption


def _valid_log() -> bytes:
    return b"".join(serialize_block(b) for b in _sample_blocks())


def _frames(data: bytes) -> list[tuple[int, int, HoodieLogBlockType, bytes]]:
    return [(b.offset, b.size, b.block_type, data[b.offset : b.offset + b.size]) for b in read_log_blocks(data)]


def test_truncated_last_block_never_hides_earlier_blocks(tmp_path):
    data = _valid_log()
    frames = _frames(data)
    last_offset = frames[-1][0]
    for cut in range(last_offset + 1, len(data)):
        blocks = read_log_blocks(data[:cut])
        assert _frames(data[:cut])[:-1] == frames[:-1]
        tail = blocks[-1]
        assert isinstance(tail, CorruptBlock) and (tail.offset, tail.size) == (last_offset, cut - last_offset)
        assert tail.read_content() == data[last_offset:cut]
    # a writer appending after the torn block: the new block is found again past the corrupt region
    path = tmp_path / "log"
    path.write_bytes(data[: last_offset + 30])
    with HoodieLogFormatWriter(path) as writer:
        [appended] = writer.append_block(CommandBlock.rollback("9", "8"))
    blocks = read_log_blocks(path)
    assert [b.block_type for b in blocks] == [f[2] for f in frames[:-1]] + [T.CORRUPT_BLOCK, T.COMMAND_BLOCK]
    assert (blocks[-1].offset, blocks[-1].target_instant_time) == (appended.offset, "8")
    assert [b.offset for b in HoodieLogFileReader(path).reverse_blocks()] == [b.offset for b in blocks][::-1]


def test_each_corruption_rule():
    data = _valid_log()
    frames = _frames(data)
    second = frames[1][0]
    cases = {
        "no magic": data[:second] + b"#HUDX#" + data[second + 6 :],
        "runs past the end": data[:second + 6] + struct.pack(">q", 10**9) + data[second + 14 :],
        "reverse length": data[: frames[1][0] + frames[1][1] - 1] + b"\x07" + data[frames[1][0] + frames[1][1]:],
    }
    for reason, damaged in cases.items():
        blocks = read_log_blocks(damaged)
        assert blocks[0].block_type == frames[0][2]
        assert isinstance(blocks[1], CorruptBlock) and reason in blocks[1].reason
        assert blocks[1].offset == second and blocks[1].size == frames[1][1]  # up to the next magic
        assert [b.offset for b in blocks[2:]] == [f[0] for f in frames[2:]]


def test_well_framed_block_with_garbage_inside():
    garbage = dataclasses.replace(_sample_blocks()[0], content=struct.pack(">ii", 3, 2) + b"\x00\x00\x00\x02\xff\xff"
                                  + b"\x00\x00\x00\x01\x80")
    [block] = read_log_blocks(serialize_block(garbage))
    with pytest.raises(HoodieCorruptedLogError):
        block.to_table()
    bad_type = bytearray(serialize_block(CommandBlock.rollback("2", "1")))
    bad_type[18:22] = struct.pack(">i", 99)
    [block] = read_log_blocks(bytes(bad_type))
    assert isinstance(block, CorruptBlock) and "unknown block type 99" in block.reason
    assert block.size == len(bad_type)


@contextlib.contextmanager
def _time_limit(seconds: float):
    def _expired(signum, frame):
        raise TimeoutError("log reading took too long (hang?)")

    previous = signal.signal(signal.SIGALRM, _expired)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


def _decode_everything(block: HoodieLogBlock) -> None:
    """Run the typed decoder of a block; only HoodieCorruptedLogError may come out."""
    try:
        if isinstance(block, (AvroDataBlock, ParquetDataBlock)):
            block.to_table()
            block.record_count()
        elif isinstance(block, DeleteBlock):
            block.delete_records()
        elif isinstance(block, CommandBlock):
            _ = block.command_type
        block.read_content()
    except HoodieCorruptedLogError:
        pass


def _read_damaged(data: bytes) -> list[HoodieLogBlock]:
    with _time_limit(5.0):
        with HoodieLogFileReader(data) as reader:
            blocks = reader.blocks()
            backward = list(reader.reverse_blocks())
        assert [(b.offset, b.size) for b in backward] == [(b.offset, b.size) for b in blocks][::-1]
        assert sum(b.size for b in blocks) == len(data)  # blocks and corrupt regions tile the file
        for block in blocks:
            _decode_everything(block)
    return blocks


def _intact(blocks: list[HoodieLogBlock], data: bytes) -> set[tuple[int, bytes]]:
    return {(b.offset, data[b.offset : b.offset + b.size]) for b in blocks if not isinstance(b, CorruptBlock)}


def _fuzz_corpus(fixture_table) -> list[bytes]:
    fixture_bytes = [p.read_bytes() for p in _all_fixture_logs(fixture_table)]
    return [_valid_log(), b"".join(fixture_bytes[4:]), b"".join(fixture_bytes[:4])]


def test_fuzz_damaged_logs(fixture_table):
    rng = random.Random(20250117)
    corpus = _fuzz_corpus(fixture_table)
    originals = [_frames(data) for data in corpus]
    for case in range(300):
        which = rng.randrange(len(corpus))
        data, frames = corpus[which], originals[which]
        kind = case % 6
        if kind == 0:  # random bytes, sometimes with magics sprinkled in
            junk = bytearray(rng.randbytes(rng.randrange(0, 3000)))
            for _ in range(rng.randrange(0, 4)):
                at = rng.randrange(0, len(junk) + 1)
                junk[at:at] = MAGIC + (rng.randbytes(8) if rng.random() < 0.5 else struct.pack(">q", 40))
            _read_damaged(bytes(junk))
            continue
        if kind == 1:  # truncated at a random offset
            cut = rng.randrange(0, len(data))
            damaged, first_bad = data[:cut], cut
        elif kind == 2:  # bit flips
            damaged, first_bad = _flip_bits(data, rng, rng.randrange(1, 4))
        elif kind == 3:  # garbage appended
            damaged, first_bad = data + rng.randbytes(rng.randrange(1, 200)), len(data)
        elif kind == 4:  # garbage prepended: every original block must survive, shifted
            pad = rng.randbytes(rng.randrange(1, 200))
            blocks = _read_damaged(pad + data)
            assert {(o + len(pad), raw) for o, _, _, raw in frames} <= _intact(blocks, pad + data)
            continue
        else:  # a slice of the file overwritten with zeros or random bytes
            start = rng.randrange(0, len(data))
            end = min(len(data), start + rng.randrange(1, 64))
            filler = bytes(end - start) if rng.random() < 0.5 else rng.randbytes(end - start)
            damaged, first_bad = data[:start] + filler + data[end:], start
        blocks = _read_damaged(damaged)
        before = {(o, raw) for o, size, _, raw in frames if o + size <= first_bad}
        assert before <= _intact(blocks, damaged), f"case {case}: a block before the damage was lost"
        if kind in (2, 5):  # in-place damage: the blocks after the damaged ones survive too
            damaged_end = max(o + size for o, size, _, raw in frames if damaged[o : o + size] != raw)
            after = {(o, raw) for o, _, _, raw in frames if o >= damaged_end}
            assert after <= _intact(blocks, damaged), f"case {case}: a block after the damage was lost"


def _flip_bits(data: bytes, rng: random.Random, count: int) -> tuple[bytes, int]:
    buf = bytearray(data)
    positions = [rng.randrange(len(buf)) for _ in range(count)]
    for pos in positions:
        buf[pos] ^= 1 << rng.randrange(8)
    return bytes(buf), min(positions)


def test_fuzz_every_truncation_point_of_a_small_file():
    data = b"".join(serialize_block(b) for b in (_sample_blocks()[2], _sample_blocks()[1], _sample_blocks()[2]))
    frames = _frames(data)
    for cut in range(len(data) + 1):
        blocks = _read_damaged(data[:cut])
        whole = [f for f in frames if f[0] + f[1] <= cut]
        assert [(b.offset, b.size) for b in blocks[: len(whole)]] == [(f[0], f[1]) for f in whole]
        assert all(isinstance(b, CorruptBlock) for b in blocks[len(whole):])


def test_file_and_bytes_readers_agree_on_damaged_files(tmp_path, monkeypatch):
    import storage.file_group.log_format as log_format

    monkeypatch.setattr(log_format, "_SCAN_CHUNK", 7)  # magics straddling chunk borders must still be found
    data = _valid_log()
    rng = random.Random(7)
    for case in range(20):
        damaged, _ = _flip_bits(data, rng, 2)
        damaged = rng.randbytes(case) + damaged[: len(damaged) - case * 3]
        path = tmp_path / f"log{case}"
        path.write_bytes(damaged)
        from_file = [(b.offset, b.size, b.block_type, b.read_content()) for b in read_log_blocks(path)]
        from_bytes = [(b.offset, b.size, b.block_type, b.read_content()) for b in read_log_blocks(damaged)]
        assert from_file == from_bytes
