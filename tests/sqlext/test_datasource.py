"""Hudi on Spark's DataFrame API: the Python data source (any session), and catalog names (saveAsTable,
insertInto, writeTo, spark.table) in a sqlext session. hudi-rs is the oracle for table contents."""
from __future__ import annotations

import subprocess
import sys
import textwrap
import uuid
from pathlib import Path

import pytest
from pyspark.sql.readwriter import DataFrameReader

from hudi_oracle import arrow_rows as _arrow_rows
from hudi_oracle import hudi_rs_read
from hudi_oracle import spark_rows as _spark_rows
from quick_jvm import quick_jvm_env

ROOT = Path(__file__).resolve().parents[2]
COLS = ["id", "name", "ts", "dt"]


def spark_rows(df, columns):
    return sorted(tuple(v for _, v in row) for row in _spark_rows(df, columns))


def arrow_rows(table, columns):
    return sorted(tuple(v for _, v in row) for row in _arrow_rows(table, columns))


def _opts(name: str, **extra) -> dict[str, str]:
    return {"hoodie.table.name": name, "hoodie.datasource.write.recordkey.field": "id",
            "hoodie.datasource.write.precombine.field": "ts", "hoodie.datasource.write.partitionpath.field": "dt",
            **extra}


def _frame(spark, rows):
    return spark.createDataFrame(rows, "id INT, name STRING, ts BIGINT, dt STRING")


def _python_data_source_read(spark, path: str, **options):
    """`spark.read.format("hudi").load(path)` through the JVM and the Python data source, skipping the
    driver-side routing sqlext installs."""
    reader = spark.read.format("hudi")
    for key, value in options.items():
        reader = reader.option(key, value)
    return DataFrameReader.load.__wrapped__(reader, path)


@pytest.mark.parametrize("table_type", ["COPY_ON_WRITE", "MERGE_ON_READ"])
def test_python_data_source_reads_as_hudi_rs_does(spark, tmp_path, table_type):
    path = str(tmp_path / "t")
    opts = _opts("ds_read", **{"hoodie.datasource.write.table.type": table_type})
    _frame(spark, [(1, "a", 1, "p1"), (2, "b", 1, "p1"), (3, "c", 1, "p2")]).write.format("hudi") \
        .options(**opts).mode("append").save(path)
    first = hudi_rs_read(path)
    _frame(spark, [(2, "B", 2, "p1"), (4, "d", 2, "p2")]).write.format("hudi").options(**opts).mode("append").save(path)

    df = _python_data_source_read(spark, path)
    from storage.table.fs_view import FileSystemView
    from storage.table.meta_client import HoodieTableMetaClient

    view = FileSystemView(HoodieTableMetaClient.load(path))
    slices = view.latest_merged_file_slices(None) if table_type == "MERGE_ON_READ" else view.latest_file_slices(None)
    assert df.rdd.getNumPartitions() == len(slices) >= 2  # one task per file slice
    assert sorted(spark_rows(df, COLS)) == sorted(arrow_rows(hudi_rs_read(path), COLS))
    assert {"_hoodie_commit_time", "_hoodie_record_key"} <= set(df.columns)
    # time travel to the first commit
    first_instant = HoodieTableMetaClient.load(path).timeline.completed().first().timestamp
    old = _python_data_source_read(spark, path, **{"as.of.instant": first_instant})
    assert sorted(spark_rows(old, COLS)) == sorted(arrow_rows(first, COLS))
    # the native path agrees
    assert sorted(spark_rows(spark.read.format("hudi").load(path), COLS)) == sorted(spark_rows(df, COLS))


def test_python_data_source_errors_name_the_problem(spark, tmp_path):
    with pytest.raises(Exception, match="not a Hudi table"):
        _python_data_source_read(spark, str(tmp_path / "missing")).collect()
    df = _frame(spark, [(1, "a", 1, "p1")])
    writer = df.write.format("hudi").mode("append")
    from pyspark.sql.readwriter import DataFrameWriter

    with pytest.raises(Exception, match="sqlext.datasource.register"):
        DataFrameWriter.save.__wrapped__(writer, str(tmp_path / "w"))
    assert not (tmp_path / "w" / ".hoodie").exists()


