"""`sqlext.session()`: a SparkSession ready for Hudi tables, local by default."""
from __future__ import annotations

import os
import sys
from pathlib import Path

from pyspark.sql import SparkSession

DEFAULT_CONF = {
    "spark.sql.shuffle.partitions": "8",
    "spark.sql.adaptive.enabled": "true",
    "spark.sql.execution.arrow.pyspark.enabled": "true",
    "spark.sql.session.timeZone": "UTC",
    "spark.ui.showConsoleProgress": "true",
    "spark.sql.parquet.enableVectorizedReader": "true",
}


def session(master: str | None = None, warehouse: str | os.PathLike | None = None, app_name: str = "sqlext",
            conf: dict[str, str] | None = None) -> SparkSession:
    """A SparkSession (reused when one runs) with `format("hudi")` on its readers and writers."""
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    from sqlext.datasource import install

    install()
    warehouse_dir = Path(warehouse or Path.cwd() / "spark-warehouse").absolute()
    builder = SparkSession.builder.appName(app_name).master(master or os.environ.get("SPARK_MASTER", "local[*]"))
    settings = {**DEFAULT_CONF, "spark.sql.warehouse.dir": str(warehouse_dir), **(conf or {})}
    for key, value in settings.items():
        builder = builder.config(key, value)
    return builder.getOrCreate()
