"""CREATE TABLE [IF NOT EXISTS] t [(cols)] USING hudi [PARTITIONED BY (...)] [LOCATION '...']
[TBLPROPERTIES | OPTIONS (...)] [AS SELECT ...].

Without data the table is still created on disk (`.hoodie/hoodie.properties` with the schema), so it can be
read, inserted into and merged into at once. CTAS writes the query's rows with bulk_insert. A LOCATION that
already holds a Hudi table adopts it (columns, if given, must match). Partition columns go last, as in Spark.
"""
from __future__ import annotations

import logging
from dataclasses import dataclass, field

from pyspark.sql import DataFrame
from pyspark.sql.pandas.types import to_arrow_schema
from pyspark.sql.types import StructType
from sqlglot import exp

from sqlext.sql.properties import check_properties, prop_key, prop_value
from sqlext.sql.resolver import HudiTableRef, TableName, is_hudi_table
from sqlext.sql.result import DmlCounts, empty_result
from sqlext.sql.table import HudiTable, session_hoodie_conf
from storage.config import KEY_PREFIX, SQL_OPTION_NAMES, HoodieConfig, TableConfigKeys as TK, WriteConfigKeys as WK
from storage.io.storage import HoodieStorage
from storage.io.storage_location import normalize_base_path
from storage.io.storage_options import session_storage_options
from storage.write.table_settings import init_table
from storage.client.write_client import write_dataframe

log = logging.getLogger(__name__)

PROVIDERS = {"hudi", "org.apache.hudi"}
# SQL property (lower case) -> write option: Hudi's Spark SQL names, then the table's own keys
_ALIASES = {
    **{name.lower(): prop.key for name, prop in SQL_OPTION_NAMES.items()},
    TK.RECORDKEY_FIELDS.key: WK.RECORDKEY_FIELD.key,
    **{key: WK.PRECOMBINE_FIELD.key for key in TK.PRECOMBINE_FIELD.keys()},  # hoodie.table.ordering.fields too
}
_TABLE_TYPES = {"cow": "COPY_ON_WRITE", "copy_on_write": "COPY_ON_WRITE", "mor": "MERGE_ON_READ",
                "merge_on_read": "MERGE_ON_READ"}
_DEFAULTS = {WK.HIVE_STYLE_PARTITIONING.key: "true"}  # Hudi's SQL default


@dataclass
class CreateSpec:
    name: TableName
    exists_ok: bool
    location: str | None
    columns: list[exp.ColumnDef] = field(default_factory=list)
    partition_by: list[str] = field(default_factory=list)
    properties: dict[str, str] = field(default_factory=dict)
    query: exp.Expression | None = None


def matches(ctx, node: exp.Create) -> bool:
    kind = str(node.args.get("kind") or "").upper()
    if kind == "INDEX":
        return _index_on_hudi_table(ctx, node)
    if kind != "TABLE":
        return False
    props = node.args.get("properties")
    fmt = props.find(exp.FileFormatProperty) if props else None
    return fmt is not None and fmt.name.lower() in PROVIDERS


def _index_on_hudi_table(ctx, node: exp.Create) -> bool:
    table = node.this.args.get("table") if isinstance(node.this, exp.Index) else None
    return table is not None and ctx.resolver.resolve(TableName.of(table)) is not None


def _plan_index(ctx, node: exp.Create) -> DataFrame:
    """CREATE INDEX i ON t (c, ...) on a Hudi table: checked and accepted with no effect (see sqlext.sql.index)."""
    from sqlext.sql import index as index_stmt

    idx = node.this
    params = idx.args.get("params")
    nodes = [o.this for o in (params.args.get("columns") or [])] if params else []
    using = params.args.get("using") if params else None
    return index_stmt.accept(ctx, idx.name, idx.args["table"], [n.name for n in nodes], nodes,
                             index_type=using.name if using is not None else None,
                             if_not_exists=bool(node.args.get("exists")))