def test_catalog_tables_through_the_dataframe_api(spark):
    db = f"dfapi_{uuid.uuid4().hex[:8]}"
    spark.sql(f"CREATE DATABASE {db}")
    name = f"{db}.trips"
    _frame(spark, [(1, "a", 1, "p1"), (2, "b", 1, "p2")]).write.format("hudi") \
        .options(**_opts("trips")).saveAsTable(name)
    assert sorted(spark_rows(spark.table(name), COLS)) == [(1, "a", 1, "p1"), (2, "b", 1, "p2")]
    location = spark.sql(f"DESCRIBE TABLE EXTENDED {name}").where("col_name = 'Location'").first()["data_type"]
    path = location.removeprefix("file:")

    _frame(spark, [(3, "c", 1, "p1")]).write.insertInto(name)
    _frame(spark, [(4, "d", 1, "p2")]).writeTo(name).append()
    expected = [(1, "a", 1, "p1"), (2, "b", 1, "p2"), (3, "c", 1, "p1"), (4, "d", 1, "p2")]
    assert sorted(spark_rows(spark.read.table(name), COLS)) == expected
    assert sorted(arrow_rows(hudi_rs_read(path), COLS)) == expected

    # overwritePartitions replaces only the partitions it writes (p1)
    _frame(spark, [(5, "e", 2, "p1")]).writeTo(name).overwritePartitions()
    expected = [(2, "b", 1, "p2"), (4, "d", 1, "p2"), (5, "e", 2, "p1")]
    assert sorted(spark_rows(spark.table(name), COLS)) == expected
    assert sorted(arrow_rows(hudi_rs_read(path), COLS)) == expected

    with pytest.raises(Exception, match="already exists"):
        _frame(spark, [(9, "z", 1, "p1")]).write.format("hudi").saveAsTable(name)
    with pytest.raises(Exception, match="2 .*4|4 data columns"):
        spark.createDataFrame([(1, "x")], "id INT, name STRING").write.insertInto(name)
    assert sorted(arrow_rows(hudi_rs_read(path), COLS)) == expected
    # other tables still go to Spark
    spark.range(3).write.saveAsTable(f"{db}.plain")
    assert spark.table(f"{db}.plain").count() == 3
    spark.sql(f"DROP DATABASE {db} CASCADE")


PLAIN_SESSION = textwrap.dedent("""
    import json, sys
    from pyspark.sql import SparkSession
    spark = (SparkSession.builder.master("local[1]").config("spark.ui.enabled", "false")
             .config("spark.sql.shuffle.partitions", "2").getOrCreate())
    from sqlext.datasource.hoodie_data_source import HoodieDataSource
    existing, fresh = sys.argv[1], sys.argv[2]
    # the Python data source alone: reads in a plain session
    spark.dataSource.register(HoodieDataSource)
    before = sorted(tuple(r) for r in spark.read.format("hudi").load(existing).select("id", "name").collect())
    # register(): writes and native reads too
    import sqlext.datasource
    sqlext.datasource.register(spark)
    df = spark.createDataFrame([(1, "x", 1, "p1"), (2, "y", 1, "p2")], "id INT, name STRING, ts BIGINT, dt STRING")
    opts = {"hoodie.table.name": "fresh", "hoodie.datasource.write.recordkey.field": "id",
            "hoodie.datasource.write.precombine.field": "ts", "hoodie.datasource.write.partitionpath.field": "dt"}
    df.write.format("hudi").options(**opts).mode("append").save(fresh)
    after = sorted(tuple(r) for r in spark.read.format("hudi").load(fresh).select("id", "name").collect())
    print(json.dumps({"before": before, "after": after, "catalog": spark.conf.get("spark.sql.catalogImplementation")}))
""")


def test_plain_spark_session(spark, tmp_path):
    existing = str(tmp_path / "existing")
    _frame(spark, [(7, "q", 1, "p1")]).write.format("hudi").options(**_opts("existing")).save(existing)
    fresh = str(tmp_path / "fresh")
    # its JVM on JIT tier 1 only (see quick_jvm): a start-up and two tiny jobs; what it runs is the same
    env = quick_jvm_env({"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin", "PYSPARK_PYTHON": sys.executable,
                         "PYSPARK_DRIVER_PYTHON": sys.executable, "HOME": str(tmp_path)})
    done = subprocess.run([sys.executable, "-c", PLAIN_SESSION, existing, fresh], env=env, capture_output=True,
                          text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    import json

    out = json.loads(done.stdout.strip().splitlines()[-1])
    assert out["catalog"] == "in-memory"  # no sqlext.session(), no metastore
    assert out["before"] == [[7, "q"]]
    assert out["after"] == [[1, "x"], [2, "y"]]
    assert sorted(arrow_rows(hudi_rs_read(fresh), ["id", "name"])) == [(1, "x"), (2, "y")]
