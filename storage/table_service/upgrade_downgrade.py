"""Upgrading and downgrading a table between versions 6, 8 and 9 (Hudi's UpgradeDowngrade with its
SixToEight / EightToNine upgrade and NineToEight / EightToSix downgrade handlers; `CALL upgrade_table` and
`CALL downgrade_table`).

Python API: ``upgrade_table(table, to_version, spark=None, config=HoodieConfig()) -> UpgradeDowngradeResult`` and
``downgrade_table(...)`` (same arguments): `table` a path or a meta client, `to_version` 6, 8, 9 or Hudi's names
SIX, EIGHT, NINE. 6 -> 9 passes through 8 and 9 -> 6 through 8, but hoodie.properties is written once.

What changes:
- 6 <-> 8: the timeline layout (storage.table_service.upgrade.timeline_layout: `.hoodie/` <-> `.hoodie/timeline/`,
  completion times in completed instants' names, JSON <-> Avro commit metadata, the v6 archive <-> the LSM
  history) and the properties (storage.table_service.upgrade.properties). A downgrade of a merge-on-read table
  also renames its log files by their slice's base instant, the version-6 naming (version 8 names them by the
  writing deltacommit, which a version-6 reader would take for a slice of its own); version-8 readers read both
  namings, so the table reads the same before and after the renames. Hudi compacts instead, which leaves older
  slices (time travel) misread.
- 8 <-> 9: the properties only.

Refused, the table unchanged (HoodieUpgradeDowngradeError): a version other than 6, 8, 9; a version 5 table (Hudi:
upgrade to 6 first, which this engine does not do); any pending instant (a write, compaction, clustering, clean,
rollback ... must finish or be rolled back first: its files and plans are named for the old layout); the wrong
direction (upgrade_table to a lower version); a downgrade to 6 of a table using what version 6 cannot record
(another table format or base file format, index definitions). A metadata table is removed first (its layout
follows the table version; storage.table.metadata_table): the next writer with hoodie.metadata.enable=true builds it
again for the new version.

Crash safety: the new layout's files are written next to the old one, then hoodie.properties is switched (the
commit point: Hudi's properties update, backup first), then the old layout's files are deleted. Until the switch
the table reads at its old version from its untouched old layout; after it, at the new version from a complete new
one. Every run (and every run of either procedure) starts by removing what the layout hoodie.properties names
does not use: the new-layout files of an attempt that died before its switch (they are written again), or the
old-layout files a finished switch left behind. Log renames happen before the switch and are idempotent.
The whole run holds the table lock; writers must not run meanwhile (as in Hudi, where the upgrade runs inside the
writing client before it writes).
"""
from __future__ import annotations

import logging
from dataclasses import dataclass, field, replace

from storage.config import WRITABLE_TABLE_VERSIONS, HoodieConfig
from storage.config import parse_table_version as parse_version_number
from storage.config import TableConfigKeys as TK
from storage.exception import HoodieError
from storage.fs_utils import make_log_file_name
from storage.table.fs_view import FileSystemView
from storage.table.meta_client import HoodieTableMetaClient, timeline_path
from storage.table.metadata_table import drop_metadata_table
from storage.table.table_config import HoodieTableConfig
from storage.table.table_version import HISTORY_FOLDER, TIMELINE_FOLDER, HoodieTableVersion
from storage.table_service.upgrade.properties import migrated_properties, version_path
from storage.table_service.upgrade.timeline_layout import (
    copy_active_timeline,
    copy_archive_to_lsm,
    copy_lsm_to_archive,
)
from storage.testing.crash_points import crash_point
from storage.timeline.instant import parse_instant_file_name
from storage.timeline.timeline import ActiveTimeline
from storage.transaction.transaction_manager import TransactionManager

log = logging.getLogger(__name__)

WRITABLE_VERSIONS = tuple(HoodieTableVersion(v) for v in WRITABLE_TABLE_VERSIONS)
INDEX_DEFS_FOLDER = ".index_defs"


class HoodieUpgradeDowngradeError(HoodieError, ValueError):
    """An upgrade or downgrade refused (the table unchanged)."""


@dataclass(frozen=True)
class UpgradeDowngradeResult:
    """What one call did."""

    base_path: str
    from_version: int
    to_version: int
    steps: tuple[str, ...] = ()            # e.g. ("6->8", "8->9"); empty: the table was at the version already
    active_instants: int = 0               # instant files written in the new timeline layout
    archived_actions: int = 0              # archived actions written in the new archive layout
    log_files_renamed: int = 0
    finished_earlier_attempt: bool = False  # files of an interrupted run were cleaned up
    messages: tuple[str, ...] = field(default=())

    @property
    def changed(self) -> bool:
        return bool(self.steps)


def parse_table_version(value) -> HoodieTableVersion:
    """6 / '6' / 'SIX' (Hudi's procedure takes the enum name) -> the version; anything else is refused."""
    text = str(value).strip().upper()
    by_name = {v.name: v for v in WRITABLE_VERSIONS}
    if text in by_name:
        return by_name[text]
    try:
        return HoodieTableVersion(parse_version_number(text))
    except ValueError:
        pass
    raise HoodieUpgradeDowngradeError(f"unknown table version {value!r}: this engine upgrades and downgrades "
                                      "between versions 6, 8 and 9 (SIX, EIGHT, NINE)")


