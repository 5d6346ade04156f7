"""Avro schemas of the timeline metadata Hudi stores in Avro (namespace `org.apache.hudi.avro.model`).

Every schema is written in the form Java Hudi embeds in its files, i.e. the `SCHEMA$` the avro-maven-plugin
compiles with `stringType=String`: strings are `{"type": "string", "avro.java.string": "String"}`, maps carry
`"avro.java.string": "String"`, docs and stray `default`s inside types are kept, a named type is defined in full
where it first appears and referenced by name afterwards, and only the top-level record names its namespace.
Key order is Java's (record: type, name, namespace, doc, fields; field: name, type, doc, default), so
`avro_schema_to_json(schema)` reproduces Java's header text byte for byte.

Sources, in order of trust:
* writer schemas embedded in the fixture tables' instant files (Hudi 0.14/0.15 writing table v6 and Hudi 1.0
  writing table v8): HoodieRollbackPlan, HoodieRollbackMetadata, HoodieRequestedReplaceMetadata,
  HoodieCompactionPlan, HoodieCommitMetadata (v8 form), HoodieIndexPlan, HoodieIndexCommitMetadata;
* field lists of Apache Hudi's `.avsc` files for the rest (HoodieReplaceCommitMetadata, HoodieCleanerPlan,
  HoodieCleanMetadata, HoodieSavepointMetadata, HoodieCompactionMetadata, HoodieArchivedMetaEntry,
  HoodieLSMTimelineInstant). Avro resolves by field name, so a Java reader accepts these even where its own
  version has a field more or less.
"""
from __future__ import annotations

import copy
from typing import Any

NAMESPACE = "org.apache.hudi.avro.model"

Schema = dict[str, Any]
_NO_DEFAULT = object()


# ----------------------------------------------------------------------------------------------- building blocks


def _string() -> Schema:
    return {"type": "string", "avro.java.string": "String"}


def _opt(avro_type: Any) -> list[Any]:
    """The `["null", T]` union Hudi uses for optional fields."""
    return ["null", avro_type]


def _int_or_null() -> list[str]:
    """`["int", "null"]`, the type of every `version` field (default 1)."""
    return ["int", "null"]


def _array(items: Any, **props: Any) -> Schema:
    return {"type": "array", "items": items, **props}


def _map(values: Any, **props: Any) -> Schema:
    # the plugin's avro.java.string comes before any prop written in the .avsc (seen in fixtures)
    return {"type": "map", "values": values, "avro.java.string": "String", **props}


def _field(name: str, avro_type: Any, default: Any = _NO_DEFAULT, doc: str | None = None) -> Schema:
    field: Schema = {"name": name, "type": avro_type}
    if doc is not None:
        field["doc"] = doc
    if default is not _NO_DEFAULT:
        field["default"] = default
    return field


def _nullable(name: str, avro_type: Any, doc: str | None = None) -> Schema:
    """An optional field: `["null", T]` with default null."""
    return _field(name, _opt(avro_type), None, doc)


def _version(doc: str | None = None) -> Schema:
    return _field("version", _int_or_null(), 1, doc)


def _record(name: str, fields: list[Schema], doc: str | None = None) -> Schema:
    record: Schema = {"type": "record", "name": name}
    if doc is not None:
        record["doc"] = doc
    record["fields"] = fields
    return record


def _string_map() -> Schema:
    return _map(_string())


# ----------------------------------------------------------------------------------------------- commit metadata


def _runtime_stats() -> Schema:
    return _record(
        "HoodieRuntimeStats",
        [_nullable("totalScanTime", "long"), _nullable("totalCreateTime", "long"), _nullable("totalUpsertTime", "long")],
    )


