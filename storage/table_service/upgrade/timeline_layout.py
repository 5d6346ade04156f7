"""Copying a table's timeline between layout 1 (table version 6) and layout 2 (versions 8 and 9), as Hudi's
UpgradeDowngradeUtils does (upgradeActiveTimelineInstant / downgradeActiveTimelineInstant, upgradeToLSMTimeline /
downgradeFromLSMTimeline), but copying instead of moving: the old layout stays whole until hoodie.properties
switches, so a reader of the table at its recorded version always finds its timeline complete.

Active instants: a completed instant gains (layout 2) or loses (layout 1) its completion time in its name; on
upgrade the completion time is the instant file's modification time (Hudi's choice: version 6 records no other),
on downgrade the file's modification time becomes the completion time (so a later upgrade finds it again).
Commit, deltacommit and replacecommit metadata is JSON in layout 1 and Avro in layout 2; the other actions' files
are Avro in both and copied as they are. Archived instants: the v6 archive's entries become rows of the LSM history
(one layer-0 file) and back (one archive file).
"""
from __future__ import annotations

import logging
import os
from datetime import datetime, timezone
from typing import Any

from storage.avro.container import write_avro_container
from storage.avro.models import (
    HOODIE_ARCHIVED_META_ENTRY,
    HOODIE_CLEAN_METADATA,
    HOODIE_CLEANER_PLAN,
    HOODIE_COMPACTION_PLAN,
    HOODIE_REQUESTED_REPLACE_METADATA,
    HOODIE_ROLLBACK_METADATA,
    HOODIE_SAVEPOINT_METADATA,
)
from storage.avro.schema_converter import avro_schema_to_json
from storage.file_group.log_block import AvroDataBlock, HeaderMetadataType
from storage.file_group.log_format import HoodieLogFormatWriter
from storage.table.meta_client import HoodieTableMetaClient
from storage.table_service.archival import avro_commit_metadata
from storage.timeline.archived_timeline import METADATA_FIELD, HoodieArchivedTimeline, archive_file_name
from storage.timeline.commit_metadata import HoodieCommitMetadata
from storage.timeline.instant import Action, HoodieInstant, State
from storage.timeline.instant_time import format_instant, parse_instant
from storage.timeline.lsm_timeline import LSMTimeline, LSMTimelineInstant
from storage.timeline.lsm_timeline_writer import LSMTimelineWriter

log = logging.getLogger(__name__)

_AVRO_MAGIC = b"Obj\x01"
_COMMIT_ACTIONS = (Action.COMMIT, Action.DELTA_COMMIT, Action.REPLACE_COMMIT)
_ENTRY_SCHEMA_JSON = avro_schema_to_json(HOODIE_ARCHIVED_META_ENTRY)
# completed (non-commit) actions whose metadata is an Avro record of this schema
_METADATA_SCHEMAS = {Action.CLEAN: HOODIE_CLEAN_METADATA, Action.ROLLBACK: HOODIE_ROLLBACK_METADATA,
                     Action.SAVEPOINT: HOODIE_SAVEPOINT_METADATA}


# ----------------------------------------------------------------------------------------------- active instants


def convert_content(instant: HoodieInstant, data: bytes, layout_version: int) -> bytes:
    """An instant file's content in `layout_version`: commit metadata re-encoded (JSON <-> Avro), everything
    else (plans, clean / rollback metadata, empty files) as it is."""
    if not data.strip() or instant.action not in _COMMIT_ACTIONS or instant.is_requested:
        return data
    is_avro = data[:4] == _AVRO_MAGIC
    if is_avro == (layout_version >= 2):
        return data
    metadata = HoodieCommitMetadata.from_bytes(data)
    if instant.action == Action.REPLACE_COMMIT and instant.is_completed and metadata.partitionToReplaceFileIds is None:
        metadata.partitionToReplaceFileIds = {}  # a completed replacecommit keeps its replace form
    # the layout changes in the 6 <-> 8 step of Hudi's upgrade chain, so version 8's form (1.0's schemas)
    return metadata.to_bytes(8 if layout_version >= 2 else 6)


def completion_from_mtime(instant: HoodieInstant, mtime: float) -> str:
    """Hudi's completion time of a version-6 instant: its file's modification time (UTC, as this engine's
    instant times), never before the instant itself."""
    moment = format_instant(datetime.fromtimestamp(mtime, timezone.utc))
    return max(moment, instant.timestamp)


