"""The metadata table's own clean and archival, run as Hudi 1.x's metadata writer runs them
(HoodieBackedTableMetadataWriter.performTableServices), so that a long-running table's `.hoodie/metadata` keeps a
bounded number of file slices and active instants.

`storage.metadata.metadata_writer.MetadataWriter.update` runs them under the data table's lock, before the MDT
deltacommit of each data action, in Hudi's order: clean, compaction (the writer's own `_maybe_compact`), archival.
The writer sits below the table services, so this module registers them with it (`register_table_services`) when
storage.table_service is imported.
Both drive the data table's services on the MDT's meta client (no copy of them): the clean planner and executor
of storage/table_service/clean*.py (HoodieCleanerPlan in `<t>.clean.requested`, HoodieCleanMetadata in the
completed `<t>.clean`, on the MDT's timeline) and the archiver of storage/table_service/archival.py (the MDT's
version 8/9 timeline goes to its LSM history, `.hoodie/metadata/.hoodie/timeline/history/`).

Hudi rules followed (each piece names its rule):
- Options, HoodieMetadataWriteUtils.createMetadataWriteConfig (1.0 / 1.1): the MDT borrows the data writer's
  cleaner policy; KEEP_LATEST_COMMITS retains max(20, int(1.2 x hoodie.cleaner.commits.retained)) commits,
  KEEP_LATEST_FILE_VERSIONS ceil(1.2 x versions), KEEP_LATEST_BY_HOURS ceil(1.2 x hours); the clean trigger is the
  data writer's hoodie.clean.max.commits; archival keeps hoodie.keep.min.commits + 1 .. hoodie.keep.max.commits + 1
  instants. Hudi 1.x has no hoodie.metadata.* key for these (0.x's hoodie.metadata.cleaner.commits.retained and
  keep.min/max.commits were made internal in 0.13), so none is added to the registry.
- Clean, cleanIfNecessary: skipped while fewer than 3 instants completed on the MDT after its last compaction (a
  reader may still hold the previous slice's files); otherwise `writeClient.clean()`: pending MDT cleans finished,
  then a clean at a fresh instant when the trigger is reached and the plan deletes something.
- Archival, TimelineArchiverV2 on the MDT: the archiver's own bounds (pending instants, the last clean's earliest
  commit to retain, the MDT's last compaction: deltacommits after it stay), min/max raised as
  ArchivalUtils.getMinAndMaxInstantsToKeep raises them when the cleaner retains more, plus
  (a) TimelineUtils.getEarliestInstantForMetadataArchival: no MDT instant at or after the data table's first active
      commit (first non-savepointed one with hoodie.archive.beyond.savepoint) or its first pending instant, and
  (b) the deltacommits not yet compacted: nothing at or after the first MDT commit that completed after the last
      compaction was requested. Hudi applies this rule to the *data* table's archival (rule 4 of the archiver:
      data instants completed after the MDT's latest compaction stay active, so (a) keeps their MDT deltacommits);
      applied here on the MDT side it gives the same guarantee without changing the data table's archival: every
      log file of the latest MDT slices belongs to an active MDT instant, for readers that do not read the MDT's
      archive (hudi-rs).

Crash safety: the steps are the data-table services' own, with their crash points (clean.after_plan,
clean.after_inflight, clean.after_deletes, archive.after_write, archive.between_deletes; no new points: the crash
matrix drives each declared point through a data-table scenario). A kill at any of them leaves the MDT readable: a
pending MDT clean only ever deletes slices older than the latest (readers read the latest slices) and a later data
action finishes it (once the killed process's heartbeat expired); archived instants are written to the LSM history
before their active files go, readers treat MDT instants before the active timeline's start as completed, and the
next archival deletes what is left. tests/storage/metadata/test_metadata_table_services.py kills at
clean.after_deletes and archive.after_write.
"""
from __future__ import annotations

import logging
import math
from dataclasses import dataclass

from storage.config import ArchivalConfigKeys as AK
from storage.config import CleanConfigKeys as CK
from storage.config import HoodieConfig
from storage.metadata.metadata_writer import V6_CLEAN_SUFFIX, register_table_services, v6_service_instant
from storage.table.meta_client import HoodieTableMetaClient
from storage.timeline.instant import Action, HoodieInstant
from storage.timeline.timeline import COMMITS_TIMELINE_ACTIONS

log = logging.getLogger(__name__)

