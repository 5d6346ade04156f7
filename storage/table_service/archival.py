"""Archival (Hudi's HoodieTimelineArchiver, timeline layout 1): keeps the active timeline
short by moving old instants into `.hoodie/archived/` (read back by storage.timeline.archived_timeline).

Python API: ``archive(base_path_or_meta, config=HoodieConfig(), spark=None) -> list[HoodieInstant]`` (the completed
instants archived) and ``check_archival_config(config)``; ``archive_timeline(meta, config, retain_from)`` archives a
loaded table with options the caller checked and an extra bound (the metadata table's archival).

What is archived (once more than `hoodie.keep.max.commits` completed instants exist, down to
`hoodie.keep.min.commits`, in batches of at least `hoodie.commits.archival.batch`):
- completed clean and rollback instants, per action;
- completed commits, deltacommits and replacecommits older than: the oldest pending write or table service (the
  completed commit before it stays too), the first savepoint (or only the savepointed commits with
  `hoodie.archive.beyond.savepoint`), the last clean's earliest commit to retain, the oldest replacecommit whose
  replaced files the cleaner has not removed yet (and the commit before a pending clustering), and on
  merge-on-read tables the last compaction (inline compaction counts the deltacommits after it);
- with each, its requested and inflight files (and the compaction plan of a compaction commit).

Order, so that a crash at any point leaves a timeline that reads correctly: the archive file is written first
(on file systems with append the records go to the latest archive file, elsewhere each archival writes a new
version whole); then the requested / inflight files are deleted, then the completed ones, oldest first. A
crash after writing re-archives the same instants next time (readers de-duplicate).

Small archive files are merged (`hoodie.archive.merge.enable`) with Hudi's plan: a `mergeArchivePlan` file
(Avro HoodieMergeArchiveFilePlan) names the candidates and the merged file, the merged file is written, the
candidates are deleted, the plan is deleted. An interrupted merge is settled at the start of the next archival.

Table versions 8 and 9 (timeline layout 2; Hudi's TimelineArchiverV2) archive the same instants into the LSM
timeline under `.hoodie/timeline/history/` instead (storage.timeline.lsm_timeline): one row per archived action
(`lsm_timeline_instant`), all of one archival in one layer-0 file published by a new manifest; then the active
files are deleted in the same order; then full layers are merged and unreferenced files cleaned
(storage.timeline.lsm_timeline_writer). As in Hudi, any number of instants is archived at once (no minimum batch),
and the archive-file merge options do not apply.
"""
from __future__ import annotations

import logging
from typing import Any

from storage.avro.container import read_avro_container, write_avro_container
from storage.avro.models import HOODIE_ARCHIVED_META_ENTRY
from storage.avro.schema_converter import avro_schema_to_json
from storage.config import ArchivalConfigKeys as AK
from storage.config import CleanConfigKeys as CK
from storage.config import CompactionConfigKeys as CMK
from storage.config import HoodieConfig
from storage.exception import HoodieArchivalError
from storage.file_group.log_block import AvroDataBlock, HeaderMetadataType
from storage.file_group.log_format import HoodieLogFormatWriter
from storage.metadata.table_metadata import FILES, enabled_partitions
from storage.table.meta_client import HoodieTableMetaClient
from storage.table.metadata_table import metadata_table_path
from storage.table_service.clean_planner import last_completed_clean
from storage.table_service.service_table import service_meta_client
from storage.testing.crash_points import crash_point
from storage.transaction.transaction_manager import TransactionManager
from storage.timeline.archived_timeline import (
    MERGE_ARCHIVE_PLAN_NAME,
    archive_file_name,
    archive_file_version,
    archive_folder,
    list_archive_files,
    read_archive_records,
)
from storage.timeline.commit_metadata import HoodieCommitMetadata
from storage.timeline.instant import Action, HoodieInstant, State
from storage.timeline.lsm_timeline import LSMTimeline, LSMTimelineInstant
from storage.timeline.lsm_timeline_writer import LSMTimelineWriter
from storage.timeline.timeline import COMMITS_TIMELINE_ACTIONS
from storage.write.markers import delete_marker_dir

log = logging.getLogger(__name__)

