"""Catalog layer: where Hudi tables are registered (a Hive Metastore).

With nothing configured, the catalog uses an embedded metastore: the real HMS Thrift service
from the jars pyspark ships, started on demand per warehouse directory (Derby database and a
generated hive-site.xml under ``<warehouse>/.metastore``), listening on 127.0.0.1 only, reused by
later sessions while it runs and stopped by itself once unused. With ``hive.metastore.uris``
configured, that metastore is used and nothing is started.

Modules: metastore_client (the Thrift client), embedded_metastore (the warehouse's own metastore: reuse,
start, stop), metastore_launcher (its JVM: files, command line, process helpers), metastore_server (the
loopback server class), metastore_lifecycle (leases, idle stop), metastore_registry (this user's metastores),
metastore_resolution (configured or embedded).

Public API:
    start_metastore(warehouse=None, keep_alive=True, idle_timeout_s=None) -> uri
                                               start (or reuse) the embedded metastore of a warehouse; by
                                               default as a service that outlives this process
    stop_metastore(warehouse=None) -> bool     stop it (False when none ran)
    metastore_status(warehouse=None) -> dict   running, pid, port, uri, mode, idle_s, leases, log_file, ...
        (warehouse defaults to ./spark-warehouse, as sqlext.session(); `sqlext metastore start|stop|status`)
    embedded_metastores() -> [EmbeddedMetastore]   the running ones of this user on this machine, orphans
                                               (warehouse deleted: status() mode "orphan") included
    EmbeddedMetastore(warehouse_dir)    start(keep_alive=False) -> uri, release(), stop(), status() -> dict, uri
    resolve_metastore(conf, warehouse)  -> thrift URI (configured, or embedded started/reused)
    MetastoreClient(uri)                lazy, reconnecting wrapper over hmsclient.HMSClient
    MetastoreError, MetastoreUnavailableError, MetastoreStartError
    MetastoreWarehouseGoneError         a call after the embedded metastore's warehouse was deleted (it stops)
    ttypes                              the HMS thrift types (Table, Partition, StorageDescriptor, ...)

Table registration (catalog.hoodie_catalog_table): register_table / refresh_table / unregister_table /
rename_table(client, db, name, ...) build the metastore entry from the table's hoodie.properties and schema.

Locks (catalog.hive_metastore_lock_provider): importing catalog registers Hudi's HiveMetastoreBasedLockProvider
(`hoodie.write.lock.provider=org.apache.hudi.hive.transaction.lock.HiveMetastoreBasedLockProvider`).

Hive sync (catalog.hive_sync), as Apache Hudi's HiveSyncTool:
    sync_table(base_path, uri, options, database=, table=, full=False) -> SyncReport   (CALL hive_sync)
    use_metastore(uri)        post-commit sync on by default (hoodie.datasource.hive_sync.enable)
    last_sync_report(base_path), sync_failures()   what the last sync of a table did / which failed
    check_write_target(spark, base_path, options)  before a DataFrame write: CatalogTableConflictError when its
                              sync would re-point a table registered elsewhere or replace a non-Hudi table
                              (sqlext.catalog.relocate.table=true re-registers)
"""
from pathlib import Path
from hmsclient.genthrift.hive_metastore import ttypes

from catalog import hive_metastore_lock_provider  # noqa: F401 - registers Hudi's HiveMetastoreBasedLockProvider
from catalog.embedded_metastore import EmbeddedMetastore, embedded_metastores
from catalog.metastore_client import (
    MetastoreClient,
    MetastoreError,
    MetastoreStartError,
    MetastoreUnavailableError,
    MetastoreWarehouseGoneError,
    parse_metastore_uris,
)
from catalog.metastore_resolution import (
    URI_CONF_KEYS,
    configured_metastore_uri,
    default_warehouse,
    resolve_metastore,
)


def start_metastore(warehouse: str | Path | None = None, *, keep_alive: bool = True,
                    idle_timeout_s: int | None = None) -> str:
    return EmbeddedMetastore(warehouse or default_warehouse()).start(keep_alive=keep_alive,
                                                                     idle_timeout_s=idle_timeout_s)


def stop_metastore(warehouse: str | Path | None = None) -> bool:
    return EmbeddedMetastore(warehouse or default_warehouse()).stop()


def metastore_status(warehouse: str | Path | None = None) -> dict:
    return EmbeddedMetastore(warehouse or default_warehouse()).status()


__all__ = [
    "default_warehouse",
    "start_metastore",
    "stop_metastore",
    "metastore_status",
    "URI_CONF_KEYS",
    "EmbeddedMetastore",
    "embedded_metastores",
    "MetastoreClient",
    "MetastoreError",
    "MetastoreStartError",
    "MetastoreUnavailableError",
    "MetastoreWarehouseGoneError",
    "configured_metastore_uri",
    "parse_metastore_uris",
    "resolve_metastore",
    "ttypes",
]
