"""Partition pruning for SQL reads: simple WHERE conjuncts on partition columns become a `partition_filter`; and
the WHERE clause as a storage predicate for data skipping (`data_filter`).

Only conjuncts of the form `col <op> literal` / `col IN (literals)` are used, and a partition is dropped
only when such a conjunct is certainly false for it, so the filter never changes a result: Spark still
applies the whole WHERE clause.
"""
from __future__ import annotations

import datetime
import logging
import operator
import struct
from dataclasses import dataclass
from decimal import Decimal
from typing import Callable
from urllib.parse import unquote

from sqlglot import exp

from storage.keygen.key_generator import HIVE_DEFAULT_PARTITION
from storage.read.predicates import Comparison, In, IsNotNull, IsNull, Or, Predicate, between, conjunction, flipped

log = logging.getLogger(__name__)

_OPS: dict[type[exp.Expression], Callable] = {
    exp.EQ: operator.eq, exp.NEQ: operator.ne, exp.GT: operator.gt, exp.GTE: operator.ge,
    exp.LT: operator.lt, exp.LTE: operator.le,
}
_FLIP = {exp.GT: exp.LT, exp.GTE: exp.LTE, exp.LT: exp.GT, exp.LTE: exp.GTE, exp.EQ: exp.EQ, exp.NEQ: exp.NEQ}
_PRUNABLE_KEYGENS = ("SimpleKeyGenerator", "ComplexKeyGenerator", "SimpleAvroKeyGenerator", "ComplexAvroKeyGenerator")


@dataclass(frozen=True)
class _Predicate:
    column: str
    test: Callable[[str], bool]


def partition_filter(where: exp.Expression | None, partition_types: dict[str, str], qualifiers: set[str],
                     allow_unqualified: bool, keygen_class: str | None, url_encoded: bool):
    """A callable(partition values) -> bool for `where`, or None when nothing can be pruned.

    `partition_types` maps each partition field to 'string', 'numeric' or 'other' (other: never pruned,
    since Spark's casts for dates and timestamps accept spellings a string comparison would not).
    """
    partition_fields = [f for f, kind in partition_types.items() if kind in ("string", "numeric")]
    if where is None or not partition_fields:
        return None
    if keygen_class and keygen_class.rsplit(".", 1)[-1] not in _PRUNABLE_KEYGENS:
        return None  # timestamp/custom keygens format the path: its values are not the column values
    fields = {f.lower(): f for f in partition_fields}
    preds: list[_Predicate] = []
    for conjunct in where.flatten() if isinstance(where, exp.And) else [where]:
        pred = _predicate(conjunct.unnest(), fields, qualifiers, allow_unqualified, partition_types)
        if pred is not None:
            preds.append(pred)
    if not preds:
        return None
    log.debug("partition pruning on %s", [p.column for p in preds])

    def keep(values: dict[str, str]) -> bool:
        for p in preds:
            raw = values.get(p.column)
            if raw is None:
                continue
            value = unquote(raw) if url_encoded else raw
            if not p.test(value):
                return False
        return True

    return keep


def _column_of(node: exp.Expression, fields: dict[str, str], qualifiers: set[str], allow_unqualified: bool) -> str | None:
    if not isinstance(node, exp.Column) or node.args.get("db"):
        return None
    if node.table:
        if node.table.lower() not in qualifiers:
            return None
    elif not allow_unqualified:
        return None
    return fields.get(node.name.lower())


def _literal(node: exp.Expression):
    if isinstance(node, exp.Literal):
        return node.this if node.is_string else _number(node.this)
    if isinstance(node, exp.Neg) and isinstance(node.this, exp.Literal) and not node.this.is_string:
        n = _number(node.this.this)
        return None if n is None else -n
    return None


def _number(text: str):
    try:
        return float(text)
    except (TypeError, ValueError):
        return None


def _predicate(node: exp.Expression, fields, qualifiers, allow_unqualified, types) -> _Predicate | None:
    if isinstance(node, exp.In) and not node.args.get("query"):
        col = _column_of(node.this, fields, qualifiers, allow_unqualified)
        values = [_literal(v) for v in node.expressions]
        if col is None or not values or any(v is None for v in values):
            return None
        numeric = types[col] == "numeric"
        return _Predicate(col, lambda raw, vs=tuple(values): any(_compare(raw, operator.eq, v, numeric) for v in vs))
    kind = type(node)
    if kind not in _OPS:
        return None
    left, right = node.this, node.expression
    col = _column_of(left, fields, qualifiers, allow_unqualified)
    lit = _literal(right)
    if col is None:
        col, lit, kind = _column_of(right, fields, qualifiers, allow_unqualified), _literal(left), _FLIP[kind]
    if col is None or lit is None:
        return None
    op, numeric = _OPS[kind], types[col] == "numeric"
    return _Predicate(col, lambda raw, op=op, lit=lit: _compare(raw, op, lit, numeric))