ROLLING_STAT_METADATA_KEY = "ROLLING_STAT_METADATA"  # emptied in archived commit metadata, as Hudi does
_ENTRY_SCHEMA_JSON = avro_schema_to_json(HOODIE_ARCHIVED_META_ENTRY)


def _merge_plan_schema() -> dict:
    """HoodieMergeArchiveFilePlan.avsc (Hudi 0.11+)."""
    return {"type": "record", "name": "HoodieMergeArchiveFilePlan", "namespace": "org.apache.hudi.avro.model",
            "fields": [{"name": "candidate", "type": ["null", {"type": "array", "items": "string"}], "default": None},
                       {"name": "mergedArchiveFileName", "type": ["null", "string"], "default": None}]}


def check_archival_config(config: HoodieConfig) -> None:
    """Hudi's HoodieWriteConfig checks: min < max, and min > the commits the cleaner retains (otherwise a
    commit could be archived before its old file versions are cleaned, and incremental pulls miss data)."""
    low, high = config.get(AK.MIN_COMMITS_TO_KEEP), config.get(AK.MAX_COMMITS_TO_KEEP)
    retained = config.get(CK.COMMITS_RETAINED)
    if low < 1 or config.get(AK.COMMITS_ARCHIVAL_BATCH_SIZE) < 1:
        raise HoodieArchivalError(f"{AK.MIN_COMMITS_TO_KEEP.key} and {AK.COMMITS_ARCHIVAL_BATCH_SIZE.key} must be "
                                  "at least 1")
    if high <= low:
        raise HoodieArchivalError(f"Increase {AK.MAX_COMMITS_TO_KEEP.key}={high} to be greater than "
                                  f"{AK.MIN_COMMITS_TO_KEEP.key}={low}.")
    if low <= retained:
        raise HoodieArchivalError(f"Increase {AK.MIN_COMMITS_TO_KEEP.key}={low} to be greater than "
                                  f"{CK.COMMITS_RETAINED.key}={retained}. Otherwise, there is risk of incremental "
                                  "pull missing data from few instants.")


# ----------------------------------------------------------------------------------------------- choosing


