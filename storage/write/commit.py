"""The commit of a write: what the instant files of a write hold, and what runs once the commit is published.

The requested file of an overwrite holds Hudi's HoodieRequestedReplaceMetadata (Avro); the inflight file the
workload profile (stats without paths); the completed file the commit metadata: every write stat, the writer
schema and, for overwrites, the file groups the commit replaces. After publishing, the commit callbacks run and
the table services the write client handed in follow (`TableServices`); none of them can undo the commit.
"""
from __future__ import annotations

import json
import logging
from typing import Protocol

import pyarrow as pa
from pyspark.sql import SparkSession

from storage.avro.schema_converter import arrow_to_avro_schema
from storage.config import HoodieConfig
from storage.table.fs_view import FileSystemView
from storage.table.meta_client import HoodieTableMetaClient
from storage.timeline.commit_metadata import HoodieCommitMetadata, HoodieWriteStat
from storage.timeline.instant import Action
from storage.write.commit_callback import CommitEvent, fire_commit_callbacks
from storage.write.operation import WriteOperationType
from storage.write.partitioner import BucketPlan
from storage.write.table_settings import TableSettings

log = logging.getLogger(__name__)


def requested_content(op: WriteOperationType, table_version: int) -> bytes:
    if op.commit_action != Action.REPLACE_COMMIT:
        return b""
    from storage.avro.container import write_avro_container
    from storage.avro.models import models_for

    return write_avro_container(models_for(table_version)["HoodieRequestedReplaceMetadata"], {
        "operationType": op.metadata_name, "clusteringPlan": None, "extraMetadata": {}, "version": 1})


def inflight_content(op: WriteOperationType, plan: BucketPlan, table_version: int) -> bytes:
    """The workload profile, as Hudi records it in the inflight file (stats without paths)."""
    md = HoodieCommitMetadata(operationType=op.metadata_name)
    for b in plan.buckets:
        md.add_write_stat(HoodieWriteStat(fileId=b.file_id, path=None, prevCommit=None, partitionPath=b.partition_path,
                                          numInserts=b.expected_inserts, numUpdateWrites=b.expected_updates))
    return md.to_bytes(table_version)


def commit_metadata(op: WriteOperationType, stats: list[HoodieWriteStat], schema: pa.Schema,
                    settings: TableSettings, fs_view: FileSystemView, partitions: list[str]) -> HoodieCommitMetadata:
    md = HoodieCommitMetadata(operationType=op.metadata_name)
    md.extraMetadata["schema"] = json.dumps(arrow_to_avro_schema(schema, settings.name), separators=(",", ":"))
    for stat in sorted(stats, key=lambda s: (s.partitionPath, s.fileId)):
        md.add_write_stat(stat)
    if op.is_overwrite:
        md.partitionToReplaceFileIds = _replaced_file_groups(op, stats, fs_view, partitions)
    return md


def _replaced_file_groups(op: WriteOperationType, stats: list[HoodieWriteStat], fs_view: FileSystemView,
                          partitions: list[str]) -> dict[str, list[str]]:
    """Every file group of the overwritten partitions (all partitions for insert_overwrite_table) that this
    write did not itself produce."""
    scope = None if op is WriteOperationType.INSERT_OVERWRITE_TABLE else partitions
    written = {(s.partitionPath, s.fileId) for s in stats}
    replaced: dict[str, list[str]] = {}
    for group in fs_view.file_groups():
        fg = group.file_group_id
        if (scope is None or fg.partition_path in scope) and (fg.partition_path, fg.file_id) not in written:
            replaced.setdefault(fg.partition_path, []).append(fg.file_id)
    return replaced


class TableServices(Protocol):
    """The table services a write client runs around its writes (Hudi's BaseHoodieWriteClient: the option checks
    before a write, `runTableServicesInline` / auto clean / auto archive after its commit). They live above the
    write path (storage.table_service.table_services.InlineTableServices); the client hands them in."""

    def check_options(self, config: HoodieConfig) -> None:
        """Fail, before anything is written, on service options the services would refuse after the commit."""

    def after_commit(self, spark: SparkSession, meta: HoodieTableMetaClient, config: HoodieConfig,
                     event: CommitEvent) -> None:
        """Run what the options ask for once `event`'s commit is published (it stands whatever they do)."""


def post_commit(spark: SparkSession, meta: HoodieTableMetaClient, config: HoodieConfig, event: CommitEvent,
                services: TableServices | None) -> list:
    """After a commit is published: its callbacks (failures are returned, never raised), then the table services.
    Returns the (callback name, error) pairs of failed callbacks."""
    failures = fire_commit_callbacks(event)
    if services is not None:
        try:
            services.after_commit(spark, meta, config, event)
        except Exception as exc:
            # the error stays what the service raised; the note keeps a caller from retrying a committed write
            exc.add_note(f"{event.action} {event.instant_time} of {event.base_path} completed before this table "
                         "service failed: the write's rows are committed (do not write them again)")
            raise
    return failures
