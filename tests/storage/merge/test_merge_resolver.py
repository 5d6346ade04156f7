"""One merge resolver: the same batches (out-of-order ordering values, a soft delete older than the stored row,
a delete operation) through a copy-on-write and a merge-on-read table give the same snapshot, for each payload
class and merge mode, before and after compaction; hudi-rs reads both tables the same."""
from __future__ import annotations

import pytest
from hudi_oracle import arrow_rows, hudi_rs_read, rows, spark_rows

from storage.config import HoodieConfig
from storage.exception import HoodieConfigError, HoodieMergeError
from storage.merge import MergeSpec, RecordMergeMode, resolve_merge_spec
from storage.table.table_config import HoodieTableConfig
from storage.table_service.compaction import run_compaction, schedule_compaction

EVENT, COMMIT = RecordMergeMode.EVENT_TIME_ORDERING, RecordMergeMode.COMMIT_TIME_ORDERING
_PKG = "org.apache.hudi.common.model."
DEFAULT, OVERWRITE, EVENT_TIME = (_PKG + "DefaultHoodieRecordPayload", _PKG + "OverwriteWithLatestAvroPayload",
                                  _PKG + "EventTimeAvroPayload")
PAYLOAD, MODE = "hoodie.datasource.write.payload.class", "hoodie.record.merge.mode"

SCHEMA = "id int, v string, ts long, dt string, _hoodie_is_deleted boolean"
COLS = ["id", "v", "ts", "dt"]
# (operation, rows): id, v, ts, dt, soft-deleted
BATCHES = [
    ("upsert", [(1, "a1", 10, "p1", False), (2, "a2", 10, "p1", False), (3, "a3", 10, "p2", False),
                (4, "a4", 10, "p2", False)]),
    ("upsert", [(1, "b1", 5, "p1", False), (2, "b2", 20, "p1", False), (5, "b5", 1, "p2", False),
                (4, "b4", 5, "p2", True)]),   # 1: older event; 4: a soft delete older than the stored row
    ("delete", [(3, "c3", 1, "p2", False)]),  # a delete operation removes whatever its ordering value
    ("upsert", [(2, "d2", 15, "p1", False), (5, "d5", 7, "p2", False)]),
]
BY_EVENT_TIME = {(1, "a1", 10, "p1"), (2, "b2", 20, "p1"), (4, "a4", 10, "p2"), (5, "d5", 7, "p2")}
BY_COMMIT_TIME = {(1, "b1", 5, "p1"), (2, "d2", 15, "p1"), (5, "d5", 7, "p2")}

CASES = {
    "DefaultHoodieRecordPayload": ({PAYLOAD: DEFAULT}, BY_EVENT_TIME),
    "OverwriteWithLatestAvroPayload": ({PAYLOAD: OVERWRITE}, BY_COMMIT_TIME),
    "EventTimeAvroPayload": ({PAYLOAD: EVENT_TIME}, BY_EVENT_TIME),
    "EVENT_TIME_ORDERING": ({PAYLOAD: OVERWRITE, MODE: "EVENT_TIME_ORDERING"}, BY_EVENT_TIME),
    "COMMIT_TIME_ORDERING": ({PAYLOAD: DEFAULT, MODE: "commit_time_ordering"}, BY_COMMIT_TIME),
}


def _options(name: str, table_type: str, extra: dict) -> dict:
    return {"hoodie.table.name": name, "hoodie.datasource.write.table.type": table_type,
            "hoodie.datasource.write.recordkey.field": "id", "hoodie.datasource.write.precombine.field": "ts",
            "hoodie.datasource.write.partitionpath.field": "dt", **extra}


def _write_all(spark, path, opts) -> None:
    for operation, data in BATCHES:
        spark.createDataFrame(data, SCHEMA).write.format("hudi").options(**opts) \
            .option("hoodie.datasource.write.operation", operation).mode("append").save(str(path))


def _snapshot(spark, path) -> list:
    return spark_rows(spark.read.format("hudi").load(str(path)), COLS)


@pytest.mark.parametrize("case", list(CASES))
def test_cow_and_mor_merge_the_same(spark, tmp_path, case):
    extra, survivors = CASES[case]
    expected = rows([dict(zip(COLS, r)) for r in survivors], COLS)
    cow, mor = tmp_path / "cow", tmp_path / "mor"
    _write_all(spark, cow, _options("cow", "COPY_ON_WRITE", extra))
    _write_all(spark, mor, _options("mor", "MERGE_ON_READ", extra))
    assert _snapshot(spark, cow) == expected
    assert _snapshot(spark, mor) == expected
    assert arrow_rows(hudi_rs_read(str(cow)), COLS) == expected
    assert arrow_rows(hudi_rs_read(str(mor)), COLS) == expected
    # compaction merges the logs into base files the same way
    assert schedule_compaction(str(mor)) is not None
    run_compaction(spark, str(mor))
    assert _snapshot(spark, mor) == expected
    assert spark_rows(spark.read.format("hudi").option("hoodie.datasource.query.type", "read_optimized")
                      .load(str(mor)), COLS) == expected


def _spec(table_props: dict, ordering_field: str | None, options: dict | None = None) -> MergeSpec:
    return resolve_merge_spec(HoodieTableConfig(table_props), ordering_field, HoodieConfig.of(options))


def test_merge_spec_inference():
    assert _spec({MODE: "COMMIT_TIME_ORDERING", "hoodie.compaction.payload.class": DEFAULT}, "ts") \
        == MergeSpec(COMMIT, "ts", "DefaultHoodieRecordPayload")
    assert _spec({"hoodie.compaction.payload.class": EVENT_TIME}, "ts").mode == EVENT
    assert _spec({"hoodie.table.payload.class": OVERWRITE}, "ts").mode == COMMIT
    assert _spec({}, "ts") == MergeSpec(EVENT, "ts", "")
    assert _spec({}, None).mode == COMMIT  # nothing to order events by
    assert _spec({MODE: "EVENT_TIME_ORDERING"}, None).mode == COMMIT
    # options before the table's properties, an explicit mode before a payload
    assert _spec({"hoodie.compaction.payload.class": OVERWRITE}, "ts", {MODE: "EVENT_TIME_ORDERING"}).mode == EVENT
    assert _spec({"hoodie.compaction.payload.class": DEFAULT}, "ts", {PAYLOAD: OVERWRITE}).mode == COMMIT
    with pytest.raises(HoodieMergeError, match="CUSTOM"):
        _spec({MODE: "CUSTOM"}, "ts")


def test_unsupported_merge_mode_fails_before_writing(spark, tmp_path):
    path = tmp_path / "custom"
    with pytest.raises(HoodieConfigError, match="option hoodie.record.merge.mode"):
        _write_all(spark, path, _options("custom", "COPY_ON_WRITE", {MODE: "CUSTOM"}))
    assert not path.exists()
