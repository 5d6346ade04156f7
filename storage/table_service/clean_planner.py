"""Planning a clean (Hudi's CleanPlanner): which file versions a retention policy lets go.

The driver plans from the timeline and one file-system view (one listing of the table, or of the partitions
touched since the last clean in incremental mode) and writes nothing; `storage.table_service.clean` saves the
plan as `<t>.clean.requested` and executes it.

Policies (`hoodie.cleaner.policy`):
- KEEP_LATEST_COMMITS: keep every file slice a query at any of the last `hoodie.cleaner.commits.retained`
  commits may read: the earliest commit to retain (ECTR) is the N-th latest completed commit (never later than
  the oldest pending write); in each file group the latest slice and the latest slice older than the ECTR stay,
  older slices go.
- KEEP_LATEST_BY_HOURS: the same, with the ECTR the first commit of the last `hoodie.cleaner.hours.retained` hours.
- KEEP_LATEST_FILE_VERSIONS: keep the latest `hoodie.cleaner.fileversions.retained` slices of each file group.

A plan that deletes nothing says why (`HoodieCleanerPlan.reason`): no more commits than retained, no commit older
than the retained hours, no partition written since the last clean (incremental mode), or no file version older
than the retained ones.

Never cleaned: savepointed files, the slice a pending compaction compacts, file groups of a pending clustering;
files of pending writes are not in the view at all. File groups replaced by insert overwrite or clustering go
whole once their replacecommit is older than the ECTR (at once under KEEP_LATEST_FILE_VERSIONS). A merge-on-read
slice goes with its log files.
"""
from __future__ import annotations

import logging
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from enum import Enum
from typing import Any

from storage.avro.container import read_avro_container
from storage.config import CleanConfigKeys as CK
from storage.config import HoodieConfig
from storage.exception import HoodieCleanError
from storage.table.file_slice import FileSlice, HoodieFileGroup
from storage.table.fs_view import FileSystemView
from storage.table.meta_client import HoodieTableMetaClient
from storage.table.retention import check_files_retained, earliest_retained_commit, last_completed_clean  # noqa: F401
from storage.timeline.instant import Action, HoodieInstant, State
from storage.timeline.instant_time import format_instant

log = logging.getLogger(__name__)

CLEAN_PLAN_VERSION = 2  # CleanPlanV2MigrationHandler: file paths in filePathsToBeDeletedPerPartition


class HoodieCleaningPolicy(str, Enum):
    KEEP_LATEST_COMMITS = "KEEP_LATEST_COMMITS"
    KEEP_LATEST_FILE_VERSIONS = "KEEP_LATEST_FILE_VERSIONS"
    KEEP_LATEST_BY_HOURS = "KEEP_LATEST_BY_HOURS"

    @classmethod
    def of(cls, name: str) -> "HoodieCleaningPolicy":
        try:
            return cls(str(name).strip().upper())
        except ValueError:
            raise HoodieCleanError(f"unknown cleaner policy {name!r} ({CK.POLICY.key}); use "
                                   f"{', '.join(p.value for p in cls)}") from None

    @property
    def retains_commits(self) -> bool:
        return self is not HoodieCleaningPolicy.KEEP_LATEST_FILE_VERSIONS


