"""DROP TABLE [IF EXISTS] t [PURGE] for Hudi tables: forget the table; delete its files when it lives in its
managed location (or with PURGE), keep them for a table created with an explicit LOCATION, as Spark does."""
from __future__ import annotations

import logging

from pyspark.sql import DataFrame
from sqlglot import exp

from sqlext.sql.resolver import TableName
from sqlext.sql.result import empty_result
from storage.io.storage import HoodieStorage
from storage.io.storage_options import session_storage_options

log = logging.getLogger(__name__)


def matches(ctx, node: exp.Drop) -> bool:
    return str(node.args.get("kind") or "").upper() == "TABLE" and any(
        ctx.resolve(t) is not None or _dangling(ctx, t) is not None
        for t in node.args.get("tables") or [node.this] if isinstance(t, exp.Table))


def _dangling(ctx, table_node: exp.Table):
    """A catalog entry for a Hudi table whose files are gone (resolvers that keep entries, e.g. a metastore)."""
    find = getattr(ctx.resolver, "dangling_entry", None)
    if find is None or not isinstance(table_node.this, exp.Identifier):
        return None
    return find(TableName.of(table_node))


def plan(ctx, node: exp.Drop) -> DataFrame:
    tables = [t for t in (node.args.get("tables") or [node.this]) if isinstance(t, exp.Table)]
    for table_node in tables:
        ref = ctx.resolve(table_node)
        dangling = _dangling(ctx, table_node) if ref is None else None
        if dangling is not None:
            ctx.resolver.unregister(dangling)
            log.info("dropped %s (its files at %s were already gone)", dangling.qualified_name, dangling.path)
            continue
        if ref is None:  # not Hudi: Spark's own DROP handles it
            clause = "IF EXISTS " if node.args.get("exists") else ""
            ctx.run_sql(f"DROP TABLE {clause}{table_node.sql(dialect='spark')}")
            continue
        managed = ref.db is not None and ctx.resolver.location_for(TableName(ref.name, ref.db)).path == ref.path
        ctx.resolver.unregister(ref)
        if managed or node.args.get("purge"):
            HoodieStorage.for_path(ref.path, session_storage_options(ctx.spark)).delete_dir(ref.path)
            log.info("dropped %s and deleted %s", ref.qualified_name, ref.path)
        else:
            log.info("dropped %s; its files stay at %s", ref.qualified_name, ref.path)
    return empty_result(ctx.spark)
