"""Hive sync as Apache Hudi's `HiveSyncTool` does it: make the metastore describe the table.

A COW table is synced as one table `<t>`; a MOR table as `<t>_ro` (read-optimized: base files only) and `<t>_rt`
(realtime: base + log files); `hoodie.datasource.hive_sync.skip_ro_suffix` names the read-optimized one `<t>`.
Per synced table, in Hudi's order:

1. the database is created if missing (`auto_create_database`);
2. schema: a missing table is created (columns = meta columns + data columns, partition keys, Hudi's
   storage descriptor, serde properties `path` / `hoodie.query.as.ro.table`, Spark data source properties);
   an existing one gets added columns and allowed type widenings (cascaded to its partitions);
3. partitions: those written since `last_commit_time_sync` (all of them, by listing, on the first sync, when
   that instant was archived, or with `full=True`) are added, moved (new location) or dropped (no live file
   group any more, e.g. after delete_partition);
4. `last_commit_time_sync` is set to the latest completed write instant, last, so a sync that failed half-way
   is redone from the same point next time.

Post-commit: `install_commit_hook()` registers `hive_sync_on_commit` with storage's commit callbacks. It syncs
when `hoodie.datasource.hive_sync.enable` says so, defaulting to on once a metastore is in use in this process
(`use_metastore(uri)`, called by `sqlext.session()`). A failed sync is logged, recorded (`sync_failures()`,
`last_sync_report()`) and re-raised into the write client's `callback_failures`; the commit stays.

A sync never changes what a catalog name means silently: an entry of the name that is not a Hudi table, or a
Hudi table registered at another location, is left as it is (`catalog_conflict`; `CatalogTableConflictError`),
unless `sqlext.catalog.relocate.table=true` asks to re-register it at the synced table's location.
`check_write_target` refuses such a DataFrame write before it writes anything (sqlext.datasource.routing).
"""
from __future__ import annotations

import logging
import threading
import time
from dataclasses import dataclass, field
from typing import Mapping

from hmsclient.genthrift.hive_metastore.ttypes import Database, Table

from catalog.hive_schema_util import (
    HiveColumn,
    schema_difference,
    spark_schema,
    spark_serde_properties,
    spark_table_properties,
    hive_columns,
    table_schema,
)
from catalog.hms_ddl import (
    HOODIE_INPUT_FORMAT,
    HOODIE_REALTIME_INPUT_FORMAT,
    LAST_COMMIT_TIME_SYNC,
    field_schemas,
    is_hudi_table as is_hudi_entry,
    local_path,
    location_uri,
    new_partition,
    new_table,
    partition_location,
)
from catalog.hive_sync_config import CatalogTableConflictError, HiveSyncConfig, HiveSyncError, sync_target
from catalog.metastore_client import MetastoreClient, MetastoreUnavailableError
from catalog.metastore_resolution import configured_metastore_uri
from catalog.partition_value_extractor import extractor_for
from storage.config import HiveSyncConfigKeys as HK, HoodieConfig, WriteConfigKeys as WK
from storage.io.storage import HoodieStorage
from storage.io.storage_location import normalize_base_path
from storage.io.storage_options import session_storage_options
from storage.table.fs_view import FileSystemView
from storage.table.meta_client import HoodieTableMetaClient

log = logging.getLogger(__name__)

SUFFIX_READ_OPTIMIZED = "_ro"
SUFFIX_SNAPSHOT = "_rt"
CALLBACK_NAME = "hive_sync"
LAST_COMMIT_COMPLETION_TIME_SYNC = "last_commit_completion_time_sync"


def synced_table_names(table: str, is_mor: bool, skip_ro_suffix: bool = False) -> list[tuple[str, bool, bool]]:
    """[(metastore table name, realtime input format, read as optimized)] in Hudi's sync order."""
    if not is_mor:
        return [(table, False, False)]
    ro = table if skip_ro_suffix else table + SUFFIX_READ_OPTIMIZED
    return [(ro, False, True), (table + SUFFIX_SNAPSHOT, True, False)]


