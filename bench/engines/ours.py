"""Our engine, through the DataFrame API (`format("hudi")`) and through `spark.sql` (CTAS, MERGE INTO on the
path form hudi.`/path`), in one warm SparkSession.

Input data reaches Spark as a cached DataFrame (staged to parquet and cached before the clock starts), the
Spark counterpart of the in-memory Arrow table the other engines get."""
from __future__ import annotations

import logging
import os
import shutil

import pyarrow as pa
import pyarrow.parquet as pq

from bench.engines.base import Engine, ScanResult
from bench.workloads import KEY, PARTITION, PRECOMBINE, SUM_COLUMN

log = logging.getLogger(__name__)

TABLE_TYPES = {"cow": "COPY_ON_WRITE", "mor": "MERGE_ON_READ"}


class SparkInput:
    """Arrow tables as cached Spark DataFrames, staged once per tag and shared by the Spark engines."""

    def __init__(self, spark, workdir: str):
        self.spark = spark
        self.dir = os.path.join(workdir, "staging")
        self.cached: dict[str, object] = {}

    def frame(self, data: pa.Table, tag: str):
        if tag not in self.cached:
            os.makedirs(self.dir, exist_ok=True)
            path = os.path.join(self.dir, f"{tag}.parquet")
            pq.write_table(data, path, row_group_size=131072)
            df = self.spark.read.parquet(path).cache()
            df.count()
            self.cached[tag] = df
        return self.cached[tag]

    def release(self) -> None:
        for df in self.cached.values():
            df.unpersist()
        self.cached.clear()


# `python -m bench --hoodie k=v`: extra write options of the ours_df lane (e.g. an index type to compare)
EXTRA_OPTIONS: dict[str, str] = {}


def hudi_options(name: str, table_type: str) -> dict[str, str]:
    return {
        "hoodie.table.name": name,
        "hoodie.datasource.write.table.type": TABLE_TYPES[table_type],
        "hoodie.datasource.write.recordkey.field": KEY,
        "hoodie.datasource.write.precombine.field": PRECOMBINE,
        "hoodie.datasource.write.partitionpath.field": PARTITION,
        "hoodie.datasource.write.hive_style_partitioning": "true",
        "hoodie.datasource.hive_sync.enable": "false",
        **EXTRA_OPTIONS,
    }


class _Ours(Engine):
    family = "ours"
    uses_spark = True

    def __init__(self, spark, inputs: SparkInput, table_type: str):
        self.spark = spark
        self.inputs = inputs
        self.table_type = table_type

    def prepare(self, data: pa.Table, tag: str):
        return self.inputs.frame(data, tag)

    def compact(self, path: str) -> None:
        from storage.config import HoodieConfig
        from storage.table_service.compaction import run_compaction, schedule_compaction

        if self.table_type != "mor":
            raise NotImplementedError("compaction is for merge-on-read tables")
        instant = schedule_compaction(path, HoodieConfig.of({
            "hoodie.compaction.strategy": "org.apache.hudi.table.action.compact.strategy.UnBoundedCompactionStrategy"}))
        if instant is None:
            raise RuntimeError(f"no compaction scheduled for {path}: no log files?")
        run_compaction(self.spark, path, instant)

    def start(self, workdir: str) -> None:
        """Warm-up on a tiny table (JIT, class loading, Python workers) so the first timed write is not the first."""
        from bench.workloads import DataSet

        tiny = DataSet(400, 40)
        path = os.path.join(workdir, f"warmup_{self.name.replace('/', '_')}")
        self.load(path, self.prepare(tiny.base(), "warmup_base"))
        self.upsert(path, self.prepare(tiny.uniform_batch(), "warmup_batch"))
        self.scan(path)
        self.lookup(path, tiny.lookup_keys()[:5])
        shutil.rmtree(path, ignore_errors=True)


class OursDataFrame(_Ours):
    """`df.write.format("hudi")...save(path)` and `spark.read.format("hudi").load(path)`."""

    def __init__(self, spark, inputs: SparkInput, table_type: str):
        super().__init__(spark, inputs, table_type)
        self.name = f"ours_df/{table_type}"

    def _write(self, df, path: str, operation: str) -> None:
        name = os.path.basename(path.rstrip("/"))
        (df.write.format("hudi").options(**hudi_options(name, self.table_type))
         .option("hoodie.datasource.write.operation", operation).mode("append").save(path))

    def load(self, path, data) -> None:
        self._write(data, path, "bulk_insert")

    def upsert(self, path, batch) -> None:
        self._write(batch, path, "upsert")

    def delete(self, path, rows) -> None:
        self._write(rows, path, "delete")

    def _table(self, path):
        return self.spark.read.format("hudi").load(path)

    def scan(self, path) -> ScanResult:
        from pyspark.sql import functions as F

        row = self._table(path).agg(F.count(F.lit(1)), F.sum(SUM_COLUMN)).collect()[0]
        return ScanResult(int(row[0]), float(row[1]))

    def lookup(self, path, keys) -> ScanResult:
        from pyspark.sql import functions as F

        return ScanResult(self._table(path).where(F.col(KEY).isin(keys)).count())


class OursSql(_Ours):
    """CREATE TABLE ... AS SELECT (load), MERGE INTO (upsert, delete), SELECT (scans) on hudi.`/path`."""

    def __init__(self, spark, inputs: SparkInput, table_type: str):
        super().__init__(spark, inputs, table_type)
        self.name = f"ours_sql/{table_type}"
        self._views = 0

    def _view(self, df) -> str:
        self._views += 1
        view = f"bench_src_{self._views}"
        df.createOrReplaceTempView(view)
        return view

    def load(self, path, data) -> None:
        view = self._view(data)
        self._views += 1  # a fresh name per table: the catalog keeps names of tables whose files the bench removed
        name = f"bench_{os.path.basename(path.rstrip('/')).replace('-', '_')}_{self._views}"
        self.spark.sql(
            f"CREATE TABLE {name} USING hudi PARTITIONED BY ({PARTITION}) LOCATION '{path}' "
            f"TBLPROPERTIES (primaryKey = '{KEY}', preCombineField = '{PRECOMBINE}', type = '{self.table_type}', "
            f"'hoodie.datasource.write.hive_style_partitioning' = 'true') AS SELECT * FROM {view}")

    def upsert(self, path, batch) -> None:
        view = self._view(batch)
        self.spark.sql(f"MERGE INTO hudi.`{path}` t USING {view} s ON t.{KEY} = s.{KEY} "
                       "WHEN MATCHED THEN UPDATE SET * WHEN NOT MATCHED THEN INSERT *")

    def delete(self, path, rows) -> None:
        view = self._view(rows.select(KEY))
        self.spark.sql(f"MERGE INTO hudi.`{path}` t USING {view} s ON t.{KEY} = s.{KEY} WHEN MATCHED THEN DELETE")

    def scan(self, path) -> ScanResult:
        row = self.spark.sql(f"SELECT count(*), sum({SUM_COLUMN}) FROM hudi.`{path}`").collect()[0]
        return ScanResult(int(row[0]), float(row[1]))

    def lookup(self, path, keys) -> ScanResult:
        ids = ", ".join(str(k) for k in keys)
        row = self.spark.sql(f"SELECT count(*) FROM hudi.`{path}` WHERE {KEY} IN ({ids})").collect()[0]
        return ScanResult(int(row[0]))
