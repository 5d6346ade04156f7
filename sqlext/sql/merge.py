"""MERGE INTO as Spark joins: the target snapshot joined with the source, the first matching WHEN clause of
each row chosen by a CASE chain, and the result handed to `changes.apply_changes` as one write batch."""
from __future__ import annotations

import logging
from dataclasses import dataclass, field

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F
from sqlglot import exp

from storage.config import WriteConfigKeys as WK
from sqlext.sql.assign import check_assignment, check_boolean, expression_types, parse_assignments
from sqlext.sql.changes import CARD, DELETE, INSERT, KIND, ROWID, SQL_DML_PAYLOAD, UPDATE, apply_changes, old_col
from sqlext.sql.key_merge import key_equalities, plan_key_merge, run_key_merge, same_sql
from sqlext.sql.result import DmlCounts
from sqlext.sql.scope import Scope, check_columns
from sqlext.sql.table import HudiTable

log = logging.getLogger(__name__)

T_FLAG, S_FLAG = "__hudi_t", "__hudi_s"
MATCHED, NOT_MATCHED, BY_SOURCE = "WHEN MATCHED", "WHEN NOT MATCHED", "WHEN NOT MATCHED BY SOURCE"


@dataclass
class Clause:
    index: int
    group: str                         # MATCHED | NOT_MATCHED | BY_SOURCE
    kind: str                          # update | delete | insert
    node: exp.When
    condition: exp.Expression | None
    assignments: dict[str, exp.Expression] = field(default_factory=dict)  # target column -> value


@dataclass
class MergeSides:
    table: HudiTable
    t_alias: str
    s_alias: str
    target: DataFrame
    source: DataFrame

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
    t_scope = Scope(sides.t_alias, sides.table.name, tuple(sides.target.columns))
    s_scope = Scope(sides.s_alias, "the source", tuple(sides.source.columns))
    check_columns(ctx, on, [t_scope, s_scope])
    clauses = _clauses(ctx, node, sides, t_scope, s_scope)

    tgt = sides.target.withColumn(T_FLAG, F.lit(True)).alias(sides.t_alias)
    src = sides.source.withColumn(S_FLAG, F.lit(True)).alias(sides.s_alias)
    on_sql = ctx.expr_sql(on)
    check_boolean(ctx, expression_types(ctx, tgt.crossJoin(src), [(on_sql, on)])[0], on, "the ON condition")
    opts = sides.table.write_options(ctx.spark)
    counts = _key_merge(ctx, node, on, clauses, sides, opts)
    if counts is not None:
        return counts.to_frame(ctx.spark)
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


def _inserts_are_new(on: exp.Expression, clauses: list[Clause], sides: MergeSides, opts: dict) -> bool:
    """True when no INSERT can write an identity the table already holds: ON is only equalities of target key
    columns (and partition columns, when records are identified per partition) with source expressions, covering
    the whole record key, and every INSERT takes those columns from the same expressions. An unmatched source
    row then names a key no stored row has."""
    table = sides.table
    allowed = {k.lower() for k in table.record_keys}
    if not table.is_global_index(opts):
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
    using = node.args.get("using")
    if isinstance(using, exp.Subquery):
        query, s_alias = using.this, using.alias or "__hudi_source"
    elif isinstance(using, exp.Table):
        plain = using.copy()
        plain.set("alias", None)
        query, s_alias = exp.select("*").from_(plain), using.alias_or_name
    else:
        raise ctx.error("MERGE ... USING needs a table or a parenthesized query", node)
    if s_alias.lower() == t_alias.lower():
        raise ctx.error(f"MERGE target and source are both called '{t_alias}': give one of them an alias", using)
    _unqualify_db(node, target_node, t_alias)
    return MergeSides(table, t_alias, s_alias, table.snapshot(ctx.spark), ctx.query(query))


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
            return Clause(index, group, UPDATE, when, condition, _star(ctx, sides, then, "UPDATE SET *"))
        return Clause(index, group, UPDATE, when, condition, parse_assignments(ctx, then.expressions, sides.t_alias, table))
    if isinstance(then, exp.Insert):
        if group != NOT_MATCHED:
            raise ctx.error(f"{group} cannot INSERT", when)
        if isinstance(then.this, exp.Star):
            return Clause(index, group, INSERT, when, condition, _star(ctx, sides, then, "INSERT *"))
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
        kind.alias(KIND), rowid.alias(ROWID), matched.alias(CARD), *new_values,
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