class _ArchivalCandidates:
    """Hudi's getInstantsToArchive, on one loaded timeline."""

    def __init__(self, meta: HoodieTableMetaClient, config: HoodieConfig, retain_from: str | None = None):
        self.meta, self.config = meta, config
        self.retain_from = retain_from  # a caller's own bound (the metadata table's: what its data table needs)
        self.timeline = meta.timeline
        self.low, self.high = config.get(AK.MIN_COMMITS_TO_KEEP), config.get(AK.MAX_COMMITS_TO_KEEP)

    def completed_instants(self) -> list[HoodieInstant]:
        chosen = self._cleans_and_rollbacks() + self._commits()
        bound = self._metadata_table_bound()
        if bound is not None:  # cleans and rollbacks too: their MDT deltacommits count while they are active
            log.debug("archival of %s: the metadata table's latest compaction %r bounds %d candidates",
                      self.meta.base_path, bound, len(chosen))
            chosen = [i for i in chosen if i.timestamp < bound]
        return sorted(chosen, key=HoodieInstant.sort_key)

    def _cleans_and_rollbacks(self) -> list[HoodieInstant]:
        out: list[HoodieInstant] = []
        for action in (Action.CLEAN, Action.ROLLBACK):
            done = list(self.timeline.completed().of_actions([action]))
            if len(done) > self.high:
                out += done[: len(done) - self.low]
        return out

    def _commits(self) -> list[HoodieInstant]:
        commits = list(self.timeline.completed().write_timeline())
        if len(commits) <= self.high:
            return []
        bounds = self._retain_bounds(commits)
        bound = min((b for b in bounds if b is not None), default=None)
        log.debug("archival of %s: %d commits, retain from %s (pending %s, clean %s, clustering %s, compaction %s, "
                  "caller %s)", self.meta.base_path, len(commits), bound, *bounds)
        savepoints = [i.timestamp for i in self.timeline.completed().of_actions([Action.SAVEPOINT])]
        beyond = self.config.get(AK.ARCHIVE_BEYOND_SAVEPOINT)
        chosen = []
        for c in commits:
            if bound is not None and c.timestamp >= bound:
                break
            if savepoints and not beyond and c.timestamp >= savepoints[0]:
                break
            if c.timestamp in savepoints:
                continue
            chosen.append(c)
        return chosen[: max(len(commits) - self.low, 0)]

    def _retain_bounds(self, commits: list[HoodieInstant]) -> list[str | None]:
        return [self._oldest_pending_bound(commits), self._clean_bound(), self._clustering_bound(commits),
                self._compaction_bound(), self.retain_from]

    def _oldest_pending_bound(self, commits: list[HoodieInstant]) -> str | None:
        """Nothing at or after the completed commit before the oldest pending write / table service."""
        pending = self.timeline.pending().of_actions(COMMITS_TIMELINE_ACTIONS).first()
        if pending is None:
            return None
        before = [c.timestamp for c in commits if c.timestamp < pending.timestamp]
        return before[-1] if before else pending.timestamp

    def _clean_bound(self) -> str | None:
        last = last_completed_clean(self.meta)
        return (last[1].get("earliestCommitToRetain") or None) if last else None

    def _clustering_bound(self, commits: list[HoodieInstant]) -> str | None:
        """ClusteringUtils.getOldestInstantToRetainForClustering: a replacecommit stays until the cleaner removed
        the file groups it replaced (else readers would see them again)."""
        replaces = list(self.timeline.of_actions([Action.REPLACE_COMMIT, Action.CLUSTERING]))
        if not replaces:
            return None
        last = last_completed_clean(self.meta)
        if last is None:
            oldest = replaces[0].timestamp
        else:
            lower = last[1].get("earliestCommitToRetain") or last[0].timestamp
            oldest = next((r.timestamp for r in replaces if r.timestamp >= lower), None)
        pending = next((r for r in replaces if not r.is_completed), None)
        if pending is not None:
            before = [c.timestamp for c in commits if c.timestamp < pending.timestamp]
            if before and (oldest is None or before[-1] < oldest):
                oldest = before[-1]
        return oldest

    def _metadata_table_bound(self) -> str | None:
        """Hudi's archiver with a metadata table: no instant at or after the metadata table's latest compaction
        ("" - nothing - before its first), so the data instants its uncompacted deltacommits stand for stay active
        (a reader trusts an MDT deltacommit whose data instant is on the active timeline)."""
        if FILES not in enabled_partitions(self.meta):
            return None
        path = metadata_table_path(self.meta)
        if not HoodieTableMetaClient.exists(path, self.meta.storage):
            return None
        last = HoodieTableMetaClient.load(path, self.meta.storage).timeline.completed() \
            .of_actions([Action.COMMIT]).last()
        return last.timestamp if last is not None else ""

    def _compaction_bound(self) -> str | None:
        """CompactionUtils.getEarliestInstantToRetainForCompaction, for merge-on-read with a trigger that counts
        deltacommits: enough deltacommits stay active to trigger the next compaction. While fewer than
        hoodie.compact.inline.max.delta.commits follow the last completed compaction (or, before any, from the
        first deltacommit) everything from it stays; past that only the last that many deltacommits do, so a
        table whose compactions find nothing to do (small file groups rewritten whole) still archives."""
        if not self.meta.table_config.is_mor:
            return None
        if str(self.config.get(CMK.INLINE_TRIGGER_STRATEGY)).upper() not in ("NUM_COMMITS", "NUM_AND_TIME"):
            return None
        files = self.meta.active_timeline.all_files()
        compactions = sorted({i.timestamp for i in files if i.action == Action.COMPACTION})
        completed = [ts for ts in compactions if self.timeline.completed().contains_timestamp(ts)]
        last = completed[-1] if completed else None
        deltas = [i.timestamp for i in self.timeline.of_actions([Action.DELTA_COMMIT])
                  if last is None or i.timestamp > last]
        if not deltas and last is None:
            return None
        keep = int(self.config.get(CMK.INLINE_MAX_DELTA_COMMITS))
        if len(deltas) < keep:
            return last if last is not None else deltas[0]
        return deltas[len(deltas) - keep]


