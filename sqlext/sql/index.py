"""CREATE INDEX ... USING <type> (...) [OPTIONS (...)] (the form sqlglot keeps as a Command) and DROP INDEX on
Hudi tables (Hudi's secondary, record-level and expression indexes). The plain `CREATE INDEX i ON t (c)` form is
handled by create.py the same way.

Those indexes live in Hudi's metadata table, which this engine does not write; they speed up lookups but never
change what a query returns. So, as for JVM-only table properties, the statement is accepted with a warning
and has no effect, after checking that the table and its columns exist (a script written for Java Hudi then
yields the same rows here).
"""
from __future__ import annotations

import logging
import re

import sqlglot
from pyspark.sql import DataFrame
from sqlglot import exp

from sqlext.sql.result import empty_result

log = logging.getLogger(__name__)

# the forms sqlglot keeps as a Command (USING <type>, OPTIONS (...))
_CREATE_TEXT = re.compile(r"(?is)^\s*CREATE\s+INDEX\s+(?:IF\s+NOT\s+EXISTS\s+)?(?P<index>[`\w]+)\s+ON\s+(?:TABLE\s+)?"
                          r"(?P<table>(?:`[^`]+`|[\w$]+)(?:\s*\.\s*(?:`[^`]+`|[\w$]+))?)"
                          r"(?:\s+USING\s+\w+)?\s*\((?P<columns>[^)]*)\)")

NO_EFFECT = ("index {index} on {table}: Hudi keeps indexes in its metadata table, which this engine does not "
             "write; the statement is accepted and has no effect (queries return the same rows)")


def _table_node(name: str) -> exp.Table:
    return sqlglot.parse_one(f"SELECT * FROM {name}", read="spark").find(exp.Table)


# -- CREATE INDEX ... USING type (...) (Command) -----------------------------------------------------------
def command_matches(ctx, text: str) -> bool:
    found = _CREATE_TEXT.match(text)
    return bool(found) and ctx.resolve(_table_node(found.group("table"))) is not None


def command_plan(ctx, text: str) -> DataFrame:
    found = _CREATE_TEXT.match(text)
    columns = [c.strip().strip("`") for c in found.group("columns").split(",") if c.strip()]
    return accept(ctx, found.group("index").strip("`"), _table_node(found.group("table")), columns, [])


def accept(ctx, index: str, table_node: exp.Table, columns: list[str], nodes: list) -> DataFrame:
    """Check the table and columns, warn, do nothing."""
    table = ctx.require_table(table_node)
    if not columns:
        raise ctx.error(f"CREATE INDEX {index}: name the indexed columns", table_node, table=table.name)
    for i, column in enumerate(columns):
        if table.field(column) is None:
            raise ctx.error(f"CREATE INDEX {index}: '{column}' is not a column of {table.name} (columns: "
                            f"{', '.join(table.columns)})", nodes[i] if i < len(nodes) else table_node,
                            table=table.name, column=column)
    log.warning(NO_EFFECT.format(index=index, table=table.name))
    return empty_result(ctx.spark)


# -- DROP INDEX name ON t (exp.Drop kind INDEX) ------------------------------------------------------------
def _drop_table(node: exp.Drop) -> exp.Table | None:
    on = node.args.get("cluster")
    return on.this if isinstance(on, exp.OnProperty) and isinstance(on.this, exp.Table) else None


def drop_matches(ctx, node: exp.Drop) -> bool:
    table = _drop_table(node)
    return str(node.args.get("kind") or "").upper() == "INDEX" and table is not None \
        and ctx.resolve(table) is not None


def drop_plan(ctx, node: exp.Drop) -> DataFrame:
    table = ctx.require_table(_drop_table(node))
    names = ", ".join(t.name for t in node.args.get("tables") or [])
    log.warning(NO_EFFECT.format(index=names, table=table.name))
    return empty_result(ctx.spark)
