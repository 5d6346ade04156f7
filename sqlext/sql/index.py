"""CREATE INDEX ... USING <type> (...) [OPTIONS (...)] (the form sqlglot keeps as a Command), DROP INDEX and
SHOW INDEXES on Hudi tables (Hudi's record-level, secondary and expression indexes, kept in its metadata table).
The plain `CREATE INDEX i ON t (c)` form is handled by create.py the same way.

- CREATE INDEX record_index ON t (<record key fields>) [USING record_index] builds the metadata table's
  `record_index` partition from the table as it stands (storage/table_service/index_admin.py); writers keep it
  in step from then on.
- CREATE INDEX name ON t (column) [USING secondary_index] defines a secondary index and builds it (Hudi's rules:
  the record index exists or is enabled in the table's options; the column's type is one the index can hold;
  table version 8 or 9); writers keep it in step from then on.
- CREATE INDEX of an expression index (column_stats / bloom_filters with `expr`): not built by this engine. They
  speed up lookups but never change what a query returns, so, as for JVM-only table properties, a statement Java
  Hudi 1.x would accept is accepted with a warning and has no effect (a script written for Java Hudi then yields
  the same rows here).
- Either way a statement Java would refuse is refused with its reason, nothing written (Hudi's IndexCommands /
  HoodieIndexUtils rules): a column the table does not have; a type other than secondary_index, record_index,
  column_stats, bloom_filters; a record_index not named `record_index` or not over exactly the record key
  fields; a secondary or expression index over more than one column; an expression index (column_stats,
  bloom_filters) without its `expr` option; a name the table already has (its index definitions,
  `.hoodie/.index_defs/index.json`, or its metadata partitions), unless IF NOT EXISTS.
- DROP INDEX [IF EXISTS] name ON [TABLE] t drops the index's metadata-table partition and index definition; the
  name is the user's (`merchant_idx`) or the partition's (`secondary_index_merchant_idx`, `record_index`,
  `column_stats`, ...). A name the table does not have is Hudi's "Index does not exist", unless IF EXISTS.
  (`DROP INDEX i ON TABLE t` does not parse with sqlglot: the interceptor hands such text here.)
- SHOW INDEXES (FROM|IN) [TABLE] t lists them with Hudi's output columns and values (see
  index_admin.show_indexes for Hudi's odd placement of the values).
"""
from __future__ import annotations

import logging
import re

import sqlglot
from pyspark.sql import DataFrame
from sqlglot import exp

from sqlext.sql.result import empty_result
from storage.config import HoodieConfig
from storage.config import MetadataConfigKeys as MK
from storage.metadata.index_definitions import index_definitions
from storage.metadata.table_metadata import FILES, enabled_partitions

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
NO_EFFECT = ("index {index} on {table}: this engine builds no {kind} index (record and secondary indexes only); "
             "the statement is accepted and has no effect (queries return the same rows)")
_NAME = r"(?:`[^`]+`|[\w$]+)(?:\s*\.\s*(?:`[^`]+`|[\w$]+))?"
_DROP_TEXT = re.compile(rf"(?is)^\s*DROP\s+INDEX\s+(?P<if_exists>IF\s+EXISTS\s+)?(?P<index>`[^`]+`|[\w$]+)\s+ON\s+"
                        rf"(?:TABLE\s+)?(?P<table>{_NAME})\s*;?\s*$")
_SHOW_TEXT = re.compile(rf"(?is)^\s*SHOW\s+INDEX(?:ES)?\s+(?:FROM|IN)\s+(?:TABLE\s+)?(?P<table>{_NAME})\s*;?\s*$")
SHOW_SCHEMA = "index_name string, col_name string, index_type string"  # Hudi's ShowIndexes output


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
    """Check the statement as Java Hudi does; build a record index, accept the others with a warning."""
    table = ctx.require_table(table_node)
    if not columns:
        raise ctx.error(f"CREATE INDEX {index}: name the indexed columns", table_node, table=table.name)
    for i, column in enumerate(columns):
        if table.field(column) is None:
            raise ctx.error(f"CREATE INDEX {index}: '{column}' is not a column of {table.name} (columns: "
                            f"{', '.join(table.columns)})", nodes[i] if i < len(nodes) else table_node,
                            table=table.name, column=column)
    kind = _index_type(index_type, columns, table.record_keys)
    problem = _refusal(index, kind, columns, table.record_keys, options or {})
    if problem:
        raise ctx.error(f"CREATE INDEX {index} on {table.name}: {problem}", table_node, table=table.name)
    if _defined(table.meta, index):
        if not if_not_exists:
            raise ctx.error(f"CREATE INDEX {index} on {table.name}: index already exists (in "
                            f"{INDEX_DEFINITIONS_FILE} or the metadata table; DROP INDEX {index} ON {table.name} "
                            f"first)", table_node, table=table.name)
        log.info("CREATE INDEX IF NOT EXISTS %s on %s: the table has it", index, table.name)
        return empty_result(ctx.spark)
    if kind == "record_index":
        return _create_record_index(ctx, table, table_node)
    if kind == "secondary_index":
        return _create_secondary_index(ctx, table, table_node, index, columns[0])
    log.warning(NO_EFFECT.format(index=index, table=table.name,
                                 kind=f"{kind} expression" if kind in _EXPRESSION_TYPES else kind))
    return empty_result(ctx.spark)