@dataclass
class HoodieCleanerPlan:
    """The Avro HoodieCleanerPlan of `<t>.clean.requested`: files per partition as absolute paths."""

    policy: HoodieCleaningPolicy
    earliest_instant_to_retain: HoodieInstant | None
    last_completed_commit: str
    files_per_partition: dict[str, list[str]] = field(default_factory=dict)
    reason: str | None = None  # why the planner found nothing to delete (not part of the Avro plan)

    def is_empty(self) -> bool:
        return not any(self.files_per_partition.values())

    def total_files(self) -> int:
        return sum(len(v) for v in self.files_per_partition.values())

    def to_record(self) -> dict[str, Any]:
        ectr = self.earliest_instant_to_retain
        return {
            "earliestInstantToRetain": None if ectr is None else {
                "timestamp": ectr.timestamp, "action": ectr.action, "state": ectr.state.value},
            "lastCompletedCommitTimestamp": self.last_completed_commit,
            "policy": self.policy.value,
            "filesToBeDeletedPerPartition": {},  # deprecated (plan version 1), kept empty as Hudi does
            "version": CLEAN_PLAN_VERSION,
            "filePathsToBeDeletedPerPartition": {
                p: [{"filePath": f, "isBootstrapBaseFile": False} for f in files]
                for p, files in sorted(self.files_per_partition.items())},
            "partitionsToBeDeleted": [],
            "extraMetadata": None,
        }

    @classmethod
    def from_record(cls, record: dict[str, Any], base_path: str) -> "HoodieCleanerPlan":
        ectr = record.get("earliestInstantToRetain")
        instant = None
        if ectr and ectr.get("timestamp"):
            instant = HoodieInstant(State(ectr.get("state") or "COMPLETED"), ectr["action"], ectr["timestamp"])
        files: dict[str, list[str]] = {}
        for p, infos in (record.get("filePathsToBeDeletedPerPartition") or {}).items():
            files[p] = [i["filePath"] for i in infos or [] if i.get("filePath")]
        for p, names in (record.get("filesToBeDeletedPerPartition") or {}).items():  # version 1 plans: names
            files.setdefault(p, []).extend(_join(base_path, p, n) for n in names or [])
        return cls(HoodieCleaningPolicy.of(record.get("policy") or "KEEP_LATEST_COMMITS"), instant,
                   record.get("lastCompletedCommitTimestamp") or "", files)

    @classmethod
    def from_bytes(cls, data: bytes, base_path: str) -> "HoodieCleanerPlan":
        return cls.from_record(read_avro_container(data), base_path)


def _join(base_path: str, partition: str, name: str) -> str:
    return f"{base_path}/{partition}/{name}" if partition else f"{base_path}/{name}"


def savepointed_files(meta: HoodieTableMetaClient) -> set[str]:
    """File names every completed savepoint keeps (Hudi's CleanPlanner.getSavepointedDataFiles)."""
    names: set[str] = set()
    for instant in meta.timeline.completed().of_actions([Action.SAVEPOINT]):
        md = read_avro_container(meta.active_timeline.read_bytes(instant))
        for pm in (md.get("partitionMetadata") or {}).values():
            names.update(pm.get("savepointDataFile") or [])
    return names


