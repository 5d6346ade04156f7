"""CREATE INDEX ... USING <type> (...) [OPTIONS (...)] (the form sqlglot keeps as a Command) and DROP INDEX on
Hudi tables (Hudi's secondary, record-level and expression indexes). The plain `CREATE INDEX i ON t (c)` form is
handled by create.py the same way.

Those indexes live in Hudi's metadata table, which this engine reads (storage/metadata/record_index.py) but does
not write yet (issue 40); they speed up lookups but never change what a query returns. So, as for JVM-only table
properties, a statement Java Hudi 1.x would accept is accepted with a warning and has no effect (a script written
for Java Hudi then yields the same rows here), and one Java would refuse is refused with its reason, nothing
written (Hudi's IndexCommands / HoodieIndexUtils rules): a column the table does not have; a type other than
secondary_index, record_index, column_stats, bloom_filters; a record_index not named `record_index` or not over
exactly the record key fields; a secondary or expression index over more than one column; an expression index
(column_stats, bloom_filters) without its `expr` option; a name the table's index definitions
(`.hoodie/.index_defs/index.json`) already hold, unless IF NOT EXISTS.
"""
from __future__ import annotations

import logging
import re

import sqlglot
from pyspark.sql import DataFrame
from sqlglot import exp

from sqlext.sql.result import empty_result
from storage.config import MetadataConfigKeys as MK
from storage.metadata.index_definitions import index_definitions

log = logging.getLogger(__name__)

# the forms sqlglot keeps as a Command (USING <type>, OPTIONS (...))
_CREATE_TEXT = re.compile(r"(?is)^\s*CREATE\s+INDEX\s+(?P<if_not_exists>IF\s+NOT\s+EXISTS\s+)?(?P<index>[`\w]+)\s+ON\s+"
                          r"(?:TABLE\s+)?(?P<table>(?:`[^`]+`|[\w$]+)(?:\s*\.\s*(?:`[^`]+`|[\w$]+))?)"
                          r"(?:\s+USING\s+(?P<type>\w+))?\s*\((?P<columns>[^)]*)\)"
                          r"(?:\s*OPTIONS\s*\((?P<options>[^)]*)\))?")
_OPTION = re.compile(r"""\s*[`'"]?(?P<key>[\w.]+)[`'"]?\s*=\s*(?:'(?P<q>[^']*)'|"(?P<dq>[^"]*)"|(?P<bare>[^,\s]+))\s*""")
INDEX_TYPES = ("secondary_index", "record_index", "column_stats", "bloom_filters")
_EXPRESSION_TYPES = ("column_stats", "bloom_filters")

INDEX_DEFINITIONS_FILE = ".hoodie/.index_defs/index.json"
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
    options = {m["key"].lower(): next(v for v in (m["q"], m["dq"], m["bare"]) if v is not None)
               for m in _OPTION.finditer(found.group("options") or "") if m["key"]}
    return accept(ctx, found.group("index").strip("`"), _table_node(found.group("table")), columns, [],
                  index_type=found.group("type"), options=options, if_not_exists=bool(found.group("if_not_exists")))


def accept(ctx, index: str, table_node: exp.Table, columns: list[str], nodes: list, index_type: str | None = None,
           options: dict[str, str] | None = None, if_not_exists: bool = False) -> DataFrame:
    """Check the statement as Java Hudi does, warn, do nothing."""
    table = ctx.require_table(table_node)
    if not columns:
        raise ctx.error(f"CREATE INDEX {index}: name the indexed columns", table_node, table=table.name)
    for i, column in enumerate(columns):
        if table.field(column) is None:
            raise ctx.error(f"CREATE INDEX {index}: '{column}' is not a column of {table.name} (columns: "
                            f"{', '.join(table.columns)})", nodes[i] if i < len(nodes) else table_node,
                            table=table.name, column=column)
    problem = _refusal(index, _index_type(index_type, columns, table.record_keys), columns, table.record_keys,
                       options or {})
    if problem:
        raise ctx.error(f"CREATE INDEX {index} on {table.name}: {problem}", table_node, table=table.name)
    if _defined(table.meta, index) and not if_not_exists:
        raise ctx.error(f"CREATE INDEX {index} on {table.name}: index already exists (in "
                        f"{INDEX_DEFINITIONS_FILE}; DROP INDEX {index} ON {table.name} first)", table_node,
                        table=table.name)
    log.warning(NO_EFFECT.format(index=index, table=table.name))
    return empty_result(ctx.spark)


def _index_type(given: str | None, columns: list[str], record_keys: list[str]) -> str:
    """The USING type, or Hudi's choice without one: record_index over exactly the key fields, else secondary."""
    if given:
        return given.lower()
    return "record_index" if _over_key_fields(columns, record_keys) else "secondary_index"


def _over_key_fields(columns: list[str], record_keys: list[str]) -> bool:
    return sorted(c.lower() for c in columns) == sorted(k.lower() for k in record_keys)


def _refusal(index: str, index_type: str, columns: list[str], record_keys: list[str],
             options: dict[str, str]) -> str | None:
    """Why Java Hudi refuses this index, None when it accepts it."""
    if index_type not in INDEX_TYPES:
        return f"index type {index_type} is not supported (Hudi's types: {', '.join(INDEX_TYPES)})"
    if index_type == "record_index":
        if index.lower() != "record_index":
            return "a record index must be named record_index"
        if not _over_key_fields(columns, record_keys):
            return f"a record index is over the record key fields ({', '.join(record_keys)}), not {', '.join(columns)}"
        return None
    if len(columns) != 1:
        return f"a {index_type} index is over exactly one column, not {len(columns)}"
    if index_type in _EXPRESSION_TYPES and "expr" not in options:
        return (f"a {index_type} index is an expression index: give OPTIONS (expr = '<function>') (plain column "
                f"stats are the table option {MK.COLUMN_STATS_ENABLE.key})")
    return None


def _defined(meta, index: str) -> bool:
    names = {n.lower() for n in index_definitions(meta)}
    return any(f"{prefix}{index}".lower() in names for prefix in ("", "secondary_index_", "expr_index_"))


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
