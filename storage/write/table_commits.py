"""Commits that change a table without writing data: a schema change (ALTER TABLE ... ADD COLUMNS) and
replacing every file group of some partitions (TRUNCATE TABLE).

As Apache Hudi does them: ADD COLUMNS completes an empty commit (deltacommit on merge-on-read) whose metadata
has operationType ALTER_SCHEMA and the new writer schema, so later writes and reads (ours, hudi-rs, Java
Hudi) take the schema from the latest commit; TRUNCATE completes a replacecommit with operationType
DELETE_PARTITION naming the replaced file groups, so time travel to before it still works.
"""
from __future__ import annotations

import json
import logging

import pyarrow as pa

from storage.avro.schema_converter import arrow_to_avro_schema
from storage.table.fs_view import FileSystemView
from storage.table.meta_client import HoodieTableMetaClient
from storage.timeline.commit_metadata import HoodieCommitMetadata
from storage.timeline.instant import Action
from storage.table.action_completion import ActionCompletion, complete_action
from storage.write.operation import WriteOperationType

log = logging.getLogger(__name__)

ALTER_SCHEMA = "ALTER_SCHEMA"
DELETE_PARTITION = WriteOperationType.DELETE_PARTITION.metadata_name


def _fire_callbacks(meta: HoodieTableMetaClient, instant_time: str, action: str, operation: str) -> None:
    from storage.write.commit_callback import CommitEvent, fire_commit_callbacks

    # the commit ran with the table's own options; a failing callback is logged there and never undoes the commit
    fire_commit_callbacks(CommitEvent(meta.base_path, meta.table_config.name, instant_time, action, operation,
                                      meta.table_config.with_options()))


def commit_schema_change(meta: HoodieTableMetaClient, schema: pa.Schema) -> str:
    """An empty ALTER_SCHEMA commit recording `schema` (data columns) as the table's writer schema."""
    timeline = meta.active_timeline
    action = Action.DELTA_COMMIT if meta.table_config.is_mor else Action.COMMIT
    instant_time = timeline.new_instant_time()
    md = HoodieCommitMetadata(operationType=ALTER_SCHEMA)
    md.extraMetadata["schema"] = json.dumps(arrow_to_avro_schema(schema, meta.table_config.name),
                                            separators=(",", ":"))
    requested = timeline.create_requested(action, instant_time)
    inflight = timeline.transition_to_inflight(requested, HoodieCommitMetadata(operationType=ALTER_SCHEMA).to_bytes(
        meta.table_config.version))
    complete_action(ActionCompletion.of_commit(meta, inflight, md, ALTER_SCHEMA))
    meta.reload()
    _fire_callbacks(meta, instant_time, action, ALTER_SCHEMA)
    log.info("schema of %s changed at %s", meta.base_path, instant_time)
    return instant_time


def commit_delete_partitions(meta: HoodieTableMetaClient, partitions: list[str] | None) -> str | None:
    """A DELETE_PARTITION replacecommit replacing every file group of `partitions` (None: of every partition).
    None when there is nothing to replace."""
    from storage.write.commit import requested_content

    view = FileSystemView(meta)
    wanted = None if partitions is None else set(partitions)
    replaced: dict[str, list[str]] = {}
    for group in view.file_groups():
        fg = group.file_group_id
        if wanted is None or fg.partition_path in wanted:
            replaced.setdefault(fg.partition_path, []).append(fg.file_id)
    if not replaced:
        return None
    timeline = meta.active_timeline
    instant_time = timeline.new_instant_time()
    requested = timeline.create_requested(Action.REPLACE_COMMIT, instant_time, requested_content(
        WriteOperationType.DELETE_PARTITION, meta.table_config.version))
    md = HoodieCommitMetadata(operationType=DELETE_PARTITION, partitionToReplaceFileIds=replaced)
    schema = _latest_schema(meta)
    if schema:
        md.extraMetadata["schema"] = schema
    inflight = timeline.transition_to_inflight(requested, HoodieCommitMetadata(operationType=DELETE_PARTITION).to_bytes(
        meta.table_config.version))
    complete_action(ActionCompletion.of_commit(meta, inflight, md, DELETE_PARTITION))
    meta.reload()
    _fire_callbacks(meta, instant_time, Action.REPLACE_COMMIT, DELETE_PARTITION)
    log.info("replaced %d file groups of %s at %s", sum(map(len, replaced.values())), meta.base_path, instant_time)
    return instant_time


def _latest_schema(meta: HoodieTableMetaClient) -> str | None:
    from storage.table.schema_resolver import latest_avro_schema

    return latest_avro_schema(meta)
