"""MERGE INTO as Spark joins: the target snapshot joined with the source, the first matching WHEN clause of
each row chosen by a CASE chain, and the result handed to `changes.apply_changes` as one write batch."""
from __future__ import annotations

import logging
from dataclasses import dataclass, field
from functools import cached_property

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F
from sqlglot import exp

from storage.config import WriteConfigKeys as WK
from sqlext.sql.assign import (
    check_assignment,
    check_boolean,
    check_identity_assignments,
    expression_types,
    parse_assignments,
    spark_column,
    spark_message,
)
from sqlext.sql.changes import (CARD, DELETE, INSERT, KIND, ROWID, SQL_DML_PAYLOAD, UPDATE, apply_changes, old_col,
                                stored_location)
from sqlext.sql.errors import HoodieSqlError
from sqlext.sql.key_merge import key_equalities, pinned_values, plan_key_merge, run_key_merge, same_sql
from sqlext.sql.result import DmlCounts
from sqlext.sql.scope import Scope, check_columns
from sqlext.sql.table import HudiTable

log = logging.getLogger(__name__)

T_FLAG, S_FLAG = "__hudi_t", "__hudi_s"
SOURCE_ALIAS = "__hudi_source"  # a source the statement gives no name: `USING (SELECT ...)`, `USING (VALUES ...)`
MATCHED, NOT_MATCHED, BY_SOURCE = "WHEN MATCHED", "WHEN NOT MATCHED", "WHEN NOT MATCHED BY SOURCE"


@dataclass
class Clause:
    index: int
    group: str                         # MATCHED | NOT_MATCHED | BY_SOURCE
    kind: str                          # update | delete | insert
    node: exp.When
    condition: exp.Expression | None
    assignments: dict[str, exp.Expression] = field(default_factory=dict)  # target column -> value
    star: bool = False                 # UPDATE SET * / INSERT *: every column from the source column of its name


@dataclass
class MergeSides:
    table: HudiTable
    t_alias: str
    s_alias: str
    source: DataFrame

    @cached_property
    def target(self) -> DataFrame:
        """The table's snapshot, planned only when the general plan joins it (a key merge never reads it)."""
        return self.table.snapshot(self.source.sparkSession)

    def t(self, column: str) -> Column:
        return F.col(f"`{self.t_alias}`.`{column}`")


def matches(ctx, node: exp.Merge) -> bool:
    return isinstance(node.this, exp.Table) and ctx.resolve(node.this) is not None


def plan(ctx, node: exp.Merge) -> DataFrame:
    sides = _sides(ctx, node)
    on = node.args.get("on")
    if not isinstance(on, exp.Expression):
        raise ctx.error("MERGE needs an ON condition relating target and source rows", node.this,
                        table=sides.table.name)
    t_scope = Scope(sides.t_alias, sides.table.name, tuple(sides.table.snapshot_columns))
    s_scope = Scope(sides.s_alias, "the source", tuple(sides.source.columns))
    check_columns(ctx, on, [t_scope, s_scope])
    clauses = _clauses(ctx, node, sides, t_scope, s_scope)
    opts = sides.table.write_options(ctx.spark)
    _check_identity_assignments(ctx, on, clauses, sides, opts)

    # a key merge's ON is equalities of keys with source values of their type: boolean, no analysis needed
    counts = _key_merge(ctx, node, on, clauses, sides, opts)
    if counts is not None:
        return counts.to_frame(ctx.spark)
    tgt = sides.target.withColumn(T_FLAG, F.lit(True)).alias(sides.t_alias)
    src = sides.source.withColumn(S_FLAG, F.lit(True)).alias(sides.s_alias)
    on_sql = ctx.expr_sql(on)
    check_boolean(ctx, expression_types(ctx, tgt.crossJoin(src), [(on_sql, on)])[0], on, "the ON condition")
    groups = {c.group for c in clauses}
    how = {(True, True): "full", (True, False): "left", (False, True): "right", (False, False): "inner"}[
        (BY_SOURCE in groups, NOT_MATCHED in groups)]
    if BY_SOURCE not in groups:
        # only target rows that match a source row can change: a semi-join against the source (broadcast when
        # small) keeps the full join below from shuffling the whole table
        tgt = tgt.join(src, F.expr(on_sql), "left_semi").alias(sides.t_alias)
    joined = tgt.join(src, F.expr(on_sql), how)
    changes = _changes(ctx, joined, sides, clauses)
    counts = apply_changes(ctx, sides.table, changes, node, "MERGE",
                           inserts_are_new=_inserts_are_new(on, clauses, sides, opts))
    return counts.to_frame(ctx.spark)


