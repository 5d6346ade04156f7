"""Registering Hudi tables by name (Hudi's `HoodieCatalogTable` / `CreateHoodieTableCommand` for HMS).

Everything the metastore entry says comes from the table itself (`hoodie.properties` + current schema), so the
entry can always be rebuilt from storage: `register_table` after CREATE TABLE, `refresh_table` after ALTER
TABLE, `unregister_table` for DROP TABLE, `rename_table` for RENAME. The entry is what Java Hudi's Spark SQL
writes: columns with the meta columns first, partition keys, Hudi's storage descriptor (realtime input format
for MOR tables), serde `path`, and table properties `provider`, `type`, `primaryKey`, `preCombineField`, the
Spark data source properties and the table's `hoodie.*` properties.
"""
from __future__ import annotations

import logging

from hmsclient.genthrift.hive_metastore.ttypes import Table

from catalog.hive_schema_util import hive_columns, spark_schema, spark_table_properties, table_schema
from catalog.hive_sync import SUFFIX_READ_OPTIMIZED, SUFFIX_SNAPSHOT
from catalog.hive_sync_config import spark_version
from catalog.hms_ddl import (
    HOODIE_INPUT_FORMAT,
    HOODIE_REALTIME_INPUT_FORMAT,
    LAST_COMMIT_TIME_SYNC,
    QUERY_AS_RO_TABLE,
    is_hudi_table as is_hudi_entry,
    local_path,
    location_uri,
    new_table,
)
from catalog.metastore_client import MetastoreClient, MetastoreError
from storage.table.meta_client import HoodieTableMetaClient
from storage.config import KEY_PREFIX, SparkSqlConfigKeys as SK, TableConfigKeys as TK

log = logging.getLogger(__name__)

# hoodie.properties entries that are bookkeeping, not table settings: not copied to the metastore
_SKIPPED_PROPS = (TK.CREATE_SCHEMA.key, TK.CHECKSUM.key)
SQL_MANAGED = SK.SQL_MANAGED.key  # our marker: the table lives in its managed location (DROP deletes data)


class TableRegistrationError(MetastoreError):
    pass


def catalog_table(db: str, name: str, meta: HoodieTableMetaClient, *, managed: bool = False) -> Table:
    """The metastore entry for the Hudi table `meta` under `db.name`."""
    tc = meta.table_config
    arrow = table_schema(meta)
    if arrow is None:
        raise TableRegistrationError(f"cannot register {db}.{name}: table at {meta.base_path} has no schema")
    partition_fields = [p.partition(":")[0] for p in tc.partition_fields]
    struct = spark_schema(arrow, partition_fields, omit_meta=not tc.populate_meta_fields)
    columns, partition_columns = hive_columns(struct, partition_fields)
    by_lower = {f.name.lower(): f.name for f in struct.fields}
    props = spark_table_properties(struct, [by_lower.get(p.lower(), p) for p in partition_fields], 4000,
                                   spark_version())
    props.update({k: v for k, v in tc.props.items() if k.startswith(KEY_PREFIX) and k not in _SKIPPED_PROPS})
    props.update({"provider": "hudi", "type": "mor" if tc.is_mor else "cow",
                  "primaryKey": ",".join(tc.record_key_fields)})
    if tc.precombine_field:
        props["preCombineField"] = tc.precombine_field
    if managed:
        props[SQL_MANAGED] = "true"
    location = location_uri(meta.base_path)
    input_format = HOODIE_REALTIME_INPUT_FORMAT if tc.is_mor else HOODIE_INPUT_FORMAT
    return new_table(db, name, columns, partition_columns, location, input_format, {"path": location}, props)


def register_table(client: MetastoreClient, db: str, name: str, base_path: str, *, managed: bool = False) -> Table:
    """Create the entry (or bring an existing entry for the same location in line)."""
    meta = HoodieTableMetaClient.load(base_path)
    table = catalog_table(db, name, meta, managed=managed)
    existing = client.get_table(db, name)
    if existing is not None:
        if not is_hudi_entry(existing):
            provider = (existing.parameters or {}).get("spark.sql.sources.provider") or existing.tableType
            raise TableRegistrationError(f"table {db}.{name} already exists in the metastore {client.uri} "
                                         f"(a {provider} table, not a Hudi table)")
        if local_path(existing.sd.location) != meta.base_path:
            raise TableRegistrationError(f"table {db}.{name} already exists in the metastore at "
                                         f"{existing.sd.location}, not at {meta.base_path}")
        # e.g. the entry the Hive sync of the table's first commit made: brought in line, and marked managed
        return refresh_table(client, db, name, base_path, managed=managed)
    client.create_table(table)
    log.info("registered %s.%s (%s) in %s", db, name, base_path, client.uri)
    return table


