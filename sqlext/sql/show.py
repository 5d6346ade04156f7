"""SHOW PARTITIONS, SHOW CREATE TABLE, SHOW TBLPROPERTIES and DESCRIBE [EXTENDED | FORMATTED] of Hudi tables,
answered from the table itself (hoodie.properties, the latest schema, the file-system view) with Spark's
output columns, so they work the same with or without a metastore. SHOW TABLES stays Spark's, except that
without a metastore (a warehouse resolver) the warehouse's Hudi tables, and the `<t>_ro` / `<t>_rt` views of its
merge-on-read tables, are added to Spark's answer (`hudi_table_names`, which `sqlext serve`'s GetTables lists too).

sqlglot keeps SHOW as a Command: the statement text is matched here; table names and partition specs in it
are parsed with sqlglot.
"""
from __future__ import annotations

import logging
import re

import sqlglot
from pyspark.sql import DataFrame
from sqlglot import exp

from sqlext.sql.resolver import SUFFIX_QUERY_TYPES, TableName
from sqlext.sql.table import HudiTable
from storage.config import KEY_PREFIX
from storage.config import TableConfigKeys as TK
from storage.meta_fields import META_COLUMNS

log = logging.getLogger(__name__)

_NAME = r"(?P<name>(?:`[^`]+`|[\w$]+)(?:\s*\.\s*(?:`[^`]+`|[\w$]+))?)"
_SHOW_PARTITIONS = re.compile(rf"(?is)^\s*SHOW\s+PARTITIONS\s+{_NAME}(?:\s+(?P<spec>PARTITION\s*\(.*\)))?\s*;?\s*$")
_SHOW_CREATE = re.compile(rf"(?is)^\s*SHOW\s+CREATE\s+TABLE\s+{_NAME}(?P<serde>\s+AS\s+SERDE)?\s*;?\s*$")
_SHOW_PROPS = re.compile(rf"(?is)^\s*SHOW\s+TBLPROPERTIES\s+{_NAME}(?:\s*\((?P<key>[^)]*)\))?\s*;?\s*$")
_SHOW_TABLES = re.compile(r"(?is)^\s*SHOW\s+TABLES(?:\s+(?:IN|FROM)\s+(?P<db>`[^`]+`|[\w$]+))?"
                          r"(?:\s+(?:LIKE\s+)?'(?P<like>[^']*)')?\s*;?\s*$")
_FORMS = (("partitions", _SHOW_PARTITIONS), ("create", _SHOW_CREATE), ("properties", _SHOW_PROPS))

# table properties SHOW CREATE TABLE writes back as Hudi's SQL spellings
_SQL_SPELLINGS = {TK.RECORDKEY_FIELDS.key: "primaryKey", TK.PRECOMBINE_FIELD.key: "preCombineField"}
# hoodie.properties entries that are derived or bookkeeping: not part of a CREATE TABLE statement
_DERIVED = {TK.NAME.key, TK.TYPE.key, TK.VERSION.key, TK.CHECKSUM.key, TK.CREATE_SCHEMA.key, TK.PARTITION_FIELDS.key,
            TK.TIMELINE_LAYOUT_VERSION.key, TK.RECORDKEY_FIELDS.key, TK.PRECOMBINE_FIELD.key, TK.DATABASE_NAME.key,
            TK.INITIAL_VERSION.key, TK.METADATA_PARTITIONS.key, TK.ARCHIVELOG_FOLDER.key, TK.TIMELINE_PATH.key,
            TK.TIMELINE_TIMEZONE.key}


def _table_node(name: str) -> exp.Table:
    return sqlglot.parse_one(f"SELECT * FROM {name}", read="spark").find(exp.Table)


def _form(text: str):
    for kind, pattern in _FORMS:
        found = pattern.match(text)
        if found:
            return kind, found
    return None, None


# -- SHOW (Command) ----------------------------------------------------------------------------------
def matches(ctx, text: str) -> bool:
    if _SHOW_TABLES.match(text):
        return hasattr(ctx.resolver, "table_names")
    kind, found = _form(text)
    if kind is None:
        return False
    try:
        return ctx.resolve(_table_node(found.group("name"))) is not None
    except sqlglot.errors.ParseError:
        return False


