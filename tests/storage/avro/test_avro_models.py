"""The timeline-metadata Avro models against the writer schemas embedded in the fixtures, and write/read round trips."""
from __future__ import annotations

import copy
import io
import os
from pathlib import Path
from typing import Any

import fastavro
import pytest

from fixture_tables import fixture_names
from storage.avro.container import MAGIC, read_avro_container, read_avro_container_with_schema, write_avro_container
from storage.avro.decoder import BinaryDecoder, DatumReader
from storage.avro.encoder import encode_datum
from storage.avro.models import MODEL_SCHEMAS, NAMESPACE, field_names, model_schema, models_for
from storage.avro.schema_converter import avro_schema_to_json
from storage.file_group.avro_block_content import avro_record_bounds
from storage.file_group.log_block import AvroDataBlock

FIXTURES = fixture_names()


def _fixture_version(base: Path) -> int:
    props = next(base.rglob(".hoodie/hoodie.properties")).read_text()
    return int(next(line.split("=", 1)[1] for line in props.splitlines() if line.startswith("hoodie.table.version=")))


def _avro_instant_files(base: Path) -> list[Path]:
    """Every Avro container under `.hoodie/` (data table and metadata table timelines)."""
    found = []
    for root, _dirs, files in os.walk(base / ".hoodie"):
        for name in files:
            path = Path(root) / name
            with path.open("rb") as fh:
                if fh.read(4) == MAGIC:
                    found.append(path)
    return sorted(found)


def _record_fields(schema: Any, out: dict[str, list[str]]) -> dict[str, list[str]]:
    """Field names of every record defined in `schema`, by short record name."""
    if isinstance(schema, list):
        for branch in schema:
            _record_fields(branch, out)
    elif isinstance(schema, dict):
        if schema.get("type") == "record":
            out[schema["name"].rsplit(".", 1)[-1]] = [f["name"] for f in schema["fields"]]
            for field in schema["fields"]:
                _record_fields(field["type"], out)
        _record_fields(schema.get("items"), out)
        _record_fields(schema.get("values"), out)
    return out


def _record_definitions(schema: Any, out: list[str]) -> list[str]:
    """Names of the record definitions (not references) in `schema`, in order."""
    for record in [schema] + _nested_records(schema):
        out.append(record["name"])
    return out


def _nested_records(schema: Any) -> list[dict[str, Any]]:
    found: list[dict[str, Any]] = []

    def walk(node: Any) -> None:
        if isinstance(node, list):
            for branch in node:
                walk(branch)
        elif isinstance(node, dict):
            if node.get("type") == "record":
                found.append(node)
                for field in node["fields"]:
                    walk(field["type"])
            walk(node.get("items"))
            walk(node.get("values"))

    for field in schema["fields"]:
        walk(field["type"])
    return found


# ----------------------------------------------------------------------------------------------- (a) vs fixtures


def test_fixtures_have_avro_instant_files(fixture_table) -> None:
    names = set()
    for name in FIXTURES:
        for path in _avro_instant_files(fixture_table(name)):
            names.add(read_avro_container_with_schema(path.read_bytes())[1]["name"])
    assert names == {
        "HoodieRollbackPlan", "HoodieRollbackMetadata", "HoodieCompactionPlan", "HoodieRequestedReplaceMetadata",
        "HoodieCommitMetadata", "HoodieIndexPlan", "HoodieIndexCommitMetadata", "HoodieReplaceCommitMetadata",
    }


@pytest.mark.parametrize("name", FIXTURES)
def test_every_avro_instant_file_matches_our_model(fixture_table, name: str) -> None:
    base = fixture_table(name)
    version = _fixture_version(base)
    for path in _avro_instant_files(base):
        data = path.read_bytes()
        record, writer = read_avro_container_with_schema(data)
        ours = model_schema(writer["name"], version)  # Hudi 1.1 (v9) writes its own, larger schemas
        assert (writer["name"], writer["namespace"]) == (ours["name"], NAMESPACE), path
        # field names and order, of the root and of every nested record
        assert _record_fields(writer, {}) == _record_fields(ours, {}), path
        # and in fact the very same schema text Java embeds
        assert avro_schema_to_json(ours) == avro_schema_to_json(writer), path
        # re-encoding Java's record with our model gives Java's bytes (given its sync marker)
        assert write_avro_container(ours, record, sync_marker=data[-16:]) == data, path


