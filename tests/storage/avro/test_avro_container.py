"""Single-record Avro container files: framing as Java writes it, and clear errors on malformed bytes."""
from __future__ import annotations

import io

import fastavro
import pytest

from storage.avro.container import (
    MAGIC,
    read_avro_container,
    read_avro_container_with_schema,
    write_avro_container,
)
from storage.avro.models import HOODIE_COMMIT_METADATA, HOODIE_INDEX_PLAN, HOODIE_ROLLBACK_PLAN
from storage.avro.schema_converter import avro_schema_to_json
from storage.timeline.commit_metadata import HoodieCommitMetadata

PLAN = {
    "version": 1,
    "indexPartitionInfos": [
        {"version": 1, "metadataPartitionPath": "secondary_index_x", "indexUptoInstant": "20240101000000000",
         "extraMetadata": {}}
    ],
}
SYNC = bytes(range(16))


def _written() -> bytes:
    return write_avro_container(HOODIE_INDEX_PLAN, PLAN, sync_marker=SYNC)


def test_layout_is_javas() -> None:
    data = _written()
    schema_json = avro_schema_to_json(HOODIE_INDEX_PLAN).encode()
    # magic, one metadata entry (zig-zag 1 = 0x02), key "avro.schema" (len 11 = 0x16), then the schema text
    assert data.startswith(MAGIC + b"\x02\x16avro.schema")
    assert schema_json in data
    header_end = data.index(schema_json) + len(schema_json)
    assert data[header_end : header_end + 1 + 16] == b"\x00" + SYNC  # end of map, sync
    assert data.endswith(SYNC)
    assert b"avro.codec" not in data  # Java leaves the null codec implicit


def test_round_trip_and_writer_schema() -> None:
    record, schema = read_avro_container_with_schema(_written())
    assert record == PLAN
    assert schema == HOODIE_INDEX_PLAN


def test_sync_marker_is_random_by_default() -> None:
    first = write_avro_container(HOODIE_INDEX_PLAN, PLAN)
    second = write_avro_container(HOODIE_INDEX_PLAN, PLAN)
    assert first[-16:] != second[-16:]
    assert read_avro_container(first) == read_avro_container(second) == PLAN


def test_reads_containers_of_other_writers() -> None:
    for codec in ("null", "deflate"):
        out = io.BytesIO()
        fastavro.writer(out, fastavro.parse_schema(HOODIE_INDEX_PLAN), [PLAN], codec=codec)
        assert read_avro_container(out.getvalue()) == PLAN


def test_v8_commit_metadata_is_readable_by_the_timeline() -> None:
    record = {
        "partitionToWriteStats": {"": [{"fileId": "f-0", "path": "f-0_0-1-2_20240101000000000.parquet",
                                        "prevCommit": "null", "numWrites": 1, "partitionPath": ""}]},
        "compacted": False,
        "extraMetadata": {"schema": "{}"},
        "version": 1,
        "operationType": "INSERT",
    }
    parsed = HoodieCommitMetadata.from_bytes(write_avro_container(HOODIE_COMMIT_METADATA, record))
    assert parsed.operationType == "INSERT"
    assert parsed.write_stats()[0].fileId == "f-0"


@pytest.mark.parametrize(
    ("mangle", "message"),
    [
        (lambda d: b"", "empty"),
        (lambda d: b"PAR1" + d[4:], "not an Avro container"),
        (lambda d: d[:4], "truncated"),
        (lambda d: d[:30], "truncated"),
        (lambda d: d[: d.index(SYNC) + 16], "no record"),
        (lambda d: d[:-16], "truncated"),
        (lambda d: d[:-1] + b"\xff", "sync marker"),
        (lambda d: MAGIC + b"\xff" * 40, "varint"),
        (lambda d: d[:-20] + b"\x00\x00\x00\x00" + d[-16:], "corrupt"),
    ],
)
def test_malformed_bytes_raise_value_error(mangle, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        read_avro_container(mangle(_written()))


def test_non_bytes_and_bad_schema_header_raise_value_error() -> None:
    with pytest.raises(ValueError, match="expected bytes"):
        read_avro_container("Obj")  # type: ignore[arg-type]
    header = MAGIC + b"\x02\x16avro.schema\x06abc\x00" + SYNC
    with pytest.raises(ValueError, match="not JSON"):
        read_avro_container(header + b"\x02\x00" + SYNC)


def test_unknown_codec_is_rejected() -> None:
    out = io.BytesIO()
    fastavro.writer(out, fastavro.parse_schema(HOODIE_INDEX_PLAN), [PLAN], codec="bzip2")
    with pytest.raises(ValueError, match="codec"):
        read_avro_container(out.getvalue())


def test_writing_rejects_records_that_do_not_fit() -> None:
    with pytest.raises(ValueError, match="not in Avro record"):
        write_avro_container(HOODIE_ROLLBACK_PLAN, {"instantToRollback": {"commitTime": "1", "action": "commit", "x": 1}})
    with pytest.raises(ValueError, match="does not match"):
        write_avro_container(HOODIE_ROLLBACK_PLAN, {"version": "one"})
    with pytest.raises(ValueError, match="sync marker"):
        write_avro_container(HOODIE_INDEX_PLAN, PLAN, sync_marker=b"short")
