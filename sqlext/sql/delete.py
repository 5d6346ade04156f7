"""DELETE FROM t [WHERE cond]: the addressed rows, written as one `delete` operation."""
from __future__ import annotations

from pyspark.sql import DataFrame
from pyspark.sql import functions as F
from sqlglot import exp

from sqlext.sql.changes import DELETE, KIND, ROWID, apply_changes, stored_location
from sqlext.sql.target import old_values, target_rows


def matches(ctx, node: exp.Delete) -> bool:
    return isinstance(node.this, exp.Table) and ctx.resolve(node.this) is not None


def plan(ctx, node: exp.Delete) -> DataFrame:
    if node.args.get("using"):
        raise ctx.error("DELETE ... USING is not supported: use MERGE INTO ... THEN DELETE", node)
    rows = target_rows(ctx, node.this, node.args.get("where"))
    table = rows.table
    rowid = table.stored_identity(table.write_options(ctx.spark), rows.alias)
    data = [F.col(f"`{rows.alias}`.`{c}`").alias(c) for c in table.columns]
    changes = rows.frame.select(F.lit(DELETE).alias(KIND), rowid.alias(ROWID), *stored_location(rows.alias), *data,
                                 *old_values(rows))
    return apply_changes(ctx, table, changes, node, "DELETE").to_frame(ctx.spark)
