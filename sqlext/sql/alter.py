"""ALTER TABLE on Hudi tables:

- `ADD COLUMNS (c type [COMMENT '...'], ...)` / `ADD COLUMN c type`: an ALTER_SCHEMA commit records the new
  schema (new columns after the data columns, before the partition columns, as Hudi's
  AlterHoodieTableAddColumnsCommand orders them); existing rows read NULL for them.
- `SET TBLPROPERTIES (...)` / `UNSET TBLPROPERTIES [IF EXISTS] (...)`: kept in hoodie.properties (atomic
  update), where every later write and every session reads them; keys that define the table's layout
  (name, type, keys, partitioning, version, ...) cannot change.
- `RENAME TO [db.]name`: the catalog entry moves (resolver.rename); hoodie.table.name follows, as in Hudi.
- `DROP PARTITION (k = v, ...)`: the partition's file groups are replaced (a DELETE_PARTITION replacecommit).

After a change the resolver is told (`refresh`), so a metastore entry follows the table.
"""
from __future__ import annotations

import logging
import re

import sqlglot
from pyspark.sql import DataFrame
from pyspark.sql.pandas.types import to_arrow_schema
from pyspark.sql.types import StructField, StructType
from sqlglot import exp

from sqlext.sql.properties import check_properties, prop_key, prop_value
from sqlext.sql.resolver import TableName
from sqlext.sql.result import empty_result
from sqlext.sql.table import HudiTable
from storage.config import SQL_OPTION_NAMES, TableConfigKeys as TK, WriteConfigKeys as WK
from storage.write.table_commits import commit_delete_partitions, commit_schema_change

log = logging.getLogger(__name__)

# keys fixed when the table is created: changing them would make existing files unreadable or misplaced
IMMUTABLE = {
    TK.NAME.key, TK.TYPE.key, TK.VERSION.key, TK.RECORDKEY_FIELDS.key, TK.PARTITION_FIELDS.key, TK.KEYGEN_CLASS.key,
    TK.KEYGEN_TYPE.key, TK.BASE_FILE_FORMAT.key, TK.LOG_FILE_FORMAT.key, TK.TIMELINE_LAYOUT_VERSION.key,
    TK.CHECKSUM.key, TK.CREATE_SCHEMA.key, TK.POPULATE_META_FIELDS.key, TK.HIVE_STYLE_PARTITIONING.key,
    TK.URL_ENCODE_PARTITIONING.key, *TK.PRECOMBINE_FIELD.keys(), TK.TIMELINE_TIMEZONE.key, TK.ARCHIVELOG_FOLDER.key,
    TK.TIMELINE_PATH.key, TK.INITIAL_VERSION.key, WK.RECORDKEY_FIELD.key, WK.PARTITIONPATH_FIELD.key,
    WK.PRECOMBINE_FIELD.key, WK.TABLE_TYPE.key, TK.METADATA_PARTITIONS.key, TK.DATABASE_NAME.key,
}
SQL_ALIASES = {name.lower() for name in SQL_OPTION_NAMES}  # Hudi's SQL names of table properties, any case

_UNSET = re.compile(r"(?is)^\s*ALTER\s+TABLE\s+(?P<name>.+?)\s+UNSET\s+TBLPROPERTIES\s+(?P<exists>IF\s+EXISTS\s+)?"
                    r"\((?P<keys>.*)\)\s*;?\s*$")


# -- exp.Alter ---------------------------------------------------------------------------------------
def matches(ctx, node: exp.Alter) -> bool:
    return str(node.args.get("kind") or "").upper() == "TABLE" and isinstance(node.this, exp.Table) \
        and ctx.resolve(node.this) is not None