# ----------------------------------------------------------------------------------------------- model shape


@pytest.mark.parametrize("table_version", [6, 9])
@pytest.mark.parametrize("name", sorted(MODEL_SCHEMAS))
def test_model_is_a_valid_standalone_schema(name: str, table_version: int) -> None:
    schema = models_for(table_version)[name]
    assert (schema["type"], schema["name"], schema["namespace"]) == ("record", name, NAMESPACE)
    fastavro.parse_schema(copy.deepcopy(schema))
    definitions = _record_definitions(schema, [])
    assert len(definitions) == len(set(definitions)), "a named type is defined twice instead of referenced"
    assert all("namespace" not in d for d in _nested_records(schema)), "only the root names its namespace"


def test_model_schema_returns_a_private_copy() -> None:
    schema = model_schema("org.apache.hudi.avro.model.HoodieRollbackPlan")
    schema["fields"].clear()
    assert field_names(MODEL_SCHEMAS["HoodieRollbackPlan"]) == ["instantToRollback", "RollbackRequests", "version"]
    with pytest.raises(KeyError):
        model_schema("HoodieNoSuchThing")


def test_field_lists_from_avsc() -> None:
    assert field_names(MODEL_SCHEMAS["HoodieCleanerPlan"]) == [
        "earliestInstantToRetain", "lastCompletedCommitTimestamp", "policy", "filesToBeDeletedPerPartition",
        "version", "filePathsToBeDeletedPerPartition", "partitionsToBeDeleted", "extraMetadata",
    ]
    assert field_names(MODEL_SCHEMAS["HoodieCleanMetadata"]) == [
        "startCleanTime", "timeTakenInMillis", "totalFilesDeleted", "earliestCommitToRetain",
        "lastCompletedCommitTimestamp", "partitionMetadata", "version", "bootstrapPartitionMetadata", "extraMetadata",
    ]
    assert field_names(MODEL_SCHEMAS["HoodieReplaceCommitMetadata"]) == [
        "partitionToWriteStats", "extraMetadata", "version", "operationType", "partitionToReplaceFileIds",
    ]
    assert field_names(MODEL_SCHEMAS["HoodieArchivedMetaEntry"]) == [
        "hoodieCommitMetadata", "hoodieCleanMetadata", "hoodieCompactionMetadata", "hoodieRollbackMetadata",
        "hoodieSavePointMetadata", "commitTime", "actionType", "version", "hoodieCompactionPlan", "hoodieCleanerPlan",
        "actionState", "hoodieReplaceCommitMetadata", "hoodieRequestedReplaceMetadata", "HoodieInflightReplaceMetadata",
        "hoodieIndexCommitMetadata", "stateTransitionTime",
    ]


# ----------------------------------------------------------------------------------------------- (b) round trips


def _write_stat(partition: str, file_id: str, instant: str) -> dict[str, Any]:
    return {
        "fileId": file_id, "path": f"{partition}/{file_id}_0-10-20_{instant}.parquet", "prevCommit": "null",
        "numWrites": 3, "numDeletes": 0, "numUpdateWrites": 1, "totalWriteBytes": 435_000, "totalWriteErrors": 0,
        "partitionPath": partition, "totalLogRecords": 0, "totalLogFiles": 0, "totalUpdatedRecordsCompacted": 0,
        "numInserts": 2, "totalLogBlocks": 0, "totalCorruptLogBlock": 0, "totalRollbackBlocks": 0,
        "fileSizeInBytes": 435_000, "logVersion": None, "logOffset": None, "baseFile": None, "logFiles": None,
        "cdcStats": None, "prevBaseFile": None, "minEventTime": None, "maxEventTime": None,
        "runtimeStats": {"totalScanTime": 0, "totalCreateTime": 812, "totalUpsertTime": 0},
        "totalLogFilesCompacted": 0, "totalLogReadTimeMs": 0, "totalLogSizeCompacted": 0, "tempPath": None,
        "numUpdates": 1,
    }