def upgrade_table(table: HoodieTableMetaClient | str, to_version, spark=None,
                  config: HoodieConfig = HoodieConfig()) -> UpgradeDowngradeResult:
    """Upgrade `table` to `to_version` (nothing when it is there already; a lower version is refused)."""
    return _migrate(table, to_version, spark, config, upgrade=True)


def downgrade_table(table: HoodieTableMetaClient | str, to_version, spark=None,
                    config: HoodieConfig = HoodieConfig()) -> UpgradeDowngradeResult:
    """Downgrade `table` to `to_version` (nothing when it is there already; a higher version is refused)."""
    return _migrate(table, to_version, spark, config, upgrade=False)


# ----------------------------------------------------------------------------------------------- the run


def _load(table: HoodieTableMetaClient | str, spark, config: HoodieConfig) -> HoodieTableMetaClient:
    if isinstance(table, HoodieTableMetaClient):
        return table
    if spark is not None:
        return HoodieTableMetaClient.load_in_session(spark, table, config)
    return HoodieTableMetaClient.load(table)


def _migrate(table, to_version, spark, config: HoodieConfig, upgrade: bool) -> UpgradeDowngradeResult:
    target = parse_table_version(to_version)
    meta = _load(table, spark, config)
    verb = "upgrade" if upgrade else "downgrade"
    with TransactionManager.for_table(meta, config).transaction(verb):
        meta.reload()
        current = meta.table_config.version
        if current not in WRITABLE_TABLE_VERSIONS:
            raise HoodieUpgradeDowngradeError(
                f"cannot {verb} {meta.base_path}: it is at table version {current}; this engine moves tables between "
                f"versions 6, 8 and 9 (upgrade a version {current} table to 6 with Hudi first)")
        settled = _settle(meta)
        if current == int(target):
            log.info("%s is at table version %d already", meta.base_path, current)
            return UpgradeDowngradeResult(meta.base_path, current, current, finished_earlier_attempt=settled)
        if upgrade != (int(target) > current):
            other = "downgrade_table" if upgrade else "upgrade_table"
            raise HoodieUpgradeDowngradeError(f"cannot {verb} {meta.base_path} from table version {current} to "
                                              f"{int(target)}: that is a{' downgrade' if upgrade else 'n upgrade'}; "
                                              f"use {other}")
        _refuse_pending(meta, verb, int(target))
        if not upgrade:
            _refuse_unsupported_features(meta, int(target))
        drop_metadata_table(meta, f"{verb} to table version {int(target)}")
        result = _run(meta, current, int(target), verb)
    log.info("%sd %s from table version %d to %d (%s)", verb, meta.base_path, current, int(target),
             ", ".join(result.steps))
    return replace(result, finished_earlier_attempt=settled)


def _run(meta: HoodieTableMetaClient, current: int, target: int, verb: str) -> UpgradeDowngradeResult:
    old_props = dict(meta.table_config.props)
    new_table = migrated_properties(meta.table_config, current, target)
    new_props = new_table.props
    old_layout = HoodieTableVersion(current).timeline_layout_version
    new_layout = HoodieTableVersion(target).timeline_layout_version
    instants = archived = renamed = 0
    if new_layout != old_layout:
        if new_layout >= 2:
            timeline_dir = _timeline_dir(meta, new_table)
            instants = copy_active_timeline(meta, timeline_dir, 2)
            crash_point("upgrade.after_active_timeline")
            history = new_props.get(TK.TIMELINE_HISTORY_PATH.key) or HISTORY_FOLDER
            archived = copy_archive_to_lsm(meta, f"{timeline_dir}/{history}")
            crash_point("upgrade.after_archived_timeline")
        else:
            if meta.table_config.is_mor:
                renamed = rename_logs_to_base_instants(meta)
            crash_point("downgrade.after_log_renames")
            instants = copy_active_timeline(meta, meta.meta_path, 1)
            crash_point("downgrade.after_active_timeline")
            archived = copy_lsm_to_archive(meta, _archive_dir(meta, new_table))
            crash_point("downgrade.after_archived_timeline")
    removals = tuple(k for k in old_props if k not in new_props)
    meta.update_table_config(new_props, removals)  # the commit point
    crash_point(f"{verb}.after_properties")
    meta.active_timeline = ActiveTimeline(meta.storage, timeline_path(meta.meta_path, meta.table_config),
                                          new_layout)
    _settle(meta)
    steps = tuple(f"{a}->{b}" for a, b in version_path(current, target))
    return UpgradeDowngradeResult(meta.base_path, current, target, steps, instants, archived, renamed)


# ----------------------------------------------------------------------------------------------- checks