def _check_identity_assignments(ctx, on: exp.Expression, clauses: list[Clause], sides: MergeSides,
                                opts: dict) -> None:
    """An UPDATE clause may not give a row another record key, nor another partition unless the index moves
    records (`check_identity_assignments`), except by assigning what the row already holds: the source value ON
    equates the column with, or the column itself. UPDATE SET * writes the source row as the record, as Hudi's
    MERGE upserts it; a row it gives another identity is moved (delete + insert in the one commit)."""
    table = sides.table
    identity = {c.lower() for c in table.record_keys + table.partition_fields}
    pinned = pinned_values(on, sides.t_alias, sides.s_alias, identity)

    def unchanged(column: str, value: exp.Expression) -> bool:
        kept = pinned.get(column.lower(), set()) | {same_sql(exp.column(column, table=sides.t_alias))}
        return same_sql(value) in kept

    hint = (": MERGE may assign such a field only the source value its ON condition equates it with "
            f"(ON {sides.t_alias}.<field> = {sides.s_alias}.<column>), or UPDATE SET *")
    for clause in clauses:
        if clause.kind == UPDATE and not clause.star:
            check_identity_assignments(ctx, table, clause.assignments, opts, "MERGE", unchanged, hint)


def _inserts_are_new(on: exp.Expression, clauses: list[Clause], sides: MergeSides, opts: dict) -> bool:
    """True when no INSERT can write an identity the table already holds: ON is only equalities of target key
    columns (and partition columns, when records are identified per partition) with source expressions, covering
    the whole record key, and every INSERT takes those columns from the same expressions. An unmatched source
    row then names a key no stored row has."""
    table = sides.table
    allowed = {k.lower() for k in table.record_keys}
    if not table.key_is_identity(opts):
        allowed |= {p.lower() for p in table.partition_fields}
    pairs = key_equalities(on, sides.t_alias, sides.s_alias, allowed)
    if pairs is None or not {k.lower() for k in table.record_keys} <= set(pairs):
        return False
    for clause in clauses:
        if clause.kind != INSERT:
            continue
        assigned = {c.lower(): v for c, v in clause.assignments.items()}
        if any(same_sql(assigned.get(col)) != same_sql(expr) for col, expr in pairs.items()):
            return False
    return True


def _key_merge(ctx, node: exp.Merge, on: exp.Expression, clauses: list[Clause], sides: MergeSides,
               opts: dict) -> DmlCounts | None:
    """Counts of the MERGE run as one upsert or delete by record key (`key_merge`), or None when the
    statement needs the general plan."""
    if any(c.condition is not None or c.group == BY_SOURCE for c in clauses):
        return None
    shape = {(c.group, c.kind): c for c in clauses}
    if len(shape) != len(clauses):
        return None
    if set(shape) == {(MATCHED, DELETE)}:
        plan_ = plan_key_merge(sides.table, sides.t_alias, sides.s_alias, on, opts, delete=True)
    elif set(shape) == {(MATCHED, UPDATE), (NOT_MATCHED, INSERT)}:
        plan_ = plan_key_merge(sides.table, sides.t_alias, sides.s_alias, on, opts,
                               update=shape[(MATCHED, UPDATE)].assignments,
                               insert=shape[(NOT_MATCHED, INSERT)].assignments)
    else:
        return None
    if plan_ is None:
        return None
    write_opts = sides.table.write_options(ctx.spark, {WK.PAYLOAD_CLASS.key: SQL_DML_PAYLOAD})
    return run_key_merge(ctx, sides.table, sides.source, sides.s_alias, plan_, node, write_opts)


