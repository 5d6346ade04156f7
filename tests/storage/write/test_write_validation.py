"""Bad input is a clear error naming the problem, and the table is exactly as it was (same files)."""
from __future__ import annotations

import os

import pytest

from storage.exception import HoodieTableStateError, HoodieWriteError

SCHEMA = "id int, name string, ts long, dt string"
OPTS = {"hoodie.table.name": "t", "hoodie.datasource.write.recordkey.field": "id",
        "hoodie.datasource.write.precombine.field": "ts", "hoodie.datasource.write.partitionpath.field": "dt"}


def _files(path):
    return sorted(os.path.relpath(os.path.join(d, f), path) for d, _, fs in os.walk(path) for f in fs)


def _write(spark, path, rows, schema=SCHEMA, **extra):
    spark.createDataFrame(rows, schema).write.format("hudi").options(**{**OPTS, **extra}).mode("append").save(str(path))


@pytest.fixture
def table(spark, tmp_path):
    path = tmp_path / "t"
    _write(spark, path, [(1, "a", 1, "p")])
    return path


@pytest.mark.parametrize("rows, schema, extra, message", [
    ([(2, 1, "p")], "id int, ts long, dt string", {}, "lacks the table's columns name.*set.null.for.missing.columns"),
    ([(2, "b", None, "p")], SCHEMA, {}, "1 records have a null precombine field 'ts'"),
    ([(2, "b", 1, ".hidden")], SCHEMA, {}, r"partition paths \.hidden start a directory with '\.' or '_'"),
    ([(2, "b", 1, "_tmp")], SCHEMA, {}, "partition paths _tmp start"),
    # the SIMPLE index counts the batch before its lookup; the others leave the checks to the workload profile
    ([(2, "b", None, "p")], SCHEMA, {"hoodie.index.type": "SIMPLE"}, "1 records have a null precombine field"),
    ([(2, "b", 1, ".hidden")], SCHEMA, {"hoodie.index.type": "SIMPLE"}, r"partition paths \.hidden start"),
    ([(2, "b", None, "p")], SCHEMA, {"hoodie.datasource.write.operation": "insert"}, "null precombine field 'ts'"),
    # a bulk insert counts partitions by their values and its tasks compute the keys in Arrow: the same errors
    ([(2, "b", 1, "a/../../x")], SCHEMA, {"hoodie.datasource.write.operation": "bulk_insert"},
     r"HoodieKeyError: partition field 'dt' value 'a/\.\./\.\./x' contains a '\.\.' path segment"),
    ([(None, "b", 1, "p")], SCHEMA, {"hoodie.datasource.write.operation": "bulk_insert"},
     "HoodieKeyError: record key field 'id' cannot be null or empty"),
    ([(2, "b", 1, ".hidden")], SCHEMA, {"hoodie.datasource.write.operation": "bulk_insert"}, "partition paths .hidden"),
    ([(2, "b", 1, "p")], SCHEMA, {"hoodie.write.concurrency.mode": "many_writers"},
     "unknown hoodie.write.concurrency.mode 'MANY_WRITERS'"),
])
def test_rejected_batches_leave_the_table_unchanged(spark, table, rows, schema, extra, message):
    before = _files(table)
    with pytest.raises(HoodieWriteError, match=message):
        _write(spark, table, rows, schema, **extra)
    assert _files(table) == before


def test_missing_columns_allowed_by_option(spark, table):
    _write(spark, table, [(2, 1, "p")], "id int, ts long, dt string",
           **{"hoodie.write.set.null.for.missing.columns": "true"})
    got = {r.id: r.name for r in spark.read.format("hudi").load(str(table)).collect()}
    assert got == {1: "a", 2: None}


def test_table_state_errors(spark, tmp_path, table):
    other = tmp_path / "plain"
    other.mkdir()
    (other / "data.csv").write_text("x\n")
    with pytest.raises(HoodieTableStateError, match=r"plain is not a Hudi table .* not empty \(data.csv\)"):
        _write(spark, other, [(1, "a", 1, "p")])
    assert _files(other) == ["data.csv"]

    props = table / ".hoodie" / "hoodie.properties"
    original = props.read_text()
    before = _files(table)
    for key, value, message in [("hoodie.table.version", "5", "table version 5; this engine writes versions"),
                                ("hoodie.table.type", "FANCY", "unknown table type 'FANCY'")]:
        props.write_text("\n".join(f"{key}={value}" if line.startswith(key + "=") else line
                                   for line in original.splitlines()) + "\n")
        with pytest.raises(HoodieWriteError, match=message):
            _write(spark, table, [(2, "b", 1, "p")])
        assert _files(table) == before
    props.write_text(original)
