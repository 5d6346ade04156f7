"""Hudi's ConcurrentOperation: what one instant changed, as the file groups (partition path, file id) it wrote
or replaced, read from its commit metadata, or from its plan while a compaction is pending."""
from __future__ import annotations

from dataclasses import dataclass

from storage.table.meta_client import HoodieTableMetaClient
from storage.timeline.commit_metadata import HoodieCommitMetadata
from storage.timeline.instant import Action, HoodieInstant

FileGroupId = tuple[str, str]


@dataclass(frozen=True)
class ConcurrentOperation:
    instant_time: str
    action: str
    operation_type: str
    file_groups: frozenset[FileGroupId]

    @classmethod
    def of_commit(cls, instant_time: str, action: str, metadata: HoodieCommitMetadata) -> "ConcurrentOperation":
        written = {(s.partitionPath or "", s.fileId) for s in metadata.write_stats() if s.fileId}
        return cls(instant_time, action, metadata.operationType or "", frozenset(written | metadata.replaced_file_ids()))

    @classmethod
    def of_instant(cls, meta: HoodieTableMetaClient, instant: HoodieInstant) -> "ConcurrentOperation":
        """A completed write or compaction from its commit metadata; a pending compaction from its plan."""
        if instant.is_completed:
            return cls.of_commit(instant.timestamp, instant.action, meta.active_timeline.commit_metadata(instant))
        if instant.action == Action.COMPACTION:
            from storage.table.pending_plans import read_compaction_plan as read_plan

            ops = read_plan(meta, instant.timestamp).get("operations") or []
            return cls(instant.timestamp, instant.action, "COMPACT",
                       frozenset((o.get("partitionPath") or "", o["fileId"]) for o in ops))
        return cls(instant.timestamp, instant.action, "", frozenset())

    def describe(self) -> str:
        kind = f" ({self.operation_type.lower()})" if self.operation_type else ""
        return f"{self.action} {self.instant_time}{kind}"