# -- the two sides ---------------------------------------------------------------------------------
def _sides(ctx, node: exp.Merge) -> MergeSides:
    target_node: exp.Table = node.this
    table = ctx.require_table(target_node)
    t_alias = target_node.alias_or_name
    _read_ctes(ctx, node)
    using = node.args.get("using")
    query, s_alias = _source_query(ctx, using)
    if s_alias.lower() == t_alias.lower():
        raise ctx.error(f"MERGE target and source are both called '{t_alias}': give one of them an alias", using)
    _unqualify_db(node, target_node, t_alias)
    return MergeSides(table, t_alias, s_alias, _read(ctx, query, using, "its source"))


def _source_query(ctx, using: exp.Expression | None) -> tuple[exp.Expression, str]:
    """The query reading the USING source and the name the statement knows the source by. Spark takes a table,
    view or CTE name or a parenthesized query (VALUES included). A column alias list, `AS s(a, b)`, names the
    source's columns as it does in a FROM clause (Spark's own MERGE refuses one, and VALUES without parentheses:
    both are unambiguous, and the first is what a newcomer writes for an inline source)."""
    if isinstance(using, exp.Subquery) and not _column_aliases(using):
        return using.this, using.alias or SOURCE_ALIAS  # the query itself: its Hudi reads keep their column pruning
    if isinstance(using, (exp.Table, exp.Values, exp.Subquery)):
        return exp.select("*").from_(using.copy()), using.alias_or_name or SOURCE_ALIAS
    shown = f" '{using.sql(dialect='spark')}'" if using is not None else ""
    raise ctx.error(f"MERGE ... USING{shown}: the source must be a table, a view, a CTE or a parenthesized query "
                    "(SELECT or VALUES)", using)


def _column_aliases(node: exp.Expression) -> list:
    alias = node.args.get("alias")
    return alias.columns if isinstance(alias, exp.TableAlias) else []


def _read(ctx, query: exp.Expression, at: exp.Expression, what: str) -> DataFrame:
    """The rows of the source or a CTE (`what`); one Spark cannot read is reported at the column Spark names,
    else where it is written (`at`), not at the start of the statement."""
    try:
        return ctx.query(query)
    except HoodieSqlError:
        raise
    except Exception as exc:
        column = spark_column(exc)
        where = next((c for c in at.find_all(exp.Column) if column and c.name.lower() == column.lower()), at)
        raise ctx.error(f"MERGE cannot read {what}: {spark_message(exc)}", where, column=column) from exc


def _read_ctes(ctx, node: exp.Merge) -> None:
    """`WITH c AS (...) MERGE INTO ...` (Spark takes CTEs before any DML statement): each CTE is read as a temp
    view, and the statement's references to it (the source, subqueries in ON and WHEN clauses) read that view."""
    with_ = node.args.get("with_")
    if with_ is None:
        return
    if with_.args.get("recursive"):
        raise ctx.error("WITH RECURSIVE before MERGE is not supported: give the source as a parenthesized query",
                        with_)
    views: dict[str, str] = {}
    for cte in with_.expressions:
        frame = _read(ctx, _to_views(cte.this.copy(), views), cte, f"the CTE '{cte.alias_or_name}'")
        columns = _column_aliases(cte)
        if columns and len(columns) != len(frame.columns):
            raise ctx.error(f"the CTE '{cte.alias_or_name}' names {len(columns)} columns but its query returns "
                            f"{len(frame.columns)}", cte)
        if columns:
            frame = frame.toDF(*[c.name for c in columns])
        views[cte.alias_or_name.lower()] = ctx.register_view(frame, cte.alias_or_name)
    node.set("with_", None)
    for arg in ("using", "on", "whens"):
        if isinstance(node.args.get(arg), exp.Expression):
            _to_views(node.args[arg], views)