def instants_to_archive(meta: HoodieTableMetaClient, config: HoodieConfig,
                        retain_from: str | None = None) -> list[HoodieInstant]:
    """Every instant file to archive (completed ones with their requested / inflight files), in time order; no
    commit at or after `retain_from` (when given) is archived."""
    completed = _ArchivalCandidates(meta, config, retain_from).completed_instants()
    keys = {(c.timestamp, Action.COMPLETES_AS.get(c.action, c.action)) for c in completed}
    files = meta.active_timeline.all_files()
    return sorted((i for i in files if (i.timestamp, Action.COMPLETES_AS.get(i.action, i.action)) in keys),
                  key=HoodieInstant.sort_key)


# ----------------------------------------------------------------------------------------------- converting


def archived_entry(meta: HoodieTableMetaClient, instant: HoodieInstant) -> dict[str, Any]:
    """Hudi's MetadataConversionUtils.createMetaWrapper: one HoodieArchivedMetaEntry for one instant file."""
    entry: dict[str, Any] = {f["name"]: None for f in HOODIE_ARCHIVED_META_ENTRY["fields"]}
    entry.update(commitTime=instant.timestamp, actionState=instant.state.value, actionType=instant.action, version=1)
    data = meta.active_timeline.read_bytes(instant)
    action = instant.action
    if action in (Action.COMMIT, Action.DELTA_COMMIT):
        entry["hoodieCommitMetadata"] = avro_commit_metadata(HoodieCommitMetadata.from_bytes(data))
    elif action == Action.REPLACE_COMMIT:
        if instant.is_completed:
            entry["hoodieReplaceCommitMetadata"] = avro_commit_metadata(HoodieCommitMetadata.from_bytes(data),
                                                                        replace=True)
        elif instant.is_inflight and data.strip():
            entry["HoodieInflightReplaceMetadata"] = avro_commit_metadata(HoodieCommitMetadata.from_bytes(data))
        elif data:
            entry["hoodieRequestedReplaceMetadata"] = read_avro_container(data)
    elif action == Action.CLEAN:
        entry["hoodieCleanMetadata" if instant.is_completed else "hoodieCleanerPlan"] = read_avro_container(data)
    elif action == Action.ROLLBACK:
        if instant.is_completed:
            entry["hoodieRollbackMetadata"] = read_avro_container(data)
    elif action == Action.COMPACTION:
        plan = data or meta.active_timeline.read_bytes(meta.active_timeline.requested_of(instant))
        entry["hoodieCompactionPlan"] = read_avro_container(plan) if plan else None
    else:
        raise HoodieArchivalError(f"archiving {instant} of {meta.base_path}: action {action!r} is not archived")
    return entry


def avro_commit_metadata(md: HoodieCommitMetadata, replace: bool = False) -> dict[str, Any]:
    """The Avro commit metadata record of an archived entry (HoodieCommitMetadata.to_avro_record), with the rolling
    stats key emptied as Hudi's archiver does."""
    record = md.to_avro_record(replace)
    record["extraMetadata"] = {**record["extraMetadata"], ROLLING_STAT_METADATA_KEY: ""}
    return record


# ----------------------------------------------------------------------------------------------- writing


def _write_archive_block(meta: HoodieTableMetaClient, records: list[dict[str, Any]]) -> str:
    """Append the entries to the latest archive file (a new version where there is no append); the file."""
    files = list_archive_files(meta)
    latest = archive_file_version(files[-1].name) if files else None
    if latest is not None and meta.storage.supports_append:
        name = files[-1].name
    else:
        name = archive_file_name((latest or 0) + 1)
    path = f"{archive_folder(meta)}/{name}"
    meta.storage.mkdirs(archive_folder(meta))
    _append_entries(meta, path, records)
    return path


def _append_entries(meta: HoodieTableMetaClient, path: str, records: list[dict[str, Any]]) -> None:
    """One AVRO_DATA_BLOCK of HoodieArchivedMetaEntry records whose header holds the SCHEMA only (no instant
    time), as Hudi's archiver writes it."""
    block = AvroDataBlock.from_records(records, _ENTRY_SCHEMA_JSON, "")
    block.header.pop(HeaderMetadataType.INSTANT_TIME, None)
    with HoodieLogFormatWriter(path, storage=meta.storage) as writer:
        writer.append_block(block)