def plan(ctx, node: exp.Alter) -> DataFrame:
    table = ctx.require_table(node.this)
    if table.ref.query_type is not None:
        raise ctx.error(f"{table.name} is a read-optimized / real-time view of a merge-on-read table: alter the "
                        f"table itself", node.this, table=table.name)
    actions = node.args.get("actions") or []
    columns = [a for a in actions if isinstance(a, exp.ColumnDef)]
    for a in actions:
        if isinstance(a, exp.Schema):
            columns.extend(a.expressions)
    if columns and len(columns) == sum(len(a.expressions) if isinstance(a, exp.Schema) else 1 for a in actions):
        return _add_columns(ctx, table, columns)
    if len(actions) == 1 and isinstance(actions[0], exp.AlterSet) and actions[0].expressions:
        return _set_properties(ctx, table, actions[0])
    if len(actions) == 1 and isinstance(actions[0], exp.AlterRename):
        return _rename(ctx, table, actions[0].this)
    if len(actions) == 1 and isinstance(actions[0], exp.DropPartition):
        return _drop_partitions(ctx, table, actions[0])
    what = actions[0].sql(dialect="spark") if actions else node.sql(dialect="spark")
    raise ctx.error(f"ALTER TABLE {table.name}: '{what}' is not supported on Hudi tables (supported: ADD COLUMNS, "
                    f"SET/UNSET TBLPROPERTIES, RENAME TO, DROP PARTITION)", actions[0] if actions else node,
                    table=table.name)


# -- ADD COLUMNS ---------------------------------------------------------------------------------------
def _add_columns(ctx, table: HudiTable, columns: list) -> DataFrame:
    from storage.table.schema_resolver import table_data_schema
    from pyspark.sql.pandas.types import from_arrow_schema

    new_fields = []
    existing = {c.lower() for c in table.schema.names} | {c.lower() for c in table.hidden}
    for col in columns:
        if not isinstance(col, exp.ColumnDef) or not isinstance(col.this, exp.Identifier):
            raise ctx.error(f"ADD COLUMNS: '{col.sql(dialect='spark')}' is not a top-level column definition "
                            "(nested fields cannot be added)", col, table=table.name)
        name = col.this.name
        if name.lower() in existing or name.lower() in {f.name.lower() for f in new_fields}:
            raise ctx.error(f"ADD COLUMNS: column '{name}' already exists in {table.name}", col, table=table.name,
                            column=name)
        if name.lower().startswith("_hoodie_"):
            raise ctx.error(f"ADD COLUMNS: '{name}' is a Hudi meta column name", col, table=table.name, column=name)
        if col.args.get("kind") is None:
            raise ctx.error(f"ADD COLUMNS: column '{name}' needs a type", col, table=table.name, column=name)
        for constraint in col.args.get("constraints") or []:
            if isinstance(constraint.args.get("kind"), exp.NotNullColumnConstraint):
                raise ctx.error(f"ADD COLUMNS: column '{name}' cannot be NOT NULL (existing rows have no value)",
                                col, table=table.name, column=name)
        try:
            dtype = StructType.fromDDL(f"`{name}` {col.args['kind'].sql(dialect='spark')}").fields[0].dataType
        except Exception as exc:
            raise ctx.error(f"ADD COLUMNS: invalid type for '{name}': {exc}", col, table=table.name, column=name) from exc
        new_fields.append(StructField(name, dtype, True))
    full = from_arrow_schema(table_data_schema(table.meta), prefer_timestamp_ntz=False)
    partition = {p.lower() for p in table.partition_fields}
    data = [f for f in full.fields if f.name.lower() not in partition]
    parts = [f for f in full.fields if f.name.lower() in partition]
    schema = StructType(data + new_fields + parts)
    commit_schema_change(table.meta, to_arrow_schema(schema, timezone="UTC"))
    ctx.resolver.refresh(table.ref)
    log.info("ALTER TABLE %s ADD COLUMNS %s", table.name, ", ".join(f.name for f in new_fields))
    return empty_result(ctx.spark)


# -- properties ------------------------------------------------------------------------------------------


def _check_mutable(ctx, table: HudiTable, key: str, where) -> None:
    if key.lower() in SQL_ALIASES or key in IMMUTABLE:
        raise ctx.error(f"table property '{key}' of {table.name} is fixed when the table is created and cannot be "
                        "changed", where, table=table.name)


