"""`install(spark, resolver)`: the SQL front door. `spark.sql` of that session (the instance attribute, not
the class) splits a multi-statement string, parses each statement with sqlglot (spark dialect) and runs
statements that touch Hudi tables through the planners; anything else reaches the original `spark.sql`
unchanged. A failing statement raises `HoodieSqlError` (with its line/column where known) and writes nothing;
statements before it in the same string have run.
"""
from __future__ import annotations

import contextlib
import logging
import re
from dataclasses import dataclass
from typing import Callable, Iterator

import sqlglot
from pyspark.sql import DataFrame, SparkSession
from sqlglot import exp
from sqlglot.errors import ParseError

from sqlext.sql import alter, call, create, delete, drop, index, insert, merge, query, show, truncate, update, view
from sqlext.sql.assign import spark_column, spark_message
from sqlext.sql.context import PlanContext
from sqlext.sql.errors import HoodieSqlError
from sqlext.sql.relations import hudi_references
from sqlext.sql.resolver import TableResolver, WarehouseResolver
from sqlext.sql.result import empty_result
from sqlext.sql.splitter import Statement, split_statements

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Planner:
    name: str
    matches: Callable[[PlanContext, exp.Expression], bool]
    plan: Callable[[PlanContext, exp.Expression], DataFrame]
    writes: bool = False  # DML planners evaluate expressions themselves: no parameter markers there


def _use_matches(ctx, node: exp.Use) -> bool:
    return str(node.args.get("kind") or "").upper() in ("", "DATABASE", "SCHEMA", "NAMESPACE")


def _use_plan(ctx, node: exp.Use) -> DataFrame:
    """Spark's USE, also told to the resolver; a database only the resolver knows (a `<db>.db` folder in the
    warehouse, created by CREATE TABLE db.t) is accepted."""
    db = node.this.name if node.this is not None else ""
    try:
        ctx.run_sql(ctx.statement.text)
    except Exception:
        if not ctx.resolver.database_exists(db):
            raise
        log.info("USE %s: unknown to Spark's catalog, known to the Hudi resolver", db)
    ctx.resolver.use(db)
    return empty_result(ctx.spark)


CREATE = Planner("CREATE TABLE", create.matches, create.plan, writes=True)
INSERT = Planner("INSERT", insert.matches, insert.plan, writes=True)
MERGE = Planner("MERGE", merge.matches, merge.plan, writes=True)
UPDATE = Planner("UPDATE", update.matches, update.plan, writes=True)
DELETE = Planner("DELETE", delete.matches, delete.plan, writes=True)
DROP = Planner("DROP TABLE", drop.matches, drop.plan, writes=True)
USE = Planner("USE", _use_matches, _use_plan)
QUERY = Planner("query", query.matches, query.plan)
VIEW = Planner("CREATE VIEW", view.matches, view.plan)
ALTER = Planner("ALTER TABLE", alter.matches, alter.plan, writes=True)
TRUNCATE = Planner("TRUNCATE TABLE", truncate.matches, truncate.plan, writes=True)
DESCRIBE = Planner("DESCRIBE", show.describe_matches, show.describe_plan)
DROP_INDEX = Planner("DROP INDEX", index.drop_matches, index.drop_plan, writes=True)

# statement type -> planners tried in order; the first whose `matches` says yes runs the statement
PLANNERS: dict[type[exp.Expression], tuple[Planner, ...]] = {
    exp.Create: (CREATE, VIEW, QUERY),  # VIEW: persistent views; temporary ones are QUERY's
    exp.Insert: (INSERT, QUERY),
    exp.Merge: (MERGE,),
    exp.Update: (UPDATE,),
    exp.Delete: (DELETE,),
    exp.Drop: (DROP, DROP_INDEX),
    exp.Use: (USE,),
    exp.Query: (QUERY,),
    exp.Values: (QUERY,),
    exp.Describe: (DESCRIBE, QUERY),
    exp.Alter: (ALTER,),
    exp.TruncateTable: (TRUNCATE,),
}


@dataclass(frozen=True)
class CommandPlanner:
    """A statement sqlglot keeps as an opaque Command (CALL, SHOW, some ALTER forms): matched on its text."""

    name: str
    matches: Callable[[PlanContext, str], bool]
    plan: Callable[[PlanContext, str], DataFrame]
    writes: bool = False