SCHEMA_TEXT = '{"type":"record","name":"t_record","namespace":"hoodie.t","fields":[]}'
COMMIT = {
    "partitionToWriteStats": {"city=chennai": [_write_stat("city=chennai", "f1-0", "20240101000000000")]},
    "compacted": False,
    "extraMetadata": {"schema": SCHEMA_TEXT},
    "version": 1,
    "operationType": "UPSERT",
}
REPLACE_COMMIT = {
    "partitionToWriteStats": {"10": [_write_stat("10", "f2-0", "20240101000000001")]},
    "extraMetadata": {"schema": SCHEMA_TEXT},
    "version": 1,
    "operationType": "INSERT_OVERWRITE_TABLE",
    "partitionToReplaceFileIds": {"10": ["f1-0"], "20": ["f3-0", "f4-0"]},
}
ROLLBACK_PLAN = {
    "instantToRollback": {"commitTime": "20240101000000000", "action": "deltacommit"},
    "RollbackRequests": [
        {"partitionPath": "", "fileId": "", "latestBaseInstant": "", "filesToBeDeleted": ["/t/f1-0_0-1-2_20240101000000000.parquet"],
         "logBlocksToBeDeleted": {}},
        {"partitionPath": "", "fileId": "f2-0", "latestBaseInstant": "20231231000000000", "filesToBeDeleted": [],
         "logBlocksToBeDeleted": {"file:/t/.f2-0_20231231000000000.log.1_0-1-2": 11828}},
    ],
    "version": 1,
}
ROLLBACK_METADATA = {
    "startRollbackTime": "20240101000000005", "timeTakenInMillis": 195, "totalFilesDeleted": 1,
    "commitsRollback": ["20240101000000000"],
    "partitionMetadata": {"": {"partitionPath": "", "successDeleteFiles": ["/t/f1-0_0-1-2_20240101000000000.parquet"],
                               "failedDeleteFiles": [], "rollbackLogFiles": {"file:/t/.f2-0.log.2_1-0-1": 105},
                               "logFilesFromFailedCommit": None}},
    "version": 1,
    "instantsRollback": [{"commitTime": "20240101000000000", "action": "deltacommit"}],
}
CLUSTERING_PLAN = {
    "inputGroups": [{
        "slices": [{"dataFilePath": "10/f1-0_0-1-2_20240101000000000.parquet", "deltaFilePaths": [], "fileId": "f1-0",
                    "partitionPath": "10", "bootstrapFilePath": "", "version": 1}],
        "metrics": {"TOTAL_IO_MB": 1.5, "TOTAL_FILE_SIZE": 435000.0},
        "numOutputFileGroups": 1, "extraMetadata": None, "version": 1,
    }],
    "strategy": {"strategyClassName": "org.apache.hudi.client.clustering.run.strategy.SparkSortAndSizeExecutionStrategy",
                 "strategyParams": {}, "version": 1},
    "extraMetadata": {}, "version": 1, "preserveHoodieMetadata": True,
}
REQUESTED_REPLACE = {"operationType": "CLUSTER", "clusteringPlan": CLUSTERING_PLAN, "extraMetadata": {}, "version": 1}
COMPACTION_PLAN = {
    "operations": [{
        "baseInstantTime": "20240101000000000", "deltaFilePaths": [".f1-0_20240101000000000.log.1_0-1-2"],
        "dataFilePath": "f1-0_0-1-2_20240101000000000.parquet", "fileId": "f1-0", "partitionPath": "city=chennai",
        "metrics": {"TOTAL_LOG_FILES": 1.0, "TOTAL_IO_MB": 0.0, "TOTAL_LOG_FILES_SIZE": 1153.0}, "bootstrapFilePath": None,
    }],
    "extraMetadata": None, "version": 2,
    "strategy": {"compactorClassName": None, "strategyParams": None, "version": 1},
    "preserveHoodieMetadata": True, "missingSchedulePartitions": None,
}
CLEANER_PLAN = {
    "earliestInstantToRetain": {"timestamp": "20240101000000000", "action": "commit", "state": "COMPLETED"},
    "lastCompletedCommitTimestamp": "20240102000000000",
    "policy": "KEEP_LATEST_COMMITS",
    "filesToBeDeletedPerPartition": {},
    "version": 2,
    "filePathsToBeDeletedPerPartition": {"10": [{"filePath": "/t/10/f1-0_0-1-2_20231231000000000.parquet",
                                                 "isBootstrapBaseFile": False}]},
    "partitionsToBeDeleted": [],
    "extraMetadata": None,
}
CLEAN_PARTITION = {
    "partitionPath": "10", "policy": "KEEP_LATEST_COMMITS",
    "deletePathPatterns": ["f1-0_0-1-2_20231231000000000.parquet"],
    "successDeleteFiles": ["f1-0_0-1-2_20231231000000000.parquet"], "failedDeleteFiles": [], "isPartitionDeleted": False,
}
CLEAN_METADATA = {
    "startCleanTime": "20240103000000000", "timeTakenInMillis": 42, "totalFilesDeleted": 1,
    "earliestCommitToRetain": "20240101000000000", "lastCompletedCommitTimestamp": "20240102000000000",
    "partitionMetadata": {"10": CLEAN_PARTITION}, "version": 2, "bootstrapPartitionMetadata": {}, "extraMetadata": None,
}
SAVEPOINT = {
    "savepointedBy": "hudi", "savepointedAt": 1_704_067_200, "comments": "before backfill",
    "partitionMetadata": {"10": {"partitionPath": "10", "savepointDataFile": ["f1-0_0-1-2_20240101000000000.parquet"]}},
    "version": 1,
}
INDEX_INFO = {"version": 1, "metadataPartitionPath": "secondary_index_rider_idx", "indexUptoInstant": "20240101000000000",
              "extraMetadata": {}}
