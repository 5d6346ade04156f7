"""HoodieWriteCommitCallbackMessage: what a commit callback sends, as Hudi's Jackson serialisation of it.

The JSON body has Hudi's field names: commitTime, tableName, basePath, hoodieWriteStat (the commit's write
stats, as in the commit file), commitActionType and extraMetadata (the commit's extra metadata).
"""
from __future__ import annotations

import json
from dataclasses import dataclass, field

from storage.timeline.commit_metadata import HoodieCommitMetadata


@dataclass(frozen=True)
class HoodieWriteCommitCallbackMessage:
    commitTime: str
    tableName: str
    basePath: str
    hoodieWriteStat: list[dict] = field(default_factory=list)
    commitActionType: str | None = None
    extraMetadata: dict[str, str] = field(default_factory=dict)

    @classmethod
    def of(cls, instant_time: str, table_name: str, base_path: str, action: str | None,
           metadata: HoodieCommitMetadata | None) -> "HoodieWriteCommitCallbackMessage":
        stats = [s.to_json_dict() for s in metadata.write_stats()] if metadata is not None else []
        extra = dict(metadata.extraMetadata) if metadata is not None else {}
        return cls(instant_time, table_name, base_path, stats, action, extra)

    def to_json(self) -> str:
        return json.dumps({"commitTime": self.commitTime, "tableName": self.tableName, "basePath": self.basePath,
                           "hoodieWriteStat": self.hoodieWriteStat, "commitActionType": self.commitActionType,
                           "extraMetadata": self.extraMetadata}, separators=(",", ":"))