def _epoch(instant_time: str) -> float:
    return parse_instant(instant_time).replace(tzinfo=timezone.utc).timestamp()


def copy_active_timeline(meta: HoodieTableMetaClient, target_dir: str, layout_version: int) -> int:
    """Write every instant file of `meta`'s active timeline into `target_dir` in `layout_version`; how many."""
    storage = meta.storage
    storage.mkdirs(target_dir)
    infos = {i.path: i for i in storage.list_dir(meta.active_timeline.path) if not i.is_dir}
    files = sorted(meta.active_timeline.all_files().items(), key=lambda kv: kv[0].sort_key())
    for instant, path in files:
        target = instant
        if instant.is_completed:
            if layout_version >= 2:
                completion = instant.completion_time or completion_from_mtime(instant, infos[path].modification_time)
                target = HoodieInstant(State.COMPLETED, instant.action, instant.timestamp, completion)
            else:
                target = HoodieInstant(State.COMPLETED, instant.action, instant.timestamp)
        out = f"{target_dir}/{target.file_name(layout_version)}"
        storage.write_atomic(out, convert_content(instant, storage.read_bytes(path), layout_version))
        if layout_version < 2 and instant.is_completed and instant.completion_time and storage.is_local:
            # the completion time survives as the modification time (Hudi's downgrade does the same)
            stamp = _epoch(instant.completion_time)
            os.utime(out, (stamp, stamp))
    log.info("copied %d instant files of %s into %s (timeline layout %d)", len(files), meta.base_path, target_dir,
             layout_version)
    return len(files)


# ----------------------------------------------------------------------------------------------- archived instants


def _container(schema: dict, record: dict[str, Any] | None) -> bytes | None:
    return write_avro_container(schema, record) if record else None


def _commit_bytes(record: dict[str, Any] | None, replace: bool) -> bytes | None:
    if record is None:
        return None
    metadata = HoodieCommitMetadata.from_dict(record)
    if replace and metadata.partitionToReplaceFileIds is None:
        metadata.partitionToReplaceFileIds = {}
    return metadata.to_bytes(8)  # the 6 -> 8 step converts the archive


def _lsm_row(group: list) -> LSMTimelineInstant | None:
    """One archived action of a v6 archive (its entries: completed, requested, inflight) as an LSM row."""
    done = next((e for e in group if e.instant.is_completed), None)
    if done is None:
        return None
    action, record = done.instant.action, done.record
    if action in _COMMIT_ACTIONS:
        metadata = _commit_bytes(done.metadata(), action == Action.REPLACE_COMMIT)
    else:
        schema = _METADATA_SCHEMAS.get(action)
        metadata = _container(schema, done.metadata()) if schema else None
    plan = None
    pending = {(e.instant.action, e.instant.state): e for e in group if not e.instant.is_completed}
    for (pending_action, state), entry in sorted(pending.items(), key=lambda kv: kv[0][1] != State.INFLIGHT):
        if pending_action == Action.CLEAN:
            plan = plan or _container(HOODIE_CLEANER_PLAN, entry.record.get("hoodieCleanerPlan"))
        elif pending_action in (Action.COMPACTION, Action.LOG_COMPACTION):
            plan = plan or _container(HOODIE_COMPACTION_PLAN, entry.record.get("hoodieCompactionPlan"))
        elif pending_action in (Action.REPLACE_COMMIT, Action.CLUSTERING):
            if state is State.INFLIGHT and entry.record.get("HoodieInflightReplaceMetadata"):
                plan = plan or _commit_bytes(entry.record["HoodieInflightReplaceMetadata"], False)
            elif entry.record.get("hoodieRequestedReplaceMetadata"):
                plan = plan or _container(HOODIE_REQUESTED_REPLACE_METADATA,
                                          entry.record["hoodieRequestedReplaceMetadata"])
    if action == Action.COMMIT and plan is None and done.record.get("hoodieCompactionPlan"):
        plan = _container(HOODIE_COMPACTION_PLAN, done.record["hoodieCompactionPlan"])
    completion = record.get("stateTransitionTime") or done.instant.timestamp
    return LSMTimelineInstant(done.instant.timestamp, completion, action, metadata, plan)


