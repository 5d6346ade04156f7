"""INSERT INTO / INSERT OVERWRITE [TABLE] t [PARTITION (...)] [(cols)] VALUES | SELECT.

INSERT INTO writes with `hoodie.spark.sql.insert.into.operation` (upsert by default: every table here has a
primary key), honouring `hoodie.datasource.insert.dup.policy` (none | drop | fail) for plain inserts.
INSERT OVERWRITE replaces the partitions the data lands in (a PARTITION clause, or dynamic overwrite mode),
else the whole table.
"""
from __future__ import annotations

import logging

from pyspark.sql import DataFrame
from pyspark.sql import functions as F
from sqlglot import exp

from sqlext.sql.assign import check_assignment
from sqlext.sql.result import DmlCounts
from sqlext.sql.table import HudiTable
from storage.config import HoodieConfig
from storage.config import WriteConfigKeys as WK
from storage.config import SparkSqlConfigKeys as SK
from storage.client.write_client import write_dataframe

log = logging.getLogger(__name__)

INSERT_INTO_OPERATION = SK.INSERT_INTO_OPERATION.key
DUP_POLICY = SK.INSERT_DUP_POLICY.key
OVERWRITE_MODE_KEYS = (SK.OVERWRITE_MODE.key, "spark.sql.sources.partitionOverwriteMode")
_INTO_OPERATIONS = ("upsert", "insert", "bulk_insert")


def _target(node: exp.Insert) -> tuple[exp.Table | None, list[exp.Identifier] | None]:
    this = node.this
    if isinstance(this, exp.Schema):
        return (this.this if isinstance(this.this, exp.Table) else None), list(this.expressions)
    return (this if isinstance(this, exp.Table) else None), None


def matches(ctx, node: exp.Insert) -> bool:
    table, _ = _target(node)
    return table is not None and ctx.resolve(table) is not None


def plan(ctx, node: exp.Insert) -> DataFrame:
    table_node, column_list = _target(node)
    table = ctx.require_table(table_node)
    if node.expression is None:
        raise ctx.error("INSERT needs VALUES or a query", node, table=table.name)
    static, dynamic = _partition_spec(ctx, table_node, table)
    source = ctx.query(node.expression)
    batch = _align(ctx, node, table, source, column_list, static)
    overwrite = bool(node.args.get("overwrite"))
    opts = table.write_options(ctx.spark)
    operation = _overwrite_operation(ctx, table, static, dynamic) if overwrite else _into_operation(ctx, opts, node)
    if operation in ("insert", "bulk_insert"):
        batch = _apply_dup_policy(ctx, table, batch, opts, node)
    opts[WK.OPERATION.key] = operation
    log.info("INSERT %s into %s as %s", "OVERWRITE" if overwrite else "INTO", table.name, operation)
    metadata = write_dataframe(ctx.spark, batch, table.ref.path, HoodieConfig.of(opts))
    stats = metadata.write_stats() if metadata is not None else []
    counts = DmlCounts(inserted=sum(s.numInserts or 0 for s in stats), updated=sum(s.numUpdateWrites or 0 for s in stats))
    return counts.to_frame(ctx.spark)


def _partition_spec(ctx, node: exp.Table, table: HudiTable) -> tuple[dict[str, exp.Expression], list[str]]:
    spec = node.args.get("partition")
    static, dynamic = {}, []
    if spec is None:
        return static, dynamic
    fields = {f.lower(): f for f in table.partition_fields}
    for item in spec.expressions:
        column = item.this if isinstance(item, exp.EQ) else item
        name = column.name if isinstance(column, (exp.Column, exp.Identifier)) else None
        if name is None or name.lower() not in fields:
            raise ctx.error(f"PARTITION ({item.sql(dialect='spark')}): '{name}' is not a partition column of "
                            f"{table.name} (partition columns: {', '.join(table.partition_fields) or 'none'})",
                            item, table=table.name, column=name)
        field = fields[name.lower()]
        if isinstance(item, exp.EQ):
            static[field] = item.expression
        else:
            dynamic.append(field)
    return static, dynamic