def plan(ctx, node: exp.Create) -> DataFrame:
    if str(node.args.get("kind") or "").upper() == "INDEX":
        return _plan_index(ctx, node)
    if node.args.get("replace"):
        raise ctx.error("CREATE OR REPLACE TABLE ... USING hudi is not supported: DROP TABLE first", node)
    spec = _spec(ctx, node)
    table_node = node.this.this if isinstance(node.this, exp.Schema) else node.this
    if spec.name.path:
        raise ctx.error("CREATE TABLE needs a name: give a path with LOCATION '...'", table_node)
    db = spec.name.db or ctx.resolver.current_database
    name = TableName(spec.name.name, db)
    if not _database_exists(ctx, db):
        raise ctx.error(f"database '{db}' does not exist (CREATE DATABASE {db} first)", table_node)
    existing = ctx.resolver.resolve(name)
    if existing is not None:
        if spec.exists_ok:
            log.info("table %s exists: CREATE TABLE IF NOT EXISTS does nothing", existing.qualified_name)
            return empty_result(ctx.spark)
        raise ctx.error(f"table {db}.{name.name} already exists (at {existing.path})", table_node, table=f"{db}.{name.name}")
    path = normalize_base_path(spec.location) if spec.location else ctx.resolver.location_for(name).path
    ref = HudiTableRef(name.name, db, path)
    if is_hudi_table(path):
        return _adopt(ctx, spec, ref, table_node)
    storage = HoodieStorage.for_path(path, session_storage_options(ctx.spark))
    if storage.list_dir(path):
        raise ctx.error(f"cannot create table {ref.qualified_name}: location {path} exists and is not empty",
                        table_node, table=ref.qualified_name)
    source = ctx.query(spec.query) if spec.query is not None else None
    schema = _schema(ctx, spec, source, table_node)
    options, extra = _options(ctx, spec, ref, schema, table_node)
    created_dir = not storage.exists(path)
    try:
        init_table(path, HoodieConfig.of(options), to_arrow_schema(schema, timezone="UTC"), HoodieConfig.of(extra))
        ctx.resolver.register(ref)
        if source is None:
            return empty_result(ctx.spark)
        table = HudiTable.load(ref)
        opts = table.write_options(ctx.spark, {WK.OPERATION.key: "bulk_insert"})
        metadata = write_dataframe(ctx.spark, source.select(*[f"`{c}`" for c in schema.names]), path,
                                   HoodieConfig.of(opts))
        stats = metadata.write_stats() if metadata is not None else []
        return DmlCounts(inserted=sum(s.numInserts or 0 for s in stats)).to_frame(ctx.spark)
    except BaseException:
        # a failed CREATE leaves nothing behind: no half-created table, no registry entry
        ctx.resolver.unregister(ref)
        storage.delete_dir(path if created_dir else f"{path}/.hoodie")
        raise


def _database_exists(ctx, db: str) -> bool:
    if ctx.resolver.database_exists(db):
        return True
    try:
        return bool(ctx.spark.catalog.databaseExists(db))
    except Exception:
        return False


# -- parsing the statement -------------------------------------------------------------------------
def _spec(ctx, node: exp.Create) -> CreateSpec:
    schema_node = node.this if isinstance(node.this, exp.Schema) else None
    table_node = schema_node.this if schema_node else node.this
    spec = CreateSpec(TableName.of(table_node), bool(node.args.get("exists")), None,
                      query=node.args.get("expression"))
    if schema_node:
        for item in schema_node.expressions:
            if not isinstance(item, exp.ColumnDef):
                raise ctx.error(f"unsupported table element '{item.sql(dialect='spark')}'", item)
            spec.columns.append(item)
    for prop in (node.args.get("properties").expressions if node.args.get("properties") else []):
        if isinstance(prop, (exp.FileFormatProperty, exp.SchemaCommentProperty)):
            continue  # the provider is known; table comments live in a catalog, not in hoodie.properties
        if isinstance(prop, exp.PartitionedByProperty):
            for part in prop.this.expressions if isinstance(prop.this, exp.Schema) else [prop.this]:
                if isinstance(part, exp.ColumnDef):  # Hive style: PARTITIONED BY (dt STRING) adds the column
                    spec.columns.append(part)
                spec.partition_by.append(part.name)
        elif isinstance(prop, exp.LocationProperty):
            spec.location = prop.this.name
        elif isinstance(prop, exp.OptionsProperty):
            for inner in prop.expressions:
                spec.properties[prop_key(inner)] = prop_value(ctx, inner)
        elif isinstance(prop, exp.Property):
            spec.properties[prop_key(prop)] = prop_value(ctx, prop)
        else:
            raise ctx.error(f"unsupported clause for a Hudi table: '{prop.sql(dialect='spark')}'", prop)
    return spec