def _write_stat() -> Schema:
    return _record(
        "HoodieWriteStat",
        [
            _nullable("fileId", _string()),
            _nullable("path", _string()),
            _nullable("prevCommit", _string()),
            _nullable("numWrites", "long"),
            _nullable("numDeletes", "long"),
            _nullable("numUpdateWrites", "long"),
            _nullable("totalWriteBytes", "long"),
            _nullable("totalWriteErrors", "long"),
            _nullable("partitionPath", _string()),
            _nullable("totalLogRecords", "long"),
            _nullable("totalLogFiles", "long"),
            _nullable("totalUpdatedRecordsCompacted", "long"),
            _nullable("numInserts", "long"),
            _nullable("totalLogBlocks", "long"),
            _nullable("totalCorruptLogBlock", "long"),
            _nullable("totalRollbackBlocks", "long"),
            _nullable("fileSizeInBytes", "long"),
            _nullable("logVersion", "int"),
            _nullable("logOffset", "long"),
            _nullable("baseFile", _string()),
            _nullable("logFiles", _array(_string(), default=None)),
            _nullable("cdcStats", _map("long", default=None)),
            _nullable("prevBaseFile", _string()),
            _nullable("minEventTime", "long"),
            _nullable("maxEventTime", "long"),
            _nullable("runtimeStats", _runtime_stats()),
            _nullable("totalLogFilesCompacted", "long"),
            _nullable("totalLogReadTimeMs", "long"),
            _nullable("totalLogSizeCompacted", "long"),
            _nullable("tempPath", _string()),
            _nullable("numUpdates", "long"),
        ],
    )


def _partition_to_write_stats() -> Schema:
    return _nullable("partitionToWriteStats", _map(_array(_write_stat())))


def _commit_metadata() -> Schema:
    """v8 form, as in the fixtures' `.hoodie/timeline/*.commit|deltacommit` files."""
    return _record(
        "HoodieCommitMetadata",
        [
            _partition_to_write_stats(),
            _nullable("compacted", "boolean"),
            _nullable("extraMetadata", _map(_string(), default=None)),
            _version(),
            _nullable("operationType", _string()),
        ],
    )


def _replace_commit_metadata(release: int = 10) -> Schema:
    """From HoodieReplaceCommitMetadata.avsc: no `compacted` field before Hudi 1.1 (unlike HoodieCommitMetadata)."""
    return _record(
        "HoodieReplaceCommitMetadata",
        [
            _partition_to_write_stats(),
            *([_nullable("compacted", "boolean")] if release >= 11 else []),
            _nullable("extraMetadata", _string_map()),
            _version(),
            _nullable("operationType", _string()),
            _nullable("partitionToReplaceFileIds", _map(_array(_string()))),
        ],
    )


# ----------------------------------------------------------------------------------------------- rollback


def _instant_info() -> Schema:
    return _record("HoodieInstantInfo", [_field("commitTime", _string()), _field("action", _string())])


def _rollback_request() -> Schema:
    return _record(
        "HoodieRollbackRequest",
        [
            _field("partitionPath", _string()),
            _nullable("fileId", _string()),
            _nullable("latestBaseInstant", _string()),
            _field("filesToBeDeleted", _array(_string(), default=[]), []),
            _nullable("logBlocksToBeDeleted", _map("long")),
        ],
    )


def _rollback_plan() -> Schema:
    return _record(
        "HoodieRollbackPlan",
        [
            _nullable("instantToRollback", _instant_info(), doc="Hoodie instant that needs to be rolled back"),
            _nullable("RollbackRequests", _array(_rollback_request())),
            _version(),
        ],
    )


def _rollback_partition_metadata() -> Schema:
    return _record(
        "HoodieRollbackPartitionMetadata",
        [
            _field("partitionPath", _string()),
            _field("successDeleteFiles", _array(_string())),
            _field("failedDeleteFiles", _array(_string())),
            _nullable("rollbackLogFiles", _map("long")),
            _nullable("logFilesFromFailedCommit", _map("long")),
        ],
    )


def _rollback_metadata() -> Schema:
    return _record(
        "HoodieRollbackMetadata",
        [
            _field("startRollbackTime", _string()),
            _field("timeTakenInMillis", "long"),
            _field("totalFilesDeleted", "int"),
            _field("commitsRollback", _array(_string())),
            _field("partitionMetadata", _map(_rollback_partition_metadata())),
            _version(),
            _field("instantsRollback", _array(_instant_info(), default=[]), []),
        ],
    )


# ----------------------------------------------------------------------------------------------- clustering


def _slice_info() -> Schema:
    return _record(
        "HoodieSliceInfo",
        [
            _nullable("dataFilePath", _string()),
            _nullable("deltaFilePaths", _array(_string())),
            _field("fileId", _opt(_string())),  # no default in the .avsc
            _nullable("partitionPath", _string()),
            _nullable("bootstrapFilePath", _string()),
            _version(),
        ],
    )


