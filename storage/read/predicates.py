"""Filters a read is asked for, as data (Hudi's `org.apache.hudi.expression` predicates): what the SQL front end's
WHERE clause and a data source's pushed filters become, so storage can prune file slices by column statistics
(storage/read/data_skipping.py) without knowing SQL.

A predicate here is a superset promise: translating a filter may drop what it cannot express (an AND keeps its
translatable conjuncts), never narrow it; Spark still applies the full filter to the rows it reads.

Literals are Python values: int, decimal.Decimal (an exact SQL literal such as 1.5), float (1e3), str, bool,
datetime.date / datetime.datetime (timezone-aware).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Union

COMPARISONS = ("=", "<", "<=", ">", ">=")


@dataclass(frozen=True)
class Comparison:
    """`column <op> value`, op one of COMPARISONS."""

    column: str
    op: str
    value: Any

    def __post_init__(self) -> None:
        if self.op not in COMPARISONS:
            raise ValueError(f"unknown comparison {self.op!r}: expected one of {', '.join(COMPARISONS)}")


@dataclass(frozen=True)
class In:
    column: str
    values: tuple


@dataclass(frozen=True)
class IsNull:
    column: str


@dataclass(frozen=True)
class IsNotNull:
    column: str


@dataclass(frozen=True)
class And:
    children: tuple["Predicate", ...]


@dataclass(frozen=True)
class Or:
    children: tuple["Predicate", ...]


Predicate = Union[Comparison, In, IsNull, IsNotNull, And, Or]

_FLIPPED = {"=": "=", "<": ">", "<=": ">=", ">": "<", ">=": "<="}


def flipped(op: str) -> str:
    """The operator with its operands swapped (`5 < x` is `x > 5`)."""
    return _FLIPPED[op]


def between(column: str, low: Any, high: Any) -> And:
    return And((Comparison(column, ">=", low), Comparison(column, "<=", high)))


def conjunction(parts: list[Predicate]) -> Predicate | None:
    """AND of what could be translated (None when nothing could: no pruning)."""
    if not parts:
        return None
    return parts[0] if len(parts) == 1 else And(tuple(parts))


def columns_of(predicate: Predicate) -> set[str]:
    """The columns `predicate` names."""
    if isinstance(predicate, (And, Or)):
        return set().union(*(columns_of(c) for c in predicate.children))
    return {predicate.column}
