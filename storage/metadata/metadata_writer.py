"""Keeping a data table's metadata table in step (Hudi's HoodieBackedTableMetadataWriter), table versions 6, 8 and 9:
its creation and initialisation (bootstrap) on an existing table, one MDT deltacommit per data action, MDT
rollbacks, and the MDT's table services before each deltacommit: clean, compaction, archival (clean and archival
in storage.table_service.metadata_table_services).

Protocol (notes §4.1): every data action T completes through `storage.table.action_completion.complete_action`;
this module's pre-complete hook (`on_pre_complete`) runs there, under the table lock, before T completes, and
writes the MDT deltacommit with the same time T: `T.deltacommit.requested`, `.inflight`, one new version-1 log
file per touched MDT file group holding one HFILE_DATA_BLOCK, then `T_<c>.deltacommit`. A write that dies in
between leaves a completed MDT deltacommit whose data instant is not complete: readers ignore it (§4.3,
`table_metadata.valid_instants`), and the rollback of the failed data instant rolls it back in the MDT too.

Which tables: a writer or service whose config has `hoodie.metadata.enable=true` calls `prepare_metadata_table`
before it changes the table: it creates / initialises the MDT partitions it maintains (`files`; `column_stats` /
`partition_stats` / `record_index` when enabled; `record_index` and every secondary index the table already has
or defines in index.json; `bloom_filters` when enabled), drops those it does not maintain (expression indexes: they
would go stale) and registers the table with the hook. Index partitions (record_index, secondary indexes) get their
changes from the files each action wrote (record_index_writer, secondary_index_writer), shard by shard. With the MDT
disabled the MDT is removed, as Hudi does for such a writer (`storage.table.metadata_table.drop_metadata_table`).

Table version 6 (as Hudi 1.x's HoodieBackedTableMetadataWriterTableVersionSix writes it, which keeps Hudi 0.x's
layout so that 0.14/0.15 readers read it): timeline layout 1 (`<T>.deltacommit`, JSON commit metadata), the MDT's
own instants are a data instant plus a 3-digit suffix - partition initialisation `<latest completed data instant
or 00000000000000>010` (011, ... for the next partitions), compaction `<latest MDT deltacommit>001`, clean
`...002` - and a data rollback R is an MDT deltacommit R (the files the rollback deleted and the log files it and
the rolled-back write left) followed by an MDT rollback `R006` of the rolled-back deltacommit. Log files are named
after their slice's base instant (`.files-0000-0_<base>.log.<n>_<token>`): each deltacommit writes the next
version, with the latest log's write token; which instant wrote a log file is in its blocks' INSTANT_TIME header.
No partition_stats (Hudi 1.x builds none on a version 6 table; 0.x's record schema has no such type).

Savepoint and restore (Hudi 1.x's rules; sources: HoodieBackedTableMetadataWriter.update(HoodieRestoreMetadata),
BaseHoodieWriteClient.restoreToSavepoint, BaseRestoreActionExecutor, CopyOnWrite/MergeOnReadRestoreActionExecutor,
CleanPlanner, 1.0/1.1):
- A savepoint writes nothing to the MDT and does not savepoint it (`update` ignores it). The MDT stays restorable
  through archival only: the data table's stops at the savepoint and the MDT's never passes the data table's first
  active commit (metadata_table_services). Its cleaner ignores data savepoints, as Hudi's does for an MDT.
- The rollbacks of a data restore leave the MDT alone (Hudi runs them with skipTimelinePublish: no rollback
  instant, no MDT write); while the restore is pending, readers do not use the MDT (table_metadata: it may still
  list rolled-back files) and list storage.
- When the data restore R to instant T completes (`restore`, its pre-complete hook): the MDT is restored to T -
  an MDT restore instant (fresh time; HoodieRestorePlan / HoodieRestoreMetadata on the MDT timeline) rolls back
  every MDT deltacommit and compaction after T, newest first, deleting the files each wrote (`_restore_to`) - then
  synced with the data table's committed files listed from storage in one deltacommit (`_sync_records`: the files
  the data table's cleans after T deleted, whose MDT deltacommits the MDT restore rolled back; `files` and
  `column_stats` as Hudi, partition stats of changed partitions recomputed besides). Hudi writes that sync at a
  fresh time, valid to its readers because the data timeline lacks it; here it is written at R, so it becomes
  valid to both rules exactly when R completes.
- When the MDT cannot be restored to T it is rebuilt from the restored data table (`rebuild`): Hudi's
  restoreToSavepoint deletes it (the next writer initialises it) when T is at or before its oldest active
  compaction or before its active timeline, and its update() fails when a `files` file group has no slice based
  at or before T (here: any maintained partition; also when the MDT or a partition was initialised after T).
- A restore killed anywhere (its crash points, or inside this step: a pending MDT restore is finished with its
  plan, an earlier sync discarded) is finished by the next restore, write or service, which runs this step again.
"""
from __future__ import annotations

import functools
import json
import logging
import threading
import time
from collections.abc import Iterable
from dataclasses import dataclass, field, replace
from importlib import resources
from typing import Protocol

import numpy as np
import pyarrow as pa

from storage.avro.container import read_avro_container, write_avro_container
from storage.avro.models import HOODIE_COMPACTION_PLAN, HOODIE_ROLLBACK_METADATA, HOODIE_ROLLBACK_PLAN
from storage.config import HoodieConfig
from storage.config import MetadataConfigKeys as MK
from storage.config import TableConfigKeys as TK
from storage.exception import HoodieCorruptedLogError, HoodieIndexError
from storage.file_group.log_block import DeleteBlock, HFileDataBlock
from storage.file_group.log_format import HoodieLogFileReader, create_new_log_file
from storage.fs_utils import join_path, make_base_file_name, make_write_token, parse_base_file_name, \
    parse_log_file_name