def copy_archive_to_lsm(meta: HoodieTableMetaClient, history_dir: str) -> int:
    """The archived instants of a version-6 table (`meta`) written as one layer-0 file of an LSM history at
    `history_dir` (published by its first manifest); how many actions."""
    groups: dict[tuple[str, str], list] = {}
    for entry in HoodieArchivedTimeline(meta).entries:
        key = (entry.instant.timestamp, Action.COMPLETES_AS.get(entry.instant.action, entry.instant.action))
        groups.setdefault(key, []).append(entry)
    rows = [r for r in (_lsm_row(g) for _, g in sorted(groups.items())) if r is not None]
    meta.storage.mkdirs(history_dir)
    if rows:
        LSMTimelineWriter(LSMTimeline(meta.storage, history_dir)).write(rows)
    log.info("copied %d archived actions of %s into the LSM history %s", len(rows), meta.base_path, history_dir)
    return len(rows)


def _entry(instant_time: str, action: str, state: State, **payload: Any) -> dict[str, Any]:
    entry: dict[str, Any] = {f["name"]: None for f in HOODIE_ARCHIVED_META_ENTRY["fields"]}
    entry.update(commitTime=instant_time, actionType=action, actionState=state.value, version=1, **payload)
    return entry


def _archive_entries(row: LSMTimelineInstant) -> list[dict[str, Any]]:
    """One LSM row as HoodieArchivedMetaEntry records: its plan's pending entry (if any), then the completed one."""
    out = []
    plan = row.plan_record()
    if plan is not None:
        if row.action == Action.COMMIT:
            out.append(_entry(row.instant_time, Action.COMPACTION, State.REQUESTED, hoodieCompactionPlan=plan))
        elif row.action == Action.DELTA_COMMIT:
            out.append(_entry(row.instant_time, Action.LOG_COMPACTION, State.REQUESTED, hoodieCompactionPlan=plan))
        elif row.action == Action.CLEAN:
            out.append(_entry(row.instant_time, Action.CLEAN, State.REQUESTED, hoodieCleanerPlan=plan))
        elif row.action == Action.REPLACE_COMMIT:
            if "partitionToWriteStats" in plan:  # the inflight commit metadata
                out.append(_entry(row.instant_time, Action.REPLACE_COMMIT, State.INFLIGHT,
                                  HoodieInflightReplaceMetadata=avro_commit_metadata(HoodieCommitMetadata.from_dict(plan))))
            else:
                out.append(_entry(row.instant_time, Action.REPLACE_COMMIT, State.REQUESTED,
                                  hoodieRequestedReplaceMetadata=plan))
    payload: dict[str, Any] = {}
    if row.action in _COMMIT_ACTIONS:
        metadata = HoodieCommitMetadata.from_bytes(row.metadata or b"")
        payload[METADATA_FIELD[row.action]] = avro_commit_metadata(metadata, replace=row.action == Action.REPLACE_COMMIT)
    elif row.action in METADATA_FIELD and row.action not in (Action.COMPACTION, Action.LOG_COMPACTION):
        record = row.metadata_record()
        if record is not None:
            payload[METADATA_FIELD[row.action]] = record
    out.append(_entry(row.instant_time, row.action, State.COMPLETED, **payload))
    return out


def copy_lsm_to_archive(meta: HoodieTableMetaClient, archive_dir: str) -> int:
    """The archived instants of a version 8/9 table (`meta`) written as one v6 archive file in `archive_dir`
    (emptied first: files there are left from before an upgrade, or from an attempt that died); how many."""
    storage = meta.storage
    storage.delete_dir(archive_dir)
    storage.mkdirs(archive_dir)
    rows: dict[str, LSMTimelineInstant] = {}
    for entry in HoodieArchivedTimeline(meta).entries:
        rows.setdefault(entry.row.instant_time, entry.row)
    records = [e for ts in sorted(rows) for e in _archive_entries(rows[ts])]
    if records:
        block = AvroDataBlock.from_records(records, _ENTRY_SCHEMA_JSON, "")
        block.header.pop(HeaderMetadataType.INSTANT_TIME, None)  # as Hudi's archiver writes it
        with HoodieLogFormatWriter(f"{archive_dir}/{archive_file_name(1)}", storage=storage) as writer:
            writer.append_block(block)
    log.info("copied %d archived actions of %s into the v6 archive %s", len(rows), meta.base_path, archive_dir)
    return len(rows)
