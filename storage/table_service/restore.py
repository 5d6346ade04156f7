"""Restore (Hudi's RestoreActionExecutor): bring a table back to a savepoint or a completed instant by rolling
back every later write and table service, newest first.

`<t>.restore.requested` (Avro HoodieRestorePlan: the instants to roll back) -> `<t>.restore.inflight` -> each
instant rolled back with storage.write.rollback (completed commits through their metadata, merge-on-read log
appends through rollback blocks, compactions with their plan) -> `<t>.restore` (Avro HoodieRestoreMetadata with
each rollback's metadata). This module plans restores; executing a plan lives beside rollback
(`storage.write.rollback.finish_pending_restores`), as a restore that dies half-way is finished from its saved
plan by the next restore, write or table service, before anything else touches the table.

The metadata table (a writer `config` with `hoodie.metadata.enable=true`; without it the restore removes it, as
every writer with it off does) follows Hudi 1.x (storage.metadata.metadata_writer, "Savepoint and restore"): the
restore's rollbacks leave it alone (Hudi runs them with skipTimelinePublish) and readers list storage while the
restore is pending; when it completes, the MDT is restored to the same instant and synced with the data files left
(BaseRestoreActionExecutor.writeToMetadata -> HoodieBackedTableMetadataWriter.update(HoodieRestoreMetadata)), or
rebuilt from them when it cannot be restored there (Hudi's restoreToSavepoint deletes it in those cases). The plan
always names the instant restored to (`savepointToRestoreTimestamp`, as Hudi's RestorePlanActionExecutor writes it;
the MDT step reads it).
"""
from __future__ import annotations

import logging

from storage.avro.container import read_avro_container, write_avro_container
from storage.avro.models import HOODIE_RESTORE_PLAN
from storage.config import ArchivalConfigKeys as AK
from storage.config import HoodieConfig
from storage.exception import HoodieRestoreError
from storage.metadata.metadata_writer import prepare_metadata_table
from storage.table.meta_client import HoodieTableMetaClient
from storage.table_service.service_table import service_meta_client
from storage.testing.crash_points import crash_point
from storage.write.rollback import execute_restore, finish_pending_restores  # noqa: F401 - run beside rollback
from storage.timeline.instant import Action, HoodieInstant
from storage.timeline.rollback_records import restore_plan_record
from storage.timeline.timeline import COMMITS_TIMELINE_ACTIONS

log = logging.getLogger(__name__)



def restore_to_savepoint(table: HoodieTableMetaClient | str, savepoint_time: str, spark=None,
                         config: HoodieConfig = HoodieConfig()) -> HoodieInstant:
    meta = service_meta_client(table, "restore", spark, config)
    savepoints = [i.timestamp for i in meta.timeline.completed().of_actions([Action.SAVEPOINT])]
    if savepoint_time not in savepoints:
        raise HoodieRestoreError(f"no savepoint at {savepoint_time} in {meta.base_path} (savepoints: "
                                 f"{', '.join(savepoints) or 'none'})")
    return restore_to_instant(meta, savepoint_time, savepoint=True, config=config)


def restore_to_instant(table: HoodieTableMetaClient | str, instant_time: str, savepoint: bool = False,
                       spark=None, config: HoodieConfig = HoodieConfig()) -> HoodieInstant:
    """Roll back every instant after the completed commit `instant_time`; the completed restore instant."""
    meta = service_meta_client(table, "restore", spark, config)
    finish_pending_restores(meta)
    completed = meta.timeline.completed().write_timeline()
    if not completed.contains_timestamp(instant_time):
        raise HoodieRestoreError(f"cannot restore {meta.base_path} to {instant_time}: no completed commit has that "
                                 "instant time on the active timeline (archived or never written)")
    _check_restorable(meta, instant_time, savepoint)
    later = [i for i in meta.timeline.of_actions(COMMITS_TIMELINE_ACTIONS) if i.timestamp > instant_time]
    plan = restore_plan_record(later, instant_time)
    timeline = meta.active_timeline
    requested = timeline.create_requested(Action.RESTORE, timeline.new_instant_time(),
                                          write_avro_container(HOODIE_RESTORE_PLAN, plan))
    crash_point("restore.after_plan")
    done = execute_restore(meta, requested)
    # an MDT the restore could not keep (removed half-way through a rebuild) is initialised again now
    prepare_metadata_table(meta, config, "restore")
    return done


def _check_restorable(meta: HoodieTableMetaClient, instant_time: str, savepoint: bool) -> None:
    """Later savepoints would name rolled-back files; an instant the cleaner no longer retains lost files."""
    from storage.table_service.clean_planner import last_completed_clean

    later = [i.timestamp for i in meta.timeline.completed().of_actions([Action.SAVEPOINT]) if i.timestamp > instant_time]
    if later:
        raise HoodieRestoreError(f"cannot restore {meta.base_path} to {instant_time}: delete the later savepoints "
                                 f"first ({', '.join(later)})")
    _check_nothing_archived_after(meta, instant_time)
    last = last_completed_clean(meta)
    retained_from = (last[1].get("earliestCommitToRetain") or "") if last else ""
    if not savepoint and retained_from and instant_time < retained_from:
        raise HoodieRestoreError(f"cannot restore {meta.base_path} to {instant_time}: the cleaner retains commits "
                                 f"from {retained_from} only (older file versions are deleted); restore to a "
                                 "savepoint or a later instant")


def _check_nothing_archived_after(meta: HoodieTableMetaClient, instant_time: str) -> None:
    """A restore rolls back the commits after the target from the active timeline; commits that archival moved
    past a savepoint (`hoodie.archive.beyond.savepoint`) cannot be rolled back, and their files would stay."""
    from storage.timeline.archived_timeline import HoodieArchivedTimeline

    later = [i.timestamp for i in HoodieArchivedTimeline(meta).completed().write_timeline() if i.timestamp > instant_time]
    if later:
        raise HoodieRestoreError(
            f"cannot restore {meta.base_path} to {instant_time}: {len(later)} later commits ({later[0]} .. {later[-1]}) "
            f"were archived beyond it ({AK.ARCHIVE_BEYOND_SAVEPOINT.key}=true) and cannot be rolled back; keep "
            f"{AK.ARCHIVE_BEYOND_SAVEPOINT.key}=false on tables whose savepoints must stay restorable")


def show_restores(meta: HoodieTableMetaClient) -> list[tuple[HoodieInstant, dict]]:
    out = []
    for instant in meta.timeline.of_actions([Action.RESTORE]):
        source = instant if instant.is_completed else meta.active_timeline.requested_of(instant)
        out.append((instant, read_avro_container(meta.active_timeline.read_bytes(source))))
    return out