from storage.io.parquet import parquet_file
from storage.metadata.bloom_filters import (
    BLOOM_FILTERS,
    BLOOM_FILTERS_FILE_GROUP_PREFIX,
    bloom_filter_record,
    bloom_filter_tombstone,
)
from storage.metadata.column_stats import ColumnStatsSettings, file_stats, tombstone
from storage.metadata.hfile_io import write_cells, write_records
from storage.metadata.index_definitions import RECORD_INDEX, column_stats_columns, secondary_index_definitions
from storage.metadata.record_index_writer import (
    RECORD_INDEX_FILE_GROUP_PREFIX,
    by_shard,
    commit_delta,
    delete_block,
    estimate_file_group_count,
    initial_delta,
    record_index_wanted,
    register_definition,
    shard_cells,
)
from storage.metadata import secondary_index_writer as si
from storage.metadata.keys import file_group_id, mdt_partition_name
from storage.metadata.records import (
    ColumnStats,
    FileInfo,
    FileListing,
    MetadataRecord,
    MetadataRecordType,
    MetaFields,
)
from storage.metadata.metadata_restore import MetadataTableRestore
from storage.metadata.table_metadata import (
    COLUMN_STATS,
    FILES,
    INIT_INSTANT_PREFIX,
    PARTITION_STATS,
    HoodieTableMetadata,
    enabled_partitions,
    pending_restore,
)
from storage.metadata.table_metadata_util import (
    by_file_group,
    column_stats_record,
    committed_files,
    files_record,
    for_base_file,
    group_by_file,
    partition_list_record,
    partition_stats_records,
    slice_file_names,
    slice_files,
    stats_by_file,
)
from storage.table.action_completion import ActionCompletion, register_pre_complete
from storage.table.fs_view import FileSystemView
from storage.table.meta_client import HoodieTableMetaClient
from storage.table.metadata_table import drop_metadata_table, metadata_table_path
from storage.table.partition_metadata import write_partition_metadata
from storage.table.table_config import HoodieTableConfig
from storage.testing.crash_points import crash_point
from storage.timeline.commit_metadata import HoodieCommitMetadata, HoodieWriteStat, RuntimeStats
from storage.timeline.instant import Action, HoodieInstant
from storage.timeline.rollback_records import RollbackRequest, rollback_metadata_record, rollback_plan_record

log = logging.getLogger(__name__)

MDT_VERSIONS = (6, 8, 9)
V6_INIT_SUFFIX, V6_COMPACTION_SUFFIX, V6_CLEAN_SUFFIX, V6_ROLLBACK_SUFFIX = 10, "001", "002", "006"
MAINTAINED = (FILES, COLUMN_STATS, PARTITION_STATS, BLOOM_FILTERS, RECORD_INDEX)  # initialisation order: files first
FILE_GROUP_PREFIX = {FILES: "files-", COLUMN_STATS: "col-stats-", PARTITION_STATS: "partition-stats-",
                     BLOOM_FILTERS: BLOOM_FILTERS_FILE_GROUP_PREFIX, RECORD_INDEX: RECORD_INDEX_FILE_GROUP_PREFIX}
HFILE_EXTENSION = ".hfile"
UPSERT_PREPPED = "UPSERT_PREPPED"
BULK_INSERT_PREPPED = "BULK_INSERT_PREPPED"
COMPACT = "COMPACT"
EMPTY_LOG_TOKEN = "0-0-0"
_META_FIELD_COUNT = 5
_COMMIT_ACTIONS = frozenset({Action.COMMIT, Action.DELTA_COMMIT, Action.REPLACE_COMMIT, Action.COMPACTION,
                             Action.CLUSTERING, Action.LOG_COMPACTION})

# what the MDT's hoodie.properties holds besides name and versions (notes §2.3)
_MDT_COMMON_PROPERTIES = {
    TK.TYPE.key: "MERGE_ON_READ",
    TK.BASE_FILE_FORMAT.key: "HFILE",
    TK.RECORDKEY_FIELDS.key: "key",
    TK.KEYGEN_TYPE.key: "HOODIE_TABLE_METADATA",
    TK.POPULATE_META_FIELDS.key: "false",
    TK.PAYLOAD_CLASS.key: "org.apache.hudi.metadata.HoodieMetadataPayload",
    TK.RECORD_MERGE_STRATEGY_ID.key: "00000000-0000-0000-0000-000000000000",
    TK.DROP_PARTITION_COLUMNS.key: "false",
}
_MDT_PROPERTIES = {**_MDT_COMMON_PROPERTIES, TK.RECORD_MERGE_MODE.key: "CUSTOM", TK.TIMELINE_LAYOUT_VERSION.key: "2",
                   TK.TIMELINE_PATH.key: "timeline", TK.TIMELINE_HISTORY_PATH.key: "history",
                   TK.ARCHIVELOG_FOLDER.key: "history"}
# Hudi 1.x's v6 MDT (HoodieTableConfig.create after dropInvalidConfigs): layout 1, the `archived` folder, no merge mode
_V6_MDT_PROPERTIES = {**_MDT_COMMON_PROPERTIES, TK.TIMELINE_LAYOUT_VERSION.key: "1", TK.ARCHIVELOG_FOLDER.key: "archived"}


# ----------------------------------------------------------------------------------------------- schema


@functools.lru_cache(maxsize=4)
def record_schema(table_version: int) -> str:
    """HoodieMetadataRecord (with the five meta fields) as the Hudi release writing `table_version` embeds it:
    1.0.x for version 8 (no valueType, no ArrayWrapper), 1.1 for version 9; version 6 takes 1.0.x's, whose extra
    fields (isTightBound, position, SecondaryIndexMetadata) 0.14/0.15 readers skip by name."""
    name = "HoodieMetadataRecord-1.1.avsc" if table_version >= 9 else "HoodieMetadataRecord-1.0.avsc"
    return resources.files("storage.metadata").joinpath("schemas", name).read_text("utf-8")


@functools.lru_cache(maxsize=4)
def commit_schema(table_version: int) -> str:
    """The schema the MDT commit metadata names (`extraMetadata.schema`): without the meta fields."""
    schema = json.loads(record_schema(table_version))
    schema["fields"] = schema["fields"][_META_FIELD_COUNT:]
    return json.dumps(schema, separators=(",", ":"))


# ----------------------------------------------------------------------------------------------- settings