class CleanPlanner:
    """Plans one clean of `meta` with the cleaner options of `config`."""

    def __init__(self, meta: HoodieTableMetaClient, config: HoodieConfig, now: datetime | None = None):
        self.meta = meta
        self.config = config
        self.policy = HoodieCleaningPolicy.of(config.get(CK.POLICY))
        self.now = now or datetime.now(timezone.utc).replace(tzinfo=None)
        timeline = meta.timeline
        self.commits = list(timeline.completed().write_timeline())
        self.pending_writes = list(timeline.pending().write_timeline())

    # -- the earliest commit to retain -----------------------------------------------------------------------
    def earliest_commit_to_retain(self) -> HoodieInstant | None:
        return self._earliest_commit_to_retain()[0]

    def _earliest_commit_to_retain(self) -> tuple[HoodieInstant | None, str | None]:
        """(the ECTR, None) or, when the policy retains every commit, (None, why)."""
        if self.policy.retains_commits and not self.commits:
            return None, "the table has no completed commit"
        if self.policy is HoodieCleaningPolicy.KEEP_LATEST_COMMITS:
            retained = self.config.get(CK.COMMITS_RETAINED)
            if len(self.commits) <= retained:
                return None, (f"the table has {_count(len(self.commits), 'completed commit')} and "
                              f"{CK.COMMITS_RETAINED.key}={retained} retains the file versions of the latest "
                              f"{retained}: no file version is old enough to clean")
            earliest = self.commits[len(self.commits) - retained]
        elif self.policy is HoodieCleaningPolicy.KEEP_LATEST_BY_HOURS:
            hours = self.config.get(CK.HOURS_RETAINED)
            cutoff = format_instant(self.now - timedelta(hours=hours))
            earliest = next((c for c in self.commits if c.timestamp >= cutoff), None)
            if earliest is None:  # no commit within the hours: none to retain from, so nothing is cleaned
                return None, (f"no commit was made in the last {CK.HOURS_RETAINED.key}={hours} hours (the latest "
                              f"of {_count(len(self.commits), 'completed commit')} is {self.commits[-1].timestamp})")
            if earliest is self.commits[0]:
                return None, (f"no commit is older than {CK.HOURS_RETAINED.key}={hours} hours (the oldest of "
                              f"{_count(len(self.commits), 'completed commit')} is {earliest.timestamp})")
        else:
            return None, None
        # a pending write may still publish files older than a later ECTR: never retain past it
        pending = self.pending_writes[0] if self.pending_writes else None
        if pending is not None and pending.timestamp < earliest.timestamp:
            return pending, None
        return earliest, None

    # -- partitions -------------------------------------------------------------------------------------------
    def partitions_to_clean(self, ectr: HoodieInstant | None) -> list[str] | None:
        """The partitions written since the last clean's ECTR (incremental mode), or None for all of them."""
        if not (self.config.get(CK.INCREMENTAL_MODE) and self.policy.retains_commits and ectr is not None):
            return None
        last = last_completed_clean(self.meta)
        if last is None:
            return None
        previous = (last[1].get("earliestCommitToRetain") or "").strip()
        if not previous or not self.meta.timeline.completed().contains_timestamp(previous):
            return None  # the last clean retained everything, or its ECTR left the active timeline
        touched: set[str] = set()
        for instant in self.commits:
            if previous <= instant.timestamp < ectr.timestamp:
                md = self.meta.active_timeline.commit_metadata(instant)
                touched.update(md.partitionToWriteStats)
                touched.update(md.partitionToReplaceFileIds or {})
        return sorted(touched)

    # -- files ------------------------------------------------------------------------------------------------
    def plan(self) -> HoodieCleanerPlan:
        ectr, retains_all = self._earliest_commit_to_retain()
        last_commit = self.commits[-1].timestamp if self.commits else ""
        plan = HoodieCleanerPlan(self.policy, ectr, last_commit)
        if self.policy.retains_commits and ectr is None:
            plan.reason = retains_all
            return plan
        partitions = self.partitions_to_clean(ectr)
        if partitions == []:
            plan.reason = (f"no partition was written since the last clean's earliest commit to retain "
                           f"({CK.INCREMENTAL_MODE.key}): no file version is older than the retained ones")
            return plan
        view = FileSystemView(self.meta, partitions=partitions)
        protected = _Protected(savepointed_files(self.meta), _pending_compaction_slices(self.meta),
                               _pending_clustering_groups(self.meta))
        for partition in view.partitions():
            files = self._files_to_clean(view, partition, ectr, protected)
            if files:
                plan.files_per_partition[partition] = files
        if plan.is_empty():
            plan.reason = self._nothing_older(ectr)
        log.info("clean plan for %s: %s, earliest commit to retain %s, %d files in %d partitions",
                 self.meta.base_path, self.policy.value, ectr.timestamp if ectr else None, plan.total_files(),
                 len(plan.files_per_partition))
        return plan

    def _nothing_older(self, ectr: HoodieInstant | None) -> str:
        """Why a plan over the file groups found nothing: the policy retains every version there is."""
        if not self.policy.retains_commits:
            return f"no file group has more file versions than {self._retention()} keeps"
        held = f" (held back by the pending write {ectr.timestamp})" if ectr in self.pending_writes else ""
        return (f"no file version is older than the retained ones: {self._retention()} retains from commit "
                f"{ectr.timestamp}{held}, and each file group's older versions are the one a query there reads, "
                f"savepointed, or already cleaned")

    def _retention(self) -> str:
        key = {HoodieCleaningPolicy.KEEP_LATEST_COMMITS: CK.COMMITS_RETAINED,
               HoodieCleaningPolicy.KEEP_LATEST_BY_HOURS: CK.HOURS_RETAINED,
               HoodieCleaningPolicy.KEEP_LATEST_FILE_VERSIONS: CK.FILE_VERSIONS_RETAINED}[self.policy]
        return f"{self.policy.value} with {key.key}={self.config.get(key)}"

    def _files_to_clean(self, view: FileSystemView, partition: str, ectr: HoodieInstant | None,
                        protected: "_Protected") -> list[str]:
        out: list[str] = []
        for group in view.file_groups(partition):
            if protected.in_pending_clustering(group):
                continue
            if self.policy.retains_commits:
                slices = _expired_slices_by_commits(group, ectr.timestamp)
            else:
                slices = self._expired_slices_by_versions(group, protected)
            out += [f for s in slices if not protected.holds(s) for f in _slice_files(s)]
        before = ectr.timestamp if self.policy.retains_commits else None
        for group, _ in view.replaced_file_groups(partition, before=before):
            if not protected.in_pending_clustering(group):
                out += [f for s in group.ordered_slices() if not protected.holds(s) for f in _slice_files(s)]
        return out

    def _expired_slices_by_versions(self, group: HoodieFileGroup, protected: "_Protected") -> list[FileSlice]:
        keep = self.config.get(CK.FILE_VERSIONS_RETAINED)
        candidates = [s for s in group.ordered_slices() if not s.is_empty() and not protected.for_compaction(s)]
        if len(candidates) < len([s for s in group.ordered_slices() if not s.is_empty()]):
            keep -= 1  # the slice a pending compaction reads counts as a retained version
        expired = []
        for s in candidates:
            if keep > 0:
                if not protected.savepointed(s):  # savepointed slices do not count as versions
                    keep -= 1
                continue
            expired.append(s)
        return expired


