"""The DataFrame a `format("hudi")` load (or `spark.table` of a Hudi table) returns: its `where` / `filter` also
skips the files the condition cannot match (Hudi's data skipping on the DataFrame API).

Spark plans our reads on the driver before any filter exists (storage.read.read_table returns a finished scan),
so no filter reaches the file selection the way it reaches Hudi's Java file index. The frame remembers how it
was read and the conditions applied to it so far; each `where` translates its condition (a SQL string or a
Column, as Spark's analysis spells it) to a storage predicate with the SQL front end's translation
(sqlext.sql.pruning.data_filter), reads again with the conjunction of every translated condition of the chain,
then applies all the conditions - so `load(p).where(a).where(b)` skips by `a AND b`. A condition it cannot
translate filters the frame as it is (still skipping by the others). Any other transformation returns an ordinary
DataFrame, whose later filters no longer skip files.
"""
from __future__ import annotations

import logging

import sqlglot
from pyspark.sql import SparkSession
from pyspark.sql.classic.dataframe import DataFrame

from storage.config import HoodieConfig
from storage.read.predicates import Predicate

log = logging.getLogger(__name__)


class HoodieDataFrame(DataFrame):
    """A snapshot of a Hudi table as read; `where` / `filter` re-read it with data skipping (module doc)."""

    @classmethod
    def read(cls, spark: SparkSession, path: str, config: HoodieConfig) -> "HoodieDataFrame":
        from storage.read import read_table

        state = _table_state(spark, path, config)
        loaded = read_table(spark, path, config)
        return cls._of(loaded, (path, config, state, loaded), (), ())

    @classmethod
    def _of(cls, frame: DataFrame, read: tuple, conditions: tuple, predicates: tuple) -> "HoodieDataFrame":
        out = cls(frame._jdf, frame.sparkSession)
        out._hoodie_read, out._hoodie_conditions, out._hoodie_predicates = read, conditions, predicates
        return out

    def filter(self, condition) -> DataFrame:
        from storage.read import read_table
        from storage.read.predicates import conjunction

        path, config, state, loaded = self._hoodie_read
        found = _portable(self, loaded, condition)
        if found is None:
            return super().filter(condition)  # Spark's own error
        portable, sql = found
        conditions = self._hoodie_conditions + (portable,)
        predicate = _predicate(sql, self.columns)
        # a table that changed since the load would be read at another snapshot than this frame's: no skipping
        if predicate is None or _table_state(self.sparkSession, path, config) != state:
            return self._of(super().filter(portable), self._hoodie_read, conditions, self._hoodie_predicates)
        predicates = self._hoodie_predicates + (predicate,)
        frame = read_table(self.sparkSession, path, config, data_filter=conjunction(list(predicates)))
        for applied in conditions:
            frame = frame.filter(applied)
        return self._of(frame, self._hoodie_read, conditions, predicates)

    where = filter


def _portable(frame: DataFrame, loaded: DataFrame, condition) -> tuple[object, str | None] | None:
    """(`condition` in a form that applies to every re-read of the table, its SQL as Spark's analysis spells it
    over `frame`), or None when it does not apply to `frame` at all. A Column bound to a frame's attributes
    (`df["id"] < 3`, of the loaded frame or of `frame`) becomes that SQL; one whose SQL does not parse back (a
    Python UDF) stays as it is."""
    if isinstance(condition, str):
        sql = _analyzed_sql(frame, condition)
        return (condition, sql) if sql is not None else None
    for source in (frame, loaded):
        sql = _analyzed_sql(source, condition)
        if sql is not None:
            spelled = _analyzed_sql(frame, sql)
            if spelled is not None:
                return sql, spelled
    sql = _analyzed_sql(frame, condition)
    return (condition, sql) if sql is not None else None


def _analyzed_sql(frame: DataFrame, condition) -> str | None:
    """`condition` as Spark's analysis spells it over `frame` (column names, not the frame's attribute ids); None
    when it does not resolve there."""
    try:
        plan = DataFrame.filter(frame, condition)._jdf.queryExecution().analyzed()
        return plan.condition().sql() if plan.nodeName() == "Filter" else None
    except Exception:  # noqa: BLE001 - a condition that does not resolve here
        return None


def _table_state(spark: SparkSession, path: str, config: HoodieConfig):
    """The table's last completed instant: what a snapshot read sees changes only with it."""
    from storage.table.meta_client import HoodieTableMetaClient

    return HoodieTableMetaClient.load_in_session(spark, path, config).timeline.completed().last()


def _predicate(sql: str | None, columns: list[str]) -> Predicate | None:
    """A filter's analyzed SQL (which spells every coercion: a cast on the column leaves that part untranslated)
    as a storage predicate, or None."""
    from sqlext.sql.pruning import data_filter

    if sql is None:
        return None
    try:
        tree = sqlglot.parse_one(sql, dialect="spark")
    except Exception as exc:  # noqa: BLE001 - an untranslatable condition only means no skipping
        log.debug("no data skipping for %r: %s", sql, exc)
        return None
    return data_filter(tree, columns, set(), True)
