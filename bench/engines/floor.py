"""The physical floor and the independent readers.

- `floor/cow`, `floor/mor`: raw pyarrow doing only the physical work of a write, no format: copy-on-write
  rewrites exactly the files an update touches (found by reading the key column of the partition's files) and
  writes inserts as new files; merge-on-read writes only the batch (one file per partition). Scans read the
  files with pyarrow (the cow layout only: a mor floor has nothing that merges).
- `spark_parquet/<type>`: plain `spark.read.parquet` of the latest base files of our table (listed before the
  clock starts; for a mor table with logs that is the read-optimized view, the lower bound of a snapshot scan).
- `hudi_rs/<type>`: hudi-rs (the `hudi` package) snapshot read of our table.
"""
from __future__ import annotations

import itertools
import os

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.dataset as ds
import pyarrow.parquet as pq

from bench.engines.base import Engine, ScanResult
from bench.workloads import KEY, PARTITION, SUM_COLUMN


def _by_partition(data: pa.Table):
    for value in pc.unique(data[PARTITION]).to_pylist():
        yield value, data.filter(pc.equal(data[PARTITION], value))


class Floor(Engine):
    family = "floor"

    def __init__(self, table_type: str):
        self.table_type = table_type
        self.name = f"floor/{table_type}"
        self._seq = itertools.count()

    def prepare(self, data: pa.Table, tag: str) -> pa.Table:
        return data

    def _new_file(self, path: str, dt: str) -> str:
        part = os.path.join(path, f"{PARTITION}={dt}")
        os.makedirs(part, exist_ok=True)
        return os.path.join(part, f"{next(self._seq):06d}.parquet")

    def _files(self, path: str, dt: str) -> list[str]:
        part = os.path.join(path, f"{PARTITION}={dt}")
        return sorted(os.path.join(part, f) for f in os.listdir(part)) if os.path.isdir(part) else []

    def load(self, path, data) -> None:
        for dt, rows in _by_partition(data):
            pq.write_table(rows.drop_columns([PARTITION]), self._new_file(path, dt))

    def _rewrite(self, path: str, batch: pa.Table, delete: bool) -> None:
        for dt, rows in _by_partition(batch):
            if self.table_type == "mor":  # only the batch (keys for deletes) lands
                pq.write_table(rows.select([KEY]) if delete else rows.drop_columns([PARTITION]), self._new_file(path, dt))
                continue
            found = []
            for f in self._files(path, dt):
                keys = pq.read_table(f, columns=[KEY])[KEY]
                hit = pc.is_in(keys, value_set=rows[KEY])
                if not pc.any(hit).as_py():
                    continue
                found.append(keys.filter(hit))
                old = pq.read_table(f)
                kept = old.filter(pc.invert(pc.is_in(old[KEY], value_set=rows[KEY])))
                parts = [kept] if delete else [kept, rows.filter(pc.is_in(rows[KEY], value_set=keys)).drop_columns([PARTITION])]
                pq.write_table(pa.concat_tables(parts), self._new_file(path, dt))
                os.remove(f)
            if not delete:
                seen = pa.chunked_array(found, pa.int64()) if found else pa.chunked_array([], pa.int64())
                inserts = rows.filter(pc.invert(pc.is_in(rows[KEY], value_set=seen)))
                if inserts.num_rows:
                    pq.write_table(inserts.drop_columns([PARTITION]), self._new_file(path, dt))

    def upsert(self, path, batch) -> None:
        self._rewrite(path, batch, delete=False)

    def delete(self, path, rows) -> None:
        self._rewrite(path, rows, delete=True)

    def _dataset(self, path):
        if self.table_type != "cow":
            from bench.engines.base import Unsupported
            raise Unsupported
        return ds.dataset(path, format="parquet", partitioning="hive")

    def scan(self, path) -> ScanResult:
        t = self._dataset(path).to_table(columns=[SUM_COLUMN])
        return ScanResult(t.num_rows, pc.sum(t[SUM_COLUMN]).as_py())

    def lookup(self, path, keys) -> ScanResult:
        return ScanResult(self._dataset(path).to_table(filter=pc.field(KEY).isin(keys), columns=[KEY]).num_rows)


def latest_base_files(path: str) -> list[str]:
    """Absolute paths of the latest base files of a Hudi table (hudi-rs's file-system view)."""
    from hudi import HudiTableBuilder

    table = HudiTableBuilder.from_base_uri(path).build()
    return [os.path.join(path, fs.base_file_relative_path()) if callable(fs.base_file_relative_path)
            else os.path.join(path, fs.base_file_relative_path) for fs in table.get_file_slices()]


class SparkParquet(Engine):
    """Plain Spark parquet read of our table's latest base files: the floor of a Spark scan."""

    family = "floor"
    writes = False
    uses_spark = True

    def __init__(self, spark, table_type: str):
        self.spark = spark
        self.table_type = table_type
        self.name = f"spark_parquet/{table_type}"
        self.files: list[str] = []

    def before_read(self, path: str) -> None:
        self.files = latest_base_files(path)

    def scan(self, path) -> ScanResult:
        from pyspark.sql import functions as F

        row = self.spark.read.parquet(*self.files).agg(F.count(F.lit(1)), F.sum(SUM_COLUMN)).collect()[0]
        return ScanResult(int(row[0]), float(row[1]))

    def lookup(self, path, keys) -> ScanResult:
        from pyspark.sql import functions as F

        return ScanResult(self.spark.read.parquet(*self.files).where(F.col(KEY).isin(keys)).count())


class HudiRs(Engine):
    """hudi-rs snapshot reads of our table (a peer reader of the same files)."""

    family = "peer"
    writes = False

    def __init__(self, table_type: str):
        self.table_type = table_type
        self.name = f"hudi_rs/{table_type}"

    def _read(self, path: str, columns: list[str]) -> pa.Table:
        from hudi import HudiReadOptions, HudiTableBuilder

        batches = HudiTableBuilder.from_base_uri(path).build().read(HudiReadOptions().with_projection(columns))
        return pa.Table.from_batches(batches) if batches else pa.table({c: [] for c in columns})

    def scan(self, path) -> ScanResult:
        t = self._read(path, [SUM_COLUMN])
        return ScanResult(t.num_rows, pc.sum(t[SUM_COLUMN]).as_py())

    def lookup(self, path, keys) -> ScanResult:
        t = self._read(path, [KEY])
        return ScanResult(int(pc.sum(pc.is_in(t[KEY], value_set=pa.array(keys, pa.int64()))).as_py() or 0))