# ----------------------------------------------------------------------------------------------
# Results
# ----------------------------------------------------------------------------------------------
@dataclass
class TableSyncResult:
    table: str                    # db.name in the metastore
    created: bool = False
    schema_changed: bool = False
    added_columns: list[str] = field(default_factory=list)
    updated_columns: list[str] = field(default_factory=list)
    added_partitions: list[str] = field(default_factory=list)
    updated_partitions: list[str] = field(default_factory=list)
    dropped_partitions: list[str] = field(default_factory=list)
    last_commit_time_sync: str | None = None
    full_listing: bool = False


@dataclass
class SyncReport:
    """The outcome of one sync of one Hudi table (kept per base path, see `last_sync_report`)."""

    base_path: str
    metastore_uri: str
    instant_time: str | None
    ok: bool
    tables: list[TableSyncResult] = field(default_factory=list)
    error: str | None = None
    at: float = field(default_factory=time.time)


_REPORTS: dict[str, SyncReport] = {}
_REPORTS_LOCK = threading.Lock()


def _record(report: SyncReport) -> None:
    with _REPORTS_LOCK:
        _REPORTS[report.base_path] = report


def last_sync_report(base_path: str) -> SyncReport | None:
    from storage.io.storage_location import normalize_base_path

    with _REPORTS_LOCK:
        return _REPORTS.get(normalize_base_path(base_path))


def sync_failures() -> list[SyncReport]:
    """Tables whose latest sync in this process failed (cleared by a later successful sync)."""
    with _REPORTS_LOCK:
        return [r for r in _REPORTS.values() if not r.ok]


