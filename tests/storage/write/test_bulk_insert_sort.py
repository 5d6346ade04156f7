"""hoodie.bulkinsert.sort.mode (file key ranges and order) and hoodie.*.shuffle.parallelism (the dedup shuffle's
tasks, the bulk insert input's partitions)."""
from __future__ import annotations

import glob
import itertools
import os
import random

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from hudi_oracle import arrow_rows, hudi_rs_read, rows
from storage.config import HoodieConfig
from storage.exception import HoodieConfigError
from storage.write.bulk_insert_sort import BulkInsertSortMode, shuffle_parallelism, sort_mode
from storage.write.operation import WriteOperationType as Op
from storage.write.prepare import dedup, key_records
from storage.write.table_settings import resolve_table_settings

SCHEMA = "id string, name string, ts long, dt string"
COLS = ["id", "name", "ts", "dt"]


def _opts(**extra) -> dict:
    opts = {"hoodie.table.name": "s", "hoodie.datasource.write.recordkey.field": "id",
            "hoodie.datasource.write.precombine.field": "ts", "hoodie.datasource.write.partitionpath.field": "dt",
            # 60 records per new file: a partition of 300 records is written as 5 files
            "hoodie.copyonwrite.insert.auto.split": "false", "hoodie.copyonwrite.insert.split.size": "60"}
    opts.update(extra)
    return opts


def _data(n: int = 300) -> list[tuple]:
    rng = random.Random(5)
    ids = [f"k{i:05d}" for i in range(n)]
    rng.shuffle(ids)
    return [(k, f"n{k}", 1, "p0" if i % 3 else "p1") for i, k in enumerate(ids)]


def _file_keys(path: str) -> list[list[str]]:
    files = sorted(glob.glob(os.path.join(path, "dt=p0", "*.parquet")) or glob.glob(os.path.join(path, "p0", "*.parquet")))
    return [pq.read_table(f, columns=["_hoodie_record_key"]).column(0).to_pylist() for f in files]


def _overlapping(files: list[list[str]]) -> bool:
    ranges = sorted((min(keys), max(keys)) for keys in files)
    return any(lo <= prev_hi for (_, prev_hi), (lo, _) in itertools.pairwise(ranges))


@pytest.mark.parametrize("mode", ["GLOBAL_SORT", "PARTITION_SORT", "NONE"])
def test_bulk_insert_sort_modes(spark, tmp_path, mode):
    path = str(tmp_path / mode)
    data = _data()
    spark.createDataFrame(data, SCHEMA).repartition(3).write.format("hudi") \
        .options(**_opts(**{"hoodie.bulkinsert.sort.mode": mode})) \
        .option("hoodie.datasource.write.operation", "bulk_insert").mode("append").save(path)
    files = _file_keys(path)
    assert sum(map(len, files)) == 200 and max(map(len, files)) <= 60  # 200 records of p0, up to 60 per file
    assert len(files) == 4  # 200 records in ceil(200 / 60) files (NONE: p1's 100 records would roll over 3 tasks)
    sorted_files = all(keys == sorted(keys) for keys in files)
    if mode == "GLOBAL_SORT":
        assert sorted_files and not _overlapping(files)
    elif mode == "PARTITION_SORT":
        assert sorted_files and _overlapping(files)
    else:  # the input order: both fail (what makes the assertions above meaningful)
        assert not sorted_files and _overlapping(files)
    want = rows([dict(zip(COLS, r)) for r in data], COLS)
    assert arrow_rows(hudi_rs_read(path), COLS) == want


def test_sort_mode_option():
    assert sort_mode(HoodieConfig(), Op.BULK_INSERT) is BulkInsertSortMode.NONE  # Hudi 0.14's default
    config = HoodieConfig.of({"hoodie.bulkinsert.sort.mode": "global_sort"})
    assert sort_mode(config, Op.BULK_INSERT) is BulkInsertSortMode.GLOBAL_SORT
    assert sort_mode(config, Op.UPSERT) is BulkInsertSortMode.NONE  # only bulk inserts sort
    with pytest.raises(HoodieConfigError, match="hoodie.bulkinsert.sort.mode"):
        sort_mode(HoodieConfig.of({"hoodie.bulkinsert.sort.mode": "RANDOM"}), Op.BULK_INSERT)


def test_shuffle_parallelism_reaches_the_dedup_shuffle(spark):
    config = HoodieConfig.of({**_opts(), "hoodie.upsert.shuffle.parallelism": "3",
                              "hoodie.delete.shuffle.parallelism": "5", "hoodie.insert.shuffle.parallelism": "7",
                              "hoodie.bulkinsert.shuffle.parallelism": "2"})
    assert [shuffle_parallelism(config, op) for op in (Op.UPSERT, Op.DELETE, Op.INSERT, Op.BULK_INSERT)] == [3, 5, 7, 2]
    assert shuffle_parallelism(HoodieConfig(), Op.UPSERT) == 0
    settings = resolve_table_settings(config, None)
    df = spark.createDataFrame(_data(40) + _data(40), SCHEMA)
    schema = pa.schema([("id", "string"), ("name", "string"), ("ts", "int64"), ("dt", "string")])
    keyed = key_records(df, settings, Op.UPSERT, schema)
    deduped = dedup(keyed, settings, False, False, parallelism=shuffle_parallelism(config, Op.UPSERT))
    assert deduped.rdd.getNumPartitions() == 3 and deduped.count() == 40


def test_write_with_shuffle_parallelism(spark, tmp_path):
    path = str(tmp_path / "par")
    data = _data(60)
    for op, key in (("bulk_insert", "hoodie.bulkinsert.shuffle.parallelism"),
                    ("upsert", "hoodie.upsert.shuffle.parallelism")):
        spark.createDataFrame(data, SCHEMA).write.format("hudi").options(**_opts(**{key: "3"})) \
            .option("hoodie.datasource.write.operation", op).mode("append").save(path)
    assert arrow_rows(hudi_rs_read(path), COLS) == rows([dict(zip(COLS, r)) for r in data], COLS)