def _compare(raw: str, op: Callable, lit, numeric_column: bool) -> bool:
    """False only when the predicate is certainly false for this partition value (Spark's coercion: a
    numeric column or a numeric literal compares as numbers, a string column with a string literal as text)."""
    if raw == HIVE_DEFAULT_PARTITION:
        return False  # a NULL partition value: comparisons with a literal are never true
    if numeric_column or isinstance(lit, float):
        value, lit_value = _number(raw), _number(lit) if isinstance(lit, str) else lit
        if value is None or lit_value is None:
            return True  # not comparable here: keep the partition, Spark decides
        return op(value, lit_value)
    return op(raw, lit)


# -- data skipping ---------------------------------------------------------------------------------
def data_filter(where: exp.Expression | None, columns: list[str], qualifiers: set[str],
                allow_unqualified: bool) -> Predicate | None:
    """The storage predicate (storage/read/predicates.py) for `where` over a table of `columns`, for data skipping:
    AND keeps the conjuncts it can translate, OR and the rest translate whole or not at all, so the predicate
    is always implied by `where` (None: nothing to skip by)."""
    if where is None:
        return None
    fields = {c.lower(): c for c in columns}
    return _data_predicate(where.unnest(), fields, qualifiers, allow_unqualified)


def _data_predicate(node: exp.Expression, fields, qualifiers, allow_unqualified) -> Predicate | None:
    node = node.unnest()
    column = lambda n: _column_of(n.unnest(), fields, qualifiers, allow_unqualified)  # noqa: E731
    if isinstance(node, exp.And):
        parts = [_data_predicate(c, fields, qualifiers, allow_unqualified) for c in node.flatten()]
        return conjunction([p for p in parts if p is not None])
    if isinstance(node, exp.Or):
        parts = [_data_predicate(c, fields, qualifiers, allow_unqualified) for c in node.flatten()]
        return None if any(p is None for p in parts) else Or(tuple(parts))
    if isinstance(node, exp.Is) and isinstance(node.expression, exp.Null):
        col = column(node.this)
        return IsNull(col) if col else None
    if isinstance(node, exp.Not) and isinstance(node.this.unnest(), exp.Is) and \
            isinstance(node.this.unnest().expression, exp.Null):
        col = column(node.this.unnest().this)
        return IsNotNull(col) if col else None
    if isinstance(node, exp.Between):
        col, low, high = column(node.this), _value(node.args.get("low")), _value(node.args.get("high"))
        return between(col, low, high) if col and low is not _UNKNOWN and high is not _UNKNOWN else None
    if isinstance(node, exp.In) and not node.args.get("query"):
        col, values = column(node.this), [_value(v) for v in node.expressions]
        return In(col, tuple(values)) if col and values and _UNKNOWN not in values else None
    op = _COMPARISON_OPS.get(type(node))
    if op is None:
        return None
    col, value = column(node.this), _value(node.expression)
    if col is None:
        col, value, op = column(node.expression), _value(node.this), flipped(op)
    return Comparison(col, op, value) if col and value is not _UNKNOWN else None


_COMPARISON_OPS = {exp.EQ: "=", exp.GT: ">", exp.GTE: ">=", exp.LT: "<", exp.LTE: "<="}
_UNKNOWN = object()


def _value(node: exp.Expression | None):
    """A literal as the Python value Spark types it with (10 int, 1.5 decimal, 1e3 double, 'x' string, DATE 'd'
    date, NULL None), or _UNKNOWN."""
    if node is None:
        return _UNKNOWN
    node = node.unnest()
    if isinstance(node, exp.Null):
        return None
    if isinstance(node, exp.Boolean):
        return bool(node.this)
    if isinstance(node, exp.Neg):
        inner = _value(node.this)
        return -inner if isinstance(inner, (int, float, Decimal)) and not isinstance(inner, bool) else _UNKNOWN
    if isinstance(node, exp.Literal):
        if node.is_string:
            return node.this
        text = node.this
        try:
            if "e" in text.lower():
                return float(text)
            return Decimal(text) if "." in text else int(text)
        except (ValueError, ArithmeticError):
            return _UNKNOWN
    if isinstance(node, exp.Cast) and isinstance(node.this, exp.Literal):
        return _cast_literal(node.this, node.to)
    return _UNKNOWN


_INTEGRAL = {exp.DataType.Type.TINYINT, exp.DataType.Type.SMALLINT, exp.DataType.Type.INT, exp.DataType.Type.BIGINT}


def _cast_literal(literal: exp.Literal, to: exp.DataType):
    """A literal under an explicit cast (Spark's analyzed conditions spell their coercions so: `CAST(20 AS
    BIGINT)`, `1.5D`, `CAST('2024-01-05' AS DATE)`), as the value the cast gives, or _UNKNOWN."""
    text, kind = literal.this.strip(), to.this
    try:
        if kind == exp.DataType.Type.DATE and literal.is_string:
            return datetime.date.fromisoformat(text)
        if kind in _INTEGRAL and not literal.is_string:
            return int(text)
        if kind == exp.DataType.Type.DOUBLE:
            return float(text)
        if kind == exp.DataType.Type.FLOAT:  # a float column compares with the literal rounded to 32 bits
            return struct.unpack("f", struct.pack("f", float(text)))[0]
        if kind == exp.DataType.Type.DECIMAL:
            return Decimal(text)
    except (ValueError, ArithmeticError, OverflowError):
        return _UNKNOWN
    return _UNKNOWN
