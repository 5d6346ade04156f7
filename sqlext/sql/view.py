"""CREATE [OR REPLACE] VIEW over Hudi tables: a persistent view Spark can read without the SQL front end.

The view is stored in the metastore as SQL text, and Spark refuses a persistent view that reads a temporary view
(INVALID_TEMP_OBJ_REFERENCE), so the front end's usual rewrite (each Hudi reference becomes a temp view) does not
apply. Instead each Hudi reference stays the catalog table it names, with the table's base path as a read option:
``db.t WITH ('path' = '<base path>')``. Spark resolves a Hudi catalog table to the `hudi` Python data source
(sqlext.datasource) but hands it only a scan's options, never the table's location (PythonDataSourceV2.getTable
drops the catalog properties), so the option carries it. The view reads the table's latest snapshot whenever it
is queried; a reference with `TIMESTAMP AS OF` / `VERSION AS OF` is pinned to the instant it named at creation,
and `<t>_ro` reads read-optimized. DROP VIEW needs nothing of ours (Spark's own DROP VIEW runs).
"""
from __future__ import annotations

import re

from pyspark.sql import DataFrame
from sqlglot import exp

from sqlext.sql.relations import hudi_references, is_table_changes, time_travel_options
from sqlext.sql.resolver import HudiTableRef
from sqlext.sql.table import HudiTable
from storage.config import ReadConfigKeys as RK

_PLACEHOLDER = "__sqlext_view_ref_{}__"


def matches(ctx, node: exp.Create) -> bool:
    """A persistent (not TEMPORARY) CREATE VIEW whose query names a Hudi table."""
    if str(node.args.get("kind") or "").upper() != "VIEW" or _is_temporary(node):
        return False
    return node.expression is not None and bool(hudi_references(ctx, node.expression))


def _is_temporary(node: exp.Create) -> bool:
    props = node.args.get("properties")
    return any(isinstance(p, exp.TemporaryProperty) for p in (props.expressions if props else []))


def plan(ctx, node: exp.Create) -> DataFrame:
    tree = node.copy()
    references = {}  # placeholder -> the SQL text Spark gets in its place
    for i, table_node in enumerate(hudi_references(ctx, tree.expression)):
        placeholder = _PLACEHOLDER.format(i)
        references[placeholder] = _catalog_reference(ctx, table_node)
        replacement = exp.Table(this=exp.to_identifier(placeholder))
        if table_node.args.get("alias"):
            replacement.set("alias", table_node.args["alias"])
        table_node.replace(replacement)
    text = tree.sql(dialect="spark")
    # sqlglot has no syntax for Spark's `t WITH (options)`: put the references into the generated text instead
    for placeholder, reference in references.items():
        text = re.sub(rf"`?\b{placeholder}\b`?", lambda _m, r=reference: r, text)
    return ctx.run_sql(text)


def _catalog_reference(ctx, node: exp.Table) -> str:
    """``db.t WITH ('path' = ..., ...)`` for a Hudi reference, or a clear error for what a stored view cannot
    name: incremental reads, path-addressed tables and tables Spark's catalog does not hold."""
    if is_table_changes(node):
        raise ctx.error("a persistent view cannot read hudi_table_changes(...): its begin instant would be frozen "
                        "into the view (use CREATE TEMPORARY VIEW)", node)
    ref = ctx.resolve(node)
    if ref.db is None:
        raise ctx.error(f"a persistent view cannot read the path-addressed table {ref.qualified_name}: register it "
                        f"first (CREATE TABLE <name> USING hudi LOCATION '{ref.path}') and name that table, or use "
                        "CREATE TEMPORARY VIEW", node, table=ref.qualified_name)
    if not _in_spark_catalog(ctx, ref):
        raise ctx.error(f"a persistent view cannot read {ref.qualified_name}: the table is not in Spark's catalog "
                        "(persistent views over Hudi tables need the session's metastore, as sqlext.session() "
                        "attaches; or use CREATE TEMPORARY VIEW)", node, table=ref.qualified_name)
    options = {"path": ref.path, **_read_options(ctx, node, ref)}
    listed = ", ".join(f"{_literal(k)} = {_literal(v)}" for k, v in options.items())
    return f"{_quoted(ref.db)}.{_quoted(ref.name)} WITH ({listed})"


def _read_options(ctx, node: exp.Table, ref: HudiTableRef) -> dict[str, str]:
    """Options the Python data source reads besides the path: the pinned instant of a time-travel reference and
    the query type of a `<t>_ro` / `<t>_rt` table."""
    options = {}
    if node.args.get("version") is not None:
        options.update(time_travel_options(ctx, node, HudiTable.load(ref)) or {})
    if ref.query_type:
        options[RK.QUERY_TYPE.key] = ref.query_type
    return options


def _in_spark_catalog(ctx, ref: HudiTableRef) -> bool:
    try:
        return bool(ctx.spark.catalog.tableExists(f"{_quoted(ref.db)}.{_quoted(ref.name)}"))
    except Exception:  # a database Spark does not know: not in its catalog either
        return False


def _quoted(identifier: str) -> str:
    return "`" + identifier.replace("`", "``") + "`"


def _literal(value: str) -> str:
    return "'" + value.replace("\\", "\\\\").replace("'", "\\'") + "'"