# ----------------------------------------------------------------------------------------------
# The tool
# ----------------------------------------------------------------------------------------------
class HiveSyncTool:
    def __init__(self, config: HiveSyncConfig, client: MetastoreClient, meta: HoodieTableMetaClient | None = None):
        self.config = config
        self.client = client
        self.meta = meta or HoodieTableMetaClient.load(config.base_path)
        self.location = location_uri(self.meta.base_path)
        tc = self.meta.table_config
        self.extract = extractor_for(config.partition_extractor_class, bool(config.partition_fields),
                                     tc.url_encode_partitioning)

    def sync(self, full: bool = False) -> list[TableSyncResult]:
        names = synced_table_names(self.config.table, self.meta.table_config.is_mor, self.config.skip_ro_suffix)
        self._ensure_database()
        arrow = table_schema(self.meta)
        if arrow is None:
            raise HiveSyncError(f"cannot sync {self.meta.base_path}: the table has no schema yet")
        # a table without meta fields (hoodie.populate.meta.fields=false) is synced without them, as Hudi does
        omit_meta = self.config.omit_metadata_fields or not self.meta.table_config.populate_meta_fields
        struct = spark_schema(arrow, self.config.partition_fields, omit_meta=omit_meta)
        columns, partition_columns = hive_columns(struct, self.config.partition_fields, self.config.support_timestamp)
        return [self._sync_one(name, realtime, ro, struct, columns, partition_columns, full)
                for name, realtime, ro in names]

    # -- database ---------------------------------------------------------------------------------
    def _ensure_database(self) -> None:
        db = self.config.database
        if self.client.get_database(db) is not None:
            return
        if not self.config.auto_create_database:
            raise HiveSyncError(f"hive database {db} does not exist ({HK.AUTO_CREATE_DATABASE.key}=false) at "
                                f"{self.client.uri}")
        self.client.create_database(Database(name=db, description="", parameters={}), if_not_exists=True)

    # -- one metastore table ----------------------------------------------------------------------
    def _sync_one(self, name: str, realtime: bool, read_optimized: bool, struct, columns: list[HiveColumn],
                  partition_columns: list[HiveColumn], full: bool) -> TableSyncResult:
        db = self.config.database
        result = TableSyncResult(f"{db}.{name}")
        table_props = dict(self.config.table_properties)
        serde_props = dict(self.config.serde_properties)
        if self.config.sync_as_datasource:
            by_lower = {f.name.lower(): f.name for f in struct.fields}
            part_names = [by_lower.get(p.lower(), p) for p in self.config.partition_fields]
            table_props.update(spark_table_properties(struct, part_names, self.config.schema_string_length_threshold,
                                                      self.config.spark_version))
            serde_props.update(spark_serde_properties(read_optimized, self.location))
        table = self.client.get_table(db, name)
        if table is None:
            input_format = HOODIE_REALTIME_INPUT_FORMAT if realtime else HOODIE_INPUT_FORMAT
            table = new_table(db, name, columns, partition_columns, self.location, input_format, serde_props,
                              table_props, managed=self.config.create_managed_table)
            self.client.create_table(table)
            table = self.client.get_table(db, name) or table
            result.created = result.schema_changed = True
            log.info("hive sync: created %s.%s for %s", db, name, self.meta.base_path)
        else:
            problem = catalog_conflict(table, self.meta.base_path, self.config.relocate_table)
            if problem:
                # the write's pre-check (check_write_target) refuses this before writing; a write that did not
                # run it (the storage API) still never re-points or replaces a catalog name silently
                raise CatalogTableConflictError(f"hive sync of {self.meta.base_path} to {self.client.uri} left "
                                                f"{db}.{name} as it was: {problem}")
            table = self._sync_schema(table, columns, table_props, serde_props, result)
        last_synced = None if result.created else (table.parameters or {}).get(LAST_COMMIT_TIME_SYNC)
        partitions_changed = self._sync_partitions(table, last_synced, full, result)
        latest = self.meta.timeline.completed().write_timeline().last()
        if latest is not None and (not self.config.conditional_sync or result.schema_changed or partitions_changed):
            if (table.parameters or {}).get(LAST_COMMIT_TIME_SYNC) == latest.timestamp:
                result.last_commit_time_sync = latest.timestamp
                return result
            table = self.client.get_table(db, name) or table
            params = {LAST_COMMIT_TIME_SYNC: latest.timestamp}
            if getattr(latest, "completion_time", None):  # table version 8: Hudi 1.x records it too
                params[LAST_COMMIT_COMPLETION_TIME_SYNC] = latest.completion_time
            table.parameters = {**(table.parameters or {}), **params}
            self.client.alter_table(db, name, table)
            result.last_commit_time_sync = latest.timestamp
        return result

    def _sync_schema(self, table: Table, columns: list[HiveColumn], table_props: dict[str, str],
                     serde_props: dict[str, str], result: TableSyncResult) -> Table:
        current = [HiveColumn(c.name, c.type) for c in (table.sd.cols or [])]
        diff = schema_difference(f"{table.dbName}.{table.tableName}", columns, current)
        changed_cols = not diff.is_empty()
        if changed_cols:
            table.sd.cols = field_schemas(columns)
            result.schema_changed = True
            result.added_columns = [c.name for c in diff.added]
            result.updated_columns = [c.name for c, _ in diff.updated]
            log.info("hive sync: schema of %s.%s changed (added %s, widened %s, removed %s)", table.dbName,
                     table.tableName, result.added_columns, result.updated_columns, diff.deleted)
        params = table.parameters or {}
        serde = table.sd.serdeInfo.parameters or {}
        props_changed = any(params.get(k) != v for k, v in table_props.items())
        serde_changed = any(serde.get(k) != v for k, v in serde_props.items())
        location_changed = local_path(table.sd.location) != local_path(self.location)
        if props_changed or serde_changed or location_changed or changed_cols:
            table.parameters = {**params, **table_props}
            table.sd.serdeInfo.parameters = {**serde, **serde_props}
            table.sd.location = self.location if location_changed else table.sd.location
            # cascade: Hive readers use each partition's own column list
            self.client.alter_table(table.dbName, table.tableName, table, cascade=changed_cols and bool(table.partitionKeys))
            table = self.client.get_table(table.dbName, table.tableName) or table
        return table

    # -- partitions -------------------------------------------------------------------------------
    def _sync_partitions(self, table: Table, last_synced: str | None, full: bool, result: TableSyncResult) -> bool:
        if not table.partitionKeys:
            return False
        full = full or self._needs_full_listing(last_synced)
        result.full_listing = full
        touched = None if full else self._written_partitions_since(last_synced)
        if touched is not None and not touched:
            return False
        live = self._live_partitions(touched)
        hive = {tuple(p.values): p for p in self.client.get_partitions(table.dbName, table.tableName)}
        wanted = {}
        for path in live:
            values = self.extract(path)
            if len(values) != len(table.partitionKeys):
                raise HiveSyncError(f"partition path {path!r} of {self.meta.base_path} gives values {values} for "
                                    f"{len(table.partitionKeys)} partition columns of {table.dbName}.{table.tableName}")
            wanted[tuple(values)] = path
        add, update = [], []
        for values, path in sorted(wanted.items()):
            loc = partition_location(self.location, path)
            existing = hive.get(values)
            if existing is None:
                add.append(new_partition(table, list(values), loc))
                result.added_partitions.append(path)
            elif local_path(existing.sd.location) != local_path(loc):
                existing.sd.location = loc
                update.append(existing)
                result.updated_partitions.append(path)
        if full:
            candidates = [v for v in hive if v not in wanted]
        else:
            gone = [p for p in touched if p not in live]
            candidates = [tuple(self.extract(p)) for p in gone]
            candidates = [v for v in candidates if v in hive]
        self.client.add_partitions(add)
        self.client.alter_partitions(table.dbName, table.tableName, update)
        for values in candidates:
            self.client.drop_partition(table.dbName, table.tableName, list(values), False)
            result.dropped_partitions.append("/".join(f"{k.name}={v}" for k, v in zip(table.partitionKeys, values)))
        if add or update or candidates:
            log.info("hive sync: %s.%s partitions +%d ~%d -%d", table.dbName, table.tableName, len(add), len(update),
                     len(candidates))
        return bool(add or update or candidates)

    def _needs_full_listing(self, last_synced: str | None) -> bool:
        if last_synced is None:
            return True
        first = self.meta.timeline.completed().write_timeline().first()
        # the instants after the last sync were archived: their partitions can only be found by listing
        return first is not None and last_synced < first.timestamp and not self._timeline_contains(last_synced)

    def _timeline_contains(self, ts: str) -> bool:
        return self.meta.timeline.contains_timestamp(ts)

    def _written_partitions_since(self, last_synced: str) -> list[str]:
        """Partitions written or replaced by completed instants after `last_synced` (commit metadata)."""
        timeline = self.meta.active_timeline
        touched: set[str] = set()
        for instant in self.meta.timeline.completed().write_timeline():
            if instant.timestamp <= last_synced:
                continue
            md = timeline.commit_metadata(instant)
            touched |= set(md.partitionToWriteStats)
            touched |= set(md.partitionToReplaceFileIds or {})
        return sorted(p for p in touched if p)

    def _live_partitions(self, partitions: list[str] | None) -> list[str]:
        """Partitions (of `partitions`, or all) that hold at least one live file slice."""
        view = FileSystemView(self.meta, partitions=partitions)
        return sorted({s.partition_path for s in view.latest_file_slices() if s.partition_path})