# tried in order for Command statements; anything unmatched goes to Spark (EXPLAIN over Hudi tables rewritten)
COMMAND_PLANNERS: tuple[CommandPlanner, ...] = (
    CommandPlanner("CALL", call.matches, call.plan, writes=True),
    CommandPlanner("ALTER TABLE UNSET TBLPROPERTIES", alter.unset_matches, alter.unset_plan, writes=True),
    CommandPlanner("SHOW INDEXES", index.show_matches, index.show_plan),
    CommandPlanner("SHOW", show.matches, show.plan),
    CommandPlanner("CREATE INDEX", index.command_matches, index.command_plan, writes=True),
)

# tried in order for statements sqlglot cannot parse, before Spark gets them (Hudi grammar Spark lacks too)
UNPARSED_PLANNERS: tuple[CommandPlanner, ...] = (
    CommandPlanner("DROP INDEX", index.drop_text_matches, index.drop_text_plan, writes=True),
)


def planners_for(node: exp.Expression) -> tuple[Planner, ...]:
    for cls in type(node).__mro__:
        if cls in PLANNERS:
            return PLANNERS[cls]
    return ()


class _DropCommandFallbackWarning(logging.Filter):
    """sqlglot warns for every statement it keeps as a Command (SHOW, CALL, ...); those go to Spark as is."""

    def filter(self, record: logging.LogRecord) -> bool:
        return "Falling back to parsing as a 'Command'" not in record.getMessage()


class SqlFrontEnd:
    def __init__(self, spark: SparkSession, resolver: TableResolver, original_sql: Callable[..., DataFrame]):
        self.spark = spark
        self.resolver = resolver
        self.original_sql = original_sql

    def sql(self, sqlQuery: str, args=None, **kwargs) -> DataFrame:  # noqa: N803 (Spark's parameter name)
        """`spark.sql`, statement by statement; returns the last statement's result."""
        extra = (args,) if args is not None else ()
        statements = split_statements(sqlQuery)
        if len(statements) <= 1:
            if not statements:
                return self.original_sql(sqlQuery, *extra, **kwargs)
            return self._run(statements[0], sqlQuery, extra, kwargs)
        result = None
        for statement in statements:
            result = self._run(statement, statement.text, extra, kwargs)
        return result

    def _run(self, statement: Statement, text: str, args: tuple, kwargs: dict) -> DataFrame:
        try:
            node = sqlglot.parse_one(statement.text, read="spark")
        except ParseError as exc:
            ctx = PlanContext(self.spark, self.resolver, self.original_sql, statement, sql_args=args,
                              sql_kwargs=kwargs)
            if any(c.matches(ctx, statement.text) for c in UNPARSED_PLANNERS):
                return self._run_command(ctx, statement, text, args, kwargs, UNPARSED_PLANNERS)
            return self._unparsed(statement, text, args, kwargs, exc)
        if node is None:
            return self.original_sql(text, *args, **kwargs)
        ctx = PlanContext(self.spark, self.resolver, self.original_sql, statement, sql_args=args, sql_kwargs=kwargs)
        if isinstance(node, exp.Command):  # CALL, SHOW, EXPLAIN, ...: ours when they name Hudi tables
            return self._run_command(ctx, statement, text, args, kwargs)
        try:
            planner = next((p for p in planners_for(node) if p.matches(ctx, node)), None)
            if planner is None:
                refs = hudi_references(ctx, node)
                if refs:
                    raise ctx.error(f"{type(node).__name__.upper()} statements are not supported on Hudi tables "
                                    f"({ctx.resolve(refs[0]).qualified_name if ctx.resolve(refs[0]) else refs[0].sql()})",
                                    refs[0])
                return self.original_sql(text, *args, **kwargs)
            if planner.writes and (args or kwargs):
                raise ctx.error(f"parameter markers are not supported in {planner.name} on Hudi tables", node)
            log.debug("%s statement at line %d runs through the Hudi planner", planner.name, statement.position.line)
            return planner.plan(ctx, node)
        except HoodieSqlError:
            raise
        except Exception as exc:
            raise _wrap(ctx, node, exc) from exc
        finally:
            ctx.cleanup()

    def _run_command(self, ctx: PlanContext, statement: Statement, text: str, args, kwargs,
                     planners: tuple[CommandPlanner, ...] = COMMAND_PLANNERS) -> DataFrame:
        try:
            command = next((c for c in planners if c.matches(ctx, statement.text)), None)
            if command is not None:
                if command.writes and (args or kwargs):
                    raise ctx.error(f"parameter markers are not supported in {command.name}")
                log.debug("%s statement at line %d runs through the Hudi planner", command.name,
                          statement.position.line)
                return command.plan(ctx, statement.text)
            if statement.text.lstrip()[:7].upper() == "EXPLAIN":
                explained = query.explain(ctx, statement.text)
                if explained is not None:
                    return explained
        except HoodieSqlError:
            raise
        except Exception as exc:
            verb = statement.text.split(None, 1)[0].upper() if statement.text.strip() else "STATEMENT"
            raise ctx.error(f"{verb} failed: {spark_message(exc)}") from exc
        finally:
            ctx.cleanup()
        return self.original_sql(text, *args, **kwargs)

    def _unparsed(self, statement: Statement, text: str, args, kwargs, parse_error: ParseError) -> DataFrame:
        """sqlglot cannot parse it: Spark may (its grammar is the reference); if Spark fails too, report the
        syntax error at sqlglot's position."""
        try:
            return self.original_sql(text, *args, **kwargs)
        except Exception as spark_exc:
            first = parse_error.errors[0] if parse_error.errors else {}
            line, col = statement.position.absolute(first.get("line", 1), first.get("col", 1))
            near = first.get("highlight") or ""
            raise HoodieSqlError(f"syntax error{f' near {near!r}' if near else ''}: "
                               f"{first.get('description', str(parse_error))} (Spark: {spark_message(spark_exc)})",
                               line=line, col=col, statement=statement.text) from spark_exc


