"""Metadata-table record payloads: every record of the fixtures decodes to typed values and encodes back to
Java's Avro bytes; records built from scratch match Java's bytes too."""
from __future__ import annotations

import collections
import datetime as dt
import decimal
import os
import struct

import pyarrow as pa
import pytest

from storage.exception import HoodieCorruptedMetadataError
from storage.io.hfile.format import FileInfoKey
from storage.io.hfile.writer import Flavor, HFileWriteOptions
from storage.metadata.hfile_io import read_records, write_records
from storage.metadata.keys import column_stats_key, partition_stats_key
from storage.metadata.records import (
    ColumnStats,
    FileInfo,
    FileListing,
    MetadataRecord,
    MetadataRecordType,
    MetaFields,
    RecordIndexInfo,
    SecondaryIndexInfo,
    ValueType,
    ValueTypeInfo,
    WrappedValue,
    arrow_type,
    decode_record,
    encode_record,
    iter_records,
    wrap_value,
)

V9 = "sample_cow_v9_txns_simple_meta"


def _cells(mdt_hfiles, fixture=None):
    for f in mdt_hfiles:
        if fixture is None or f.fixture == fixture:
            r = f.reader()
            for cell in r.cells():
                yield f, r.schema, cell


def _find(mdt_hfiles, fixture, partition, key, base=True):
    """The newest (by instant in the file name) HFile of the partition holding `key`, its schema and value."""
    found = []
    for f in mdt_hfiles:
        if f.fixture == fixture and f.mdt_partition == partition and f.is_base == base:
            r = f.reader()
            value = r.get(key)
            if value is not None:
                found.append((f.path.name.rsplit("_", 1)[-1], f.block_offset, f, r.schema, value))
    assert found, f"{key!r} not in {fixture}/{partition}"
    return max(found, key=lambda t: t[:2])[2:]


def test_every_record_round_trips_to_java_bytes(mdt_hfiles):
    counts = collections.Counter()
    for f, schema, cell in _cells(mdt_hfiles):
        rec = decode_record(cell.key, cell.value, schema, f.label)
        assert rec.key == cell.key_str and rec.stored_key == ""
        assert encode_record(rec, schema) == cell.value, (f.label, rec.key)
        counts[rec.type] += 1
    assert counts == {MetadataRecordType.COLUMN_STATS: 1021, MetadataRecordType.PARTITION_STATS: 798,
                      MetadataRecordType.FILE_LIST: 56, MetadataRecordType.PARTITION_LIST: 38,
                      MetadataRecordType.RECORD_INDEX: 82, MetadataRecordType.SECONDARY_INDEX: 62}


def test_files_partition(mdt_hfiles, fixture_table):
    f, schema, value = _find(mdt_hfiles, V9, "files", "__all_partitions__")
    rec = decode_record("__all_partitions__", value, schema)
    assert rec.type is MetadataRecordType.PARTITION_LIST
    assert rec.payload.entries == {p: FileInfo(0, False) for p in ("region=eu", "region=us", "region=apac")}
    assert rec.meta == MetaFields(file_name=f.path.name)  # base files carry their own name
    base = fixture_table(V9)
    on_disk = 0
    for f, schema, cell in _cells(mdt_hfiles, V9):
        rec = decode_record(cell.key, cell.value, schema)
        if rec.type is MetadataRecordType.FILE_LIST:
            for name, info in rec.payload.entries.items():
                path = base / rec.key / name
                if path.exists() and not info.is_deleted:
                    assert os.path.getsize(path) == info.size, path
                    on_disk += 1
    assert on_disk > 5


def test_column_stats_values(mdt_hfiles):
    by_column = {}
    for f, schema, cell in _cells(mdt_hfiles, V9):
        rec = decode_record(cell.key, cell.value, schema)
        if rec.type is MetadataRecordType.COLUMN_STATS and rec.payload.value_count:
            by_column.setdefault(rec.payload.column_name, rec.payload)
    currency = by_column["currency"]
    assert (currency.min, currency.max, currency.value_type.value_type) == ("USD", "USD", ValueType.STRING)
    fee = by_column["fee_amount"]
    assert fee.value_type == ValueTypeInfo(10, "10,2") and fee.min_value == WrappedValue("BytesWrapper", b"\x00")
    assert isinstance(fee.max, decimal.Decimal) and fee.max.as_tuple().exponent == -2
    assert arrow_type(fee.value_type) == pa.decimal128(10, 2)
    when = by_column["txn_datetime"]
    assert when.value_type.value_type is ValueType.TIMESTAMP_MICROS
    assert when.min == dt.datetime(1970, 1, 1, tzinfo=dt.UTC) + dt.timedelta(microseconds=when.min_value.value)
    assert arrow_type(when.value_type) == pa.timestamp("us", "UTC")
    day = by_column["txn_date"]
    assert isinstance(day.min, dt.date) and day.min == dt.date(1970, 1, 1) + dt.timedelta(days=day.min_value.value)
    for stats in by_column.values():  # the 1.1 stored form is what wrap_value builds from the logical value
        assert wrap_value(stats.min, stats.value_type) == stats.min_value
        assert wrap_value(stats.max, stats.value_type) == stats.max_value


