"""A write's input in this process (storage.write.local.input): rows the driver holds (LocalRelation) collected, a
plain parquet scan read with pyarrow, anything else with toArrow; each gives the rows Spark's toArrow gives."""
from __future__ import annotations

import datetime

import pyarrow as pa
import pytest

from storage.write.local import input as local_input


def _same(spark_df, table: pa.Table) -> None:
    expected = spark_df.toArrow()
    assert table.schema.names == expected.schema.names
    assert sorted(table.to_pylist(), key=repr) == sorted(expected.cast(table.schema).to_pylist(), key=repr)


def test_rows_held_by_the_driver_are_collected_without_a_job(spark, monkeypatch):
    df = spark.sql("SELECT * FROM VALUES (1, 'a', 2.5, DATE'2024-01-02'), (2, NULL, NULL, NULL) AS t(id, s, v, d)")
    assert local_input._is_local_relation(df)
    monkeypatch.setattr(type(df), "toArrow", lambda self: pytest.fail("toArrow runs a Spark job"))
    table = local_input.to_arrow(df)
    assert table.to_pylist() == [{"id": 1, "s": "a", "v": 2.5, "d": datetime.date(2024, 1, 2)},
                                 {"id": 2, "s": None, "v": None, "d": None}]


def test_timestamps_held_by_the_driver_go_through_spark(spark):
    df = spark.sql("SELECT 1 AS id, TIMESTAMP'2024-01-02 03:04:05' AS t")
    assert local_input._collected(df) is None  # the session's time zone would shift them
    _same(df, local_input.to_arrow(df))


def test_a_plain_parquet_scan_is_read_with_pyarrow(spark, tmp_path, monkeypatch):
    path = str(tmp_path / "in")
    spark.range(50).selectExpr("id", "cast(id % 3 as string) as dt", "id * 1.5 as v").write.parquet(path)
    df = spark.read.parquet(path).cache()
    assert local_input._plain_parquet_files(df)
    expected = df.toArrow()
    monkeypatch.setattr(type(df), "toArrow", lambda self: pytest.fail("toArrow runs a Spark job"))
    table = local_input.to_arrow(df)
    assert sorted(table.to_pylist(), key=repr) == sorted(expected.to_pylist(), key=repr)
    assert local_input.estimated_bytes(df) < 1 << 30


def test_a_filtered_scan_is_evaluated_by_spark(spark, tmp_path):
    path = str(tmp_path / "in")
    spark.range(50).selectExpr("id", "cast(id % 3 as string) as dt").write.parquet(path)
    df = spark.read.parquet(path).where("id > 40")
    assert local_input._plain_parquet_files(df) is None
    table = local_input.to_arrow(df)
    assert sorted(table.column("id").to_pylist()) == list(range(41, 50))