def _clustering_group() -> Schema:
    return _record(
        "HoodieClusteringGroup",
        [
            _nullable("slices", _array(_slice_info())),
            _nullable("metrics", _map("double")),
            _field("numOutputFileGroups", _int_or_null(), 1),
            _nullable("extraMetadata", _string_map()),
            _version(),
        ],
    )


def _clustering_strategy() -> Schema:
    return _record(
        "HoodieClusteringStrategy",
        [_nullable("strategyClassName", _string()), _nullable("strategyParams", _string_map()), _version()],
    )


def _clustering_plan(release: int = 10) -> Schema:
    """Hudi 1.1 adds `missingSchedulePartitions`."""
    return _record(
        "HoodieClusteringPlan",
        [
            _nullable("inputGroups", _array(_clustering_group())),
            _nullable("strategy", _clustering_strategy()),
            _nullable("extraMetadata", _string_map()),
            _version(),
            _nullable("preserveHoodieMetadata", "boolean"),
            *([_nullable("missingSchedulePartitions", _array(_string()))] if release >= 11 else []),
        ],
    )


def _requested_replace_metadata(release: int = 10) -> Schema:
    return _record(
        "HoodieRequestedReplaceMetadata",
        [
            _nullable("operationType", _string()),
            _nullable("clusteringPlan", _clustering_plan(release)),
            _nullable("extraMetadata", _string_map()),
            _version(),
        ],
    )


# ----------------------------------------------------------------------------------------------- compaction


def _compaction_operation() -> Schema:
    return _record(
        "HoodieCompactionOperation",
        [
            _field("baseInstantTime", _opt(_string())),  # no default in the .avsc
            _nullable("deltaFilePaths", _array(_string())),
            _nullable("dataFilePath", _string()),
            _field("fileId", _opt(_string())),  # no default in the .avsc
            _nullable("partitionPath", _string()),
            _nullable("metrics", _map("double")),
            _nullable("bootstrapFilePath", _string()),
        ],
    )


_COMPACTOR_DOC = (
    "The class name that is provided here should extend CompactionExecutionStrategy abstract class, idea is that "
    "the plan generator will also provide the execution strategy to use."
)
_STRATEGY_PARAMS_DOC = (
    "These parameters play a key role in determining which action type it is i.e. compaction or logcompaction and "
    "it will also include configs that determine how compaction needs to be executed."
)


def _compaction_strategy() -> Schema:
    return _record(
        "HoodieCompactionStrategy",
        [
            _nullable("compactorClassName", _string(), doc=_COMPACTOR_DOC),
            _nullable("strategyParams", _string_map(), doc=_STRATEGY_PARAMS_DOC),
            _version(),
        ],
    )


def _compaction_plan() -> Schema:
    return _record(
        "HoodieCompactionPlan",
        [
            _nullable("operations", _array(_compaction_operation())),
            _nullable("extraMetadata", _string_map()),
            _version(),
            _nullable("strategy", _compaction_strategy()),
            _field("preserveHoodieMetadata", ["boolean", "null"], False),
            _nullable("missingSchedulePartitions", _array(_string())),
        ],
    )


def _compaction_write_stat() -> Schema:
    return _record(
        "HoodieCompactionWriteStat",
        [
            _nullable("partitionPath", _string()),
            _nullable("totalLogRecords", "long"),
            _nullable("totalLogFiles", "long"),
            _nullable("totalUpdatedRecordsCompacted", "long"),
            _nullable("hoodieWriteStat", _write_stat()),
        ],
    )


def _compaction_metadata() -> Schema:
    """Deprecated; still a member of HoodieArchivedMetaEntry."""
    return _record(
        "HoodieCompactionMetadata",
        [_field("partitionToCompactionWriteStats", _opt(_map(_array(_compaction_write_stat()))))],
    )


# ----------------------------------------------------------------------------------------------- clean


def _action_instant() -> Schema:
    return _record(
        "HoodieActionInstant",
        [_field("timestamp", _string()), _field("action", _string()), _field("state", _string())],
    )


def _clean_file_info() -> Schema:
    return _record("HoodieCleanFileInfo", [_nullable("filePath", _string()), _nullable("isBootstrapBaseFile", "boolean")])