def test_legacy_column_stats_have_no_value_type(mdt_hfiles):
    seen = 0
    for f, schema, cell in _cells(mdt_hfiles, "trips_mor_avro_v8_trips_8i3u1d"):
        rec = decode_record(cell.key, cell.value, schema)
        if rec.type is MetadataRecordType.COLUMN_STATS:
            assert rec.payload.value_type is None
            if rec.payload.column_name == "fare" and rec.payload.min_value:
                assert isinstance(rec.payload.min, float)
                seen += 1
    assert seen


def test_build_records_from_scratch_gives_java_bytes(mdt_hfiles):
    # record index: the sample of the notes' appendix
    f, schema, value = _find(mdt_hfiles, V9, "record_index", "TXN-008")
    built = MetadataRecord("TXN-008", MetadataRecordType.RECORD_INDEX,
                           RecordIndexInfo("region=apac", 541420586697966898, -6206175399855160771, 0, "",
                                           1772922274124), MetaFields(file_name=f.path.name))
    assert encode_record(built, schema) == value
    assert built.payload.file_group_id == "07838327-b037-4532-a9df-3c5b05dd823d-0"
    # secondary index with a NULL value
    f, schema, value = _find(mdt_hfiles, V9, "secondary_index_merchant_idx", "\x00$TXN-003")
    assert f.path.name.endswith("_00000000000000004.hfile")  # partition-init base files (1.1) leave the name null
    built = MetadataRecord("\x00$TXN-003", MetadataRecordType.SECONDARY_INDEX, SecondaryIndexInfo(False))
    assert encode_record(built, schema) == value
    # column stats and partition stats rebuilt from their logical values
    checked = 0
    for f, schema, cell in _cells(mdt_hfiles, V9):
        rec = decode_record(cell.key, cell.value, schema)
        if rec.type not in (MetadataRecordType.COLUMN_STATS, MetadataRecordType.PARTITION_STATS):
            continue
        s = rec.payload
        vt = ValueTypeInfo(s.value_type.type_ordinal, s.value_type.additional_info)
        stats = ColumnStats(s.file_name, s.column_name, wrap_value(s.min, vt), wrap_value(s.max, vt), s.value_count,
                            s.null_count, s.total_size, s.total_uncompressed_size, False, s.is_tight_bound, vt)
        rebuilt = MetadataRecord(cell.key_str, rec.type, stats, rec.meta)
        assert encode_record(rebuilt, schema) == cell.value
        if rec.type is MetadataRecordType.PARTITION_STATS:
            assert cell.key_str == partition_stats_key(s.column_name, s.file_name)
        else:
            assert cell.key_str.endswith(column_stats_key(s.column_name, "", s.file_name)[24:])
        checked += 1
    assert checked == 720  # every column_stats and partition_stats record of the fixture


def test_files_record_from_scratch(mdt_hfiles):
    f, schema, value = _find(mdt_hfiles, V9, "files", "__all_partitions__", base=False)
    rec = decode_record("__all_partitions__", value, schema)
    built = MetadataRecord("__all_partitions__", MetadataRecordType.PARTITION_LIST,
                           FileListing({p: FileInfo(0) for p in rec.payload.entries}))
    assert encode_record(built, schema) == value
    records = list(iter_records(f.reader().cells(), schema))
    assert records[0] == rec


def test_corrupted_value_is_an_error(mdt_hfiles):
    _, schema, value = _find(mdt_hfiles, V9, "record_index", "TXN-008")
    with pytest.raises(HoodieCorruptedMetadataError, match="TXN-008"):
        decode_record("TXN-008", value[:-3], schema, "rli.hfile")
    with pytest.raises(HoodieCorruptedMetadataError, match="TXN-008"):
        decode_record("TXN-008", value + b"\x00", schema, "rli.hfile")
    wrong_type = bytearray(value)
    index = value.index(b"\x00\x0a") + 1  # key "" then type 5 (zig-zag 0x0a)
    wrong_type[index] = 0x04  # type 2 (file list) with a record-index payload
    with pytest.raises(HoodieCorruptedMetadataError, match="FILE_LIST"):
        decode_record("TXN-008", bytes(wrong_type), schema, "rli.hfile")


def test_every_fixture_hfile_rebuilt_from_its_records(mdt_hfiles):
    """Decode all records of a fixture HFile, write them again (with the bloom filter computed from the keys):
    Java's file, byte for byte - base files and log-block HFiles, 1.1 and 1.0.x."""
    for f in mdt_hfiles:
        r = f.reader()
        legacy = r.version == (3, 3)
        (create_time,) = struct.unpack(">q", r.file_info[FileInfoKey.CREATE_TIME_TS])
        records = list(read_records(r))
        data = write_records(reversed(records), r.schema, base_file=f.is_base, create_time_ms=create_time,
                             options=HFileWriteOptions(flavor=Flavor.HBASE_1_0 if legacy else Flavor.HUDI_1_1))
        assert data == f.data, f.label
