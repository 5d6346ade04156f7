"""Projections of Spark DataFrames by column name, built in few py4j calls.

Every `F.col(...)` is ~13 py4j round trips (PySpark resolves `org.apache.spark.sql.functions` attribute by
attribute), so selecting nine columns as Column objects costs ~140 calls; the same projection as SQL expression
strings is one `selectExpr` call plus the list's conversion (~14 calls). On a small read, where the Spark job
itself takes ~0.2 s, those calls were a third of the planning time.
"""
from __future__ import annotations

from typing import Iterable

from pyspark.sql import DataFrame


def quote(name: str) -> str:
    """`name` as a SQL identifier (back-quoted, inner back quotes doubled)."""
    return "`" + name.replace("`", "``") + "`"


def select_names(df: DataFrame, names: Iterable[str]) -> DataFrame:
    """`df` with only the columns `names`, in that order (names as they are: no expressions)."""
    names = list(names)
    if names == df.columns:  # the schema is cached on the DataFrame: no call at all
        return df
    return df.selectExpr(*map(quote, names))