# HoodieMetadataConfig.DEFAULT_METADATA_CLEANER_COMMITS_RETAINED: the fewest commits the MDT's cleaner retains
DEFAULT_METADATA_CLEANER_COMMITS_RETAINED = 20
# createMetadataWriteConfig: the MDT retains 20% more than the data table
RETENTION_FACTOR = 1.2
# cleanIfNecessary: instants that must complete after an MDT compaction before the MDT is cleaned
MIN_INSTANTS_AFTER_COMPACTION_TO_CLEAN = 3


@dataclass(frozen=True)
class MetadataServiceSettings:
    """The data writer's clean and archival options the MDT's are derived from (`of`)."""

    policy: str = CK.POLICY.default
    commits_retained: int = CK.COMMITS_RETAINED.default
    file_versions_retained: int = CK.FILE_VERSIONS_RETAINED.default
    hours_retained: int = CK.HOURS_RETAINED.default
    clean_max_commits: int = CK.MAX_COMMITS.default
    min_commits_to_keep: int = AK.MIN_COMMITS_TO_KEEP.default
    max_commits_to_keep: int = AK.MAX_COMMITS_TO_KEEP.default
    archive_beyond_savepoint: bool = AK.ARCHIVE_BEYOND_SAVEPOINT.default

    @classmethod
    def of(cls, config: HoodieConfig) -> "MetadataServiceSettings":
        return cls(str(config.get(CK.POLICY)).strip().upper(), config.get(CK.COMMITS_RETAINED),
                   config.get(CK.FILE_VERSIONS_RETAINED), config.get(CK.HOURS_RETAINED), config.get(CK.MAX_COMMITS),
                   config.get(AK.MIN_COMMITS_TO_KEEP), config.get(AK.MAX_COMMITS_TO_KEEP),
                   config.get(AK.ARCHIVE_BEYOND_SAVEPOINT))

    def mdt_config(self) -> HoodieConfig:
        """The MDT's own clean and archival options (createMetadataWriteConfig)."""
        values: dict[str, object] = {CK.POLICY.key: self.policy, CK.MAX_COMMITS.key: self.clean_max_commits,
                                     AK.MIN_COMMITS_TO_KEEP.key: self.min_commits_to_keep + 1,
                                     AK.MAX_COMMITS_TO_KEEP.key: self.max_commits_to_keep + 1,
                                     AK.ARCHIVE_BEYOND_SAVEPOINT.key: self.archive_beyond_savepoint}
        if self.policy == "KEEP_LATEST_COMMITS":
            values[CK.COMMITS_RETAINED.key] = max(DEFAULT_METADATA_CLEANER_COMMITS_RETAINED,
                                                  int(self.commits_retained * RETENTION_FACTOR))
        elif self.policy == "KEEP_LATEST_FILE_VERSIONS":
            values[CK.FILE_VERSIONS_RETAINED.key] = math.ceil(self.file_versions_retained * RETENTION_FACTOR)
        elif self.policy == "KEEP_LATEST_BY_HOURS":
            values[CK.HOURS_RETAINED.key] = math.ceil(self.hours_retained * RETENTION_FACTOR)
        return HoodieConfig().with_values(values)