def _align(ctx, node: exp.Insert, table: HudiTable, source: DataFrame, column_list, static) -> DataFrame:
    """The source rows as the table's columns, in table order, cast to the table's types."""
    static_lower = {c.lower() for c in static}
    if column_list is not None:
        targets = []
        for ident in column_list:
            f = table.field(ident.name)
            if f is None:
                raise ctx.error(f"column '{ident.name}' does not exist in {table.name} (columns: "
                                f"{', '.join(table.columns)})", ident, table=table.name, column=ident.name)
            if f.name in targets or f.name.lower() in static_lower:
                raise ctx.error(f"column '{f.name}' is given twice", ident, column=f.name)
            targets.append(f.name)
        sources = source.columns
    elif node.args.get("by_name"):
        targets, sources = [], []
        for name in source.columns:
            f = table.field(name)
            if f is None:
                raise ctx.error(f"INSERT BY NAME: the query's column '{name}' does not exist in {table.name}",
                                node.expression, table=table.name, column=name)
            targets.append(f.name)
            sources.append(name)
    else:
        targets = [c for c in table.columns if c.lower() not in static_lower]
        sources = source.columns
    positional = column_list is None and not node.args.get("by_name")
    if len(sources) != len(targets):
        raise ctx.error(f"INSERT into {table.name}: the data has {len(sources)} columns but {len(targets)} are "
                        f"expected ({', '.join(targets)})", node.expression, table=table.name)
    # positional names: query columns may be called anything ("1.0", duplicates, ...)
    index_of = {name: i for i, name in enumerate(source.columns)}
    source_index = {t: (index_of[s] if node.args.get("by_name") else i) for i, (t, s) in enumerate(zip(targets, sources))}
    fields = source.schema.fields
    source = source.toDF(*[f"__hudi_c{i}" for i in range(len(fields))])
    columns = []
    for column in table.columns:
        dtype = table.field(column).dataType
        if column in static:
            columns.append(F.expr(static[column].sql(dialect="spark")).cast(dtype).alias(column))
        elif column in source_index:
            i = source_index[column]
            src_type = fields[i].dataType
            check_assignment(ctx, src_type, column, dtype, _value_node(node.expression, i), table.name,
                             _order_hint(table, targets) if positional else "")
            value = F.col(f"__hudi_c{i}")
            columns.append((value if src_type == dtype else value.cast(dtype)).alias(column))
        else:
            if column in table.record_keys:
                raise ctx.error(f"INSERT into {table.name} must give the record key column '{column}'",
                                node.expression, table=table.name, column=column)
            columns.append(F.lit(None).cast(dtype).alias(column))
    return source.select(*columns)


def _order_hint(table: HudiTable, targets: list[str]) -> str:
    """Values given by position follow the table's column order, where partition columns come last (also after
    columns added later by ALTER TABLE ADD COLUMNS): say so, and how to name the columns instead."""
    if not table.partition_fields:
        return ""
    return (f" (values without a column list go in the table's column order: {', '.join(targets)}; partition "
            f"columns ({', '.join(table.partition_fields)}) come last, after added columns; or name the columns: "
            f"INSERT INTO {table.name} ({', '.join(targets)}) ...)")


def _value_node(query: exp.Expression, i: int) -> exp.Expression:
    """The expression producing the i-th column (for error positions)."""
    if isinstance(query, exp.Values) and query.expressions:
        row = query.expressions[0]
        items = row.expressions if isinstance(row, exp.Tuple) else [row]
        return items[i] if i < len(items) else query
    if isinstance(query, exp.Select) and i < len(query.expressions) and not query.is_star:
        return query.expressions[i]
    return query


def _into_operation(ctx, opts: dict[str, str], node) -> str:
    op = (opts.get(INSERT_INTO_OPERATION) or "upsert").strip().lower()
    if op not in _INTO_OPERATIONS:
        raise ctx.error(f"{INSERT_INTO_OPERATION}={op!r}: expected one of {', '.join(_INTO_OPERATIONS)}", node)
    return op


def _overwrite_operation(ctx, table: HudiTable, static: dict, dynamic: list) -> str:
    if not table.partition_fields:
        return "insert_overwrite_table"
    if static or dynamic:
        return "insert_overwrite"
    mode = "static"
    for key in OVERWRITE_MODE_KEYS:
        value = table.write_options(ctx.spark).get(key) or _conf(ctx, key)
        if value:
            mode = value.strip().lower()
            break
    return "insert_overwrite" if mode == "dynamic" else "insert_overwrite_table"


def _conf(ctx, key: str) -> str | None:
    try:
        return ctx.spark.conf.get(key, None)
    except Exception:
        return None


def _apply_dup_policy(ctx, table: HudiTable, batch: DataFrame, opts: dict[str, str], node) -> DataFrame:
    policy = (opts.get(DUP_POLICY) or "none").strip().lower()
    if policy == "none":
        return batch
    if policy not in ("drop", "fail"):
        raise ctx.error(f"{DUP_POLICY}={policy!r}: expected none, drop or fail", node)
    ident = "__hudi_id"
    keyed = batch.withColumn(ident, table.identity(opts))
    stored = table.snapshot(ctx.spark).select(table.stored_identity(opts).alias(ident))
    if policy == "drop":
        return keyed.join(stored, ident, "left_anti").drop(ident)
    clash = keyed.join(stored, ident, "left_semi").select(ident).limit(1).collect()
    if clash:
        key = str(clash[0][0]).split("\u0001")[0]
        raise ctx.error(f"INSERT into {table.name}: record key '{key}' already exists ({DUP_POLICY}=fail). "
                        "Nothing was written.", node, table=table.name)
    return batch