# ----------------------------------------------------------------------------------------------
# What a sync may do to a catalog name
# ----------------------------------------------------------------------------------------------
def catalog_conflict(entry: Table | None, base_path: str, relocate: bool) -> str | None:
    """Why syncing the Hudi table at `base_path` into the metastore entry `entry` would change what the entry's
    name means, and the ways out (None when it would not): the entry is not a Hudi table (the sync would replace
    it), or, unless `relocate` (sqlext.catalog.relocate.table), it is a Hudi table registered at another location
    (the sync would re-point the name: every query of it would read another table)."""
    if entry is None:
        return None
    name = f"{entry.dbName}.{entry.tableName}"
    other_name = (f"name this table otherwise ({WK.TABLE_NAME.key} or {HK.TABLE.key}) or do not sync it "
                  f"({HK.ENABLE.key}=false)")
    if not is_hudi_entry(entry):
        provider = (entry.parameters or {}).get("spark.sql.sources.provider") or entry.tableType
        return f"table {name} is a {provider} table, not a Hudi table, and the Hive sync would replace it: {other_name}"
    registered, location = local_path(entry.sd.location), local_path(location_uri(base_path))
    if relocate or registered == location:
        return None
    return (f"table {name} is registered at {registered} and the Hive sync would re-point it to {location}, so "
            f"every query of {name} would read another table: write to {registered}, {other_name}, or set "
            f"{HK.RELOCATE_TABLE.key}=true to re-register {name} at {location}")


