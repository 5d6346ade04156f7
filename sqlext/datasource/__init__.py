"""Hudi on Spark's DataFrame API.

- `HoodieDataSource` (hoodie_data_source.py): Hudi as a PySpark Python data source, so `format("hudi")` reads
  in any SparkSession (`spark.dataSource.register(HoodieDataSource)`).
- routing.py: on the driver, `save` / `load` of `format("hudi")` and (with the SQL front end) `saveAsTable`,
  `insertInto`, `writeTo`, `spark.table` / `spark.read.table` of Hudi tables run storage's write client and
  native reader.

`register(spark)` does both for a session made any way (`SparkSession.builder...getOrCreate()`);
`sqlext.session()` calls it.
"""
from __future__ import annotations

import contextlib

from pyspark.sql import SparkSession

from sqlext.datasource.routing import HUDI_FORMATS, install  # noqa: F401


def register(spark: SparkSession) -> SparkSession:
    """Make `format("hudi")` work in `spark`: the Python data source (reads, any route through the JVM) and the
    driver-side routing of writes and native reads. Returns `spark`."""
    from sqlext.datasource.hoodie_data_source import HoodieDataSource

    install()
    with _active(spark):
        spark.dataSource.register(HoodieDataSource)
    return spark


@contextlib.contextmanager
def _active(spark: SparkSession):
    """`spark` as the JVM's active session for the block. Spark checks a new data source's name against the
    ACTIVE session's data sources: registering in a `newSession()` child (its own, empty list) while its parent is
    active fails with DATA_SOURCE_ALREADY_EXISTS, and the child then cannot read Hudi catalog tables."""
    sessions = spark._jvm.org.apache.spark.sql.classic.SparkSession
    previous = sessions.getActiveSession()
    sessions.setActiveSession(spark._jsparkSession)
    try:
        yield
    finally:
        if previous.isDefined():
            sessions.setActiveSession(previous.get())
        else:
            sessions.clearActiveSession()
