"""Which version of a record key wins: the one answer the copy-on-write writer, merge-on-read readers and
compaction all use, so a table merges the same way whichever path touches it.

The merge mode comes from `hoodie.record.merge.mode` when set, else from the payload class as Apache Hudi
infers it (DefaultHoodieRecordPayload, EventTimeAvroPayload -> event time; OverwriteWithLatestAvroPayload ->
commit time), else event time. Options (a write's or read's config) are looked at before the table's properties,
as Hudi does. Event time needs an ordering (precombine) field; without one Hudi falls back to commit time.
"""
from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import TYPE_CHECKING

from storage.config import HoodieConfig, TableConfigKeys as TK, WriteConfigKeys as WK
from storage.exception import HoodieMergeError
from storage.merge.record_merger import RecordMergeMode

if TYPE_CHECKING:
    from storage.table.table_config import HoodieTableConfig

log = logging.getLogger(__name__)

_EVENT_TIME_PAYLOADS = ("DefaultHoodieRecordPayload", "EventTimeAvroPayload", "PartialUpdateAvroPayload")
_COMMIT_TIME_PAYLOADS = ("OverwriteWithLatestAvroPayload", "OverwriteNonDefaultsWithLatestAvroPayload")


@dataclass(frozen=True)
class MergeSpec:
    """How the versions of one key merge: the mode, the ordering field it compares (None under commit time
    without one) and the payload class named (simple name; "" when none is)."""

    mode: RecordMergeMode
    ordering_field: str | None
    payload: str = ""

    @property
    def by_event_time(self) -> bool:
        return self.mode == RecordMergeMode.EVENT_TIME_ORDERING

    def for_ordering_field(self, ordering_field: str | None) -> "MergeSpec":
        """This spec comparing `ordering_field`; without one, commit time (Hudi's fallback)."""
        mode = self.mode if ordering_field else RecordMergeMode.COMMIT_TIME_ORDERING
        return MergeSpec(mode, ordering_field, self.payload)


def resolve_merge_spec(table: "HoodieTableConfig", ordering_field: str | None,
                       config: HoodieConfig = HoodieConfig()) -> MergeSpec:
    """The merge of `table` (its hoodie.properties) with `ordering_field`, under the options of `config`. Each
    of the two is asked on its own (the options first, every spelling of a key), not their layered union."""
    sources = [config, HoodieConfig(table.props)]
    payload = next((p for p in (c.raw(prop) for c in sources for prop in (WK.PAYLOAD_CLASS, TK.PAYLOAD_CLASS)) if p),
                   "")
    simple = payload.rsplit(".", 1)[-1]
    explicit = next((m for m in (c.raw(TK.RECORD_MERGE_MODE) for c in sources) if m), None)
    if explicit:
        mode = _parse_mode(explicit)
    elif simple in _COMMIT_TIME_PAYLOADS:
        mode = RecordMergeMode.COMMIT_TIME_ORDERING
    else:
        if simple and simple not in _EVENT_TIME_PAYLOADS:
            log.warning("payload class %s is not supported; merging with event-time ordering", payload)
        mode = RecordMergeMode.EVENT_TIME_ORDERING
    return MergeSpec(mode, ordering_field or None, simple).for_ordering_field(ordering_field or None)


def _parse_mode(text: str) -> RecordMergeMode:
    try:
        return RecordMergeMode(text.strip().upper())
    except ValueError:
        raise HoodieMergeError(f"unsupported {TK.RECORD_MERGE_MODE.key} {text!r}: expected EVENT_TIME_ORDERING or "
                               "COMMIT_TIME_ORDERING (CUSTOM mergers are not supported)") from None
