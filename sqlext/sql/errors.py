"""The one error type of the SQL front end: what went wrong, where in the SQL text, on which table/column."""
from __future__ import annotations

from dataclasses import dataclass

from sqlglot import exp
from storage.exception import HoodieError


class HoodieSqlError(HoodieError, ValueError):
    """A statement was rejected or failed; the tables it names are unchanged.

    `line`/`col` are 1-based positions in the full SQL text given to `spark.sql` (None when unknown).
    """

    def __init__(self, message: str, *, line: int | None = None, col: int | None = None,
                 table: str | None = None, column: str | None = None, statement: str | None = None):
        self.message = message
        self.line, self.col = line, col
        self.table, self.column = table, column
        self.statement = statement
        where = f"line {line}:{col}: " if line is not None else ""
        super().__init__(f"{where}{message}")


@dataclass(frozen=True)
class Position:
    """Where a statement starts in the full SQL text, to turn statement-relative positions into absolute ones."""

    line: int = 1
    col: int = 1

    def absolute(self, line: int, col: int) -> tuple[int, int]:
        if line == 1:
            return self.line, self.col + col - 1
        return self.line + line - 1, col


def node_position(node: exp.Expression | None) -> tuple[int, int] | None:
    """(line, col) where a node starts in its statement: the earliest identifier or literal inside it that
    sqlglot recorded a position for (sqlglot keeps positions on tokens, not on composite nodes)."""
    if node is None:
        return None
    best = None
    for cand in node.find_all(exp.Identifier, exp.Literal):
        meta = cand.meta or {}
        if "line" not in meta or "col" not in meta:
            continue
        # sqlglot records the column of the token's last character; report its first
        length = len(cand.name) + (2 if (isinstance(cand, exp.Identifier) and cand.quoted)
                                   or (isinstance(cand, exp.Literal) and cand.is_string) else 0)
        pos = (meta["line"], max(1, meta["col"] - length + 1))
        best = pos if best is None or pos < best else best
    return best