def _delete_archived_instants(meta: HoodieTableMetaClient, instants: list[HoodieInstant]) -> None:
    """requested / inflight files first, then completed ones oldest first (a completed file deleted first would
    make its instant look pending to compaction or clustering)."""
    timeline = meta.active_timeline
    for instant in [i for i in instants if not i.is_completed]:
        timeline.delete_instant_file(instant)
    crash_point("archive.between_deletes")
    for instant in [i for i in instants if i.is_completed]:
        timeline.delete_instant_file(instant)


def archive(table: HoodieTableMetaClient | str, config: HoodieConfig = HoodieConfig(),
            spark=None) -> list[HoodieInstant]:
    """Archive what the rules allow; the completed instants archived (empty when below the batch size)."""
    meta = service_meta_client(table, "archival", spark, config)
    check_archival_config(config)
    return archive_timeline(meta, config)


def archive_timeline(meta: HoodieTableMetaClient, config: HoodieConfig,
                     retain_from: str | None = None) -> list[HoodieInstant]:
    """`archive` of a loaded table whose options the caller checked (the metadata table's writer derives its
    own, storage.metadata.metadata_table_services); `retain_from` bounds the commits archived further."""
    # under the table lock, as Hudi's archiver: a writer's conflict check must not read a timeline whose
    # instants are half moved to the archive
    with TransactionManager.for_table(meta, config).transaction("archive"):
        meta.reload()
        if meta.active_timeline.layout_version >= 2:
            return _archive_to_lsm_timeline(meta, config, retain_from)
        _settle_interrupted_merge(meta)
        instants = instants_to_archive(meta, config, retain_from)
        completed = [i for i in instants if i.is_completed]
        if not completed or len(completed) < config.get(AK.COMMITS_ARCHIVAL_BATCH_SIZE):
            log.debug("no instants to archive in %s", meta.base_path)
            return []
        path = _write_archive_block(meta, [archived_entry(meta, i) for i in instants])
        crash_point("archive.after_write")
        _remove_archived(meta, instants, completed, path.rsplit("/", 1)[-1])
    if config.get(AK.MERGE_ENABLE):
        merge_small_archive_files(meta, config)
    return completed


def _remove_archived(meta: HoodieTableMetaClient, instants: list[HoodieInstant], completed: list[HoodieInstant],
                     archive_file: str) -> None:
    """Once the archive holds them: the archived instants' markers and instant files leave the active timeline."""
    for instant in completed:
        delete_marker_dir(meta.storage, meta.marker_dir(instant.timestamp))
    _delete_archived_instants(meta, instants)
    meta.reload()
    log.info("archived %d instants of %s (%s .. %s) into %s", len(completed), meta.base_path,
             completed[0].timestamp, completed[-1].timestamp, archive_file)


# ----------------------------------------------------------------------------------------------- layout 2


def _archive_to_lsm_timeline(meta: HoodieTableMetaClient, config: HoodieConfig,
                             retain_from: str | None = None) -> list[HoodieInstant]:
    """TimelineArchiverV2.archiveIfRequired, under the caller's table lock."""
    instants = instants_to_archive(meta, config, retain_from)
    completed = [i for i in instants if i.is_completed]
    if not completed:
        log.debug("no instants to archive in %s", meta.base_path)
        return []
    writer = LSMTimelineWriter(LSMTimeline.for_table(meta), config.get(AK.TIMELINE_COMPACTION_BATCH_SIZE))
    name = writer.write([lsm_timeline_instant(meta, action) for action in archived_actions(instants)])
    crash_point("archive.after_write")
    _remove_archived(meta, instants, completed, name)
    writer.compact_and_clean()
    return completed


def archived_actions(instants: list[HoodieInstant]) -> list[list[HoodieInstant]]:
    """The instant files of `instants_to_archive` grouped per action (Hudi's ActiveAction: requested, inflight and
    completed file of one instant time; a table service's pending action with the action it completes as)."""
    groups: dict[tuple[str, str], list[HoodieInstant]] = {}
    for instant in instants:
        groups.setdefault((instant.timestamp, Action.COMPLETES_AS.get(instant.action, instant.action)), []).append(instant)
    return [sorted(g, key=HoodieInstant.sort_key) for _, g in sorted(groups.items())
            if any(i.is_completed for i in g)]


