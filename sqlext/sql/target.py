"""The rows of a Hudi table an UPDATE or DELETE addresses: the snapshot (pruned by the WHERE clause's
partition predicates), filtered by the WHERE clause, under the statement's alias."""
from __future__ import annotations

from dataclasses import dataclass

from pyspark.sql import DataFrame
from pyspark.sql import functions as F
from sqlglot import exp

from sqlext.sql.assign import check_boolean, expression_types
from sqlext.sql.relations import read_session_options, where_data_filter, where_partition_filter
from sqlext.sql.scope import Scope, check_columns
from sqlext.sql.table import HudiTable


@dataclass
class TargetRows:
    table: HudiTable
    alias: str
    frame: DataFrame      # the addressed rows, meta + data columns, aliased
    scope: Scope


def target_rows(ctx, node: exp.Table, where: exp.Where | None, table: HudiTable | None = None) -> TargetRows:
    """`table`: the table `node` names, when the caller loaded it already."""
    table = table or ctx.require_table(node)
    alias = node.alias_or_name
    condition = where.this if where is not None else None
    if node.db and condition is not None:
        for column in condition.find_all(exp.Column):  # db.t.col -> t.col
            db = column.args.get("db")
            if db and db.name.lower() == node.db.lower():
                column.set("db", None)
    snapshot = table.snapshot(ctx.spark, read_session_options(ctx), where_partition_filter(table, condition, alias),
                              data_filter=where_data_filter(table, condition, alias))
    scope = Scope(alias, table.name, tuple(snapshot.columns))
    check_columns(ctx, condition, [scope])
    frame = snapshot.alias(alias)
    if condition is not None:
        sql = ctx.expr_sql(condition)
        check_boolean(ctx, expression_types(ctx, frame, [(sql, condition)])[0], condition, "the WHERE condition")
        frame = frame.where(F.expr(sql))
    return TargetRows(table, alias, frame, scope)


def old_values(rows: TargetRows) -> list:
    from sqlext.sql.changes import old_col

    return [F.col(f"`{rows.alias}`.`{c}`").alias(old_col(i)) for i, c in enumerate(rows.table.columns)]
