"""hoodie.properties across table versions 6, 8 and 9 (Hudi's SixToEightUpgradeHandler, EightToNineUpgradeHandler,
NineToEightDowngradeHandler, EightToSixDowngradeHandler, as far as they touch the properties).

6 -> 8: the layout keys (timeline layout 2, `hoodie.timeline.path`, `hoodie.timeline.history.path`), the initial
version (the version the table had, as a number), the key generator's type beside its class, the merge mode and
its strategy id (the mode the table merges with today, so every read merges the same way after).
8 -> 9: the ordering field moves to `hoodie.table.ordering.fields`, the payload class (one Hudi 1.1 replaces by a
merge mode) to `hoodie.legacy.payload.class`, the strategy id goes, the table format is recorded.
The downgrades reverse each step.
"""
from __future__ import annotations

from storage.config import HoodieConfig
from storage.config import TableConfigKeys as TK
from storage.merge.merge_resolver import resolve_merge_spec
from storage.merge.record_merger import RecordMergeMode
from storage.table.table_config import KEYGEN_CLASS_BY_TYPE, HoodieTableConfig
from storage.table.table_version import MERGE_STRATEGY_IDS, HoodieTableVersion

_TYPE_BY_KEYGEN_CLASS = {cls: t for t, cls in KEYGEN_CLASS_BY_TYPE.items()}
# the payload class version 8 records for a merge mode when the table names none (table_settings' defaults)
_PAYLOAD_OF_MODE = {RecordMergeMode.EVENT_TIME_ORDERING: "org.apache.hudi.common.model.DefaultHoodieRecordPayload",
                    RecordMergeMode.COMMIT_TIME_ORDERING: TK.PAYLOAD_CLASS.default}


def merge_mode(table: HoodieTableConfig) -> RecordMergeMode:
    """The merge a table with these properties reads and writes with."""
    return resolve_merge_spec(table, table.precombine_field, HoodieConfig()).mode


def _six_to_eight(table: HoodieTableConfig) -> HoodieTableConfig:
    props = table.props
    out = dict(props)
    mode = merge_mode(table)
    out.update(HoodieTableVersion.EIGHT.layout_properties())
    out[TK.INITIAL_VERSION.key] = props.get(TK.INITIAL_VERSION.key) or props.get(TK.VERSION.key) or "6"
    keygen_class = props.get(TK.KEYGEN_CLASS.key)
    if keygen_class and keygen_class in _TYPE_BY_KEYGEN_CLASS:
        out[TK.KEYGEN_TYPE.key] = _TYPE_BY_KEYGEN_CLASS[keygen_class]  # Hudi keeps the class beside the type
    out[TK.RECORD_MERGE_MODE.key] = mode.value
    out[TK.RECORD_MERGE_STRATEGY_ID.key] = MERGE_STRATEGY_IDS[mode]
    out.setdefault(TK.PAYLOAD_CLASS.key, TK.PAYLOAD_CLASS.default)
    return HoodieTableConfig(out)


def _eight_to_nine(table: HoodieTableConfig) -> HoodieTableConfig:
    props = table.props
    out = dict(props)
    out[TK.RECORD_MERGE_MODE.key] = merge_mode(table).value
    out[TK.VERSION.key] = "9"
    out[TK.TABLE_FORMAT.key] = TK.TABLE_FORMAT.default
    out.pop(TK.RECORD_MERGE_STRATEGY_ID.key, None)
    ordering = out.pop(TK.PRECOMBINE_FIELD.key, None)
    if ordering:
        out[TK.ORDERING_FIELDS.key] = ordering
    payload = out.pop(TK.PAYLOAD_CLASS.key, None)
    if payload:
        out[TK.LEGACY_PAYLOAD_CLASS.key] = payload
    return HoodieTableConfig(out)


def _nine_to_eight(table: HoodieTableConfig) -> HoodieTableConfig:
    props = table.props
    out = dict(props)
    mode = merge_mode(table)
    out[TK.VERSION.key] = "8"
    out.pop(TK.TABLE_FORMAT.key, None)
    ordering = out.pop(TK.ORDERING_FIELDS.key, None)
    if ordering:
        out[TK.PRECOMBINE_FIELD.key] = ordering
    legacy = out.pop(TK.LEGACY_PAYLOAD_CLASS.key, None)
    out[TK.PAYLOAD_CLASS.key] = legacy or _PAYLOAD_OF_MODE[mode]
    out[TK.RECORD_MERGE_MODE.key] = mode.value
    out[TK.RECORD_MERGE_STRATEGY_ID.key] = MERGE_STRATEGY_IDS[mode]
    return HoodieTableConfig(out)


def _eight_to_six(table: HoodieTableConfig) -> HoodieTableConfig:
    props = table.props
    mode = merge_mode(table)
    out = {k: v for k, v in props.items() if k not in (
        TK.INITIAL_VERSION.key, TK.TIMELINE_PATH.key, TK.TIMELINE_HISTORY_PATH.key, TK.RECORD_MERGE_STRATEGY_ID.key,
        TK.RECORD_MERGE_MODE.key, TK.KEYGEN_TYPE.key)}
    out.update(HoodieTableVersion.SIX.layout_properties())
    keygen_type = props.get(TK.KEYGEN_TYPE.key)
    if keygen_type and not out.get(TK.KEYGEN_CLASS.key):
        out[TK.KEYGEN_CLASS.key] = KEYGEN_CLASS_BY_TYPE[keygen_type.upper()]
    if merge_mode(HoodieTableConfig(out)) != mode:
        out[TK.RECORD_MERGE_MODE.key] = mode.value  # version 6 keeps a mode its payload class does not imply
    return HoodieTableConfig(out)


_STEPS = {(6, 8): _six_to_eight, (8, 9): _eight_to_nine, (9, 8): _nine_to_eight, (8, 6): _eight_to_six}


def version_path(current: int, target: int) -> list[tuple[int, int]]:
    """The single-version steps from `current` to `target` (6 and 8 are neighbours: there is no version 7)."""
    order = [int(v) for v in (HoodieTableVersion.SIX, HoodieTableVersion.EIGHT, HoodieTableVersion.NINE)]
    i, j = order.index(current), order.index(target)
    stride = 1 if j > i else -1
    return [(order[k], order[k + stride]) for k in range(i, j, stride)]


def migrated_properties(table: HoodieTableConfig, current: int, target: int) -> HoodieTableConfig:
    """The hoodie.properties of the table at `target` (the checksum is the file writer's)."""
    out = HoodieTableConfig({k: v for k, v in table.props.items() if k != TK.CHECKSUM.key})
    for step in version_path(current, target):
        out = _STEPS[step](out)
    return out