def plan(ctx, text: str) -> DataFrame:
    tables = _SHOW_TABLES.match(text)
    if tables:
        return show_tables(ctx, text, tables.group("db"), tables.group("like"))
    kind, found = _form(text)
    node = _table_node(found.group("name"))
    table = ctx.require_table(node)
    if kind == "partitions":
        return show_partitions(ctx, table, found.group("spec"))
    if kind == "create":
        return ctx.spark.createDataFrame([(show_create_table(table),)], "createtab_stmt string")
    return show_tblproperties(ctx, table, found.group("key"))


def show_tables(ctx, text: str, db: str | None, like: str | None) -> DataFrame:
    """Spark's SHOW TABLES plus the warehouse's Hudi tables it does not know (no metastore registers them)."""
    spark_rows = ctx.run_sql(text)
    db = (db.strip("`") if db else ctx.resolver.current_database).lower()
    if not ctx.resolver.database_exists(db):
        return spark_rows  # Spark has already said what it thinks of an unknown database
    known = {r.tableName.lower() for r in spark_rows.collect() if not r.isTemporary}
    extra = [(db, n, False) for n in hudi_table_names(ctx.resolver, db) if n.lower() not in known and _like(n, like)]
    return spark_rows.unionByName(ctx.spark.createDataFrame(extra, spark_rows.schema)) if extra else spark_rows


def hudi_table_names(resolver, db: str) -> list[str]:
    """The Hudi tables a resolver without a metastore finds in `db` (its `table_names`) and the `<t>_ro` / `<t>_rt`
    views it resolves for the merge-on-read ones: every name a query can use is listed, as Hive sync lists them
    with a metastore. Empty for a resolver that lists no tables itself (a metastore's are in Spark's answer)."""
    if not hasattr(resolver, "table_names"):
        return []
    names = resolver.table_names(db)
    views = [view for name in names for view in _synced_views(resolver, name, db)]
    return sorted(set(names) | set(views))


def _synced_views(resolver, name: str, db: str) -> list[str]:
    """`<name>_ro` / `<name>_rt` when the resolver reads them as views of `name` (it is a merge-on-read table)."""
    candidates = [name + suffix for suffix in SUFFIX_QUERY_TYPES]
    refs = [resolver.resolve(TableName(candidate, db)) for candidate in candidates]
    return [c for c, ref in zip(candidates, refs) if ref is not None and ref.query_type is not None]


def _like(name: str, pattern: str | None) -> bool:
    """Spark's SHOW TABLES LIKE: `*` any characters, `|` alternatives, case-insensitive."""
    if pattern is None:
        return True
    alternatives = [re.escape(p.strip()).replace(r"\*", ".*") for p in pattern.split("|")]
    return re.fullmatch("|".join(alternatives), name, re.IGNORECASE) is not None


def show_partitions(ctx, table: HudiTable, spec_text: str | None) -> DataFrame:
    """The partitions (relative paths) holding data in the latest snapshot, as Hudi's SHOW PARTITIONS."""
    from sqlext.sql.truncate import matching_partitions, partition_spec

    if not table.partition_fields:
        raise ctx.error(f"SHOW PARTITIONS is not allowed on a table that is not partitioned: {table.name}",
                        table=table.name)
    spec = {}
    if spec_text:
        alter = sqlglot.parse_one(f"ALTER TABLE x DROP {spec_text}", read="spark")
        part = alter.find(exp.Partition)
        if part is None:
            raise ctx.error(f"SHOW PARTITIONS {table.name}: cannot read the partition spec '{spec_text}'",
                            table=table.name)
        spec = partition_spec(ctx, table, part)
    rows = [(p,) for p in sorted(matching_partitions(table, spec))]
    return ctx.spark.createDataFrame(rows, "partition string")


def _columns(table: HudiTable) -> list[tuple[str, str]]:
    return [(f.name, f.dataType.simpleString()) for f in table.schema.fields]


def _ident(name: str) -> str:
    return name if re.fullmatch(r"[A-Za-z_]\w*", name) else f"`{name.replace('`', '``')}`"


def _literal(value: str) -> str:
    return "'" + str(value).replace("\\", "\\\\").replace("'", "\\'") + "'"