def refresh_table(client: MetastoreClient, db: str, name: str, base_path: str, *, managed: bool = False) -> Table:
    """Rebuild the entry from storage, keeping what only the metastore knows (partitions, last sync, extra
    properties, creation time, the managed marker; `managed` sets that marker)."""
    meta = HoodieTableMetaClient.load(base_path)
    existing = client.get_table(db, name)
    if existing is None:
        return register_table(client, db, name, base_path, managed=managed)
    params = existing.parameters or {}
    fresh = catalog_table(db, name, meta, managed=managed or params.get(SQL_MANAGED) == "true")
    old_cols = [(c.name, c.type) for c in existing.sd.cols or []]
    new_cols = [(c.name, c.type) for c in fresh.sd.cols]
    existing.sd.cols = fresh.sd.cols
    existing.sd.location = fresh.sd.location
    serde = existing.sd.serdeInfo.parameters or {}
    existing.sd.serdeInfo.parameters = {**serde, **fresh.sd.serdeInfo.parameters}
    # table properties: drop stale hoodie.* / schema parts, keep the rest (e.g. last_commit_time_sync)
    kept = {k: v for k, v in params.items()
            if not (k.startswith(KEY_PREFIX) or k.startswith("spark.sql.sources.schema."))}
    existing.parameters = {**kept, **fresh.parameters}
    if [(c.name, c.type) for c in existing.partitionKeys or []] != [(c.name, c.type) for c in fresh.partitionKeys]:
        raise TableRegistrationError(f"partition columns of {db}.{name} differ between the metastore and "
                                     f"{base_path}: drop and re-create the table entry")
    client.alter_table(db, name, existing, cascade=old_cols != new_cols and bool(existing.partitionKeys))
    return existing


def synced_views(client: MetastoreClient, db: str, name: str, base_path: str) -> list[str]:
    """Names of the `_ro` / `_rt` tables hive sync made for the table at `base_path`."""
    out = []
    for suffix in (SUFFIX_READ_OPTIMIZED, SUFFIX_SNAPSHOT):
        t = client.get_table(db, name + suffix)
        if t is not None and local_path(t.sd.location) == base_path and \
                QUERY_AS_RO_TABLE in (t.sd.serdeInfo.parameters or {}):
            out.append(name + suffix)
    return out


def unregister_table(client: MetastoreClient, db: str, name: str, base_path: str | None = None) -> bool:
    """Drop the entry (never the data: entries are EXTERNAL) and the `_ro`/`_rt` tables synced for it, as
    Hudi's DROP TABLE does."""
    entry = client.get_table(db, name)
    if entry is None:
        return False
    if not is_hudi_entry(entry) or (base_path and table_location(entry) != base_path):
        # never drop what is not this Hudi table (e.g. the foreign entry a failed CREATE ran into)
        log.info("not unregistering %s.%s: the entry is not the Hudi table at %s", db, name, base_path)
        return False
    views = synced_views(client, db, name, base_path) if base_path else []
    dropped = client.drop_table(db, name, False)
    for view in views:
        client.drop_table(db, view, False)
    return dropped


def rename_table(client: MetastoreClient, db: str, name: str, new_db: str, new_name: str,
                 base_path: str | None = None) -> None:
    """Rename the entry (and its `_ro`/`_rt` tables). The data stays: EXTERNAL tables never move."""
    table = client.get_table(db, name)
    if table is None:
        raise TableRegistrationError(f"table {db}.{name} is not in the metastore {client.uri}")
    if client.get_table(new_db, new_name) is not None:
        raise TableRegistrationError(f"cannot rename {db}.{name}: {new_db}.{new_name} already exists")
    views = synced_views(client, db, name, base_path or local_path(table.sd.location))
    table.dbName, table.tableName = new_db, new_name
    client.alter_table(db, name, table)
    for view in views:
        t = client.get_table(db, view)
        if t is not None:
            t.dbName, t.tableName = new_db, new_name + view[len(name):]
            client.alter_table(db, view, t)


def table_location(table: Table) -> str | None:
    serde = (table.sd.serdeInfo.parameters or {}) if table.sd and table.sd.serdeInfo else {}
    return local_path(serde.get("path") or (table.sd.location if table.sd else None))


def read_optimized(table: Table) -> bool | None:
    """True for a synced `_ro` table, False for `_rt`/COW synced tables, None when not set."""
    value = ((table.sd.serdeInfo.parameters or {}) if table.sd and table.sd.serdeInfo else {}).get(QUERY_AS_RO_TABLE)
    return None if value is None else value.lower() == "true"


def last_commit_time_sync(table: Table) -> str | None:
    return (table.parameters or {}).get(LAST_COMMIT_TIME_SYNC)


__all__ = ["catalog_table", "register_table", "refresh_table", "unregister_table", "rename_table",
           "synced_views", "table_location", "read_optimized", "last_commit_time_sync",
           "TableRegistrationError"]
