"""A MERGE whose ON is the record key equality, run as the one storage write it amounts to.

  MERGE INTO t USING s ON t.key = s.key [AND t.part = s.part]
  WHEN MATCHED THEN UPDATE SET *  WHEN NOT MATCHED THEN INSERT *      -> upsert of the source rows
  WHEN MATCHED THEN DELETE                                            -> delete of the source keys

The write's own index lookup finds the matched rows, so the target snapshot, the join and the change frame of
the general plan (`merge.py`) are not needed. The write requires unique keys: a batch that repeats a key (a
cardinality violation, or two inserts of one key into different partitions) raises before anything is written
and the statement falls back to the general plan, which reports or performs it exactly. ON without the partition
columns of a table whose index is per partition matches a key in any partition: that write looks keys up
globally and moves a row whose partition changes (delete + insert), as the general plan does.
"""
from __future__ import annotations

import logging
from dataclasses import dataclass

from pyspark.sql import DataFrame
from pyspark.sql.types import AtomicType
from pyspark.sql import functions as F
from sqlglot import exp

from sqlext.sql.assign import check_assignment, expression_types
from sqlext.sql.result import DmlCounts
from sqlext.sql.table import HudiTable
from storage.config import HoodieConfig
from storage.config import WriteConfigKeys as WK
from storage.exception import HoodieDuplicateKeyError
from storage.index.bucket_index import is_bucket_index
from storage.table.fs_view import FileSystemView
from storage.timeline.instant import Action
from storage.client.write_client import write_dataframe

log = logging.getLogger(__name__)

UPSERT, DELETE = "upsert", "delete"


@dataclass(frozen=True)
class KeyMerge:
    operation: str                            # upsert | delete
    values: dict[str, exp.Expression]         # table column -> its value, an expression over the source alone
    global_lookup: bool                       # match keys in every partition (ON leaves the partition out)


def same_sql(node: exp.Expression | None) -> str | None:
    """Canonical SQL of an expression for comparing two spellings (quoting and case of names ignored)."""
    if node is None:
        return None
    copy = node.copy()
    for ident in copy.find_all(exp.Identifier):
        ident.set("quoted", False)
        ident.set("this", ident.name.lower())
    return copy.sql(dialect="spark")


def _same(a: exp.Expression, b: exp.Expression) -> bool:
    """`same_sql(a) == same_sql(b)`, without generating SQL when the two are the same tree (SET * and INSERT *)."""
    return a is b or a == b or same_sql(a) == same_sql(b)


def key_equalities(on: exp.Expression, t_alias: str, s_alias: str,
                   allowed: set[str]) -> dict[str, exp.Expression] | None:
    """{target column (lower case): source expression} when ON is only `t.col = <source-only expression>`
    conjuncts over `allowed` columns, else None."""
    out = {}
    for pair in _equalities(on, t_alias, s_alias, allowed):
        if pair is None or pair[0] in out:
            return None
        out[pair[0]] = pair[1]
    return out


def pinned_values(on: exp.Expression, t_alias: str, s_alias: str, allowed: set[str]) -> dict[str, set[str]]:
    """{target column (lower case): `same_sql` of each source expression an ON conjunct equates it with}: the
    value that column already holds in every matched row (other conjuncts may narrow the match further)."""
    out: dict[str, set[str]] = {}
    for pair in _equalities(on, t_alias, s_alias, allowed):
        if pair is not None:
            out.setdefault(pair[0], set()).add(same_sql(pair[1]))
    return out


def _equalities(on: exp.Expression, t_alias: str, s_alias: str,
                allowed: set[str]) -> list[tuple[str, exp.Expression] | None]:
    """Each conjunct of ON as `_target_equality` reads it."""
    return [_target_equality(c, t_alias, s_alias, allowed) for c in (on.flatten() if isinstance(on, exp.And) else [on])]


def _target_equality(node: exp.Expression, t_alias: str, s_alias: str,
                     allowed: set[str]) -> tuple[str, exp.Expression] | None:
    if not isinstance(node, exp.EQ):
        return None
    for t_side, s_side in ((node.this, node.expression), (node.expression, node.this)):
        if (isinstance(t_side, exp.Column) and t_side.table.lower() == t_alias.lower()
                and t_side.name.lower() in allowed and _source_only(s_side, s_alias)):
            return t_side.name.lower(), s_side
    return None


def _source_only(node: exp.Expression, s_alias: str) -> bool:
    return all(c.table and c.table.lower() == s_alias.lower() for c in node.find_all(exp.Column))