def _cleaner_plan() -> Schema:
    return _record(
        "HoodieCleanerPlan",
        [
            _nullable("earliestInstantToRetain", _action_instant()),
            _field("lastCompletedCommitTimestamp", _string(), ""),
            _field("policy", _string()),
            # deprecated, replaced by filePathsToBeDeletedPerPartition
            _nullable("filesToBeDeletedPerPartition", _map(_array(_string()))),
            _version(),
            _nullable(
                "filePathsToBeDeletedPerPartition",
                _map(_array(_clean_file_info())),
                doc="This field replaces the field filesToBeDeletedPerPartition",
            ),
            _nullable("partitionsToBeDeleted", _array(_string()), doc="partitions to be deleted"),
            _nullable("extraMetadata", _map(_string(), default=None)),
        ],
    )


def _clean_partition_metadata() -> Schema:
    return _record(
        "HoodieCleanPartitionMetadata",
        [
            _field("partitionPath", _string()),
            _field("policy", _string()),
            _field("deletePathPatterns", _array(_string())),
            _field("successDeleteFiles", _array(_string())),
            _field("failedDeleteFiles", _array(_string())),
            _nullable("isPartitionDeleted", "boolean"),
        ],
    )


def _clean_metadata() -> Schema:
    return _record(
        "HoodieCleanMetadata",
        [
            _field("startCleanTime", _string()),
            _field("timeTakenInMillis", "long"),
            _field("totalFilesDeleted", "int"),
            _field("earliestCommitToRetain", _string()),
            _field("lastCompletedCommitTimestamp", _string(), ""),
            _field("partitionMetadata", _map(_clean_partition_metadata())),
            _version(),
            _nullable("bootstrapPartitionMetadata", _map(_clean_partition_metadata(), default=None)),
            _nullable("extraMetadata", _map(_string(), default=None)),
        ],
    )


# ----------------------------------------------------------------------------------------------- restore


def _restore_plan() -> Schema:
    """HoodieRestorePlan.avsc: the instants a restore rolls back, newest first."""
    return _record(
        "HoodieRestorePlan",
        [
            _field("instantsToRollback", _array(_instant_info(), default=None), []),
            _field("version", _int_or_null(), 2),
            _field("savepointToRestoreTimestamp", ["string", "null"], None),
        ],
    )


def _restore_metadata() -> Schema:
    """HoodieRestoreMetadata.avsc: the rollback metadata of every instant the restore rolled back."""
    return _record(
        "HoodieRestoreMetadata",
        [
            _field("startRestoreTime", _string()),
            _field("timeTakenInMillis", "long"),
            _field("instantsToRollback", _array(_string())),
            _field("hoodieRestoreMetadata", _map(_array(_opt(_rollback_metadata()), default=None,
                                                        name="hoodieRollbackMetadata"))),
            _version(),
            _field("restoreInstantInfo", _array(_instant_info(), default=None), []),
            _nullable("extraMetadata", _map(_string())),
        ],
    )


# ----------------------------------------------------------------------------------------------- savepoint, index


def _savepoint_metadata() -> Schema:
    partition = _record(
        "HoodieSavepointPartitionMetadata",
        [_field("partitionPath", _string()), _field("savepointDataFile", _array(_string()))],
    )
    return _record(
        "HoodieSavepointMetadata",
        [
            _field("savepointedBy", _string()),
            _field("savepointedAt", "long"),
            _field("comments", _string()),
            _field("partitionMetadata", _map(partition)),
            _version(),
        ],
    )


def _index_partition_info() -> Schema:
    return _record(
        "HoodieIndexPartitionInfo",
        [
            _version(),
            _nullable("metadataPartitionPath", _string()),
            _nullable("indexUptoInstant", _string()),
            _nullable("extraMetadata", _string_map()),
        ],
    )


def _index_plan() -> Schema:
    return _record("HoodieIndexPlan", [_version(), _nullable("indexPartitionInfos", _array(_index_partition_info()))])


_INDEX_DOC_REPLACES = "This field replaces the field filesToBeDeletedPerPartition"  # sic, as Java ships it


def _index_commit_metadata() -> Schema:
    return _record(
        "HoodieIndexCommitMetadata",
        [
            _version(doc=_INDEX_DOC_REPLACES),
            _nullable("operationType", _string(), doc=_INDEX_DOC_REPLACES),
            _nullable(
                "indexPartitionInfos",
                _array(_index_partition_info()),
                doc="This field contains the info for each partition that got indexed",
            ),
        ],
    )


# ----------------------------------------------------------------------------------------------- archived timeline


