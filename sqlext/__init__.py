"""SQL front door and Spark entry points for Hudi tables.

`sqlext.session()` returns a SparkSession on which `df.write.format("hudi")` and
`spark.read.format("hudi")` run through this project's storage engine.
"""
from sqlext.session import session  # noqa: F401
