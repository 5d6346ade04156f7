"""SQL front end for Hudi tables: `install(spark, resolver)` makes `spark.sql` understand CREATE TABLE ...
USING hudi, INSERT, INSERT OVERWRITE, MERGE INTO, UPDATE, DELETE, DROP TABLE and queries (with time travel
and `hudi_table_changes`) over Hudi tables; everything else goes to Spark unchanged.

The planners (and the storage write path they use) load on first use of `install`.
"""
from sqlext.sql.errors import HoodieSqlError  # noqa: F401
from sqlext.sql.resolver import HudiTableRef, TableName, TableResolver, WarehouseResolver  # noqa: F401

__all__ = ["HoodieSqlError", "HudiTableRef", "TableName", "TableResolver", "WarehouseResolver", "SqlFrontEnd",
           "install", "installed", "uninstall"]


def __getattr__(name: str):
    if name in ("install", "installed", "uninstall", "SqlFrontEnd"):
        from sqlext.sql import interceptor

        return getattr(interceptor, name)
    raise AttributeError(name)
