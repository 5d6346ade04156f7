"""TRUNCATE TABLE t [PARTITION (k = v, ...)] on Hudi tables: one DELETE_PARTITION replacecommit replacing every
file group of the table (or of the matching partitions), as Hudi's TruncateHoodieTableCommand does for a
partition spec. The files stay until the cleaner runs, so time travel to before the truncate still reads
them; readers (ours, hudi-rs, Java Hudi) read the replaced file groups as gone."""
from __future__ import annotations

import logging
from urllib.parse import unquote

from pyspark.sql import DataFrame
from sqlglot import exp

from sqlext.sql.result import empty_result
from sqlext.sql.table import HudiTable
from storage.write.table_commits import commit_delete_partitions
from storage.table.fs_view import FileSystemView

log = logging.getLogger(__name__)


def matches(ctx, node: exp.TruncateTable) -> bool:
    return any(isinstance(t, exp.Table) and ctx.resolve(t) is not None for t in node.expressions)


def plan(ctx, node: exp.TruncateTable) -> DataFrame:
    tables = [t for t in node.expressions if isinstance(t, exp.Table)]
    if len(tables) != 1:
        raise ctx.error("TRUNCATE TABLE takes one table", node)
    table = ctx.require_table(tables[0])
    if table.ref.query_type is not None:
        raise ctx.error(f"{table.name} is a read-optimized / real-time view: truncate the table itself", tables[0],
                        table=table.name)
    partition = node.args.get("partition")
    targets = None
    if partition is not None:
        targets = matching_partitions(table, partition_spec(ctx, table, partition))
        if not targets:
            log.info("TRUNCATE %s: no partition matches %s", table.name, partition.sql(dialect="spark"))
            return empty_result(ctx.spark)
    instant = commit_delete_partitions(table.meta, targets)
    ctx.resolver.refresh(table.ref)
    log.info("truncated %s%s at %s", table.name, f" partitions {targets}" if targets else "", instant)
    return empty_result(ctx.spark)


def partition_spec(ctx, table: HudiTable, part: exp.Expression) -> dict[str, str]:
    """`PARTITION (k = 'v', ...)` -> {partition field: value}; every key must be a partition field."""
    fields = {f.lower(): f for f in table.partition_fields}
    if not fields:
        raise ctx.error(f"{table.name} is not partitioned: PARTITION (...) does not apply", part, table=table.name)
    spec: dict[str, str] = {}
    for item in part.expressions:
        if not isinstance(item, exp.EQ) or not isinstance(item.this, exp.Column):
            raise ctx.error(f"partition spec '{item.sql(dialect='spark')}': expected column = value", item,
                            table=table.name)
        key = item.this.name
        if key.lower() not in fields:
            raise ctx.error(f"'{key}' is not a partition column of {table.name} (partition columns: "
                            f"{', '.join(table.partition_fields)})", item, table=table.name, column=key)
        value = item.expression
        if isinstance(value, exp.Null):
            raise ctx.error(f"partition value of '{key}' cannot be NULL", item, table=table.name, column=key)
        spec[fields[key.lower()]] = value.name if isinstance(value, exp.Literal) else value.sql(dialect="spark")
    return spec


def partition_values(table: HudiTable, partition_path: str) -> dict[str, str]:
    """The partition field values a relative partition path stands for (hive style `k=v` or bare values)."""
    fields = table.partition_fields
    segments = partition_path.split("/") if partition_path else []
    values = {}
    for name, segment in zip(fields, segments):
        value = segment.split("=", 1)[1] if "=" in segment and segment.split("=", 1)[0] == name else segment
        values[name] = unquote(value)
    return values


def matching_partitions(table: HudiTable, spec: dict[str, str]) -> list[str]:
    """Partitions (relative paths) of the latest snapshot whose values match `spec` (a prefix or any subset)."""
    view = FileSystemView(table.meta)
    out = []
    for path in view.partitions():
        if not view.file_groups(path):
            continue
        values = partition_values(table, path)
        if all(values.get(k) == v for k, v in spec.items()):
            out.append(path)
    return out
