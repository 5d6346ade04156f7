"""`MetastoreResolver`: the SQL front end's `TableResolver` over a Hive Metastore (catalog/).

Names resolve through the metastore (`db.name` -> the table's location), so tables created in one session are
found by any other session, process or engine using the same metastore. CREATE TABLE registers the table
(catalog.hoodie_catalog_table), DROP TABLE removes the entry (and the `_ro`/`_rt` tables synced for it), ALTER
TABLE refreshes it from `hoodie.properties`, RENAME renames it. The `_ro` / `_rt` tables made by Hive sync
resolve to the same base path with the read-optimized / snapshot query type.
"""
from __future__ import annotations

import logging
import os
from typing import Callable

from catalog import hive_sync
from catalog.hms_ddl import is_hudi_table as is_hudi_entry, local_path
from catalog.hoodie_catalog_table import (
    read_optimized,
    refresh_table,
    register_table,
    rename_table,
    table_location,
    unregister_table,
)
from catalog.metastore_client import MetastoreClient
from sqlext.sql.resolver import (
    DEFAULT_DB,
    READ_OPTIMIZED,
    SNAPSHOT,
    DatabaseScope,
    HudiTableRef,
    resolve_path_form,
    TableName,
    is_hudi_table,
    is_mor_table,
)
from storage.io.storage_location import normalize_base_path

log = logging.getLogger(__name__)


class MetastoreResolver(DatabaseScope):
    def __init__(self, client: MetastoreClient, current_db: str | Callable[[], str] = DEFAULT_DB,
                 warehouse_dir: str | os.PathLike | None = None):
        super().__init__(current_db)
        self.client = client
        self.warehouse = normalize_base_path(warehouse_dir) if warehouse_dir else None

    # -- databases --------------------------------------------------------------------------------
    def database_exists(self, db: str) -> bool:
        return self.client.get_database(db.lower()) is not None

    def _db_dir(self, db: str) -> str:
        database = self.client.get_database(db)
        path = local_path(database.locationUri) if database is not None else None
        if path:
            return path
        if self.warehouse is None:
            raise ValueError(f"database {db} has no location and no warehouse directory is set")
        return self.warehouse if db == DEFAULT_DB else f"{self.warehouse}/{db}.db"

    # -- tables -----------------------------------------------------------------------------------
    def resolve(self, name: TableName) -> HudiTableRef | None:
        if name.path:
            return resolve_path_form(name)
        db = name.db or self.current_database
        entry = self.client.get_table(db, name.name)
        if entry is None or not is_hudi_entry(entry):
            return None
        path = table_location(entry)
        if not path or not is_hudi_table(path):
            log.warning("metastore table %s.%s has no Hudi table at %s", db, name.name, path)
            return None
        query_type, base_name = self._view_of(name.name, entry, path)
        hive_sync.remember_table_name(path, db, base_name)
        return HudiTableRef(name.name, db, path, query_type)

    def dangling_entry(self, name: TableName) -> HudiTableRef | None:
        """A Hudi entry whose files are gone (deleted outside SQL): DROP TABLE must still remove it, and Spark
        cannot (it has no `hudi` data source to resolve the entry with)."""
        if name.path:
            return None
        db = name.db or self.current_database
        entry = self.client.get_table(db, name.name)
        if entry is None or not is_hudi_entry(entry):
            return None
        path = table_location(entry) or ""
        return None if is_hudi_table(path) else HudiTableRef(name.name, db, path)

    @staticmethod
    def _view_of(name: str, entry, path: str) -> tuple[str | None, str]:
        """(query type, base table name) of a synced `_ro`/`_rt` table; (None, name) for a plain entry."""
        ro = read_optimized(entry)
        if ro is None or not is_mor_table(path):
            return None, name
        if ro:
            return READ_OPTIMIZED, name[:-3] if name.endswith("_ro") else name
        return SNAPSHOT, name[:-3] if name.endswith("_rt") else name

    def register(self, ref: HudiTableRef) -> None:
        if ref.db is None:
            return
        managed = ref.path == self.location_for(TableName(ref.name, ref.db)).path
        register_table(self.client, ref.db, ref.name, ref.path, managed=managed)
        hive_sync.remember_table_name(ref.path, ref.db, ref.name)

    def unregister(self, ref: HudiTableRef) -> None:
        if ref.db is None:
            return
        unregister_table(self.client, ref.db, ref.name, ref.path)
        hive_sync.forget_table_name(ref.path)

    def refresh(self, ref: HudiTableRef) -> None:
        if ref.db is not None:
            refresh_table(self.client, ref.db, ref.name, ref.path)

    def rename(self, ref: HudiTableRef, new_name: TableName) -> HudiTableRef:
        if ref.db is None:
            raise ValueError(f"cannot rename {ref.qualified_name}: a table named by its path has no catalog entry")
        new_db = (new_name.db or ref.db).lower()
        rename_table(self.client, ref.db, ref.name, new_db, new_name.name, ref.path)
        hive_sync.remember_table_name(ref.path, new_db, new_name.name)
        return HudiTableRef(new_name.name, new_db, ref.path)


def run_hive_sync(resolver, table: str, options: dict[str, str] | None = None, metastore_uri: str | None = None):
    """`CALL hive_sync(table => 'db.t')`: a full sync (listing every partition) of the named Hudi table into the
    metastore of `resolver` (or `metastore_uri`); returns catalog.hive_sync.SyncReport, raises HiveSyncError."""
    ref = resolver.resolve(TableName.parse(table))
    if ref is None:
        raise ValueError(f"hive_sync: table {table} is not a Hudi table or does not exist")
    uri = metastore_uri or (resolver.client.uri if isinstance(resolver, MetastoreResolver) else None)
    db, name = (ref.db, ref.name) if ref.db else (None, None)
    if ref.query_type is not None and name and name[-3:] in ("_ro", "_rt"):
        name = name[:-3]  # CALL hive_sync on a synced view syncs its table
    return hive_sync.sync_table(ref.path, uri, options, database=db, table=name, full=True)
