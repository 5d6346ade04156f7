"""UPDATE t SET col = expr[, ...] [WHERE cond]. As in Hudi, a record key field cannot be assigned, nor a partition
field unless the table's index moves records between partitions (a global one); the write then moves the row."""
from __future__ import annotations

from pyspark.sql import DataFrame
from pyspark.sql import functions as F
from sqlglot import exp

from sqlext.sql.assign import check_assignment, check_identity_assignments, expression_types, parse_assignments
from sqlext.sql.changes import KIND, ROWID, UPDATE, apply_changes, stored_location
from sqlext.sql.scope import check_columns
from sqlext.sql.target import old_values, target_rows


def matches(ctx, node: exp.Update) -> bool:
    return isinstance(node.this, exp.Table) and ctx.resolve(node.this) is not None


def plan(ctx, node: exp.Update) -> DataFrame:
    if node.args.get("from_") or node.args.get("from"):
        raise ctx.error("UPDATE ... FROM is not supported: use MERGE INTO", node)
    rows = target_rows(ctx, node.this, node.args.get("where"))
    table = rows.table
    assignments = parse_assignments(ctx, node.expressions, rows.alias, table)
    check_identity_assignments(ctx, table, assignments, table.write_options(ctx.spark), "UPDATE")
    for value in assignments.values():
        check_columns(ctx, value, [rows.scope])
    sqls = {col: ctx.expr_sql(value) for col, value in assignments.items()}
    types = expression_types(ctx, rows.frame, [(sqls[c], assignments[c]) for c in assignments])
    new = []
    for column in table.columns:
        if column in assignments:
            dtype = table.field(column).dataType
            src = types[list(assignments).index(column)]
            check_assignment(ctx, src, column, dtype, assignments[column], table.name)
            value = F.expr(sqls[column])
            new.append((value if src == dtype else value.cast(dtype)).alias(column))
        else:
            new.append(F.col(f"`{rows.alias}`.`{column}`").alias(column))
    rowid = table.stored_identity(table.write_options(ctx.spark), rows.alias)
    changes = rows.frame.select(F.lit(UPDATE).alias(KIND), rowid.alias(ROWID), *stored_location(rows.alias), *new,
                                 *old_values(rows))
    return apply_changes(ctx, table, changes, node, "UPDATE").to_frame(ctx.spark)