# -- schema and options ----------------------------------------------------------------------------
def _schema(ctx, spec: CreateSpec, source: DataFrame | None, node) -> StructType:
    if source is not None:
        if spec.columns and any(c.args.get("kind") is not None for c in spec.columns
                                if c.name.lower() not in {p.lower() for p in spec.partition_by}):
            raise ctx.error("CREATE TABLE ... AS SELECT takes its columns from the query: drop the column list", node)
        fields = list(source.schema.fields)
    else:
        if not spec.columns:
            raise ctx.error("CREATE TABLE needs columns (or AS SELECT, or a LOCATION holding a Hudi table)", node)
        ddl = ", ".join(f"`{c.name}` {c.args['kind'].sql(dialect='spark')}" for c in spec.columns if c.args.get("kind"))
        try:
            fields = list(StructType.fromDDL(ddl).fields)
        except Exception as exc:
            raise ctx.error(f"invalid column definitions: {exc}", node) from exc
    by_name = {f.name.lower(): f for f in fields}
    if len(by_name) != len(fields):
        raise ctx.error("duplicate column names", node)
    partition = []
    for p in spec.partition_by:
        f = by_name.get(p.lower())
        if f is None:
            raise ctx.error(f"PARTITIONED BY column '{p}' is not a column of the table", node, column=p)
        partition.append(f)
    part_names = {f.name for f in partition}
    return StructType([f for f in fields if f.name not in part_names] + partition)


def _options(ctx, spec: CreateSpec, ref: HudiTableRef, schema: StructType, node) -> tuple[dict, dict]:
    # first: a misspelt key property fails before anything else is read from the properties
    check_properties(ctx, spec.properties, node, table=ref.qualified_name)
    # `SET hoodie.*` values of the session apply to the new table (hoodie.write.table.version, say) under its own
    # TBLPROPERTIES, as Hudi merges the session's hoodie.* configuration into a statement's options
    options = {**_DEFAULTS, **session_hoodie_conf(ctx.spark), WK.TABLE_NAME.key: ref.name, WK.DATABASE_NAME.key: ref.db}
    extra = {}
    for key, value in spec.properties.items():
        lower = key.lower()
        if lower == "type":
            table_type = _TABLE_TYPES.get(value.lower())
            if table_type is None:
                raise ctx.error(f"type='{value}': expected cow or mor", node)
            options[WK.TABLE_TYPE.key] = table_type
        elif lower in _ALIASES:
            options[_ALIASES[lower]] = value
        elif key.startswith(KEY_PREFIX):
            options[key] = value
            extra[key] = value  # kept in hoodie.properties: every later write of the table uses it
        # any other property was warned about by check_properties, with the SQL name it may mean
    if spec.partition_by:
        options[WK.PARTITIONPATH_FIELD.key] = ",".join(_canonical(spec.partition_by, schema))
    keys = [k.strip() for k in options.get(WK.RECORDKEY_FIELD.key, "").split(",") if k.strip()]
    if not keys:
        raise ctx.error(f"table {ref.qualified_name} needs a primary key: TBLPROPERTIES (primaryKey = 'col')", node,
                        table=ref.qualified_name)
    names = {n.lower(): n for n in schema.names}
    canonical = []
    for k in keys:
        if k.lower() not in names:
            raise ctx.error(f"primaryKey column '{k}' is not a column of {ref.qualified_name}", node,
                            table=ref.qualified_name, column=k)
        canonical.append(names[k.lower()])
    options[WK.RECORDKEY_FIELD.key] = ",".join(canonical)
    pre = options.get(WK.PRECOMBINE_FIELD.key)
    if pre:
        first = pre.split(",")[0].strip()
        if first.lower() not in names:
            raise ctx.error(f"preCombineField '{first}' is not a column of {ref.qualified_name}", node,
                            table=ref.qualified_name, column=first)
        options[WK.PRECOMBINE_FIELD.key] = names[first.lower()]
    return options, extra


def _canonical(columns: list[str], schema: StructType) -> list[str]:
    names = {n.lower(): n for n in schema.names}
    return [names.get(c.lower(), c) for c in columns]


def _adopt(ctx, spec: CreateSpec, ref: HudiTableRef, node) -> DataFrame:
    """CREATE TABLE t USING hudi LOCATION '<existing Hudi table>': register it (columns must agree)."""
    if spec.query is not None:
        raise ctx.error(f"CREATE TABLE ... AS SELECT: location {ref.path} already holds a Hudi table", node)
    check_properties(ctx, spec.properties, node, table=ref.qualified_name)  # a typo fails before registering
    table = HudiTable.load(ref)
    if spec.columns:
        given = [c.name.lower() for c in spec.columns]
        have = [c.lower() for c in table.columns]
        if sorted(given) != sorted(have):
            raise ctx.error(f"the columns given ({', '.join(given)}) do not match the Hudi table at {ref.path} "
                            f"({', '.join(table.columns)})", node, table=ref.qualified_name)
    ctx.resolver.register(ref)
    log.info("registered existing Hudi table %s at %s", ref.qualified_name, ref.path)
    return empty_result(ctx.spark)
