"""DELETE FROM t [WHERE cond]: the addressed rows, written as one `delete` operation."""
from __future__ import annotations

from pyspark.sql import DataFrame
from pyspark.sql import functions as F
from sqlglot import exp

from storage.config import WriteConfigKeys as WK

from sqlext.sql.changes import DELETE, KIND, ROWID, SQL_DML_PAYLOAD, apply_changes, stored_location
from sqlext.sql.key_merge import KEY_SOURCE, plan_key_delete, run_key_merge
from sqlext.sql.result import DmlCounts
from sqlext.sql.table import HudiTable
from sqlext.sql.target import old_values, target_rows


def matches(ctx, node: exp.Delete) -> bool:
    return isinstance(node.this, exp.Table) and ctx.resolve(node.this) is not None


def plan(ctx, node: exp.Delete) -> DataFrame:
    if node.args.get("using"):
        raise ctx.error("DELETE ... USING is not supported: use MERGE INTO ... THEN DELETE", node)
    table = ctx.require_table(node.this)
    counts = _key_delete(ctx, node, table)
    if counts is not None:
        return counts.to_frame(ctx.spark)
    rows = target_rows(ctx, node.this, node.args.get("where"), table)
    table = rows.table
    rowid = table.stored_identity(table.write_options(ctx.spark), rows.alias)
    data = [F.col(f"`{rows.alias}`.`{c}`").alias(c) for c in table.columns]
    changes = rows.frame.select(F.lit(DELETE).alias(KIND), rowid.alias(ROWID), *stored_location(rows.alias), *data,
                                 *old_values(rows))
    return apply_changes(ctx, table, changes, node, "DELETE").to_frame(ctx.spark)


def _key_delete(ctx, node: exp.Delete, table: HudiTable) -> DmlCounts | None:
    """A DELETE that names its rows by record key literals: the delete of those keys, looked up by the write's
    index (no read of the table, no Spark job for a few keys); None when the statement needs the general plan."""
    where = node.args.get("where")
    opts = table.write_options(ctx.spark, {WK.PAYLOAD_CLASS.key: SQL_DML_PAYLOAD})
    planned = plan_key_delete(table, node.this.alias_or_name, where.this if where is not None else None, opts)
    if planned is None:
        return None
    km, source_sql = planned
    return run_key_merge(ctx, table, ctx.spark.sql(source_sql), KEY_SOURCE, km, node, opts, verb="DELETE")