def _set_properties(ctx, table: HudiTable, action: exp.AlterSet) -> DataFrame:
    props = [p for group in action.expressions for p in (group.expressions if isinstance(group, exp.Properties)
                                                         else [group])]
    updates = {}
    for prop in props:
        if not isinstance(prop, exp.Property):
            raise ctx.error(f"ALTER TABLE {table.name} SET: '{prop.sql(dialect='spark')}' is not supported on Hudi "
                            "tables", prop, table=table.name)
        key = prop_key(prop)
        _check_mutable(ctx, table, key, prop)
        updates[key] = prop_value(ctx, prop)
    if not updates:
        raise ctx.error("SET TBLPROPERTIES needs at least one property", action, table=table.name)

    check_properties(ctx, updates, action, table=table.name)
    table.meta.update_table_config(updates)
    ctx.resolver.refresh(table.ref)
    log.info("ALTER TABLE %s SET TBLPROPERTIES %s", table.name, updates)
    return empty_result(ctx.spark)


def unset_matches(ctx, text: str) -> bool:
    found = _UNSET.match(text)
    return bool(found) and ctx.resolve(_table_node(found.group("name"))) is not None


def unset_plan(ctx, text: str) -> DataFrame:
    found = _UNSET.match(text)
    node = _table_node(found.group("name"))
    table = ctx.require_table(node)
    # keys: 'quoted', "quoted" or bare dotted names (hoodie.x.y)
    joined = re.split(r"\s*,\s*", found.group("keys").strip())
    keys = [k.strip().strip("'\"`") for k in joined if k.strip()]
    if not keys:
        raise ctx.error("UNSET TBLPROPERTIES needs at least one key", node, table=table.name)
    props = table.meta.table_config.props
    missing = [k for k in keys if k not in props]
    if missing and not found.group("exists"):
        raise ctx.error(f"UNSET TBLPROPERTIES: {table.name} has no property {', '.join(repr(m) for m in missing)} "
                        "(IF EXISTS ignores missing keys)", node, table=table.name)
    for key in keys:
        _check_mutable(ctx, table, key, node)
    present = tuple(k for k in keys if k in props)
    if present:
        table.meta.update_table_config({}, present)
        ctx.resolver.refresh(table.ref)
    return empty_result(ctx.spark)


def _table_node(name: str) -> exp.Table:
    return sqlglot.parse_one(f"SELECT * FROM {name}", read="spark").find(exp.Table)


# -- RENAME ------------------------------------------------------------------------------------------------
def _rename(ctx, table: HudiTable, target: exp.Table) -> DataFrame:
    if table.ref.db is None:
        raise ctx.error(f"cannot rename {table.name}: a table named by its path has no name to change", target,
                        table=table.name)
    new = TableName.of(target)
    new = TableName(new.name, new.db or table.ref.db)
    if ctx.resolver.resolve(new) is not None or _spark_has_table(ctx, new):
        raise ctx.error(f"cannot rename {table.name} to {new}: table {new} already exists", target, table=table.name)
    if not ctx.resolver.database_exists(new.db):
        raise ctx.error(f"cannot rename {table.name} to {new}: database '{new.db}' does not exist", target)
    new_ref = ctx.resolver.rename(table.ref, new)
    updates = {TK.NAME.key: new_ref.name}
    if new_ref.db and new_ref.db != table.ref.db:
        updates[TK.DATABASE_NAME.key] = new_ref.db
    table.meta.update_table_config(updates)
    ctx.resolver.refresh(new_ref)
    log.info("renamed %s to %s (data stays at %s)", table.name, new_ref.qualified_name, new_ref.path)
    return empty_result(ctx.spark)


def _spark_has_table(ctx, name: TableName) -> bool:
    try:
        return bool(ctx.spark.catalog.tableExists(f"{name.db}.{name.name}"))
    except Exception:
        return False


# -- DROP PARTITION ------------------------------------------------------------------------------------------
def _drop_partitions(ctx, table: HudiTable, action: exp.DropPartition) -> DataFrame:
    from sqlext.sql.truncate import matching_partitions, partition_spec

    targets: set[str] = set()
    for part in action.expressions:
        spec = partition_spec(ctx, table, part)
        found = matching_partitions(table, spec)
        if not found and not action.args.get("exists"):
            raise ctx.error(f"ALTER TABLE {table.name} DROP PARTITION: no partition matches "
                            f"{part.sql(dialect='spark')}", part, table=table.name)
        targets.update(found)
    if targets:
        commit_delete_partitions(table.meta, sorted(targets))
        ctx.resolver.refresh(table.ref)
    return empty_result(ctx.spark)