def _archived_meta_entry() -> Schema:
    """v6 archived timeline entry (a record of an AVRO_DATA_BLOCK in `.hoodie/archived/.commits_.archive.*`)."""
    return _record(
        "HoodieArchivedMetaEntry",
        [
            _nullable("hoodieCommitMetadata", _commit_metadata()),
            _nullable("hoodieCleanMetadata", _clean_metadata()),
            _nullable("hoodieCompactionMetadata", _compaction_metadata()),  # deprecated
            _nullable("hoodieRollbackMetadata", _rollback_metadata()),
            _nullable("hoodieSavePointMetadata", _savepoint_metadata()),
            _nullable("commitTime", _string()),
            _nullable("actionType", _string()),
            _version(),
            _nullable("hoodieCompactionPlan", _compaction_plan()),
            _nullable("hoodieCleanerPlan", _cleaner_plan()),
            _nullable("actionState", _string()),
            _nullable("hoodieReplaceCommitMetadata", _replace_commit_metadata()),
            _nullable("hoodieRequestedReplaceMetadata", _requested_replace_metadata()),
            _nullable("HoodieInflightReplaceMetadata", _commit_metadata()),  # capital H, as in the .avsc
            _nullable("hoodieIndexCommitMetadata", _index_commit_metadata()),
            _nullable("stateTransitionTime", _string()),
        ],
    )


def _lsm_timeline_instant() -> Schema:
    """Row of the v8 LSM archived timeline (parquet files under `.hoodie/timeline/history/`)."""
    return _record(
        "HoodieLSMTimelineInstant",
        [
            _nullable("instantTime", _string()),
            _nullable("completionTime", _string()),
            _nullable("action", _string()),
            _nullable("metadata", "bytes"),
            _nullable("plan", "bytes"),
            _field("version", "int", 1),
        ],
    )


# ----------------------------------------------------------------------------------------------- finishing


def _standalone(definition: Schema) -> Schema:
    """Java's compiled form of a top-level record: namespace on the root, later repeats of a type by name."""
    rest = {k: v for k, v in copy.deepcopy(definition).items() if k not in ("type", "name")}
    root = {"type": "record", "name": definition["name"], "namespace": NAMESPACE, **rest}
    return _reference_repeats(root, set())


def _reference_repeats(schema: Any, defined: set[str]) -> Any:
    """Replace every definition of an already defined named type with its name (in serialization order)."""
    if isinstance(schema, list):
        return [_reference_repeats(s, defined) for s in schema]
    if not isinstance(schema, dict):
        return schema
    if schema.get("type") == "record":
        if schema["name"] in defined:
            return schema["name"]
        defined.add(schema["name"])
        return {**schema, "fields": [{**f, "type": _reference_repeats(f["type"], defined)} for f in schema["fields"]]}
    if schema.get("type") == "array":
        return {**schema, "items": _reference_repeats(schema["items"], defined)}
    if schema.get("type") == "map":
        return {**schema, "values": _reference_repeats(schema["values"], defined)}
    return schema


_BUILDERS = {
    "HoodieCommitMetadata": _commit_metadata,
    "HoodieReplaceCommitMetadata": _replace_commit_metadata,
    "HoodieWriteStat": _write_stat,
    "HoodieRuntimeStats": _runtime_stats,
    "HoodieRollbackPlan": _rollback_plan,
    "HoodieInstantInfo": _instant_info,
    "HoodieRollbackRequest": _rollback_request,
    "HoodieRollbackMetadata": _rollback_metadata,
    "HoodieRollbackPartitionMetadata": _rollback_partition_metadata,
    "HoodieRequestedReplaceMetadata": _requested_replace_metadata,
    "HoodieClusteringPlan": _clustering_plan,
    "HoodieClusteringGroup": _clustering_group,
    "HoodieSliceInfo": _slice_info,
    "HoodieClusteringStrategy": _clustering_strategy,
    "HoodieCompactionPlan": _compaction_plan,
    "HoodieCompactionOperation": _compaction_operation,
    "HoodieCompactionStrategy": _compaction_strategy,
    "HoodieCompactionMetadata": _compaction_metadata,
    "HoodieCompactionWriteStat": _compaction_write_stat,
    "HoodieCleanerPlan": _cleaner_plan,
    "HoodieActionInstant": _action_instant,
    "HoodieCleanFileInfo": _clean_file_info,
    "HoodieCleanMetadata": _clean_metadata,
    "HoodieCleanPartitionMetadata": _clean_partition_metadata,
    "HoodieSavepointMetadata": _savepoint_metadata,
    "HoodieRestorePlan": _restore_plan,
    "HoodieRestoreMetadata": _restore_metadata,
    "HoodieIndexPlan": _index_plan,
    "HoodieIndexCommitMetadata": _index_commit_metadata,
    "HoodieIndexPartitionInfo": _index_partition_info,
    "HoodieArchivedMetaEntry": _archived_meta_entry,
    "HoodieLSMTimelineInstant": _lsm_timeline_instant,
}

