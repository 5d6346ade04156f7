"""Where HiveServer2 clients rely on HiveQL behaviour that Spark SQL answers differently.

- `SHOW TABLES`: Hive answers the table name in the first column and clients read `row[0]` (the SQLAlchemy
  `hive://` dialect's `get_table_names`); Spark's first column is the database. The server answers Spark's
  columns with `tableName` first: `tableName, namespace, isTemporary`.
- `DESCRIBE <query>`: Hive has no such statement, and clients probe whether a string names a table by
  running `DESCRIBE <string>` (pandas.read_sql does, with the query text): Spark would describe the query's
  output and the probe would take the query for a table. A query is described with Spark's explicit form,
  `DESCRIBE QUERY <query>`; without the QUERY keyword it is an error.
- `DESCRIBE <missing table>`: the same clients tell "no such table" from other failures by Hive's wording,
  `SemanticException ... Table not found <name>`; the error message ends with it.
"""
from __future__ import annotations

import re
from typing import Callable

from pyspark.sql import DataFrame

from sqlext.server.errors import sqlstate
from sqlext.sql.errors import HoodieSqlError

SHOW_TABLES = re.compile(r"^\s*SHOW\s+TABLES\b", re.IGNORECASE)
_DESCRIBE_QUERY = re.compile(r"^\s*(?:DESC|DESCRIBE)\s+(?:EXTENDED\s+|FORMATTED\s+)?\(?\s*(?:SELECT|WITH|VALUES|FROM|TABLE)\b",
                             re.IGNORECASE)
_DESCRIBE_TABLE = re.compile(r"^\s*(?:DESC|DESCRIBE)\s+(?:TABLE\s+)?(?:EXTENDED\s+|FORMATTED\s+)?([\w.`]+)\s*$",
                             re.IGNORECASE)
TABLE_FIRST = ("tableName", "namespace", "isTemporary")
TABLE_NOT_FOUND = "42P01"


def run(sql: Callable[[str], DataFrame], statement: str) -> DataFrame:
    """`sql(statement)` with the HiveQL adjustments above."""
    if _DESCRIBE_QUERY.match(statement):
        raise HoodieSqlError("DESCRIBE of a query needs the QUERY keyword (DESCRIBE QUERY SELECT ...); "
                             "DESCRIBE <name> describes a table", line=1, col=1, statement=statement)
    try:
        df = sql(statement)
    except Exception as exc:
        described = _DESCRIBE_TABLE.match(statement)
        if described and sqlstate(exc) == TABLE_NOT_FOUND:
            raise HoodieSqlError(f"{getattr(exc, 'message', exc)}; SemanticException [Error 10001]: Table not found "
                                 f"{described.group(1).replace('`', '')}", line=getattr(exc, "line", None),
                                 col=getattr(exc, "col", None), statement=statement) from exc
        raise
    if SHOW_TABLES.match(statement) and set(TABLE_FIRST) <= set(df.columns):
        df = df.select(*TABLE_FIRST, *[c for c in df.columns if c not in TABLE_FIRST])
    return df