class MetadataTableServices:
    """Clean and archival of the MDT `mdt` of data table `data`."""

    def __init__(self, data: HoodieTableMetaClient, mdt: HoodieTableMetaClient, settings: MetadataServiceSettings):
        self.data, self.mdt = data, mdt
        self.config = settings.mdt_config()

    # -- clean ---------------------------------------------------------------------------------------------

    def clean_if_necessary(self) -> str | None:
        """Hudi's cleanIfNecessary; the new MDT clean instant, or None."""
        from storage.table_service.clean import clean_loaded_table  # clean imports the MDT writer

        completed = self.mdt.reload().timeline.completed()
        last = completed.of_actions([Action.COMMIT, Action.REPLACE_COMMIT]).last()
        if last is not None:
            after = sum(1 for i in completed if i.timestamp > last.timestamp)
            if after < MIN_INSTANTS_AFTER_COMPACTION_TO_CLEAN:
                log.debug("metadata table %s: %d instants since its compaction %s, not cleaned yet",
                          self.mdt.base_path, after, last.timestamp)
                return None
        instant = None
        if self.mdt.table_config.version < 8:  # Hudi 0.x's MDT: the clean is the latest deltacommit + 002
            instant = v6_service_instant(self.mdt, V6_CLEAN_SUFFIX)
            if instant is None:
                return None
        outcome = clean_loaded_table(None, self.mdt, self.config, force=False, instant_time=instant)
        if outcome.instant is not None:
            log.info("metadata table %s: cleaned at %s", self.mdt.base_path, outcome.instant)
        return outcome.instant

    # -- archival ------------------------------------------------------------------------------------------

    def archival_config(self) -> HoodieConfig:
        """The MDT's archival options with min/max raised as ArchivalUtils.getMinAndMaxInstantsToKeep raises them
        when the cleaner retains more instants than min (instants after the earliest commit to retain + 2)."""
        from storage.table_service.clean_planner import CleanPlanner

        low, high = self.config.get(AK.MIN_COMMITS_TO_KEEP), self.config.get(AK.MAX_COMMITS_TO_KEEP)
        ectr = CleanPlanner(self.mdt, self.config).earliest_commit_to_retain()
        if ectr is not None:
            commits = self.mdt.timeline.completed().write_timeline()
            by_cleaning = sum(1 for c in commits if c.timestamp > ectr.timestamp) + 2
            if low < by_cleaning:
                low, high = by_cleaning, by_cleaning + high - low
        return self.config.with_values({AK.MIN_COMMITS_TO_KEEP.key: low, AK.MAX_COMMITS_TO_KEEP.key: high})

    def retain_from(self) -> str | None:
        """The MDT's own archival bounds (a) and (b) of the module doc: the earliest of them, or None."""
        bounds = [earliest_instant_for_metadata_archival(self.data, self.config.get(AK.ARCHIVE_BEYOND_SAVEPOINT)),
                  first_uncompacted_instant(self.mdt)]
        present = [b for b in bounds if b is not None]
        return min(present) if present else None

    def archive(self) -> list[HoodieInstant]:
        """Archive the MDT's timeline as far as the rules allow; the completed instants archived."""
        from storage.table_service.archival import archive_timeline  # archival imports the MDT writer

        self.mdt.reload()
        archived = archive_timeline(self.mdt, self.archival_config(), self.retain_from())
        if archived:
            log.info("metadata table %s: archived %d instants (%s .. %s)", self.mdt.base_path, len(archived),
                     archived[0].timestamp, archived[-1].timestamp)
        return archived


def earliest_instant_for_metadata_archival(data: HoodieTableMetaClient, beyond_savepoint: bool) -> str | None:
    """TimelineUtils.getEarliestInstantForMetadataArchival: the earlier of the data table's first active commit
    (any state; with archival beyond savepoints, the first one not savepointed) and its first pending instant of
    any action. Clean and rollback instants are archived on their own schedule, so they do not count."""
    timeline = data.timeline
    if beyond_savepoint:
        earliest_commit = timeline.commits_timeline_start()
    else:
        first = timeline.of_actions(COMMITS_TIMELINE_ACTIONS).first()
        earliest_commit = first.timestamp if first is not None else None
    first_pending = timeline.pending().first()
    candidates = [t for t in (earliest_commit, first_pending.timestamp if first_pending else None) if t]
    return min(candidates) if candidates else None


def first_uncompacted_instant(mdt: HoodieTableMetaClient) -> str | None:
    """The first completed MDT write whose completion came after the last MDT compaction was requested (its log
    files are in the latest slices): archival keeps it and everything after it. None without a compaction (the
    archiver's compaction bound then keeps every deltacommit)."""
    completed = mdt.timeline.completed()
    last = completed.of_actions([Action.COMMIT]).last()
    if last is None:
        return None
    later = [i.timestamp for i in completed.write_timeline()
             if (i.completion_time or i.timestamp) > last.timestamp and i.timestamp != last.timestamp]
    return min(later) if later else None


class _Runner:
    """What the MDT writer calls (storage.metadata.metadata_writer.MetadataTableServiceRunner)."""

    @staticmethod
    def clean(data: HoodieTableMetaClient, mdt: HoodieTableMetaClient, config: HoodieConfig) -> None:
        MetadataTableServices(data, mdt, MetadataServiceSettings.of(config)).clean_if_necessary()

    @staticmethod
    def archive(data: HoodieTableMetaClient, mdt: HoodieTableMetaClient, config: HoodieConfig) -> None:
        MetadataTableServices(data, mdt, MetadataServiceSettings.of(config)).archive()


register_table_services(_Runner())

__all__ = ["DEFAULT_METADATA_CLEANER_COMMITS_RETAINED", "MetadataServiceSettings", "MetadataTableServices",
           "earliest_instant_for_metadata_archival", "first_uncompacted_instant"]
