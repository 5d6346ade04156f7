"""Name checks before anything runs: every column a statement names must exist, unambiguously, so a typo
is reported with its position and the table, not as a Spark plan dump after work has started."""
from __future__ import annotations

from dataclasses import dataclass

from sqlglot import exp


@dataclass(frozen=True)
class Scope:
    alias: str             # how the statement refers to the relation
    display: str           # how errors name it (qualified table name or 'source')
    columns: tuple[str, ...]

    def has(self, name: str) -> bool:
        lower = name.lower()
        return any(c.lower() == lower for c in self.columns)


def check_columns(ctx, node: exp.Expression | None, scopes: list[Scope]) -> None:
    """Raise for an unknown or ambiguous column in `node` (nested queries and lambdas are Spark's to check)."""
    if node is None:
        return
    for column in node.find_all(exp.Column):
        if isinstance(column.this, exp.Star) or _nested(column, node):
            continue
        name = column.name
        if column.table:
            scope = next((s for s in scopes if s.alias.lower() == column.table.lower()), None)
            if scope is None:
                if any(s.has(column.table) for s in scopes):
                    continue  # struct field access: col.field
                known = ", ".join(s.alias for s in scopes)
                raise ctx.error(f"unknown table or alias '{column.table}' in '{column.sql(dialect='spark')}' "
                                f"(known here: {known})", column, column=name)
            if not scope.has(name):
                raise ctx.error(f"column '{name}' does not exist in {scope.display} (columns: "
                                f"{', '.join(c for c in scope.columns if not c.startswith('_hoodie_'))})",
                                column, table=scope.display, column=name)
            continue
        matches = [s for s in scopes if s.has(name)]
        if not matches:
            listing = "; ".join(f"{s.display}: {', '.join(c for c in s.columns if not c.startswith('_hoodie_'))}"
                                for s in scopes)
            raise ctx.error(f"column '{name}' does not exist ({listing})", column,
                            table=scopes[0].display if len(scopes) == 1 else None, column=name)
        if len(matches) > 1:
            raise ctx.error(f"column '{name}' is ambiguous: qualify it with "
                            f"{' or '.join(s.alias for s in matches)}", column, column=name)


def _nested(column: exp.Column, root: exp.Expression) -> bool:
    node = column.parent
    while node is not None and node is not root:
        if isinstance(node, (exp.Select, exp.Subquery, exp.Union)):
            return True
        if isinstance(node, exp.Lambda) and any(v.name.lower() == column.name.lower() for v in node.expressions):
            return True
        node = node.parent
    return False