ARCHIVED_ENTRY = {
    "hoodieCommitMetadata": COMMIT, "hoodieCleanMetadata": None, "hoodieCompactionMetadata": None,
    "hoodieRollbackMetadata": None, "hoodieSavePointMetadata": None, "commitTime": "20240101000000000",
    "actionType": "commit", "version": 1, "hoodieCompactionPlan": None, "hoodieCleanerPlan": None,
    "actionState": "COMPLETED", "hoodieReplaceCommitMetadata": None, "hoodieRequestedReplaceMetadata": None,
    "HoodieInflightReplaceMetadata": None, "hoodieIndexCommitMetadata": None, "stateTransitionTime": "20240101000001000",
}

ROUND_TRIPS = {
    "HoodieCommitMetadata": COMMIT,
    "HoodieReplaceCommitMetadata": REPLACE_COMMIT,
    "HoodieRollbackPlan": ROLLBACK_PLAN,
    "HoodieRollbackMetadata": ROLLBACK_METADATA,
    "HoodieRequestedReplaceMetadata": REQUESTED_REPLACE,
    "HoodieClusteringPlan": CLUSTERING_PLAN,
    "HoodieCompactionPlan": COMPACTION_PLAN,
    "HoodieCleanerPlan": CLEANER_PLAN,
    "HoodieCleanMetadata": CLEAN_METADATA,
    "HoodieCleanPartitionMetadata": CLEAN_PARTITION,
    "HoodieSavepointMetadata": SAVEPOINT,
    "HoodieIndexPlan": {"version": 1, "indexPartitionInfos": [INDEX_INFO]},
    "HoodieIndexCommitMetadata": {"version": 1, "operationType": None, "indexPartitionInfos": [INDEX_INFO]},
    "HoodieWriteStat": _write_stat("p", "f-0", "20240101000000000"),
    "HoodieArchivedMetaEntry": ARCHIVED_ENTRY,
    "HoodieLSMTimelineInstant": {"instantTime": "20240101000000000", "completionTime": "20240101000001000",
                                 "action": "commit", "metadata": b"Obj\x01...", "plan": None, "version": 1},
}