def show_create_table(table: HudiTable) -> str:
    """A CREATE TABLE statement that makes a table with the same columns, keys, type and settings."""
    cfg = table.meta.table_config
    name = table.ref.qualified_name if table.ref.db else f"hudi.`{table.ref.path}`"
    cols = ",\n".join(f"  {_ident(n)} {t.upper()}" for n, t in _columns(table))
    props = {"primaryKey": ",".join(cfg.record_key_fields), "type": "mor" if cfg.is_mor else "cow"}
    if cfg.precombine_field:
        props["preCombineField"] = cfg.precombine_field
    for key, value in sorted(cfg.props.items()):
        if key.startswith(KEY_PREFIX) and key not in _DERIVED:
            props[key] = value
    lines = [f"CREATE TABLE {name} (", cols, ")", "USING hudi"]
    if table.partition_fields:
        lines.append(f"PARTITIONED BY ({', '.join(_ident(p) for p in table.partition_fields)})")
    lines.append(f"LOCATION {_literal(table.ref.path)}")
    lines.append("TBLPROPERTIES (\n" + ",\n".join(f"  {_literal(k)} = {_literal(v)}" for k, v in props.items())
                 + ")")
    return "\n".join(lines) + "\n"


def table_properties(table: HudiTable) -> dict[str, str]:
    """What the catalog shows as the table's properties: hoodie.properties plus Hudi's SQL spellings."""
    cfg = table.meta.table_config
    props = {k: v for k, v in cfg.props.items() if k not in (TK.CREATE_SCHEMA.key,)}
    props.update({"provider": "hudi", "type": "mor" if cfg.is_mor else "cow",
                  "primaryKey": ",".join(cfg.record_key_fields)})
    if cfg.precombine_field:
        props["preCombineField"] = cfg.precombine_field
    return props


def show_tblproperties(ctx, table: HudiTable, key_text: str | None) -> DataFrame:
    props = table_properties(table)
    if key_text is not None and key_text.strip():
        key = key_text.strip().strip("'\"`")
        value = props.get(key, f"Table {table.name} does not have property: {key}")
        return ctx.spark.createDataFrame([(key, value)], "key string, value string")
    return ctx.spark.createDataFrame(sorted(props.items()), "key string, value string")


# -- DESCRIBE (exp.Describe) -------------------------------------------------------------------------------
def describe_matches(ctx, node: exp.Describe) -> bool:
    extra = {k for k, v in node.args.items() if v and k not in ("this", "style", "kind", "as_json")}
    return not extra and isinstance(node.this, exp.Table) and ctx.resolve(node.this) is not None


def describe_plan(ctx, node: exp.Describe) -> DataFrame:
    """Spark's DESCRIBE layout: the columns (meta columns first), partition information, and with EXTENDED /
    FORMATTED the detailed table information."""
    table = ctx.require_table(node.this)
    cfg = table.meta.table_config
    rows: list[tuple] = []
    if cfg.populate_meta_fields:
        rows += [(m, "string", None) for m in META_COLUMNS]
    rows += [(n, t, None) for n, t in _columns(table)]
    parts = [(n, t) for n, t in _columns(table) if n.lower() in {p.lower() for p in table.partition_fields}]
    if parts:
        rows += [("# Partition Information", "", ""), ("# col_name", "data_type", "comment")]
        rows += [(n, t, None) for n, t in parts]
    style = str(node.args.get("style") or "").upper()
    if style in ("EXTENDED", "FORMATTED"):
        rows += [("", "", ""), ("# Detailed Table Information", "", "")]
        rows += [("Database", table.ref.db or "", ""), ("Table", table.ref.name, ""),
                 ("Type", "MANAGED" if _managed(ctx, table) else "EXTERNAL", ""), ("Provider", "hudi", ""),
                 ("Table Type", cfg.table_type, ""),
                 ("Record Key", ",".join(cfg.record_key_fields), ""),
                 ("Precombine Field", cfg.precombine_field or "", ""),
                 ("Location", table.ref.path, ""),
                 ("Table Properties", "[" + ", ".join(f"{k}={v}" for k, v in sorted(table_properties(table).items()))
                  + "]", "")]
    return ctx.spark.createDataFrame(rows, "col_name string, data_type string, comment string")


def _managed(ctx, table: HudiTable) -> bool:
    from sqlext.sql.resolver import TableName

    if table.ref.db is None:
        return False
    try:
        return ctx.resolver.location_for(TableName(table.ref.name, table.ref.db)).path == table.ref.path
    except Exception:
        return False