def _count(n: int, noun: str) -> str:
    return f"{n} {noun}{'' if n == 1 else 's'}"


def _expired_slices_by_commits(group: HoodieFileGroup, ectr: str) -> list[FileSlice]:
    """Slices older than the ECTR, except the latest slice and the latest slice before the ECTR (a query at
    the ECTR reads that one)."""
    slices = [s for s in group.ordered_slices() if not s.is_empty()]
    if not slices:
        return []
    latest = slices[0].base_instant
    before_ectr = next((s.base_instant for s in slices if s.base_instant < ectr), None)
    return [s for s in slices if s.base_instant not in (latest, before_ectr) and s.base_instant < ectr]


def _slice_files(fs: FileSlice) -> list[str]:
    files = [fs.base_file.path] if fs.base_file is not None else []
    return files + [lf.path for lf in fs.sorted_log_files()]


@dataclass(frozen=True)
class _Protected:
    """What a clean must leave alone whatever the policy says."""

    savepointed_names: set[str]
    compaction_slices: set[tuple[str, str, str]]  # (partition, file id, base instant) a pending compaction reads
    clustering_groups: set[tuple[str, str]]

    def savepointed(self, fs: FileSlice) -> bool:
        names = {fs.base_file.name} if fs.base_file else set()
        return bool((names | {lf.name for lf in fs.log_files}) & self.savepointed_names)

    def for_compaction(self, fs: FileSlice) -> bool:
        return (fs.partition_path, fs.file_id, fs.base_instant) in self.compaction_slices

    def holds(self, fs: FileSlice) -> bool:
        return self.savepointed(fs) or self.for_compaction(fs)

    def in_pending_clustering(self, group: HoodieFileGroup) -> bool:
        fg = group.file_group_id
        return (fg.partition_path, fg.file_id) in self.clustering_groups


def _pending_compaction_slices(meta: HoodieTableMetaClient) -> set[tuple[str, str, str]]:
    from storage.table_service.compaction import pending_compaction_operations

    return {(p, f, base) for (p, f), base in pending_compaction_operations(meta).items()}


def _pending_clustering_groups(meta: HoodieTableMetaClient) -> set[tuple[str, str]]:
    """File groups named by the clustering plans of pending replacecommit / clustering instants."""
    from storage.table_service.clustering.plan import pending_clustering_file_groups

    return set(pending_clustering_file_groups(meta))