def lsm_timeline_instant(meta: HoodieTableMetaClient, action: list[HoodieInstant]) -> LSMTimelineInstant:
    """Hudi's MetadataConversionUtils.createLSMTimelineInstant for one action's files: the completed file's bytes
    as metadata (none when empty) and, as plan, the requested-state content: the cleaner plan, the compaction or
    log-compaction plan, for replacecommit / clustering the requested metadata, replaced by the inflight commit
    metadata when that file is not empty."""
    timeline = meta.active_timeline
    done = next(i for i in action if i.is_completed)
    by_state = {i.state: i for i in action}
    pending = by_state.get(State.REQUESTED) or by_state.get(State.INFLIGHT)
    pending_action = pending.action if pending is not None else done.action

    def content(state: State) -> bytes | None:
        instant = by_state.get(state)
        data = timeline.read_bytes(instant) if instant is not None else b""
        return data or None

    plan = None
    if pending_action == Action.CLEAN:
        plan = content(State.REQUESTED) or content(State.INFLIGHT)
    elif pending_action in (Action.REPLACE_COMMIT, Action.CLUSTERING):
        plan = content(State.INFLIGHT) or content(State.REQUESTED)
    elif pending_action in (Action.COMPACTION, Action.LOG_COMPACTION):
        plan = content(State.REQUESTED)
    return LSMTimelineInstant(done.timestamp, done.completion_time, done.action, content(State.COMPLETED), plan)


# ----------------------------------------------------------------------------------------------- merging


def merge_small_archive_files(meta: HoodieTableMetaClient, config: HoodieConfig) -> str | None:
    """Merge the newest run of archive files smaller than `hoodie.archive.merge.small.file.limit.bytes` into
    one new version once there are `hoodie.archive.merge.files.batch.size` of them; the merged file or None."""
    limit = config.get(AK.MERGE_SMALL_FILE_LIMIT_BYTES)
    files = list_archive_files(meta)
    candidates = []
    for info in reversed(files):
        if info.size >= limit:
            break
        candidates.append(info)
    if len(candidates) < config.get(AK.MERGE_FILES_BATCH_SIZE):
        return None
    candidates.reverse()
    merged_name = archive_file_name(archive_file_version(files[-1].name) + 1)
    folder = archive_folder(meta)
    plan = {"candidate": [c.name for c in candidates], "mergedArchiveFileName": merged_name}
    meta.storage.write_atomic(f"{folder}/{MERGE_ARCHIVE_PLAN_NAME}", write_avro_container(_merge_plan_schema(), plan))
    crash_point("archive.merge_after_plan")
    _append_entries(meta, f"{folder}/{merged_name}", [r for c in candidates for r in read_archive_records(meta, c.path)])
    crash_point("archive.merge_after_write")
    for c in candidates:
        meta.storage.delete(c.path)
    meta.storage.delete(f"{folder}/{MERGE_ARCHIVE_PLAN_NAME}")
    log.info("merged %d small archive files of %s into %s", len(candidates), meta.base_path, merged_name)
    return merged_name


def _settle_interrupted_merge(meta: HoodieTableMetaClient) -> None:
    """Hudi's verifyLastMergeArchiveFilesIfNecessary: with every candidate still there the merged file may be
    partial, so it goes (the merge is redone later); with some candidates gone it is whole, so the rest go."""
    folder = archive_folder(meta)
    plan_path = f"{folder}/{MERGE_ARCHIVE_PLAN_NAME}"
    if not meta.storage.exists(plan_path):
        return
    plan = read_avro_container(meta.storage.read_bytes(plan_path))
    candidates = [f"{folder}/{n}" for n in plan.get("candidate") or []]
    merged = f"{folder}/{plan.get('mergedArchiveFileName')}"
    if all(meta.storage.exists(c) for c in candidates):
        meta.storage.delete(merged)
    else:
        for c in candidates:
            meta.storage.delete(c)
    meta.storage.delete(plan_path)
    log.info("settled an interrupted archive merge in %s", meta.base_path)