def plan_key_merge(table: HudiTable, t_alias: str, s_alias: str, on: exp.Expression, opts: dict,
                   update: dict[str, exp.Expression] | None = None, insert: dict[str, exp.Expression] | None = None,
                   delete: bool = False) -> KeyMerge | None:
    """The single write a MERGE amounts to, or None when it needs the general plan. `update` / `insert`: the
    assignments of its one unconditional WHEN MATCHED UPDATE and WHEN NOT MATCHED INSERT; `delete`: its only
    clause is an unconditional WHEN MATCHED DELETE."""
    keys = {k.lower() for k in table.record_keys}
    parts = {p.lower() for p in table.partition_fields}
    per_partition = not table.key_is_identity(opts)
    on_pairs = key_equalities(on, t_alias, s_alias, keys | (parts if per_partition else set()))
    if on_pairs is None or not keys <= set(on_pairs):
        return None
    named_parts = parts & set(on_pairs)
    if named_parts and named_parts != parts:
        return None  # some partition columns but not all: neither a per-partition nor a global match
    global_lookup = per_partition and bool(parts) and not named_parts
    if delete and update is None and insert is None:
        return KeyMerge(DELETE, _table_spelling(table, on_pairs), global_lookup)
    if delete or update is None or insert is None:
        return None
    columns = {c.lower() for c in table.columns}
    for values in (update, insert):
        lowered = {c.lower(): v for c, v in values.items()}
        if set(lowered) != columns or not all(_source_only(v, s_alias) for v in lowered.values()):
            return None
    if any(not _same(update[c], insert[c]) for c in table.columns):
        return None  # a matched row would not be written as the same record an unmatched one is
    if any(not _same(update[c], on_pairs[c.lower()]) for c in table.columns if c.lower() in on_pairs):
        return None  # the written key is not the one ON matched on
    return KeyMerge(UPSERT, dict(update), global_lookup)


def plan_key_delete(table: HudiTable, alias: str, condition: exp.Expression | None,
                    opts: dict) -> tuple[KeyMerge, str] | None:
    """`DELETE FROM t WHERE key = literal [AND part = literal]` (one IN list of literals at most) as the delete of
    those keys: the key merge and the query of its literal rows (named `KEY_SOURCE`), or None when the statement
    must read the table. Every record key field must be pinned; partition fields all or none (none: a global lookup,
    unless records are identified by key alone, where pinning a partition would filter)."""
    pins = _pinned_literals(condition, alias) if condition is not None else None
    if pins is None:
        return None
    keys = {k.lower() for k in table.record_keys}
    parts = {p.lower() for p in table.partition_fields}
    named_parts = parts & set(pins)
    by_key = table.key_is_identity(opts)
    if not keys <= set(pins) or set(pins) - keys - parts or (named_parts and (by_key or named_parts != parts)):
        return None
    lists = [c for c, values in pins.items() if len(values) > 1]
    if len(lists) > 1:
        return None
    columns = [c for c in table.columns if c.lower() in pins]
    listed = lists[0] if lists else None
    rows = [[v if c.lower() == listed else pins[c.lower()][0] for c in columns]
            for v in (pins[listed] if listed else [None])]
    names = ", ".join(f"`{c.replace('`', '``')}`" for c in columns)
    source = (f"SELECT * FROM VALUES {', '.join('(' + ', '.join(row) + ')' for row in rows)} "
              f"AS {KEY_SOURCE}({names})")
    values = {c: exp.column(c, table=KEY_SOURCE) for c in columns}
    return KeyMerge(DELETE, values, not by_key and bool(parts) and not named_parts), source


KEY_SOURCE = "__hudi_keys"  # the name a key delete's literal rows go by


def _pinned_literals(condition: exp.Expression, alias: str) -> dict[str, list[str]] | None:
    """{column (lower case): the SQL of each literal it is pinned to} when the condition is only conjuncts
    `col = literal` / `col IN (literal, ...)` on distinct columns of the table `alias`; else None."""
    out: dict[str, list[str]] = {}
    for part in condition.flatten() if isinstance(condition, exp.And) else [condition]:
        if isinstance(part, exp.EQ):
            sides = [(part.this, [part.expression]), (part.expression, [part.this])]
        elif isinstance(part, exp.In) and not part.args.get("query"):
            sides = [(part.this, part.expressions)]
        else:
            return None
        column, literals = next(((c, v) for c, v in sides if isinstance(c, exp.Column)), (None, None))
        if column is None or column.table.lower() not in ("", alias.lower()) or column.name.lower() in out or \
                not literals or not all(_is_literal(v) for v in literals):
            return None
        out[column.name.lower()] = [v.sql(dialect="spark") for v in literals]
    return out


def _is_literal(node: exp.Expression) -> bool:
    """A non-null string or number literal (a negative number included)."""
    inner = node.this if isinstance(node, exp.Neg) else node
    return isinstance(inner, exp.Literal) and (inner is node or not inner.is_string)


def _table_spelling(table: HudiTable, pairs: dict[str, exp.Expression]) -> dict[str, exp.Expression]:
    return {c: pairs[c.lower()] for c in table.columns if c.lower() in pairs}