@dataclass(frozen=True)
class MetadataWriteSettings:
    """What a writer keeps in the MDT: `partitions` (subset of MAINTAINED), the column-stats columns, the file
    group counts of partitions created here, and the compaction trigger."""

    partitions: tuple[str, ...] = (FILES,)
    column_stats: ColumnStatsSettings = field(default_factory=ColumnStatsSettings)
    file_group_counts: tuple[tuple[str, int], ...] = ((FILES, 1), (COLUMN_STATS, 2), (PARTITION_STATS, 1),
                                                     (BLOOM_FILTERS, 4))
    max_delta_commits: int = MK.COMPACT_MAX_DELTA_COMMITS.default
    writer_config: HoodieConfig = field(default_factory=HoodieConfig)  # what the MDT's clean and archival derive from
    # (MDT partition, indexed column, index definition version) of each secondary index kept
    secondary_indexes: tuple[tuple[str, str, str], ...] = ()

    @classmethod
    def of(cls, config: HoodieConfig, partitioned: bool, table_version: int = 9,
           defined_columns: tuple[str, ...] | None = None, record_index: bool = False,
           secondary_indexes: tuple[tuple[str, str, str], ...] = ()) -> "MetadataWriteSettings":
        """`defined_columns`: the columns the table's column_stats index definition names (index.json), indexed
        when the options name none; `record_index`: keep record_index (`record_index_wanted`)."""
        partitions = [FILES]
        if config.get(MK.COLUMN_STATS_ENABLE):
            partitions.append(COLUMN_STATS)
            # Java: none for non-partitioned tables, nor on a version 6 table
            if config.get(MK.PARTITION_STATS_ENABLE) and partitioned and table_version >= 8:
                partitions.append(PARTITION_STATS)
        if config.get(MK.BLOOM_FILTER_ENABLE):
            partitions.append(BLOOM_FILTERS)
        if record_index:
            partitions.append(RECORD_INDEX)
        partitions += [p for p, _, _ in secondary_indexes]
        columns = config.get(MK.COLUMN_STATS_COLUMNS) or defined_columns
        return cls(tuple(partitions),
                   ColumnStatsSettings(tuple(columns) if columns else None, config.get(MK.COLUMN_STATS_MAX_COLUMNS),
                                       primitive_only=table_version < 9),
                   ((FILES, 1), (COLUMN_STATS, config.get(MK.COLUMN_STATS_FILE_GROUP_COUNT)),
                    (PARTITION_STATS, config.get(MK.PARTITION_STATS_FILE_GROUP_COUNT)),
                    (BLOOM_FILTERS, config.get(MK.BLOOM_FILTER_FILE_GROUP_COUNT))),
                   config.get(MK.COMPACT_MAX_DELTA_COMMITS), config, tuple(secondary_indexes))

    def file_group_count(self, partition: str) -> int:
        return dict(self.file_group_counts)[partition]


# ----------------------------------------------------------------------------------------------- registration

_REGISTERED: dict[str, MetadataWriteSettings] = {}
_LOCK = threading.Lock()
_HOOK_INSTALLED = False


def prepare_metadata_table(meta: HoodieTableMetaClient, config: HoodieConfig, action: str) -> bool:
    """Before `action` changes the table: with `hoodie.metadata.enable` on a table version 6/8/9 table, make sure the
    MDT exists with the partitions `config` asks for and keep it in step from now on (True); otherwise remove it
    (False), as today."""
    if not config.get(MK.ENABLE) or meta.table_config.version not in MDT_VERSIONS:
        with _LOCK:
            _REGISTERED.pop(meta.base_path, None)
        drop_metadata_table(meta, action)
        return False
    settings = MetadataWriteSettings.of(config, bool(meta.table_config.partition_fields), meta.table_config.version,
                                        column_stats_columns(meta),
                                        record_index_wanted(config, meta, enabled_partitions(meta)),
                                        secondary_indexes_of(meta))
    _install_hook()
    with _LOCK:
        _REGISTERED[meta.base_path] = settings
    MetadataWriter(meta, settings).ensure_partitions()
    return True


def drop_metadata_partitions(meta: HoodieTableMetaClient, partitions: Iterable[str], reason: str) -> list[str]:
    """Unlist, then delete, the MDT `partitions` of the table (DROP INDEX: Hudi's dropIndex); the ones it had."""
    enabled = set(enabled_partitions(meta))
    present = sorted(set(partitions) & enabled)
    if present:
        MetadataWriter(meta, MetadataWriteSettings())._drop_partitions(present, enabled, reason)
    return present


def secondary_indexes_of(meta: HoodieTableMetaClient) -> tuple[tuple[str, str, str], ...]:
    """The secondary indexes the table defines (index.json: CREATE INDEX here, or Java's), kept by every writer:
    (MDT partition, column, definition version)."""
    return tuple((p, d.source_fields[0], d.version.upper())
                 for p, d in sorted(secondary_index_definitions(meta).items()))


def refuse_overwrite_with_secondary_indexes(meta: HoodieTableMetaClient, operation: str) -> None:
    """Hudi refuses insert_overwrite and delete_partition on a table with secondary indexes; refused here before
    anything is written."""
    indexes = [p for p, _, _ in secondary_indexes_of(meta)]
    if indexes:
        raise HoodieIndexError(f"Can not perform operation {operation} on secondary index ({meta.base_path} has "
                               f"{', '.join(indexes)}; DROP INDEX first)")


def index_file_group_prefix(partition: str) -> str:
    """Hudi names an index partition's file groups after it: `record-index-0003-0`, `secondary-index-by-city-0001-0`."""
    return FILE_GROUP_PREFIX.get(partition) or partition.replace("_", "-") + "-"


@dataclass(frozen=True)
class ShardWrite:
    """What one file group (shard) of an index partition receives from one action: upserts as encoded HFile
    cells (sorted), and deleted keys."""

    partition: str
    shard: int
    cells: list
    deletes: pa.Array


class MetadataTableServiceRunner(Protocol):
    """The MDT's clean and archival, given the data table, the MDT and the data writer's options."""

    def clean(self, data: HoodieTableMetaClient, mdt: HoodieTableMetaClient, config: HoodieConfig) -> None: ...

    def archive(self, data: HoodieTableMetaClient, mdt: HoodieTableMetaClient, config: HoodieConfig) -> None: ...


# They drive the data table's clean and archival code, a layer above this module, which registers them here when
# storage.table_service is imported (the write client and every table service import it); until then the MDT
# only compacts.
_TABLE_SERVICES: MetadataTableServiceRunner | None = None


def register_table_services(runner: MetadataTableServiceRunner) -> None:
    global _TABLE_SERVICES
    _TABLE_SERVICES = runner


def _install_hook() -> None:
    global _HOOK_INSTALLED
    with _LOCK:
        if not _HOOK_INSTALLED:
            register_pre_complete(on_pre_complete)
            _HOOK_INSTALLED = True


def on_pre_complete(completion: ActionCompletion) -> None:
    """The pre-complete hook: the MDT update for the action about to complete, for tables a writer with the MDT
    enabled prepared in this process and whose MDT is still listed (a writer with it disabled removes it). An
    action that changes files on a table with an MDT nobody here keeps in step (a path that did not prepare it)
    removes the MDT first: readers list files through it, and a stale one would hide the action's files."""
    meta = completion.meta
    with _LOCK:
        settings = _REGISTERED.get(meta.base_path)
    if FILES not in enabled_partitions(meta):
        return
    if settings is None:
        if _changes_files(completion):
            drop_metadata_table(meta, f"{completion.action} {completion.instant_time} (not kept in step here)")
        return
    MetadataWriter(meta, settings).update(completion)


def _changes_files(completion: ActionCompletion) -> bool:
    if isinstance(completion.metadata, HoodieCommitMetadata):
        return bool(completion.metadata.write_stats())
    return completion.action != Action.SAVEPOINT