@pytest.mark.parametrize("name", sorted(ROUND_TRIPS))
def test_write_read_round_trip(name: str) -> None:
    record = ROUND_TRIPS[name]
    data = write_avro_container(MODEL_SCHEMAS[name], record)
    assert read_avro_container(data) == record
    # a generic Avro reader agrees
    assert list(fastavro.reader(io.BytesIO(data))) == [record]


def test_archived_entry_carries_each_payload_type() -> None:
    schema = MODEL_SCHEMAS["HoodieArchivedMetaEntry"]
    payloads = {
        "hoodieCleanMetadata": CLEAN_METADATA, "hoodieRollbackMetadata": ROLLBACK_METADATA,
        "hoodieSavePointMetadata": SAVEPOINT, "hoodieCompactionPlan": COMPACTION_PLAN,
        "hoodieCleanerPlan": CLEANER_PLAN, "hoodieReplaceCommitMetadata": REPLACE_COMMIT,
        "hoodieRequestedReplaceMetadata": REQUESTED_REPLACE, "HoodieInflightReplaceMetadata": COMMIT,
        "hoodieIndexCommitMetadata": ROUND_TRIPS["HoodieIndexCommitMetadata"],
        "hoodieCompactionMetadata": {"partitionToCompactionWriteStats": {"p": [{
            "partitionPath": "p", "totalLogRecords": 1, "totalLogFiles": 1, "totalUpdatedRecordsCompacted": 1,
            "hoodieWriteStat": _write_stat("p", "f-0", "20240101000000000")}]}},
    }
    for field, payload in payloads.items():
        entry = {**{k: None for k in ARCHIVED_ENTRY}, "version": 1, "commitTime": "1", field: payload}
        assert read_avro_container(write_avro_container(schema, entry)) == entry


def test_defaults_fill_missing_fields() -> None:
    data = write_avro_container(MODEL_SCHEMAS["HoodieRequestedReplaceMetadata"], {"operationType": "INSERT_OVERWRITE"})
    assert read_avro_container(data) == {
        "operationType": "INSERT_OVERWRITE", "clusteringPlan": None, "extraMetadata": None, "version": 1,
    }


@pytest.mark.parametrize("name", sorted(ROUND_TRIPS))
def test_datum_codec_matches_fastavro(name: str) -> None:
    schema, record = MODEL_SCHEMAS[name], ROUND_TRIPS[name]
    expected = io.BytesIO()
    fastavro.schemaless_writer(expected, fastavro.parse_schema(copy.deepcopy(schema)), record)
    assert encode_datum(schema, record) == expected.getvalue()
    assert DatumReader(schema).read(BinaryDecoder(expected.getvalue())) == record


def test_archived_entries_in_an_avro_data_block() -> None:
    """What the archived timeline writes: HoodieArchivedMetaEntry records in an AVRO_DATA_BLOCK."""
    schema = MODEL_SCHEMAS["HoodieArchivedMetaEntry"]
    entries = [ARCHIVED_ENTRY, {**{k: None for k in ARCHIVED_ENTRY}, "version": 1, "commitTime": "2",
                                "actionType": "clean", "hoodieCleanMetadata": CLEAN_METADATA}]
    block = AvroDataBlock.from_records(entries, avro_schema_to_json(schema), "20240101000002000")
    assert list(block.iter_records()) == entries
    content, reader = block.read_content(), DatumReader(schema)
    starts, ends = avro_record_bounds(content)
    assert [reader.read(BinaryDecoder(content[a:b])) for a, b in zip(starts, ends)] == entries