def _to_views(tree: exp.Expression, views: dict[str, str]) -> exp.Expression:
    """`tree` with its references to the CTEs in `views` (name -> temp view) reading those views, under the CTE's
    name so that columns qualified by it still resolve."""
    for table in list(tree.find_all(exp.Table)):
        view = views.get(table.name.lower()) if not table.db and isinstance(table.this, exp.Identifier) else None
        if view is None:
            continue
        if not table.args.get("alias"):
            table.set("alias", exp.TableAlias(this=exp.to_identifier(table.name)))
        table.set("this", exp.to_identifier(view))
    return tree


def _unqualify_db(node: exp.Merge, target: exp.Table, alias: str) -> None:
    """`db.t.col` in the statement -> `t.col`: the joined frame knows the target by its alias only."""
    if not target.db:
        return
    for column in node.find_all(exp.Column):
        db = column.args.get("db")
        if db and db.name.lower() == target.db.lower() and column.table.lower() == target.name.lower():
            column.set("db", None)
            column.set("table", exp.to_identifier(alias))


# -- clauses ---------------------------------------------------------------------------------------
def _clauses(ctx, node: exp.Merge, sides: MergeSides, t_scope: Scope, s_scope: Scope) -> list[Clause]:
    whens = node.args.get("whens")
    if whens is None or not whens.expressions:
        raise ctx.error("MERGE needs at least one WHEN clause", node)
    clauses, seen_unconditional = [], set()
    for i, when in enumerate(whens.expressions):
        group = MATCHED if when.args.get("matched") else BY_SOURCE if when.args.get("source") else NOT_MATCHED
        if group in seen_unconditional:
            raise ctx.error(f"only the last {group} clause may omit its AND condition", when)
        condition = when.args.get("condition")
        if condition is None:
            seen_unconditional.add(group)
        scopes = {MATCHED: [t_scope, s_scope], NOT_MATCHED: [s_scope], BY_SOURCE: [t_scope]}[group]
        check_columns(ctx, condition, scopes)
        clause = _clause(ctx, i, group, when, condition, sides)
        for value in clause.assignments.values():
            check_columns(ctx, value, scopes)
        clauses.append(clause)
    return clauses


def _clause(ctx, index: int, group: str, when: exp.When, condition, sides: MergeSides) -> Clause:
    then = when.args.get("then")
    table = sides.table
    if isinstance(then, exp.Var) and then.name.upper() == DELETE.upper():
        if group == NOT_MATCHED:
            raise ctx.error("WHEN NOT MATCHED [BY TARGET] can only INSERT", when)
        return Clause(index, group, DELETE, when, condition)
    if isinstance(then, exp.Update):
        if group == NOT_MATCHED:
            raise ctx.error("WHEN NOT MATCHED [BY TARGET] can only INSERT", when)
        if len(then.expressions) == 1 and isinstance(then.expressions[0], exp.Star):
            if group == BY_SOURCE:
                raise ctx.error("UPDATE SET * is not possible WHEN NOT MATCHED BY SOURCE (there is no source row)", then)
            return Clause(index, group, UPDATE, when, condition, _star(ctx, sides, then, "UPDATE SET *"), star=True)
        return Clause(index, group, UPDATE, when, condition, parse_assignments(ctx, then.expressions, sides.t_alias, table))
    if isinstance(then, exp.Insert):
        if group != NOT_MATCHED:
            raise ctx.error(f"{group} cannot INSERT", when)
        if isinstance(then.this, exp.Star):
            return Clause(index, group, INSERT, when, condition, _star(ctx, sides, then, "INSERT *"), star=True)
        columns = then.this.expressions if isinstance(then.this, exp.Tuple) else [then.this]
        values = then.expression.expressions if isinstance(then.expression, exp.Tuple) else [then.expression]
        if len(columns) != len(values):
            raise ctx.error(f"INSERT lists {len(columns)} columns but {len(values)} values", then)
        pairs = [exp.EQ(this=c if isinstance(c, exp.Column) else exp.column(c.name), expression=v)
                 for c, v in zip(columns, values)]
        return Clause(index, group, INSERT, when, condition, parse_assignments(ctx, pairs, sides.t_alias, table))
    raise ctx.error(f"unsupported MERGE action '{then.sql(dialect='spark') if then else ''}'", when)


