"""Split a multi-statement SQL string on `;`, respecting quotes, backticks and comments.

Each piece keeps its start position (line/column in the full text), so errors inside a statement can be
reported against what the user wrote.
"""
from __future__ import annotations

import re
from dataclasses import dataclass

from sqlext.sql.errors import HoodieSqlError, Position


@dataclass(frozen=True)
class Statement:
    text: str          # from the first significant character to before the `;`, trailing blanks removed
    offset: int        # index of text[0] in the full string
    position: Position  # line/column of text[0] in the full string


_COMPOUND = re.compile(r"^\s*BEGIN\b", re.IGNORECASE)


def split_statements(sql: str) -> list[Statement]:
    """The non-empty statements of `sql`. A Spark SQL script (BEGIN ... END) is kept whole."""
    if _COMPOUND.match(_strip_leading_comments(sql)):
        return [_make(sql, 0, len(sql))] if sql.strip() else []
    pieces, start, i, n = [], 0, 0, len(sql)
    while i < n:
        ch = sql[i]
        if ch in ("'", '"', "`"):
            i = _skip_quoted(sql, i)
        elif sql.startswith("--", i):
            j = sql.find("\n", i)
            i = n if j < 0 else j + 1
        elif sql.startswith("/*", i):
            i = _skip_block_comment(sql, i)
        elif ch == ";":
            pieces.append((start, i))
            start = i = i + 1
        else:
            i += 1
    pieces.append((start, n))
    out = []
    for a, b in pieces:
        stmt = _make(sql, a, b)
        if stmt is not None:
            out.append(stmt)
    return out


def _skip_quoted(sql: str, i: int) -> int:
    quote, j, n = sql[i], i + 1, len(sql)
    while j < n:
        c = sql[j]
        if c == "\\" and quote != "`":  # Spark string literals take backslash escapes
            j += 2
            continue
        if c == quote:
            if j + 1 < n and sql[j + 1] == quote:  # doubled quote inside the literal/identifier
                j += 2
                continue
            return j + 1
        j += 1
    raise HoodieSqlError(f"unterminated {'identifier' if quote == '`' else 'string'} starting here",
                       **_line_col(sql, i))


def _skip_block_comment(sql: str, i: int) -> int:
    depth, j, n = 0, i, len(sql)
    while j < n:  # Spark allows nested bracketed comments
        if sql.startswith("/*", j):
            depth, j = depth + 1, j + 2
        elif sql.startswith("*/", j):
            depth, j = depth - 1, j + 2
            if depth == 0:
                return j
        else:
            j += 1
    raise HoodieSqlError("unterminated comment starting here", **_line_col(sql, i))


def _strip_leading_comments(sql: str) -> str:
    text = sql
    while True:
        stripped = text.lstrip()
        if stripped.startswith("--"):
            nl = stripped.find("\n")
            text = "" if nl < 0 else stripped[nl + 1:]
        elif stripped.startswith("/*"):
            text = stripped[_skip_block_comment(stripped, 0):]
        else:
            return stripped


def _significant_start(sql: str, a: int, b: int) -> int | None:
    """First index in [a, b) that is neither blank nor inside a comment."""
    i = a
    while i < b:
        if sql[i].isspace():
            i += 1
        elif sql.startswith("--", i):
            j = sql.find("\n", i)
            i = b if j < 0 or j >= b else j + 1
        elif sql.startswith("/*", i):
            i = _skip_block_comment(sql, i)
        else:
            return i
    return None


def _make(sql: str, a: int, b: int) -> Statement | None:
    start = _significant_start(sql, a, b)
    if start is None:
        return None
    text = sql[start:b].rstrip()
    return Statement(text, start, Position(**_line_col(sql, start)))


def _line_col(sql: str, index: int) -> dict[str, int]:
    line = sql.count("\n", 0, index) + 1
    col = index - (sql.rfind("\n", 0, index) + 1) + 1
    return {"line": line, "col": col}
