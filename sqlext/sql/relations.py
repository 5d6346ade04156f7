"""Hudi table references inside queries become temp views over `read_table`, one per reference.

Per reference: `TIMESTAMP AS OF x` (an instant or a timestamp), `VERSION AS OF n` (the n-th completed
commit, 1-based), partition pruning from the enclosing WHERE, and `hudi_table_changes(...)` as an
incremental read. Everything else in the query is left to Spark.
"""
from __future__ import annotations

import logging

from pyspark.sql import DataFrame
from pyspark.sql.types import NumericType, StringType
from sqlglot import exp

from sqlext.sql.pruning import data_filter, partition_filter
from sqlext.sql.resolver import HudiTableRef, TableName
from sqlext.sql.table import HudiTable
from storage.config import ConfigProperty, MetadataConfigKeys as MK, ReadConfigKeys as RK
from storage.meta_fields import RECORD_KEY
from storage.timeline.instant_time import normalize_instant_time

log = logging.getLogger(__name__)

TABLE_CHANGES = "hudi_table_changes"


def is_table_changes(node: exp.Table) -> bool:
    return isinstance(node.this, exp.Anonymous) and node.this.name.lower() == TABLE_CHANGES


def cte_names(tree: exp.Expression) -> set[str]:
    return {cte.alias_or_name.lower() for cte in tree.find_all(exp.CTE)}


def hudi_references(ctx, tree: exp.Expression) -> list[exp.Table]:
    """Table nodes of `tree` that name Hudi tables (or call hudi_table_changes)."""
    ctes = cte_names(tree)
    found = []
    for node in tree.find_all(exp.Table):
        if is_table_changes(node):
            found.append(node)
        elif not (not node.db and node.name.lower() in ctes) and ctx.resolve(node) is not None:
            found.append(node)
        elif isinstance(node.this, exp.Identifier) and TableName.of(node).path:
            # Spark would answer "Unsupported data source type for direct query on files: hudi", as if path
            # queries did not work: the path is what is wrong
            path = TableName.of(node).path
            raise ctx.error(f"no Hudi table at {path}: it has no .hoodie directory (hudi.`<path>` reads the Hudi "
                            "table whose base path that is)", node, table=path)
    return found


def referenced_names(tree: exp.Expression) -> set[str] | None:
    """Every name the statement could use to refer to a column (lower case), or None when it may use columns
    it does not name: a `*` / `t.*` projection, PIVOT / UNPIVOT (which group by the unnamed columns), a NATURAL
    join. An over-approximation by name alone (any identifier counts), so a pruned read never lacks a column."""
    for star in tree.find_all(exp.Star):
        if not isinstance(star.parent, exp.Count):
            return None
    if any(True for _ in tree.find_all(exp.Pivot)):
        return None
    for join in tree.find_all(exp.Join):
        if str(join.args.get("method") or "").upper() == "NATURAL":
            return None
    return {ident.name.lower() for ident in tree.find_all(exp.Identifier)}


def rewrite_relations(ctx, tree: exp.Expression) -> exp.Expression:
    """A copy of `tree` where every Hudi table reference reads a temp view of the right snapshot, with only
    the columns the statement can refer to (a merge-on-read scan then merges only those)."""
    names = referenced_names(tree)
    tree = tree.copy()
    replaced: set[tuple[str, str]] = set()
    for node in hudi_references(ctx, tree):
        if is_table_changes(node):
            view = ctx.register_view(_table_changes(ctx, node), TABLE_CHANGES)
            node.replace(_view_node(node, view, alias=None))
            continue
        ref = ctx.resolve(node)
        view = ctx.register_view(_snapshot(ctx, node, ref, names), ref.name)
        if node.db:
            replaced.add((node.db.lower(), node.name.lower()))
        node.replace(_view_node(node, view, alias=None if TableName.of(node).path else node.name))
    for column in tree.find_all(exp.Column):
        db = column.args.get("db")
        if db and (db.name.lower(), column.table.lower()) in replaced:
            column.set("db", None)  # db.t.col -> t.col: the view is aliased t
    return tree


def _view_node(node: exp.Table, view: str, alias: str | None) -> exp.Table:
    new = node.copy()
    new.set("this", exp.to_identifier(view))
    for arg in ("db", "catalog", "version"):
        new.set(arg, None)
    if not new.args.get("alias") and alias:
        new.set("alias", exp.TableAlias(this=exp.to_identifier(alias, quoted=True)))
    return new


# -- snapshots -------------------------------------------------------------------------------------
def _snapshot(ctx, node: exp.Table, ref: HudiTableRef, names: set[str] | None = None) -> DataFrame:
    table = HudiTable.load(ref)
    options = time_travel_options(ctx, node, table)
    if ref.query_type:  # <t>_ro reads read-optimized, <t>_rt the realtime (snapshot) view
        options = {**(options or {}), RK.QUERY_TYPE.key: ref.query_type}
    # `SET hoodie.datasource.read.extract.partition.values.from.path=true` applies to queries only
    options = {**(options or {}), **read_session_options(ctx, RK.EXTRACT_PARTITION_VALUES_FROM_PATH)}
    where, single = _enclosing_where(node)
    pf = _pruning(node, table, where, single)
    skip_by = _data_skipping(node, table, where, single)
    columns = None
    if names is not None:
        columns = [c for c in table.snapshot_columns if c.lower() in names]
        if not columns:  # count(*) and the like: one narrow column keeps the rows
            columns = [RECORD_KEY]
    return table.snapshot(ctx.spark, options, pf, columns, skip_by)