#: Every model by short record name, each in standalone (top-level) form, as Hudi 0.x/1.0 ship them.
MODEL_SCHEMAS: dict[str, Schema] = {name: _standalone(build()) for name, build in _BUILDERS.items()}

# Hudi 1.1 (the release that writes table version 9) grew these records by optional fields; Java 1.1 embeds its
# own schemas, so the instant files of a version-9 table carry them. Every other record is unchanged in 1.1.
_BUILDERS_1_1 = {
    "HoodieReplaceCommitMetadata": lambda: _replace_commit_metadata(11),
    "HoodieRequestedReplaceMetadata": lambda: _requested_replace_metadata(11),
    "HoodieClusteringPlan": lambda: _clustering_plan(11),
}
MODEL_SCHEMAS_1_1: dict[str, Schema] = {**MODEL_SCHEMAS,
                                        **{name: _standalone(build()) for name, build in _BUILDERS_1_1.items()}}
#: The first table version written by Hudi 1.1, whose schemas it uses.
HUDI_1_1_TABLE_VERSION = 9

HOODIE_COMMIT_METADATA = MODEL_SCHEMAS["HoodieCommitMetadata"]
HOODIE_REPLACE_COMMIT_METADATA = MODEL_SCHEMAS["HoodieReplaceCommitMetadata"]
HOODIE_ROLLBACK_PLAN = MODEL_SCHEMAS["HoodieRollbackPlan"]
HOODIE_ROLLBACK_METADATA = MODEL_SCHEMAS["HoodieRollbackMetadata"]
HOODIE_REQUESTED_REPLACE_METADATA = MODEL_SCHEMAS["HoodieRequestedReplaceMetadata"]
HOODIE_COMPACTION_PLAN = MODEL_SCHEMAS["HoodieCompactionPlan"]
HOODIE_CLEANER_PLAN = MODEL_SCHEMAS["HoodieCleanerPlan"]
HOODIE_CLEAN_METADATA = MODEL_SCHEMAS["HoodieCleanMetadata"]
HOODIE_SAVEPOINT_METADATA = MODEL_SCHEMAS["HoodieSavepointMetadata"]
HOODIE_RESTORE_PLAN = MODEL_SCHEMAS["HoodieRestorePlan"]
HOODIE_RESTORE_METADATA = MODEL_SCHEMAS["HoodieRestoreMetadata"]
HOODIE_INDEX_PLAN = MODEL_SCHEMAS["HoodieIndexPlan"]
HOODIE_INDEX_COMMIT_METADATA = MODEL_SCHEMAS["HoodieIndexCommitMetadata"]
HOODIE_ARCHIVED_META_ENTRY = MODEL_SCHEMAS["HoodieArchivedMetaEntry"]
HOODIE_LSM_TIMELINE_INSTANT = MODEL_SCHEMAS["HoodieLSMTimelineInstant"]


def models_for(table_version: int) -> dict[str, Schema]:
    """The models of the Hudi release that writes `table_version` (shared; do not mutate)."""
    return MODEL_SCHEMAS_1_1 if table_version >= HUDI_1_1_TABLE_VERSION else MODEL_SCHEMAS


def model_schema(name: str, table_version: int = 6) -> Schema:
    """A private copy of the model schema `name` (short or full record name) as written for `table_version`."""
    short = name.rsplit(".", 1)[-1]
    models = models_for(table_version)
    if short not in models:
        raise KeyError(f"no Avro model named {name!r}")
    return copy.deepcopy(models[short])


def field_names(schema: Schema) -> list[str]:
    """Top-level field names of a record schema, in order."""
    return [f["name"] for f in schema["fields"]]