def _create_secondary_index(ctx, table, table_node: exp.Table, index: str, column: str) -> DataFrame:
    from storage.exception import HoodieError
    from storage.table_service.index_admin import create_secondary_index

    try:
        create_secondary_index(table.ref.path, index, table.field(column).name,
                               HoodieConfig.of(table.write_options(ctx.spark)))
    except HoodieError as exc:
        raise ctx.error(f"CREATE INDEX {index} on {table.name}: {exc}", table_node, table=table.name,
                        column=column) from exc
    log.info("CREATE INDEX %s on %s (%s): built", index, table.name, column)
    return empty_result(ctx.spark)


def _create_record_index(ctx, table, table_node: exp.Table) -> DataFrame:
    from storage.exception import HoodieError
    from storage.table_service.index_admin import create_record_index

    config = HoodieConfig.of(table.write_options(ctx.spark))
    try:
        built = create_record_index(table.ref.path, config)
    except HoodieError as exc:
        raise ctx.error(f"CREATE INDEX record_index on {table.name}: {exc}", table_node, table=table.name) from exc
    if not built:
        raise ctx.error(f"CREATE INDEX record_index on {table.name}: the record index was not built (table "
                        f"version {table.meta.table_config.version}: the metadata table needs version 6, 8 or 9)",
                        table_node, table=table.name)
    log.info("CREATE INDEX record_index on %s: built", table.name)
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
    names |= {p.lower() for p in enabled_partitions(meta) if p != FILES}
    return any(f"{prefix}{index}".lower() in names for prefix in ("", "secondary_index_", "expr_index_"))


# -- DROP INDEX [IF EXISTS] name ON t (exp.Drop kind INDEX; `ON TABLE t` does not parse: text) -------------------
def _drop_table(node: exp.Drop) -> exp.Table | None:
    on = node.args.get("cluster")
    return on.this if isinstance(on, exp.OnProperty) and isinstance(on.this, exp.Table) else None


def drop_matches(ctx, node: exp.Drop) -> bool:
    table = _drop_table(node)
    return str(node.args.get("kind") or "").upper() == "INDEX" and table is not None \
        and ctx.resolve(table) is not None


def drop_plan(ctx, node: exp.Drop) -> DataFrame:
    names = node.args.get("tables") or []
    if len(names) != 1:
        raise ctx.error("DROP INDEX names one index", node)
    return drop(ctx, names[0].name, _drop_table(node), bool(node.args.get("exists")), names[0])


def _text_names_hudi_table(ctx, pattern: re.Pattern, text: str) -> bool:
    """Whether `text` matches `pattern` and its `table` group names a Hudi table."""
    found = pattern.match(text)
    try:
        return bool(found) and ctx.resolve(_table_node(found.group("table"))) is not None
    except sqlglot.errors.ParseError:
        return False


def drop_text_matches(ctx, text: str) -> bool:
    return _text_names_hudi_table(ctx, _DROP_TEXT, text)


def drop_text_plan(ctx, text: str) -> DataFrame:
    found = _DROP_TEXT.match(text)
    return drop(ctx, found.group("index").strip("`"), _table_node(found.group("table")),
                bool(found.group("if_exists")))


def drop(ctx, index: str, table_node: exp.Table, if_exists: bool, index_node: exp.Expression | None = None
         ) -> DataFrame:
    """DROP INDEX `index` ON the table: its metadata partition and index definition go (index_admin.drop_index);
    Hudi's "Index does not exist" when the table has none of that name, unless IF EXISTS."""
    from storage.exception import HoodieIndexError
    from storage.table_service.index_admin import drop_index

    table = ctx.require_table(table_node)
    try:
        dropped = drop_index(table.ref.path, index, HoodieConfig.of(table.write_options(ctx.spark)))
    except HoodieIndexError as exc:
        raise ctx.error(f"DROP INDEX {index} on {table.name}: {exc}", index_node or table_node,
                        table=table.name) from exc
    if dropped is None:
        if not if_exists:
            raise ctx.error(f"DROP INDEX {index} on {table.name}: Index does not exist: {index} (SHOW INDEXES "
                            f"FROM {table.name} lists the table's indexes)", index_node or table_node,
                            table=table.name)
        log.info("DROP INDEX IF EXISTS %s on %s: the table has no such index", index, table.name)
    else:
        log.info("DROP INDEX %s on %s: dropped %s", index, table.name, dropped)
    return empty_result(ctx.spark)


# -- SHOW INDEXES (FROM|IN) [TABLE] t (Command) ---------------------------------------------------------------
def show_matches(ctx, text: str) -> bool:
    return _text_names_hudi_table(ctx, _SHOW_TEXT, text)


def show_plan(ctx, text: str) -> DataFrame:
    from storage.table_service.index_admin import show_indexes

    table = ctx.require_table(_table_node(_SHOW_TEXT.match(text).group("table")))
    return ctx.spark.createDataFrame(show_indexes(table.ref.path), SHOW_SCHEMA)
