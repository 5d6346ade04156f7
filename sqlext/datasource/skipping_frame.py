"""The DataFrame a `format("hudi")` load (or `spark.table` of a Hudi table) returns: its `where` / `filter` also
skips the files the condition cannot match (Hudi's data skipping on the DataFrame API).

Spark plans our reads on the driver before any filter exists (storage.read.read_table returns a finished scan),
so no filter reaches the file selection the way it reaches Hudi's Java file index. The frame remembers how it
was read; its first `where` translates the condition (a SQL string or a Column, as Spark's analysis spells it) to a
storage predicate with the SQL front end's translation (sqlext.sql.pruning.data_filter) and reads again with it,
then applies the whole condition. A condition it cannot translate filters the frame as it is. Any other
transformation returns an ordinary DataFrame, whose later filters no longer skip files.
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
        frame = cls(read_table(spark, path, config)._jdf, spark)
        frame._hoodie_read = (path, config, state)
        return frame

    def filter(self, condition) -> DataFrame:
        from storage.read import read_table

        path, config, state = self._hoodie_read
        predicate = condition_predicate(self, condition)
        # a table that changed since the load would be read at another snapshot than this frame's: no skipping
        if predicate is None or _table_state(self.sparkSession, path, config) != state:
            return super().filter(condition)
        return read_table(self.sparkSession, path, config, data_filter=predicate).filter(condition)

    where = filter


def _table_state(spark: SparkSession, path: str, config: HoodieConfig):
    """The table's last completed instant: what a snapshot read sees changes only with it."""
    from storage.table.meta_client import HoodieTableMetaClient

    return HoodieTableMetaClient.load_in_session(spark, path, config).timeline.completed().last()


def condition_predicate(frame: DataFrame, condition) -> Predicate | None:
    """`condition` (SQL text or a Column) over `frame` as a storage predicate, or None. Translated from Spark's
    analysis of the filter, whose SQL spells every coercion (a cast on the column leaves that part untranslated)."""
    from sqlext.sql.pruning import data_filter

    try:
        plan = DataFrame.filter(frame, condition)._jdf.queryExecution().analyzed()
        if plan.nodeName() != "Filter":
            return None
        tree = sqlglot.parse_one(plan.condition().sql(), dialect="spark")
    except Exception as exc:  # noqa: BLE001 - an untranslatable condition only means no skipping
        log.debug("no data skipping for %r: %s", condition, exc)
        return None
    return data_filter(tree, frame.columns, set(), True)
