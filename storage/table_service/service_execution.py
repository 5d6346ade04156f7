"""Execution of a planned table service (compaction, clustering): the plan is `<t>.<action>.requested`; executing
it moves it to inflight under the table lock with this process's heartbeat. An inflight attempt whose process died
(no live heartbeat) is undone first: the files its markers name are deleted and the instant goes back to
requested, so the plan runs again from the start. Nothing an attempt wrote is visible before its completed
instant exists."""
from __future__ import annotations

import logging

import json

import pyarrow as pa

from storage.avro.schema_converter import arrow_to_avro_schema
from storage.config import HoodieConfig
from storage.exception import HoodieError, HoodieHeartbeatError
from storage.fs_utils import join_path
from storage.table.meta_client import HoodieTableMetaClient
from storage.testing.crash_points import crash_point
from storage.timeline.commit_metadata import HoodieCommitMetadata, HoodieWriteStat
from storage.timeline.instant import HoodieInstant
from storage.transaction.transaction_manager import TransactionManager
from storage.write.heartbeat import Heartbeat, HeartbeatSettings, is_writer_alive
from storage.write.markers import delete_marker_dir, list_markers, reconcile_against_markers

log = logging.getLogger(__name__)


def undo_failed_attempt(meta: HoodieTableMetaClient, instant: HoodieInstant, service: str,
                        error: type[HoodieError]) -> None:
    """An inflight `service` whose executor died: delete what it wrote and return it to requested."""
    if is_writer_alive(meta.storage, meta.meta_path, instant.timestamp):
        message = f"{service} {instant.timestamp} of {meta.base_path} is being executed by another running process"
        raise error(message) from HoodieHeartbeatError(message)  # the cause tells a busy plan from a failed one
    marker_dir = meta.marker_dir(instant.timestamp)
    markers = list_markers(meta.storage, marker_dir)
    for marker in markers:
        meta.storage.delete(join_path(meta.base_path, marker.partition_path, marker.file_name))
    delete_marker_dir(meta.storage, marker_dir)
    meta.storage.delete(join_path(meta.meta_path, instant.file_name(meta.table_config.timeline_layout_version)))
    meta.reload()
    log.info("rolled back the failed attempt of %s %s (%d files removed)", service, instant.timestamp, len(markers))


def start_execution(meta: HoodieTableMetaClient, instant_time: str, action: str, service: str,
                    config: HoodieConfig, error: type[HoodieError]) -> tuple[HoodieInstant, Heartbeat]:
    """Under the table lock: undo a dead attempt, start this process's heartbeat (refused while another live
    process runs it: its heartbeat is never taken over or deleted), then the inflight instant."""
    with TransactionManager.for_table(meta, config).transaction(f"execute {service} {instant_time}"):
        timeline = meta.active_timeline.reload()
        pending = [i for i in timeline.timeline.pending() if i.timestamp == instant_time and i.action == action]
        if not pending:
            raise error(f"no pending {service} {instant_time} in {meta.base_path}")
        if pending[0].is_inflight:
            undo_failed_attempt(meta, pending[0], service, error)
            timeline = meta.active_timeline
        requested = timeline.requested_of(pending[0])
        try:
            heartbeat = Heartbeat(meta.storage, meta.meta_path, instant_time, HeartbeatSettings.of(config)).start()
        except HoodieHeartbeatError as exc:
            raise error(str(exc)) from exc
        try:
            inflight = timeline.transition_to_inflight(requested)
        except BaseException:
            heartbeat.stop()
            raise
    return inflight, heartbeat


def service_commit_metadata(meta: HoodieTableMetaClient, operation: str, stats: list[HoodieWriteStat],
                            schema: pa.Schema, marker_dir: str, **fields) -> HoodieCommitMetadata:
    """The commit metadata a service publishes (its write stats in file-group order and the writer schema), after
    removing the files of failed task attempts (reconcile against markers)."""
    metadata = HoodieCommitMetadata(operationType=operation, **fields)
    metadata.extraMetadata["schema"] = json.dumps(arrow_to_avro_schema(schema, meta.table_config.name),
                                                  separators=(",", ":"))
    for stat in sorted(stats, key=lambda s: (s.partitionPath, s.fileId)):
        metadata.add_write_stat(stat)
    reconcile_against_markers(meta.storage, meta.base_path, marker_dir, {s.path for s in stats if s.path})
    return metadata


def finish_execution(meta: HoodieTableMetaClient, service: str, marker_dir: str) -> None:
    """After the completed instant exists: its markers go (a crash before that leaves them to the next run)."""
    crash_point(f"{service}.after_commit")
    delete_marker_dir(meta.storage, marker_dir)
    meta.reload()