def _star(ctx, sides: MergeSides, node, what: str) -> dict[str, exp.Expression]:
    available = {c.lower(): c for c in sides.source.columns}
    out = {}
    for column in sides.table.columns:
        src = available.get(column.lower())
        if src is None:
            raise ctx.error(f"{what}: the source has no column '{column}' of {sides.table.name}", node,
                            table=sides.table.name, column=column)
        out[column] = exp.column(src, table=sides.s_alias, quoted=True)
    return out


# -- the change frame ------------------------------------------------------------------------------
def _changes(ctx, joined: DataFrame, sides: MergeSides, clauses: list[Clause]) -> DataFrame:
    table = sides.table
    probes = [(ctx.expr_sql(c.condition), c.condition) for c in clauses if c.condition is not None]
    assigned = [(c, col, value) for c in clauses for col, value in c.assignments.items()]
    probes += [(ctx.expr_sql(v), v) for _, _, v in assigned]
    types = expression_types(ctx, joined, probes)
    cond_types, value_types = types[:len(probes) - len(assigned)], types[len(probes) - len(assigned):]
    conditioned = [c for c in clauses if c.condition is not None]
    for c, dtype in zip(conditioned, cond_types):
        check_boolean(ctx, dtype, c.condition, f"the condition of {c.group}")
    value_type = {}
    for (c, col, value), dtype in zip(assigned, value_types):
        check_assignment(ctx, dtype, col, table.field(col).dataType, value, table.name)
        value_type[(c.index, col)] = dtype

    matched = F.col(T_FLAG).isNotNull() & F.col(S_FLAG).isNotNull()
    chosen = F.when(matched, _chain(ctx, clauses, MATCHED)) \
        .when(F.col(T_FLAG).isNull(), _chain(ctx, clauses, NOT_MATCHED)) \
        .when(F.col(S_FLAG).isNull(), _chain(ctx, clauses, BY_SOURCE))
    frame = joined.withColumn("__hudi_clause", chosen)
    clause = F.col("__hudi_clause")
    kind = None
    for c in clauses:
        kind = F.when(clause == c.index, F.lit(c.kind)) if kind is None else kind.when(clause == c.index, F.lit(c.kind))
    new_values = []
    for column in table.columns:
        dtype = table.field(column).dataType
        value = None
        for c in clauses:
            if c.kind == DELETE:
                continue
            if column in c.assignments:
                v = F.expr(ctx.expr_sql(c.assignments[column]))
                v = v if value_type[(c.index, column)] == dtype else v.cast(dtype)
            elif c.kind == UPDATE:
                v = sides.t(column)
            else:
                v = F.lit(None).cast(dtype)
            value = F.when(clause == c.index, v) if value is None else value.when(clause == c.index, v)
        value = sides.t(column) if value is None else value.otherwise(sides.t(column))
        new_values.append(value.alias(column))
    rowid = F.when(F.col(T_FLAG).isNotNull(),
                   table.stored_identity(table.write_options(ctx.spark), sides.t_alias))
    return frame.select(
        kind.alias(KIND), rowid.alias(ROWID), matched.alias(CARD), *stored_location(sides.t_alias), *new_values,
        *[sides.t(c).alias(old_col(i)) for i, c in enumerate(table.columns)],
    ).where(F.col(KIND).isNotNull())


def _chain(ctx, clauses: list[Clause], group: str) -> Column:
    chain = None
    for c in clauses:
        if c.group != group:
            continue
        cond = F.expr(ctx.expr_sql(c.condition)) if c.condition is not None else F.lit(True)
        chain = F.when(cond, F.lit(c.index)) if chain is None else chain.when(cond, F.lit(c.index))
    return chain if chain is not None else F.lit(None).cast("int")
