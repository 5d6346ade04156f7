"""Table versions 6, 8 and 9: what each one writes differently, in one place.

Version 6 (Hudi 0.14/0.15) keeps its timeline in `.hoodie/` (layout 1, JSON commit metadata, completed instants
named by request time) and appends a write's log blocks to the slice's current log file. Versions 8 (Hudi 1.0)
and 9 (Hudi 1.1) keep it in `.hoodie/timeline/` (layout 2: completed instants also name their completion time,
every non-empty instant file is Avro), give every deltacommit log files of its own named by its request time
(a log joins the file slice by its commit's completion time), delete a rolled-back write's log files instead of
appending rollback blocks, and pend clustering as `clustering` rather than `replacecommit`. Version 9 names the
ordering field `hoodie.table.ordering.fields`, drops the payload class for the merge mode, and records the
table format.
"""
from __future__ import annotations

from enum import IntEnum

from storage.config import TableConfigKeys as TK
from storage.merge.record_merger import RecordMergeMode
from storage.timeline.instant import Action

# Hudi's HoodieRecordMerger strategy ids, recorded by table version 8 beside the merge mode
MERGE_STRATEGY_IDS = {RecordMergeMode.EVENT_TIME_ORDERING: "eeb8d96f-b1e4-49fd-bbf8-28ac514178e5",
                      RecordMergeMode.COMMIT_TIME_ORDERING: "ce9acb64-bde0-424c-9b91-f6ebba25356d"}
TIMELINE_FOLDER, HISTORY_FOLDER = "timeline", "history"


class HoodieTableVersion(IntEnum):
    FIVE = 5  # read only (Hudi 0.12/0.13); laid out as 6
    SIX = 6
    EIGHT = 8
    NINE = 9

    @classmethod
    def of(cls, meta) -> "HoodieTableVersion":
        """The version of the table `meta` (a HoodieTableMetaClient) is at."""
        return cls(meta.table_config.version)

    @property
    def timeline_layout_version(self) -> int:
        return 2 if self >= HoodieTableVersion.EIGHT else 1

    @property
    def log_file_per_write(self) -> bool:
        """Each write's log files are its own (version 1, named by the write's instant), never appended to."""
        return self >= HoodieTableVersion.EIGHT

    @property
    def clustering_action(self) -> str:
        """The action a clustering is requested and runs under (it completes as a replacecommit either way)."""
        return Action.CLUSTERING if self >= HoodieTableVersion.EIGHT else Action.REPLACE_COMMIT

    def layout_properties(self) -> dict[str, str]:
        """The hoodie.properties keys of this version's layout (not of the table's schema or keys)."""
        props = {TK.VERSION.key: str(int(self)), TK.TIMELINE_LAYOUT_VERSION.key: str(self.timeline_layout_version),
                 TK.ARCHIVELOG_FOLDER.key: "archived"}
        if self >= HoodieTableVersion.EIGHT:
            props.update({TK.INITIAL_VERSION.key: str(int(self)), TK.TIMELINE_PATH.key: TIMELINE_FOLDER,
                          TK.TIMELINE_HISTORY_PATH.key: HISTORY_FOLDER})
        if self >= HoodieTableVersion.NINE:
            props[TK.TABLE_FORMAT.key] = TK.TABLE_FORMAT.default
        return props

    def merge_properties(self, ordering_field: str | None, payload_class: str, mode: RecordMergeMode) -> dict[str, str]:
        """How the table records its ordering field and merge: version 6 the payload class (the merge mode only
        when given), 8 the payload class, the mode and its strategy id, 9 the mode (and ordering fields)."""
        props: dict[str, str] = {}
        if ordering_field:
            key = TK.ORDERING_FIELDS if self >= HoodieTableVersion.NINE else TK.PRECOMBINE_FIELD
            props[key.key] = ordering_field
        if self < HoodieTableVersion.NINE:
            props[TK.PAYLOAD_CLASS.key] = payload_class
        if self >= HoodieTableVersion.EIGHT:
            props[TK.RECORD_MERGE_MODE.key] = mode.value
        if self == HoodieTableVersion.EIGHT:
            props[TK.RECORD_MERGE_STRATEGY_ID.key] = MERGE_STRATEGY_IDS[mode]
        return props