def check_write_target(spark, base_path: str, options: Mapping[str, str]) -> None:
    """Before a write to `base_path` (a DataFrame write): refuse it, before anything is written, when the Hive
    sync after its commit would re-point or replace a catalog table (`catalog_conflict`). Nothing is checked when
    the write does not sync or names no table; a metastore that cannot be reached only warns (the sync after the
    commit refuses the same conflicts, and reports the metastore)."""
    location = normalize_base_path(base_path)
    options = {**_session_sync_options(), **(options or {})}
    target = _write_sync_target(spark, location, options)
    if target is None:
        return
    uri, db, names = target
    relocate = bool(HoodieConfig.of(options).get(HK.RELOCATE_TABLE))
    try:
        client = _HOOK.client(uri)
        entries = [client.get_table(db, name) for name in names]
    except MetastoreUnavailableError as exc:
        log.warning("the catalog names of %s were not checked before writing: %s", location, exc)
        return
    for entry in entries:
        problem = catalog_conflict(entry, location, relocate)
        if problem:
            raise CatalogTableConflictError(f"cannot write to {location} (nothing was written; metastore {uri}): "
                                            f"{problem}")


def _write_sync_target(spark, location: str, options: Mapping[str, str]) -> tuple[str, str, list[str]] | None:
    """(metastore URI, database, metastore table names) the sync after a write to `location` would write to, as
    `hive_sync_on_commit` and `HiveSyncConfig.of` will name them; None when that write would not sync."""
    if not sync_enabled(options):
        return None
    uri = _sync_uri(options)
    table = _written_table(spark, location, options)
    if not uri or table is None:
        return None
    name, database, is_mor = table
    cfg = HoodieConfig.of(options)
    named_db, named_table = _sync_names(location, cfg)
    db, name = sync_target(cfg, name, database, database=named_db, table=named_table)
    names = [n for n, _, _ in synced_table_names(name, is_mor, bool(cfg.get(HK.SKIP_RO_SUFFIX)))]
    return uri, db, names


def _written_table(spark, location: str, options: Mapping[str, str]) -> tuple[str, str | None, bool] | None:
    """(name, database, merge-on-read) of the table a write to `location` goes to: its hoodie.properties when it
    exists, the write options for the table the write creates (None without a name: the write refuses that)."""
    from storage.write.table_settings import MERGE_ON_READ, parse_table_type

    storage = HoodieStorage.for_path(location, session_storage_options(spark, HoodieConfig.of(options)))
    if HoodieTableMetaClient.exists(location, storage):
        tc = HoodieTableMetaClient.load(location, storage).table_config
        return tc.name, tc.database_name, tc.is_mor
    cfg = HoodieConfig.of(options)
    name = cfg.get(WK.TABLE_NAME)
    return (name, None, parse_table_type(cfg.get(WK.TABLE_TYPE)) == MERGE_ON_READ) if name else None


# ----------------------------------------------------------------------------------------------
# Entry points
# ----------------------------------------------------------------------------------------------
def sync_table(base_path: str, metastore_uri: str | None = None, options: Mapping[str, str] | None = None, *,
               database: str | None = None, table: str | None = None, full: bool = False,
               client: MetastoreClient | None = None, instant_time: str | None = None) -> SyncReport:
    """Sync one Hudi table now (what `CALL hive_sync(table => ...)` runs, with full=True). Raises
    `HiveSyncError` (recorded in `sync_failures()`) when it fails; returns the report otherwise."""
    meta = HoodieTableMetaClient.load(base_path)
    uri = metastore_uri or HoodieConfig.of(options).get(HK.METASTORE_URIS) or _HOOK.default_uri
    if not uri:
        raise HiveSyncError(f"no metastore to sync {meta.base_path} to: set {HK.METASTORE_URIS.key}")
    report = SyncReport(meta.base_path, uri, instant_time, ok=False)
    own_client = client is None
    client = client or MetastoreClient(uri)
    try:
        config = HiveSyncConfig.of(base_path, uri, meta, options, database=database, table=table)
        report.tables = HiveSyncTool(config, client, meta).sync(full=full)
        report.ok = True
        return report
    except Exception as exc:
        report.error = f"{type(exc).__name__}: {exc}"
        log.warning("hive sync of %s to %s failed: %s", meta.base_path, uri, report.error)
        if isinstance(exc, HiveSyncError):
            raise
        raise HiveSyncError(f"hive sync of table at {meta.base_path} to metastore {uri} failed: {exc}") from exc
    finally:
        _record(report)
        if own_client:
            client.close()


