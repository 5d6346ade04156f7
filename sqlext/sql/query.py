"""Statements Spark runs itself once their Hudi table references read temp views: SELECT (CTEs, joins,
subqueries, set operations), INSERT into a non-Hudi table from Hudi data, CREATE TEMPORARY VIEW / non-Hudi CTAS
over Hudi tables, DESCRIBE of a Hudi table (persistent views: view.py)."""
from __future__ import annotations

from pyspark.sql import DataFrame
from sqlglot import exp

from sqlext.sql.relations import hudi_references, rewrite_relations


def matches(ctx, node: exp.Expression) -> bool:
    return bool(hudi_references(ctx, node))


def plan(ctx, node: exp.Expression) -> DataFrame:
    if isinstance(node, exp.Create) and str(node.args.get("kind") or "").upper() == "VIEW":
        ctx.keep_views = True  # a temporary view reads our temp views each time it is queried
    tree = rewrite_relations(ctx, node)
    if isinstance(tree, exp.Describe) and isinstance(tree.this, exp.Table):
        tree.this.set("alias", None)  # DESCRIBE takes a bare name
    return ctx.run_sql(tree.sql(dialect="spark"), *ctx.sql_args, **ctx.sql_kwargs)


def explain(ctx, text: str) -> DataFrame | None:
    """EXPLAIN [mode] <query> (sqlglot keeps it as a Command): explain the rewritten query, or None when the
    query does not touch Hudi tables (then Spark gets the statement unchanged)."""
    import re

    import sqlglot

    found = re.match(r"(?is)^\s*EXPLAIN(\s+(?:EXTENDED|CODEGEN|COST|FORMATTED))?\s+(.*)$", text)
    if not found:
        return None
    try:
        inner = sqlglot.parse_one(found.group(2), read="spark")
    except sqlglot.errors.ParseError:
        return None
    if isinstance(inner, exp.Command) or not hudi_references(ctx, inner):
        return None
    mode = found.group(1) or ""
    return ctx.run_sql(f"EXPLAIN{mode} {rewrite_relations(ctx, inner).sql(dialect='spark')}")