def run_key_merge(ctx, table: HudiTable, source: DataFrame, s_alias: str, km: KeyMerge, node, opts: dict,
                  verb: str = "MERGE") -> DmlCounts | None:
    """Write the merge; None (nothing written) when the general plan must decide."""
    if table.meta.table_config.table_type == "MERGE_ON_READ" and _logs_hold_deletes(table):
        # a key deleted in a log is still in its base file: the index would call its re-insert an update
        return None
    frame = _frame(ctx, table, source, s_alias, km)
    if frame is None:
        return None
    opts = dict(opts)
    opts[WK.OPERATION.key] = km.operation
    opts[WK.ALLOW_EMPTY_COMMIT.key] = "false"
    if km.global_lookup:
        if is_bucket_index(HoodieConfig.of(table.meta.table_config.props)):
            return None  # a bucket table keeps its index: a key is found in its own partition's bucket only
        opts[WK.INDEX_TYPE.key] = "GLOBAL_SIMPLE"
        opts[WK.SIMPLE_INDEX_UPDATE_PARTITION_PATH.key] = "true"
    try:
        metadata = write_dataframe(ctx.spark, frame, table.ref.path, HoodieConfig.of(opts), require_unique_keys=True)
    except HoodieDuplicateKeyError as exc:
        log.info("%s on %s: %s; the general plan decides", verb, table.name, exc)
        return None
    counts = _counts(metadata, km.operation)
    log.info("%s on %s: %s (%s by record key)", verb, table.name, counts, km.operation)
    return counts


def _frame(ctx, table: HudiTable, source: DataFrame, s_alias: str, km: KeyMerge) -> DataFrame | None:
    """The batch: each table column from its source expression (cast as the general plan casts); key and
    partition values must have the column's type or widen to it losslessly (an INT literal for a BIGINT key), so
    the written key is the one ON compared."""
    items = [(ctx.expr_sql(v), v) for v in km.values.values()]
    types = _column_types(source, s_alias, km.values.values())
    aliased = source.alias(s_alias)
    if types is None:  # expressions: Spark's analysis types them
        types = expression_types(ctx, aliased, items)
    matched = {c.lower() for c in table.record_keys} | {p.lower() for p in table.partition_fields}
    cols = []
    for (column, value), (sql, _), dtype in zip(km.values.items(), items, types):
        want = table.field(column).dataType
        if column.lower() in matched and dtype != want and not _widens(dtype, want):
            return None
        check_assignment(ctx, dtype, column, want, value, table.name)
        cols.append((sql, None if dtype == want else want, column))
    if km.operation == DELETE:  # the partition path of a global delete comes from the index, not the batch
        cols += [("NULL", table.field(p).dataType, p) for p in table.partition_fields if p not in km.values]
    if all(want is None or isinstance(want, AtomicType) for _, want, _ in cols):
        # one call: the projection parsed in the JVM (a Column per value costs a round trip each)
        return aliased.selectExpr(*[f"{_cast_sql(sql, want)} AS `{name.replace('`', '``')}`"
                                    for sql, want, name in cols])
    return aliased.select(*[(F.expr(sql) if want is None else F.expr(sql).cast(want)).alias(name)
                            for sql, want, name in cols])


def _cast_sql(sql: str, want) -> str:
    return sql if want is None else f"CAST({sql} AS {want.simpleString()})"


def _column_types(source: DataFrame, s_alias: str, values) -> list | None:
    """The type of each value when every one is a plain column of the source (UPDATE SET *, INSERT *): read from
    the source's schema, no analysis; else None."""
    fields = {f.name.lower(): f.dataType for f in source.schema.fields}
    types = []
    for value in values:
        if not isinstance(value, exp.Column) or value.table.lower() not in ("", s_alias.lower()) or \
                value.name.lower() not in fields:
            return None
        types.append(fields[value.name.lower()])
    return types


_INTEGRAL = ("byte", "short", "integer", "long")


def _widens(dtype, want) -> bool:
    """Whether every value of `dtype` is a value of `want` spelled the same (integral types only)."""
    have, target = dtype.typeName(), want.typeName()
    return have in _INTEGRAL and target in _INTEGRAL and _INTEGRAL.index(have) < _INTEGRAL.index(target)


def _counts(metadata, operation: str) -> DmlCounts:
    if metadata is None:
        return DmlCounts()
    stats = metadata.write_stats()
    deletes = sum(s.numDeletes for s in stats)
    if operation == DELETE:
        return DmlCounts(deleted=deletes)
    # in an upsert every delete is the old place of a row that moved partition: an update, not an insert
    return DmlCounts(inserted=sum(s.numInserts for s in stats) - deletes,
                     updated=sum(s.numUpdateWrites for s in stats) + deletes)


def _logs_hold_deletes(table: HudiTable) -> bool:
    """Whether a log file of a latest file slice holds delete records (per its commit's write stats)."""
    meta = table.meta
    slices = [s for s in FileSystemView(meta).latest_file_slices() if s.log_files]
    if not slices:
        return False
    logs = {lf.name for s in slices for lf in s.log_files}
    oldest = min(s.base_instant for s in slices)  # logs are written after the instant their slice starts at
    for instant in meta.timeline.completed().of_actions([Action.DELTA_COMMIT]):
        if instant.timestamp < oldest:
            continue
        for stat in meta.active_timeline.commit_metadata(instant).write_stats():
            if stat.numDeletes and (stat.path or "").rsplit("/", 1)[-1] in logs:
                return True
    return False