def _refuse_pending(meta: HoodieTableMetaClient, verb: str, target: int) -> None:
    """Hudi rolls failed writes back and compacts first; here a pending instant may be a live writer's, so it is
    the caller's to finish (run_compaction, run_clustering, ...) or roll back."""
    pending = list(meta.timeline.pending())
    if pending:
        names = ", ".join(f"{i.action} {i.timestamp} ({i.state.value.lower()})" for i in pending[:5])
        more = f" and {len(pending) - 5} more" if len(pending) > 5 else ""
        raise HoodieUpgradeDowngradeError(
            f"cannot {verb} {meta.base_path} to table version {target}: pending instants {names}{more}; finish "
            "them (pending compaction: run_compaction, pending clustering: run_clustering) or roll back the failed "
            "writes first")


def _refuse_unsupported_features(meta: HoodieTableMetaClient, target: int) -> None:
    if target >= int(HoodieTableVersion.EIGHT):
        return
    props = meta.table_config.props
    problems = []
    table_format = props.get(TK.TABLE_FORMAT.key)
    if table_format and table_format.lower() != TK.TABLE_FORMAT.default:
        problems.append(f"{TK.TABLE_FORMAT.key}={table_format}")
    base_format = props.get(TK.BASE_FILE_FORMAT.key)
    if base_format and base_format.upper() != "PARQUET":
        problems.append(f"{TK.BASE_FILE_FORMAT.key}={base_format}")
    if meta.storage.is_dir(f"{meta.meta_path}/{INDEX_DEFS_FOLDER}"):
        problems.append(f"index definitions ({INDEX_DEFS_FOLDER})")
    if problems:
        raise HoodieUpgradeDowngradeError(f"cannot downgrade {meta.base_path} to table version {target}: the table "
                                          f"uses what version {target} cannot record: {', '.join(problems)}")


# ----------------------------------------------------------------------------------------------- layout


def _timeline_dir(meta: HoodieTableMetaClient, table: HoodieTableConfig) -> str:
    return f"{meta.meta_path}/{table.props.get(TK.TIMELINE_PATH.key) or TIMELINE_FOLDER}"


def _archive_dir(meta: HoodieTableMetaClient, table: HoodieTableConfig) -> str:
    return f"{meta.meta_path}/{table.props.get(TK.ARCHIVELOG_FOLDER.key) or 'archived'}"


def _settle(meta: HoodieTableMetaClient) -> bool:
    """Remove the files of the layout hoodie.properties does not name: `.hoodie/timeline/` of a version-6 table
    (written by an upgrade that died before its switch), instant files directly in `.hoodie/` of a version 8/9
    table (left by a switched upgrade, or written by a downgrade that died before its switch). True if any."""
    storage = meta.storage
    if meta.table_config.timeline_layout_version < 2:
        folder = _timeline_dir(meta, meta.table_config)
        if storage.is_dir(folder):
            storage.delete_dir(folder)
            log.info("removed %s, left by an interrupted upgrade", folder)
            return True
        return False
    stale = [i for i in storage.list_dir(meta.meta_path) if not i.is_dir and parse_instant_file_name(i.name)]
    # completed files last, so that no listing sees a completed instant without its earlier states
    for info in sorted(stale, key=lambda i: parse_instant_file_name(i.name).is_completed):
        storage.delete(info.path)
    if stale:
        log.info("removed %d layout-1 instant files from %s", len(stale), meta.meta_path)
    return bool(stale)


# ----------------------------------------------------------------------------------------------- log files


def rename_logs_to_base_instants(meta: HoodieTableMetaClient) -> int:
    """Name every committed log file of a version 8/9 table by the base instant of the slice it belongs to (the
    version-6 naming), numbering the versions of a slice's logs in the order of their writes' completion; how
    many were renamed. Logs named so already keep their names (a rerun continues after them)."""
    view = FileSystemView(meta, include_pending_compaction=False)
    completion = {i.timestamp: i.completion_time or i.timestamp for i in meta.timeline.completed()}
    groups = view.file_groups() + [g for g, _ in view.replaced_file_groups()]
    renamed = 0
    for group in groups:
        versions: dict[str, int] = {}
        for lf in (lf for s in group.slices.values() for lf in s.log_files):
            versions[lf.parsed.instant_time] = max(versions.get(lf.parsed.instant_time, 0), lf.parsed.version)
        for base, file_slice in sorted(group.slices.items()):
            todo = sorted((lf for lf in file_slice.log_files if lf.parsed.instant_time != base),
                          key=lambda lf: (completion.get(lf.parsed.instant_time, lf.parsed.instant_time), lf.name))
            for lf in todo:
                versions[base] = versions.get(base, 0) + 1
                name = make_log_file_name(lf.parsed.file_id, base, versions[base], lf.parsed.write_token)
                # object stores copy, then delete: meanwhile both names hold the same blocks (the same rows merged)
                meta.storage.rename(lf.path, f"{lf.path.rsplit('/', 1)[0]}/{name}")
                renamed += 1
    if renamed:
        log.info("renamed %d log files of %s by their slices' base instants", renamed, meta.base_path)
    return renamed