def discard_metadata_deltacommit(meta: HoodieTableMetaClient, instant_time: str) -> None:
    """A write undone before its data instant completed (`storage.write.rollback.abort_write`) takes its MDT
    deltacommit with it - before the data instant's files go, so a crash in between leaves a pending write whose
    rollback finds the rest."""
    if FILES in enabled_partitions(meta) and HoodieTableMetaClient.exists(metadata_table_path(meta), meta.storage):
        MetadataWriter(meta, MetadataWriteSettings()).discard(instant_time)


# ----------------------------------------------------------------------------------------------- the writer


@dataclass
class _Written:
    """A file the MDT deltacommit wrote, for its commit metadata."""

    partition: str
    file_id: str
    name: str
    size: int
    records: int


class MetadataWriter:
    """The MDT of data table `data` (version 6/8/9), written with `settings`."""

    def __init__(self, data: HoodieTableMetaClient, settings: MetadataWriteSettings):
        self.data = data
        self.settings = settings
        self.storage = data.storage
        self.base_path = metadata_table_path(data)
        self.version = data.table_config.version
        self.v6 = self.version < 8  # Hudi 0.x's MDT layout (module doc)
        self.schema = record_schema(self.version)
        self._mdt: HoodieTableMetaClient | None = None

    @property
    def mdt(self) -> HoodieTableMetaClient:
        if self._mdt is None:
            self._mdt = HoodieTableMetaClient.load(self.base_path, self.storage)
        return self._mdt

    # -- creation and initialisation ---------------------------------------------------------------

    def ensure_partitions(self) -> None:
        """Create the MDT if needed, initialise the wanted partitions it lacks (files first), and drop the ones
        this writer does not keep in step; the data table lists exactly what is usable afterwards."""
        enabled = set(enabled_partitions(self.data))
        if FILES not in enabled or not HoodieTableMetaClient.exists(self.base_path, self.storage):
            if self.storage.is_dir(self.base_path):  # a half-built MDT (crash during initialisation) or stale
                drop_metadata_table(self.data, "metadata table initialisation")
            enabled = set()
            self._create_table()
        stale = sorted(enabled - set(self.settings.partitions))
        if stale:
            self._drop_partitions(stale, enabled)
            enabled -= set(stale)
        for partition in self.settings.partitions:
            if partition not in enabled:
                self._initialise(partition)
                enabled.add(partition)
                self._list_partitions(enabled)

    def _create_table(self) -> None:
        name = f"{self.data.table_config.name}_metadata"
        if self.v6:
            props = {TK.NAME.key: name, TK.VERSION.key: "6", **_V6_MDT_PROPERTIES}
        else:
            props = {TK.NAME.key: name, TK.VERSION.key: str(self.version),
                     TK.INITIAL_VERSION.key: str(self.version), **_MDT_PROPERTIES}
        HoodieTableMetaClient.init_table(self.base_path, HoodieTableConfig(props), self.storage)
        self.storage.mkdirs(f"{self.base_path}/.hoodie/.heartbeat")
        self._mdt = None
        log.info("created the metadata table of %s", self.data.base_path)

    def _list_partitions(self, enabled: Iterable[str]) -> None:
        self.data.update_table_config({TK.METADATA_PARTITIONS.key: ",".join(sorted(enabled)),
                                       TK.METADATA_PARTITIONS_INFLIGHT.key: ""})

    def _drop_partitions(self, partitions: list[str], enabled: set[str],
                         reason: str = "not maintained by this writer") -> None:
        """Unlist, then delete, MDT partitions (Hudi drops a disabled index, and DROP INDEX drops one)."""
        self._list_partitions(enabled - set(partitions))
        for partition in partitions:
            self.storage.delete_dir(f"{self.base_path}/{partition}")
        log.warning("metadata table of %s: partitions %s removed (%s)", self.data.base_path, ", ".join(partitions),
                    reason)

    def _init_instant(self) -> str:
        """`00000000000000000` plus k for the first k not on the MDT timeline (Hudi 1.x); version 6: the latest
        completed data instant (or 00000000000000) plus 010 + k (Hudi 0.x's createIndexInitTimestamp)."""
        taken = {i.timestamp for i in self.mdt.active_timeline.all_files()}
        if self.v6:
            latest = self.data.reload().timeline.completed().last()
            prefix, k = (latest.timestamp if latest else INIT_INSTANT_PREFIX), V6_INIT_SUFFIX
        else:
            prefix, k = INIT_INSTANT_PREFIX, 0
        while f"{prefix}{k:03d}" in taken:
            k += 1
        return f"{prefix}{k:03d}"

    def _initialise(self, partition: str) -> None:
        """One BULK_INSERT_PREPPED deltacommit building `partition` from the data table as it stands: every file
        group gets its empty 80-byte log, those with records a base HFile (notes §4.4)."""
        if partition == RECORD_INDEX or self._secondary(partition) is not None:
            self._initialise_index(partition)
            return
        instant = self._init_instant()
        records = self._initial_records(partition)
        timeline = self.mdt.active_timeline
        inflight = timeline.transition_to_inflight(timeline.create_requested(Action.DELTA_COMMIT, instant))
        directory = f"{self.base_path}/{partition}"
        self.storage.mkdirs(directory)
        write_partition_metadata(self.storage, self.base_path, partition, instant)
        groups = [file_group_id(FILE_GROUP_PREFIX[partition], i)
                  for i in range(self.settings.file_group_count(partition))]
        written = []
        for fg, group_records in zip(groups, by_file_group(records, len(groups))):
            create_new_log_file(self.storage, directory, fg, instant, 1, EMPTY_LOG_TOKEN,
                                [DeleteBlock.from_records([], instant)])
            if group_records or partition == FILES:
                written.append(self._write_base_file(partition, fg, instant, group_records, len(written)))
        metadata = self._commit_metadata(written, instant, BULK_INSERT_PREPPED, base_files=True)
        timeline.transition_to_complete(inflight, metadata.to_bytes(self.version))
        log.info("metadata table of %s: initialised %s (%d records) at %s", self.data.base_path, partition,
                 len(records), instant)

    def _secondary(self, partition: str) -> tuple[str, str] | None:
        """(column, version) of a secondary index partition this writer keeps."""
        return next(((c, v) for p, c, v in self.settings.secondary_indexes if p == partition), None)

    def _initialise_index(self, partition: str) -> None:
        """record_index or a secondary index from the latest merged slices: the shard count sized to the entries
        (Hudi's record-index estimate, for both), one base HFile per shard with entries, the empty init log in
        every shard; then index.json names the record index (v9; a secondary index is defined before it is
        built)."""
        instant = self._init_instant()
        view = FileSystemView(self.data)
        if partition == RECORD_INDEX:
            delta = initial_delta(self.data, view)
            count = estimate_file_group_count(delta.num_rows, self.settings.writer_config)
            shards = {d.shard: (lambda name, d=d: shard_cells(d.upserts, self.schema, name))
                      for d in by_shard(delta, count)}
            entries = delta.num_rows
        else:
            column, version = self._secondary(partition)
            keys = si.initial_entries(self.data, view, column)
            count = estimate_file_group_count(len(keys), self.settings.writer_config)
            table = pa.table({si.KEY: keys, si.DELETED: pa.array(np.zeros(len(keys), bool))})
            shards = {shard: (lambda name, k=upserts: si.secondary_cells(k, self.schema, name))
                      for shard, upserts, _ in si.by_secondary_shard(table, count, version)}
            entries = len(keys)
        timeline = self.mdt.active_timeline
        inflight = timeline.transition_to_inflight(timeline.create_requested(Action.DELTA_COMMIT, instant))
        directory = f"{self.base_path}/{partition}"
        self.storage.mkdirs(directory)
        write_partition_metadata(self.storage, self.base_path, partition, instant)
        written = []
        for i in range(count):
            fg = file_group_id(index_file_group_prefix(partition), i)
            create_new_log_file(self.storage, directory, fg, instant, 1, EMPTY_LOG_TOKEN,
                                [DeleteBlock.from_records([], instant)])
            if i in shards:
                written.append(self._write_base_cells(partition, fg, instant, len(written), shards[i]))
        metadata = self._commit_metadata(written, instant, BULK_INSERT_PREPPED, base_files=True)
        timeline.transition_to_complete(inflight, metadata.to_bytes(self.version))
        if partition == RECORD_INDEX:
            register_definition(self.data)
        log.info("metadata table of %s: initialised %s (%d entries in %d file groups) at %s", self.data.base_path,
                 partition, entries, count, instant)

    def _initial_records(self, partition: str) -> list[MetadataRecord]:
        listing, latest = self._table_files
        if partition == FILES:
            out = [partition_list_record(listing)]
            out += [files_record(p, files) for p, files in sorted(listing.items()) if files]
            return out
        if partition == COLUMN_STATS:
            return [column_stats_record(p, s) for p, lst in self._table_stats.items() for s in lst]
        if partition == BLOOM_FILTERS:  # every committed base file, each at the instant that wrote it
            return self.bloom_records({p: list(files) for p, files in listing.items()})
        return [r for p, lst in self._table_stats.items()
                for r in partition_stats_records(p, [s for s in lst if s.file_name in latest[p]])]

    @functools.cached_property
    def _table_files(self) -> tuple[dict[str, dict[str, int]], dict[str, set[str]]]:
        """The data table as initialisation sees it, listed once for every partition it builds: partition ->
        {file: size} of every committed file, and partition -> the names in its latest slices."""
        view = FileSystemView(self.data)
        listing = committed_files(view)
        return listing, {p: slice_file_names(view, p) for p in listing}

    @functools.cached_property
    def _table_stats(self) -> dict[str, list[ColumnStats]]:
        """Every committed file's column stats, read once for column_stats and partition_stats alike."""
        return self.stats_of(self._table_files[0])

    def stats_of(self, files: dict[str, dict[str, int]]) -> dict[str, list[ColumnStats]]:
        """Partition -> the column stats of the named data files of each partition."""
        return {p: [s for name in names for s in self.data_file_stats(p, name)] for p, names in files.items()}

    def bloom_records(self, files: dict[str, list[str]]) -> list[MetadataRecord]:
        """The bloom_filters records of the base files among `files` (partition -> names), each stamped with the
        instant that wrote its file (a commit's own instant for the files it writes)."""
        out = []
        for partition, names in sorted(files.items()):
            for name in sorted(names):
                parsed = parse_base_file_name(name)
                if parsed is None:
                    continue  # a log file: Hudi indexes base files only
                footer = parquet_file(self.storage, join_path(self.data.base_path, partition, name)).metadata
                record = bloom_filter_record(partition, name, parsed.instant_time, footer)
                if record is not None:
                    out.append(record)
        return out

    def data_file_stats(self, partition: str, name: str) -> list[ColumnStats]:
        return file_stats(self.storage, join_path(self.data.base_path, partition, name), self.settings.column_stats)

    def _write_base_file(self, partition: str, fg: str, instant: str, records: list[MetadataRecord],
                         ordinal: int) -> _Written:
        name = make_base_file_name(fg, make_write_token(ordinal, 0, ordinal), instant, HFILE_EXTENSION)
        named = [replace(r, meta=MetaFields(file_name=name)) for r in records]
        data = write_records(named, self.schema, base_file=True, create_time_ms=int(time.time() * 1000))
        self.storage.create(f"{self.base_path}/{partition}/{name}", data)
        return _Written(partition, fg, name, len(data), len(records))

    def _write_base_cells(self, partition: str, fg: str, instant: str, ordinal: int, cells_of) -> _Written:
        """A base HFile of cells already encoded: `cells_of(file name)` (the name is in every base record)."""
        name = make_base_file_name(fg, make_write_token(ordinal, 0, ordinal), instant, HFILE_EXTENSION)
        cells = cells_of(name)
        data = write_cells(cells, self.schema, base_file=True, create_time_ms=int(time.time() * 1000))
        self.storage.create(f"{self.base_path}/{partition}/{name}", data)
        return _Written(partition, fg, name, len(data), len(cells))

    def _commit_metadata(self, written: list[_Written], instant: str, operation: str,
                         base_files: bool) -> HoodieCommitMetadata:
        md = HoodieCommitMetadata(extraMetadata={"schema": commit_schema(self.version)}, operationType=operation,
                                  compacted=operation == COMPACT)
        for w in written:
            stat = HoodieWriteStat(fileId=w.file_id, path=f"{w.partition}/{w.name}", numWrites=w.records,
                                   totalWriteBytes=w.size, partitionPath=w.partition, fileSizeInBytes=w.size,
                                   runtimeStats=RuntimeStats())
            if base_files:
                stat.numInserts = w.records
            else:
                stat.prevCommit, stat.numUpdateWrites = instant, w.records
                stat.logVersion, stat.logOffset, stat.baseFile, stat.logFiles = 1, 0, "", [w.name]
            md.add_write_stat(stat)
        return md

    # -- one data action ---------------------------------------------------------------------------

    def update(self, completion: ActionCompletion) -> None:
        """The MDT change for `completion`, before it completes."""
        action, instant = completion.action, completion.instant_time
        if action == Action.ROLLBACK:
            if pending_restore(self.data) is not None:
                return  # a restore's rollbacks leave the MDT to the restore (Hudi: skipTimelinePublish)
            if self.v6:  # the files the rollback deleted and left, then the MDT rollback at R006 (module doc)
                self.discard(instant)
                self.deltacommit(instant, self._rollback_records(completion.metadata or {}))
            for target in (completion.metadata or {}).get("commitsRollback") or []:
                self.rollback(target, instant + V6_ROLLBACK_SUFFIX if self.v6 else instant)
            return
        if action == Action.RESTORE:
            self.restore(instant)
            return
        if action == Action.CLEAN:
            records = self._clean_records(completion.metadata or {}, instant)
        elif action in _COMMIT_ACTIONS and isinstance(completion.metadata, HoodieCommitMetadata):
            records = self._commit_records(completion.metadata)
        else:
            return  # savepoint: Hudi neither writes nor savepoints the MDT
        shard_writes = self._index_writes(completion, instant)
        self.discard(instant)  # an earlier attempt whose data instant never completed
        self._table_services()
        self.deltacommit(instant, records, shard_writes)

    def _index_writes(self, completion: ActionCompletion, instant: str) -> list[ShardWrite]:
        """What a commit action changes in record_index and the secondary indexes, by shard (computed before the
        MDT's services run: its compaction does not change shard counts)."""
        md = completion.metadata
        if not isinstance(md, HoodieCommitMetadata):
            return []
        out: list[ShardWrite] = []
        if RECORD_INDEX in self.settings.partitions:
            delta = commit_delta(self.data, md, instant)
            if delta.num_rows:
                count = len(self._latest_files(RECORD_INDEX))
                out += [ShardWrite(RECORD_INDEX, d.shard, shard_cells(d.upserts, self.schema), d.deletes)
                        for d in by_shard(delta, count)]
        for partition, column, version in self.settings.secondary_indexes:
            entries = si.commit_entries(self.data, md, instant, column)
            if entries.num_rows:
                count = len(self._latest_files(partition))
                out += [ShardWrite(partition, shard, si.secondary_cells(upserts, self.schema), deletes)
                        for shard, upserts, deletes in si.by_secondary_shard(entries, count, version)]
        return out

    def _table_services(self) -> None:
        """The MDT's own table services before its next deltacommit, in Hudi's order (performTableServices):
        clean, compaction, archival (clean and archival as registered by
        storage.table_service.metadata_table_services)."""
        services = _TABLE_SERVICES
        if services is not None:
            services.clean(self.data, self.mdt, self.settings.writer_config)
        self._maybe_compact()
        if services is not None:
            services.archive(self.data, self.mdt, self.settings.writer_config)

    def _commit_records(self, md: HoodieCommitMetadata) -> dict[str, list[MetadataRecord]]:
        """files (+ the partition list), and the column and partition stats of the new files (notes §4.2)."""
        new_files: dict[str, dict[str, int]] = {}
        for stat in md.write_stats():
            for path in [stat.path, *(stat.logFiles or [])]:
                if path:
                    new_files.setdefault(stat.partitionPath, {})[path.rsplit("/", 1)[-1]] = stat.fileSizeInBytes
        out: dict[str, list[MetadataRecord]] = {FILES: [partition_list_record(new_files)]}
        out[FILES] += [files_record(p, files) for p, files in sorted(new_files.items())]
        if BLOOM_FILTERS in self.settings.partitions:
            out[BLOOM_FILTERS] = self.bloom_records({p: list(files) for p, files in new_files.items()})
        if COLUMN_STATS not in self.settings.partitions:
            return out
        stats = self.stats_of(new_files)
        out[COLUMN_STATS] = [column_stats_record(p, s) for p, lst in stats.items() for s in lst]
        if PARTITION_STATS in self.settings.partitions:
            out[PARTITION_STATS] = self._partition_stats_after(md, new_files, stats)
        return out

    def _partition_stats_after(self, md: HoodieCommitMetadata, new_files: dict[str, dict[str, int]],
                               new_stats: dict[str, list[ColumnStats]]) -> list[MetadataRecord]:
        """Per touched partition, the stats over its latest slices once this commit lands: the slices the table
        has now (replaced file groups included while the replace is inflight, as Java computes them) with this
        commit's base files starting new slices and its log files joining theirs."""
        view = FileSystemView(self.data, partitions=sorted(new_files))
        known = stats_by_file(HoodieTableMetadata(self.data), list(new_files))
        out = []
        for partition, files in sorted(new_files.items()):
            slices = slice_files(view, partition)
            for name in files:
                parsed = parse_base_file_name(name)
                file_id = parsed.file_id if parsed else parse_log_file_name(name).file_id
                if parsed:
                    slices[file_id] = {name}
                else:
                    slices.setdefault(file_id, set()).add(name)
            names = {n for group in slices.values() for n in group}
            fresh = new_stats.get(partition, [])
            by_file = {**known.get(partition, {}), **group_by_file(fresh)}
            columns = {s.column_name for s in fresh}
            parts = []
            for name in sorted(names):
                indexed = {s.column_name for s in by_file.get(name, [])}
                if not columns <= indexed:  # a file indexed before, on fewer columns, or not at all: read it now
                    by_file[name] = self.data_file_stats(partition, name)
                parts += by_file[name]
            out += partition_stats_records(partition, parts)
        return out

    def _rollback_records(self, record: dict) -> dict[str, list[MetadataRecord]]:
        """Version 6: a data rollback's `files` change (Hudi 0.x's convertMetadataToRecords of a rollback): the
        files it deleted leave, the log files holding its rollback blocks and those the rolled-back write appended
        to are listed (their blocks are skipped by the rollback command)."""
        out: list[MetadataRecord] = []
        for partition, pm in sorted((record.get("partitionMetadata") or {}).items()):
            entries = {path.rsplit("/", 1)[-1]: FileInfo(size)
                       for key in ("logFilesFromFailedCommit", "rollbackLogFiles")
                       for path, size in (pm.get(key) or {}).items()}
            entries.update((f.rsplit("/", 1)[-1], FileInfo(0, True)) for f in pm.get("successDeleteFiles") or [])
            if entries:
                out.append(MetadataRecord(mdt_partition_name(partition), MetadataRecordType.FILE_LIST,
                                          FileListing(entries)))
        return {FILES: out}

    def _clean_records(self, record: dict, instant: str) -> dict[str, list[MetadataRecord]]:
        """Deleted files leave the listing (isDeleted entries), their column stats and bloom filters (tombstones)."""
        deleted: dict[str, list[str]] = {}
        for partition, pm in (record.get("partitionMetadata") or {}).items():
            names = [f.rsplit("/", 1)[-1] for f in pm.get("successDeleteFiles") or []]
            if names:
                deleted[partition] = names
        out: dict[str, list[MetadataRecord]] = {
            FILES: [MetadataRecord(mdt_partition_name(p), MetadataRecordType.FILE_LIST,
                                   FileListing({n: FileInfo(0, True) for n in names}))
                    for p, names in sorted(deleted.items())]}
        if BLOOM_FILTERS in self.settings.partitions and deleted:
            out[BLOOM_FILTERS] = [bloom_filter_tombstone(p, n, instant) for p, names in sorted(deleted.items())
                                  for n in sorted(names) if parse_base_file_name(n) is not None]
        if COLUMN_STATS in self.settings.partitions and deleted:
            known = stats_by_file(HoodieTableMetadata(self.data), list(deleted))
            out[COLUMN_STATS] = [column_stats_record(p, tombstone(s)) for p, names in deleted.items()
                                 for n in names for s in known.get(p, {}).get(n, [])]
        return out

    def deltacommit(self, instant: str, records: dict[str, list[MetadataRecord]],
                    shard_writes: list[ShardWrite] = ()) -> None:
        """The MDT deltacommit `instant`: one new log file per touched file group (notes §2.4, §2.5); index
        shards get their upserts as an HFILE_DATA_BLOCK followed by their deletes as a DELETE_BLOCK."""
        timeline = self.mdt.active_timeline
        inflight = timeline.transition_to_inflight(timeline.create_requested(Action.DELTA_COMMIT, instant))
        written: list[_Written] = []
        for partition in MAINTAINED:
            if not records.get(partition) or partition not in self.settings.partitions:
                continue
            latest = self._latest_files(partition)
            groups = sorted(latest)  # in index order: the key hash picks among them
            for fg, group_records in zip(groups, by_file_group(records[partition], len(groups))):
                if group_records:
                    base, version, token = latest[fg]
                    written.append(self._write_log_file(partition, fg, instant, group_records, len(written),
                                                        (base, version + 1, token) if self.v6 else None))
        latest_of: dict[str, dict] = {}
        for w in shard_writes:
            if w.partition not in latest_of:
                latest_of[w.partition] = self._latest_files(w.partition)
            latest = latest_of[w.partition]
            fg = sorted(latest)[w.shard]
            base, version, token = latest[fg]
            blocks = []
            if w.cells:
                blocks.append(HFileDataBlock.from_hfile(write_cells(w.cells, self.schema, base_file=False,
                                                                    create_time_ms=int(time.time() * 1000)),
                                                        self.schema, instant))
            if len(w.deletes):
                blocks.append(delete_block(w.deletes, instant, w.partition))
            written.append(self._write_log_blocks(w.partition, fg, instant, blocks, len(w.cells) + len(w.deletes),
                                                  len(written), (base, version + 1, token) if self.v6 else None))
        metadata = self._commit_metadata(written, instant, UPSERT_PREPPED, base_files=False)
        crash_point("metadata.before_commit")
        timeline.transition_to_complete(inflight, metadata.to_bytes(self.version))
        crash_point("metadata.after_commit")
        log.debug("metadata table of %s: deltacommit %s wrote %d log files", self.data.base_path, instant,
                  len(written))

    def _write_log_file(self, partition: str, fg: str, instant: str, records: list[MetadataRecord],
                        ordinal: int, v6_next: tuple[str, int, str | None] | None = None) -> _Written:
        """A new log file of `instant`'s block: v8+ named after `instant` (version 1); version 6 the next version
        of the latest slice, `v6_next` = (its base instant, the next version, the latest log's token)."""
        block = HFileDataBlock.from_hfile(write_records(records, self.schema, base_file=False,
                                                        create_time_ms=int(time.time() * 1000)),
                                          self.schema, instant)
        return self._write_log_blocks(partition, fg, instant, [block], len(records), ordinal, v6_next)

    def _write_log_blocks(self, partition: str, fg: str, instant: str, blocks: list, count: int, ordinal: int,
                          v6_next: tuple[str, int, str | None] | None = None) -> _Written:
        base_instant, version, token = v6_next or (instant, 1, None)
        new = create_new_log_file(self.storage, f"{self.base_path}/{partition}", fg, base_instant, version,
                                  token or make_write_token(ordinal, 0, ordinal), blocks)
        return _Written(partition, fg, new.name, new.size, count)

    def _latest_files(self, partition: str) -> dict[str, tuple[str, int, str | None]]:
        """File id -> (base instant of its latest slice, its latest log version there (0: none), that log's write
        token) of an MDT partition, from one listing: its file groups, and where a version 6 deltacommit writes
        (Hudi 1.x: the next version, with the latest log's token)."""
        latest: dict[str, tuple[str, int, str | None]] = {}
        for info in self.storage.list_dir(f"{self.base_path}/{partition}"):
            base, log_name = parse_base_file_name(info.name), parse_log_file_name(info.name)
            if base is not None:
                fg, entry = base.file_id, (base.instant_time, 0, None)
            elif log_name is not None:
                fg, entry = log_name.file_id, (log_name.instant_time, log_name.version, log_name.write_token)
            else:
                continue
            known = latest.get(fg)
            if known is None or entry[:2] > known[:2]:
                latest[fg] = entry
        return latest

    # -- rollback ------------------------------------------------------------------------------------

    def instant_files(self, instant: str) -> dict[str, list[str]]:
        """MDT partition -> paths of the files MDT instant `instant` wrote (v8+: its name is in theirs; version
        6: base files by name, log files by their blocks' INSTANT_TIME, as they are named after their slice)."""
        out: dict[str, list[str]] = {}
        for partition in enabled_partitions(self.data):
            directory = f"{self.base_path}/{partition}"
            if not self.storage.is_dir(directory):
                continue
            for info in self.storage.list_dir(directory):
                log_name = parse_log_file_name(info.name)
                if log_name is not None and self.v6:
                    written = log_name.instant_time <= instant and _log_instant(self.storage, info.path) == instant
                else:
                    parsed = log_name or parse_base_file_name(info.name)
                    written = parsed is not None and parsed.instant_time == instant
                if written:
                    out.setdefault(partition, []).append(info.path)
        return out

    def discard(self, instant: str) -> None:
        """Remove MDT deltacommit `instant` whose data instant will never complete (an earlier attempt, or a write
        undone before publishing): its files, then its instant files."""
        if self.mdt.active_timeline.timeline.find(instant) is None:
            return
        for paths in self.instant_files(instant).values():
            for path in paths:
                self.storage.delete(path)
        self.delete_instant(instant)

    def delete_instant(self, instant: str) -> None:
        timeline = self.mdt.active_timeline
        for i in [i for i in timeline.all_files() if i.timestamp == instant]:
            timeline.delete_instant_file(i)

    def rollback(self, target: str, rollback_time: str) -> None:
        """The MDT side of the data rollback `rollback_time` of `target`: an MDT rollback with the same time
        deleting the log files MDT deltacommit `target` wrote, then `target` leaves the MDT timeline (§4.7). When
        an MDT compaction may already hold those records, the MDT is removed instead (the next writer with it
        enabled builds it again): a listing never shows a rolled-back file."""
        found = self.mdt.active_timeline.timeline.find(target)
        if found is None:
            return
        if self._compacted(target):
            drop_metadata_table(self.data, f"rollback of {target} (already compacted into the metadata table)")
            return
        files = self.instant_files(target)
        requests = [RollbackRequest(p, "", target, paths) for p, paths in sorted(files.items())]
        target_instant = HoodieInstant(found.state, found.action, target)
        timeline = self.mdt.active_timeline
        started = time.time()
        requested = timeline.create_requested(Action.ROLLBACK, rollback_time, write_avro_container(
            HOODIE_ROLLBACK_PLAN, rollback_plan_record(target_instant, requests)))
        inflight = timeline.transition_to_inflight(requested)
        deleted = {p: [path for path in paths if self.storage.delete(path) or not self.storage.exists(path)]
                   for p, paths in files.items()}
        record = rollback_metadata_record(rollback_time, int((time.time() - started) * 1000), target_instant,
                                          deleted, {})
        timeline.transition_to_complete(inflight, write_avro_container(HOODIE_ROLLBACK_METADATA, record))
        self.delete_instant(target)
        log.info("metadata table of %s: rolled back %s (%d files)", self.data.base_path, target,
                 sum(map(len, deleted.values())))

    def _compacted(self, target: str) -> bool:
        """Did a completed MDT compaction merge log files of deltacommit `target` into base files (its plan names
        them; version 6: any later compaction, Hudi 0.x's validateRollback)?"""
        if self.v6:
            return any(i.timestamp > target for i in self.mdt.timeline.completed().of_actions([Action.COMMIT]))
        timeline = self.mdt.active_timeline
        marker = f"_{target}.log."
        for instant in self.mdt.timeline.completed().of_actions([Action.COMMIT]):
            if instant.timestamp < target:
                continue
            plan = read_avro_container(timeline.read_bytes(timeline.requested_of(instant)))
            if any(marker in path for op in plan.get("operations") or [] for path in op.get("deltaFilePaths") or []):
                return True
        return False

    # -- restore -------------------------------------------------------------------------------------

    def restore(self, restore_time: str) -> None:
        """The MDT side of data restore `restore_time` (storage.metadata.metadata_restore)."""
        MetadataTableRestore(self).restore(restore_time)

    def rebuild(self, reason: str) -> None:
        """Remove the MDT and initialise it again from the data table as it stands (Hudi deletes it and the
        next writer with it enabled initialises it)."""
        log.warning("metadata table of %s is rebuilt from the data table (%s)", self.data.base_path, reason)
        self._list_partitions(())  # readers stop using it first
        self.storage.delete_dir(self.base_path)
        MetadataWriter(self.data, self.settings).ensure_partitions()

    # -- compaction ----------------------------------------------------------------------------------

    def _maybe_compact(self) -> None:
        """Compact every MDT file group once `max_delta_commits` deltacommits completed since the last MDT
        compaction; run before the next deltacommit, so that one's log files fall in the new slices."""
        completed = self.mdt.timeline.completed()
        last = completed.of_actions([Action.COMMIT]).last()
        since = [i for i in completed.of_actions([Action.DELTA_COMMIT])
                 if last is None or i.timestamp > last.timestamp]
        if len(since) >= self.settings.max_delta_commits:
            self.compact()

    def compact(self) -> str | None:
        """An MDT compaction at a fresh instant (version 6: `v6_service_instant`): per file group, the merged
        records of its latest slice (the log blocks of valid instants only) in a new base HFile (notes §4.5)."""
        reader = HoodieTableMetadata(self.data)
        timeline = self.mdt.active_timeline
        instant = v6_service_instant(self.mdt, V6_COMPACTION_SUFFIX) if self.v6 else timeline.new_instant_time()
        if instant is None:
            return None
        plan_ops, outputs = [], []
        for partition in self.settings.partitions:
            for file_slice in reader.file_slices(partition):
                logs = [lf.name for lf in file_slice.sorted_log_files() if lf.instant_time in reader.valid]
                plan_ops.append({"baseInstantTime": file_slice.base_instant, "deltaFilePaths": logs,
                                 "dataFilePath": file_slice.base_file.name if file_slice.base_file else None,
                                 "fileId": file_slice.file_id, "partitionPath": partition, "metrics": {},
                                 "bootstrapFilePath": None})
                outputs.append((partition, file_slice))
        plan = {"operations": plan_ops, "extraMetadata": None, "version": 1, "strategy": None,
                "preserveHoodieMetadata": None, "missingSchedulePartitions": None}
        requested = timeline.create_requested(Action.COMPACTION, instant,
                                              write_avro_container(HOODIE_COMPACTION_PLAN, plan))
        inflight = timeline.transition_to_inflight(requested)
        written = []
        for partition, file_slice in outputs:
            records = [r for r in map(for_base_file, reader.slice_records(file_slice).values()) if r is not None]
            written.append(self._write_base_file(partition, file_slice.file_id, instant, records, len(written)))
        metadata = self._commit_metadata(written, instant, COMPACT, base_files=True)
        timeline.transition_to_complete(inflight, metadata.to_bytes(self.version))
        log.info("metadata table of %s: compacted %d file groups at %s", self.data.base_path, len(written), instant)
        return instant