class _CommitHook:
    """Process-wide state of the post-commit sync: the metastore in use and the catalog names of tables."""

    def __init__(self) -> None:
        self.default_uri: str | None = None
        self._names: dict[str, tuple[str, str]] = {}
        self._clients: dict[str, MetastoreClient] = {}
        self._lock = threading.Lock()

    def client(self, uri: str) -> MetastoreClient:
        with self._lock:
            if uri not in self._clients:
                # no reviver: a sync inside a commit never starts a metastore; CALL hive_sync repairs later
                self._clients[uri] = MetastoreClient(uri, connect_timeout_s=3.0)
            return self._clients[uri]

    def remember(self, base_path: str, db: str, name: str) -> None:
        self._names[base_path] = (db, name)

    def forget(self, base_path: str) -> None:
        self._names.pop(base_path, None)

    def catalog_name(self, base_path: str) -> tuple[str, str] | None:
        return self._names.get(base_path)


_HOOK = _CommitHook()


def use_metastore(uri: str | None) -> None:
    """Declare the metastore in use in this process (turns post-commit sync on by default); None: none."""
    _HOOK.default_uri = uri
    install_commit_hook()


def metastore_in_use() -> str | None:
    return _HOOK.default_uri


def remember_table_name(base_path: str, db: str, name: str) -> None:
    """The catalog name a table is known by (its sync target when the options name none)."""
    _HOOK.remember(base_path, db, name)


def forget_table_name(base_path: str) -> None:
    _HOOK.forget(base_path)


def install_commit_hook() -> None:
    from storage.write.commit_callback import register_commit_callback

    register_commit_callback(CALLBACK_NAME, hive_sync_on_commit)


def sync_enabled(options: Mapping[str, str]) -> bool:
    value = HoodieConfig.of(options).get(HK.ENABLE)
    return bool(value) if value is not None else _HOOK.default_uri is not None


def _session_sync_options() -> dict[str, str]:
    """`SET hoodie.datasource.hive_sync.*` values of the active Spark session (datasource writes do not
    carry session settings in their options)."""
    try:
        from pyspark.sql import SparkSession

        from storage.io.spark_conf import runtime_conf

        spark = SparkSession.getActiveSession()
        if spark is None:
            return {}
        return runtime_conf(spark, HK.PREFIXES)
    except Exception:
        return {}


def _sync_uri(options: Mapping[str, str]) -> str | None:
    return HoodieConfig.of(options).get(HK.METASTORE_URIS) or configured_metastore_uri(options) or _HOOK.default_uri


def _sync_names(base_path: str, cfg: HoodieConfig) -> tuple[str | None, str | None]:
    """(database, table) the sync of `base_path` is told: the hive_sync options, else the catalog name the table
    is known by in this process (None: the table's own, see `sync_target`)."""
    named = _HOOK.catalog_name(base_path) or (None, None)
    return cfg.get(HK.DATABASE) or named[0], cfg.get(HK.TABLE) or named[1]


def hive_sync_on_commit(event) -> None:
    """Commit callback (storage.write.commit_callback.CommitEvent)."""
    options = {**_session_sync_options(), **event.config.props}
    if not sync_enabled(options):
        return
    uri = _sync_uri(options)
    db, table = _sync_names(event.base_path, HoodieConfig.of(options))
    if not uri:
        report = SyncReport(event.base_path, "", event.instant_time, ok=False,
                            error=f"{HK.ENABLE.key}=true but no metastore URI is set")
        _record(report)
        raise HiveSyncError(f"hive sync of {event.base_path}: {report.error} ({HK.METASTORE_URIS.key})")
    started = time.monotonic()
    sync_table(event.base_path, uri, options, database=db, table=table, client=_HOOK.client(uri),
               instant_time=event.instant_time)
    log.debug("hive sync of %s at %s took %.2fs", event.base_path, event.instant_time, time.monotonic() - started)