def time_travel_options(ctx, node: exp.Table, table: HudiTable) -> dict[str, str] | None:
    version = node.args.get("version")
    if version is None:
        return None
    kind = str(version.this).upper()
    value = version.expression
    if kind == "VERSION":
        return {"as.of.instant": _nth_commit(ctx, value, table)}
    text = _timestamp_text(ctx, value)
    try:
        instant = normalize_instant_time(text)
    except ValueError as exc:
        raise ctx.error(f"TIMESTAMP AS OF on {table.name}: {exc}", value, table=table.name) from None
    return {"as.of.instant": instant}


def _nth_commit(ctx, value: exp.Expression, table: HudiTable) -> str:
    instants = table.meta.timeline.completed().write_timeline().timestamps()
    if isinstance(value, exp.Literal) and value.is_string and value.this.isdigit() and len(value.this) >= 14:
        return normalize_instant_time(value.this)  # VERSION AS OF '<instant>' (Hudi accepts an instant here)
    if not (isinstance(value, exp.Literal) and not value.is_string and value.this.isdigit()):
        raise ctx.error(f"VERSION AS OF needs a commit number (1..{len(instants)}) on {table.name}", value,
                        table=table.name)
    n = int(value.this)
    if not 1 <= n <= len(instants):
        raise ctx.error(f"VERSION AS OF {n}: table {table.name} has {len(instants)} completed commits "
                        f"(versions 1..{len(instants)})", value, table=table.name)
    return instants[n - 1]


def _timestamp_text(ctx, value: exp.Expression) -> str:
    if isinstance(value, exp.Literal):
        return value.this
    # an expression (e.g. current_timestamp() - INTERVAL 1 HOUR): let Spark evaluate it, in the session time zone
    sql = f"SELECT date_format(CAST({value.sql(dialect='spark')} AS TIMESTAMP), 'yyyy-MM-dd HH:mm:ss.SSS')"
    return ctx.run_sql(sql).first()[0]


def partition_types(table: HudiTable) -> dict[str, str]:
    kinds = {}
    for name in table.partition_fields:
        f = table.field(name)
        dtype = f.dataType if f else None
        kinds[name] = "string" if isinstance(dtype, StringType) else "numeric" if isinstance(dtype, NumericType) else "other"
    return kinds


def _enclosing_where(node: exp.Table) -> tuple[exp.Expression | None, bool]:
    """The WHERE condition of the SELECT whose FROM or JOIN names `node`, and whether `node` is its only table."""
    parent = node.parent
    select = parent.parent if isinstance(parent, (exp.From, exp.Join)) else None
    if not isinstance(select, exp.Select):
        return None, False
    where = select.args.get("where")
    return (where.this if where else None), isinstance(parent, exp.From) and not select.args.get("joins")


def _pruning(node: exp.Table, table: HudiTable, where: exp.Expression | None, single: bool):
    cfg = table.meta.table_config
    return partition_filter(where, partition_types(table), {node.alias_or_name.lower()}, single, cfg.keygen_class,
                            cfg.url_encode_partitioning)


def _data_skipping(node: exp.Table, table: HudiTable, where: exp.Expression | None, single: bool):
    """The WHERE clause as a predicate to skip files by, for a table that is a query's only FROM item (an outer
    join's side would let a null-extended row through that its skipped matches would have prevented)."""
    return data_filter(where, table.snapshot_columns, {node.alias_or_name.lower()}, True) if single else None


def where_data_filter(table: HudiTable, where: exp.Expression | None, qualifier: str):
    """Data skipping for UPDATE/DELETE: the WHERE clause of a single-table statement."""
    return data_filter(where, table.snapshot_columns, {qualifier.lower()}, True)


def read_session_options(ctx, *extra: ConfigProperty) -> dict[str, str]:
    """Reader options a session sets with `SET` (data skipping, listing through the metadata table, and `extra`)."""
    out = {}
    for key in (RK.ENABLE_DATA_SKIPPING.key, MK.READER_ENABLE.key, *(p.key for p in extra)):
        value = ctx.spark.conf.get(key, None)
        if value is not None:
            out[key] = value
    return out


def where_partition_filter(table: HudiTable, where: exp.Expression | None, qualifier: str):
    """Pruning for UPDATE/DELETE: the WHERE clause of a single-table statement."""
    cfg = table.meta.table_config
    return partition_filter(where, partition_types(table), {qualifier.lower()}, True, cfg.keygen_class,
                            cfg.url_encode_partitioning)


# -- hudi_table_changes ----------------------------------------------------------------------------
def _table_changes(ctx, node: exp.Table) -> DataFrame:
    call = node.this
    args = call.expressions
    if len(args) not in (3, 4) or not all(isinstance(a, exp.Literal) for a in args):
        raise ctx.error(f"{TABLE_CHANGES}('table', 'latest_state', 'begin instant'[, 'end instant']) takes "
                        "3 or 4 literal arguments", node)
    name, query_type, begin = args[0].this, args[1].this.lower(), args[2].this
    if query_type != "latest_state":
        raise ctx.error(f"{TABLE_CHANGES}: query type {args[1].this!r} is not supported (use 'latest_state')", args[1])
    ref = ctx.resolver.resolve(TableName.parse(name))
    if ref is None:
        raise ctx.error(f"{TABLE_CHANGES}: table {name} is not a Hudi table or does not exist", args[0], table=name)
    options = {RK.QUERY_TYPE.key: "incremental", RK.BEGIN_INSTANTTIME.key: begin}
    if len(args) == 4:
        options[RK.END_INSTANTTIME.key] = args[3].this
    try:
        return HudiTable.load(ref).snapshot(ctx.spark, options)
    except ValueError as exc:
        raise ctx.error(f"{TABLE_CHANGES} on {ref.qualified_name}: {exc}", args[2], table=ref.qualified_name) from None