def v6_service_instant(mdt: HoodieTableMetaClient, suffix: str) -> str | None:
    """Version 6: the instant of an MDT compaction (001) or clean (002) - the latest completed MDT deltacommit plus
    `suffix` (Hudi 0.x's createCompactionTimestamp / createCleanTimestamp); None when that instant is taken (the
    service already ran after that deltacommit)."""
    latest = mdt.timeline.completed().of_actions([Action.DELTA_COMMIT]).last()
    instant = (latest.timestamp if latest else INIT_INSTANT_PREFIX) + suffix
    return None if mdt.active_timeline.timeline.find(instant) is not None else instant


def _log_instant(storage, path: str) -> str | None:
    """The instant that wrote log file `path` (its first block's INSTANT_TIME header; None when unreadable)."""
    try:
        with HoodieLogFileReader(path, storage=storage) as reader:
            return next((b.instant_time for b in reader), None)
    except (OSError, HoodieCorruptedLogError):
        return None


__all__ = ["MetadataWriteSettings", "MetadataWriter", "V6_CLEAN_SUFFIX", "commit_schema", "v6_service_instant",
           "drop_metadata_partitions",
           "discard_metadata_deltacommit", "on_pre_complete",
           "prepare_metadata_table", "record_schema"]


# Installed when the module loads (every process that writes or runs a service imports it): tables nobody here
# prepared still get the protection of `on_pre_complete`.
_install_hook()
