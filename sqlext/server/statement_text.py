"""What the server's checks read off a statement's text: the text without comments, and the tables a parsed
statement names (shared by the safe default, the grants and the audit log)."""
from __future__ import annotations

import re


def without_comments(statement: str) -> str:
    """`statement` without `--` line comments and `/* */` blocks (quotes left as they are: a comment marker in a
    string literal only widens what is checked)."""
    return re.sub(r"/\*.*?\*/", " ", re.sub(r"--[^\n]*", " ", statement), flags=re.DOTALL)


def named_tables(tree) -> list:
    """The sqlglot Table nodes of `tree` that name a table or view (an unqualified name of one of its CTEs does
    not)."""
    from sqlglot import exp

    ctes = {cte.alias_or_name.lower() for cte in tree.find_all(exp.CTE)}
    return [t for t in tree.find_all(exp.Table) if t.name and (t.db or t.name.lower() not in ctes)]
