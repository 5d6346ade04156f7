"""Savepoints (Hudi's SavepointActionExecutor): pin a completed commit so clean and archival keep what a query
or a restore at that commit needs.

A savepoint of commit `t` is `<t>.savepoint.inflight` (empty) then `<t>.savepoint` (Avro
HoodieSavepointMetadata naming, per partition, the files of the latest file slices as of `t`). The cleaner never
deletes those files; archival stops at the first savepoint (or skips savepointed commits with
`hoodie.archive.beyond.savepoint`). `restore_to_savepoint` (storage.table_service.restore) brings the table back.

The metadata table (Hudi 1.x): a savepoint writes nothing to it and does not savepoint it (SavepointActionExecutor
touches the data timeline only). What keeps it restorable is the data table's archival, which stops at the first
savepoint, and the MDT's archival, which never passes the data table's first active commit
(storage.metadata.metadata_table_services, TimelineUtils.getEarliestInstantForMetadataArchival): the MDT
deltacommits after the savepoint stay on its active timeline. Its cleaner ignores data savepoints (Hudi's
CleanPlanner keeps no savepointed files for a metadata table), so a restore to a savepoint older than the MDT
slices its cleaner kept rebuilds the MDT instead (storage.metadata.metadata_writer, "Savepoint and
restore").
"""
from __future__ import annotations

import getpass
import logging
import time

from storage.avro.container import write_avro_container
from storage.avro.models import HOODIE_SAVEPOINT_METADATA
from storage.config import HoodieConfig
from storage.exception import HoodieSavepointError
from storage.table.fs_view import FileSystemView
from storage.table.meta_client import HoodieTableMetaClient
from storage.table_service.clean_planner import last_completed_clean
from storage.table_service.service_table import service_meta_client
from storage.testing.crash_points import crash_point
from storage.timeline.instant import Action, HoodieInstant, State
from storage.table.action_completion import ActionCompletion, complete_action

log = logging.getLogger(__name__)


def savepoint_instants(meta: HoodieTableMetaClient) -> list[HoodieInstant]:
    return list(meta.timeline.completed().of_actions([Action.SAVEPOINT]))


def create_savepoint(table: HoodieTableMetaClient | str, commit_time: str, user: str | None = None,
                     comments: str = "", spark=None, config: HoodieConfig = HoodieConfig()) -> HoodieInstant:
    """Savepoint the completed commit `commit_time`; the completed savepoint instant. `config`: the writer's
    options (with `hoodie.metadata.enable=true` the metadata table stays, else it is removed first)."""
    meta = service_meta_client(table, "savepoint", spark, config)
    commit = next((i for i in meta.timeline.completed().write_timeline() if i.timestamp == commit_time), None)
    if commit is None:
        raise HoodieSavepointError(f"cannot savepoint {commit_time} of {meta.base_path}: no completed commit has "
                                   "that instant time on the active timeline")
    if meta.timeline.completed().of_actions([Action.SAVEPOINT]).contains_timestamp(commit_time):
        raise HoodieSavepointError(f"commit {commit_time} of {meta.base_path} is already savepointed")
    last = last_completed_clean(meta)
    retained_from = (last[1].get("earliestCommitToRetain") or "") if last else ""
    if retained_from and commit_time < retained_from:
        raise HoodieSavepointError(f"cannot savepoint {commit_time} of {meta.base_path}: it is older than the "
                                   f"earliest commit the cleaner retains ({retained_from}), its files may be gone")
    # the files as of the commit: on the axis time travel uses (its completion time in table version 8+, where
    # its request time would leave out the commit's own files)
    record = _savepoint_record(meta, commit.completion_time or commit_time, user, comments)
    timeline = meta.active_timeline
    inflight = HoodieInstant(State.INFLIGHT, Action.SAVEPOINT, commit_time)
    if not meta.timeline.pending().of_actions([Action.SAVEPOINT]).contains_timestamp(commit_time):
        meta.storage.create(f"{timeline.path}/{inflight.file_name(1)}")
    # else: a savepoint of this commit died before completing; this call finishes it
    crash_point("savepoint.after_inflight")
    done = complete_action(ActionCompletion(meta, inflight, write_avro_container(HOODIE_SAVEPOINT_METADATA, record),
                                            record, "savepoint"))
    meta.reload()
    log.info("savepoint %s of %s keeps %d files", commit_time, meta.base_path,
             sum(len(p["savepointDataFile"]) for p in record["partitionMetadata"].values()))
    return done


def _savepoint_record(meta: HoodieTableMetaClient, as_of: str, user: str | None, comments: str) -> dict:
    view = FileSystemView(meta, as_of=as_of)
    files: dict[str, list[str]] = {}
    for fs in view.latest_merged_file_slices():
        names = ([fs.base_file.name] if fs.base_file else []) + [lf.name for lf in fs.sorted_log_files()]
        files.setdefault(fs.partition_path, []).extend(names)
    return {
        "savepointedBy": user or _user(),
        "savepointedAt": int(time.time()),
        "comments": comments or "",
        "partitionMetadata": {p: {"partitionPath": p, "savepointDataFile": sorted(names)}
                              for p, names in sorted(files.items())},
        "version": 1,
    }


def _user() -> str:
    try:
        return getpass.getuser()
    except Exception:  # no user name in some containers
        return "unknown"


def delete_savepoint(table: HoodieTableMetaClient | str, commit_time: str, spark=None) -> None:
    """Remove the savepoint of `commit_time` (its files become cleanable again)."""
    meta = service_meta_client(table, "delete_savepoint", spark)
    files = [i for i in meta.active_timeline.all_files()
             if i.action == Action.SAVEPOINT and i.timestamp == commit_time]
    if not any(i.is_completed for i in files):
        raise HoodieSavepointError(f"no savepoint at {commit_time} in {meta.base_path} (savepoints: "
                                   f"{', '.join(i.timestamp for i in savepoint_instants(meta)) or 'none'})")
    for instant in sorted(files, key=lambda i: i.state is State.COMPLETED):  # pending first, as archival does
        meta.active_timeline.delete_instant_file(instant)
    meta.reload()
    log.info("deleted savepoint %s of %s", commit_time, meta.base_path)
