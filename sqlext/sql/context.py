"""Per-statement state shared by the planners: the session, the resolver, the original `spark.sql`, where the
statement sits in the SQL text, and the temp views created for it (dropped when the statement is done)."""
from __future__ import annotations

import itertools
import logging
from dataclasses import dataclass, field
from typing import Callable

from pyspark.sql import DataFrame, SparkSession
from sqlglot import exp

from sqlext.sql.errors import HoodieSqlError, node_position
from sqlext.sql.resolver import HudiTableRef, TableName, TableResolver
from sqlext.sql.splitter import Statement
from sqlext.sql.table import HudiTable

log = logging.getLogger(__name__)

_view_ids = itertools.count(1)


@dataclass
class PlanContext:
    spark: SparkSession
    resolver: TableResolver
    run_sql: Callable[..., DataFrame]      # the session's original spark.sql
    statement: Statement
    views: list[str] = field(default_factory=list)
    keep_views: bool = False               # CREATE VIEW ... over a Hudi table needs them to outlive the statement
    sql_args: tuple = ()                   # spark.sql's positional args / kwargs, for statements Spark runs itself
    sql_kwargs: dict = field(default_factory=dict)
    _resolved: dict[TableName, HudiTableRef | None] = field(default_factory=dict)
    _expr_sql: dict[int, str] = field(default_factory=dict)  # node id -> SQL: rewrite each subquery once

    # -- errors ----------------------------------------------------------------------------------
    def error(self, message: str, node: exp.Expression | None = None, *, table: str | None = None,
              column: str | None = None) -> HoodieSqlError:
        pos = node_position(node)
        line, col = self.statement.position.absolute(*pos) if pos else (self.statement.position.line,
                                                                          self.statement.position.col)
        return HoodieSqlError(message, line=line, col=col, table=table, column=column, statement=self.statement.text)

    # -- tables ----------------------------------------------------------------------------------
    def resolve(self, node: exp.Table) -> HudiTableRef | None:
        """The Hudi table a table node names, or None (temp views shadow unqualified names, as in Spark)."""
        if not isinstance(node.this, exp.Identifier):
            return None
        name = TableName.of(node)
        if name not in self._resolved:
            ref = self.resolver.resolve(name)
            if ref is not None and name.db is None and name.path is None and self._is_temp_view(name.name):
                ref = None
            self._resolved[name] = ref
        return self._resolved[name]

    def _is_temp_view(self, name: str) -> bool:
        try:  # the session's own views: no metastore request (catalog.getTable asks it, ~50 ms)
            return bool(self.spark._jsparkSession.sessionState().catalog().getTempView(name).isDefined())
        except Exception:  # noqa: BLE001 - a session without the JVM catalog (Connect): ask the public API
            try:
                return bool(self.spark.catalog.getTable(name).isTemporary)
            except Exception:
                return False

    def require_table(self, node: exp.Table) -> HudiTable:
        ref = self.resolve(node)
        if ref is None:
            raise self.error(f"table {TableName.of(node)} is not a Hudi table or does not exist", node,
                             table=str(TableName.of(node)))
        try:
            return HudiTable.load(ref)
        except Exception as exc:
            raise self.error(f"cannot load table {ref.qualified_name}: {exc}", node, table=ref.qualified_name) from exc

    # -- temp views ------------------------------------------------------------------------------
    def register_view(self, df: DataFrame, hint: str) -> str:
        safe = "".join(c if c.isalnum() else "_" for c in hint)[:40]
        name = f"__hudi_{next(_view_ids)}_{safe}"
        df.createOrReplaceTempView(name)
        self.views.append(name)
        return name

    def cleanup(self) -> None:
        if self.keep_views:
            return
        for name in self.views:
            try:
                self.spark.catalog.dropTempView(name)
            except Exception as exc:  # never mask the statement's own outcome
                log.debug("could not drop temp view %s: %s", name, exc)
        self.views.clear()

    # -- running SQL -----------------------------------------------------------------------------
    def query(self, node: exp.Expression) -> DataFrame:
        """Run a query (SELECT, VALUES, set operation) with its Hudi table references rewritten."""
        from sqlext.sql.relations import rewrite_relations

        return self.run_sql(rewrite_relations(self, node).sql(dialect="spark"))

    def expr_sql(self, node: exp.Expression) -> str:
        """Spark SQL text of an expression; subqueries inside it get their Hudi references rewritten."""
        from sqlext.sql.relations import rewrite_relations

        key = id(node)
        if key not in self._expr_sql:
            tree = rewrite_relations(self, node) if any(True for _ in node.find_all(exp.Table)) else node
            self._expr_sql[key] = tree.sql(dialect="spark")
        return self._expr_sql[key]