_KEY_ERROR = re.compile(r"HoodieKeyError: ([^\n\"]*)")


def _wrap(ctx: PlanContext, node: exp.Expression, exc: Exception) -> HoodieSqlError:
    text = str(exc)
    found = _KEY_ERROR.search(text)
    column = None
    if found:
        message = found.group(1).rstrip(". ")
        named = re.search(r"field '([^']+)'", message)
        column = named.group(1) if named else None
    else:
        message = spark_message(exc)
        column = spark_column(exc)
    where = None
    if column:
        where = next((c for c in node.find_all(exp.Column) if c.name.lower() == column.lower()), None)
    verb = type(node).__name__.upper()
    # only when Spark ran the text as written (no Hudi table rewritten into a temp view)
    spark_pos = _SPARK_POSITION.search(text) if where is None and not ctx.views else None
    if spark_pos:  # Spark's own position of the problem (0-based pos), relative to the statement it ran
        line, col = ctx.statement.position.absolute(int(spark_pos.group(1)), int(spark_pos.group(2)) + 1)
        return HoodieSqlError(f"{verb} failed: {message}", line=line, col=col, column=column,
                            statement=ctx.statement.text)
    return ctx.error(f"{verb} failed: {message}", where, column=column)


_SPARK_POSITION = re.compile(r"; line (\d+) pos (\d+)")


def install(spark: SparkSession, resolver: TableResolver | None = None) -> SqlFrontEnd:
    """Route `spark.sql` of this session object through the Hudi SQL front end (idempotent; a second call
    replaces the resolver). The default resolver uses Spark's warehouse dir and current database."""
    current = getattr(spark, "_sqlext_frontend", None)
    original = current.original_sql if current is not None else spark.sql
    if resolver is None:
        resolver = WarehouseResolver(spark.conf.get("spark.sql.warehouse.dir"), spark.catalog.currentDatabase)
    front = SqlFrontEnd(spark, resolver, original)
    spark.sql = front.sql            # instance attribute: other sessions and the class stay untouched
    spark._sqlext_frontend = front
    sqlglot_logger = logging.getLogger("sqlglot")
    if not any(isinstance(f, _DropCommandFallbackWarning) for f in sqlglot_logger.filters):
        sqlglot_logger.addFilter(_DropCommandFallbackWarning())
    return front


def uninstall(spark: SparkSession) -> None:
    current = getattr(spark, "_sqlext_frontend", None)
    if current is not None:
        spark.sql = current.original_sql
        del spark._sqlext_frontend


@contextlib.contextmanager
def installed(spark: SparkSession, resolver: TableResolver) -> Iterator[SparkSession]:
    """`spark` with the front end on `resolver` for the block; afterwards the session's previous front end (and
    resolver) is back, or the plain `spark.sql` if it had none."""
    previous = getattr(spark, "_sqlext_frontend", None)
    install(spark, resolver)
    try:
        yield spark
    finally:
        if previous is not None:
            install(spark, previous.resolver)
        else:
            uninstall(spark)
