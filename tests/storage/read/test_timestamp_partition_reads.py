"""Tables partitioned by a timestamp key generator (issue 22): written here with each timestamp type, read as
table version 6 and as the version 9 table Java Hudi 1.1 writes (java_v9_layout), COW and MOR.

The partition column keeps the type its data files store (BIGINT for epoch millis / seconds, STRING for date
strings) in snapshot, read-optimized, time travel and incremental reads and in SQL; with
`hoodie.datasource.read.extract.partition.values.from.path` it is the partition path string instead. Rows are
checked against the expected table state (kept here by hand) and against hudi-rs.
"""
from __future__ import annotations

import shutil
from dataclasses import dataclass, field
from datetime import datetime, timezone

import pytest
from pyspark.sql import types as T

from hudi_oracle import apply_batch, arrow_rows, hudi_rs_read, spark_rows
from java_v9_layout import store_as_string, to_java_v9
from storage.table.meta_client import HoodieTableMetaClient

KEYGEN = "org.apache.hudi.keygen.TimestampBasedKeyGenerator"
FROM_PATH = "hoodie.datasource.read.extract.partition.values.from.path"
COLUMNS = ["id", "name", "ver"]


@dataclass
class Case:
    """One timestamp type: the partition column, its Spark type, the options, and how a value maps to a path."""

    name: str
    column: str
    dtype: T.DataType
    options: dict
    path_of: object
    values: list = field(default_factory=list)  # 4 source values, the first three in two partitions


def _utc(seconds: float) -> datetime:
    return datetime.fromtimestamp(seconds, timezone.utc)


CASES = {
    "millis": Case("millis", "ts_millis", T.LongType(), {
        "hoodie.keygen.timebased.timestamp.type": "EPOCHMILLISECONDS",
        "hoodie.keygen.timebased.output.dateformat": "yyyy/MM/dd/HH"},
        lambda v: _utc(v / 1000).strftime("%Y/%m/%d/%H"),
        [1705311000000, 1705312800000, 1705315500000, 1705485600000]),
    "seconds": Case("seconds", "ts_epoch", T.LongType(), {
        "hoodie.keygen.timebased.timestamp.type": "UNIX_TIMESTAMP",
        "hoodie.keygen.timebased.output.dateformat": "yyyy/MM/dd"},
        lambda v: _utc(v).strftime("%Y/%m/%d"),
        [1705311000, 1705315500, 1705397400, 1705485600]),
    "date_string": Case("date_string", "ts_str", T.StringType(), {
        "hoodie.keygen.timebased.timestamp.type": "DATE_STRING",
        "hoodie.keygen.timebased.input.dateformat": "yyyy-MM-dd'T'HH:mm:ss.SSSZ",
        "hoodie.keygen.timebased.output.dateformat": "yyyy/MM/dd/HH"},
        lambda v: datetime.strptime(v, "%Y-%m-%dT%H:%M:%S.%f%z").astimezone(timezone.utc).strftime("%Y/%m/%d/%H"),
        ["2024-01-15T10:30:00.000Z", "2024-01-15T10:45:00.000Z", "2024-01-16T09:00:00.000+0100",
         "2024-01-17T14:20:00.000Z"]),
}


@dataclass
class Table:
    case: Case
    table_type: str
    v6: str
    v9: str
    expected: dict          # id -> row tuple (id, name, ver, value) after all commits
    first_batch: dict       # the same after the first commit


def _write(spark, case: Case, path: str, table_type: str, rows: list[tuple], operation: str = "upsert") -> None:
    schema = f"id bigint, name string, ver int, {case.column} {case.dtype.simpleString()}"
    spark.createDataFrame(rows, schema).write.format("hudi").options(**{
        "hoodie.table.name": f"ts_{case.name}", "hoodie.datasource.write.recordkey.field": "id",
        "hoodie.datasource.write.precombine.field": "ver",
        "hoodie.datasource.write.partitionpath.field": case.column,
        "hoodie.datasource.write.keygenerator.class": KEYGEN,
        "hoodie.datasource.write.table.type": table_type,
        "hoodie.datasource.write.operation": operation, **case.options}).mode("append").save(path)


def _build(spark, root, case: Case, table_type: str) -> Table:
    v = case.values
    first = [(1, "a", 1, v[0]), (2, "b", 1, v[1]), (3, "c", 1, v[2]), (4, "d", 1, v[2])]
    second = [(1, "a2", 2, v[0]), (5, "e", 1, v[3])]
    v6 = str(root / f"{case.name}_{table_type.lower()}_v6")
    state: dict = {}
    _write(spark, case, v6, table_type, first)
    apply_batch(state, first, ordering=2)
    first_state = dict(state)
    _write(spark, case, v6, table_type, second)
    apply_batch(state, second, ordering=2)
    if table_type == "MERGE_ON_READ":
        _write(spark, case, v6, table_type, [(2, "b", 1, v[1])], operation="delete")
        apply_batch(state, [(2, "b", 1, v[1])], delete=True)
    v9 = v6.replace("_v6", "_v9")
    shutil.copytree(v6, v9)
    to_java_v9(v9)
    return Table(case, table_type, v6, v9, state, first_state)


@pytest.fixture(scope="module")
def tables(spark, tmp_path_factory):
    root = tmp_path_factory.mktemp("timestamp_keygen")
    built = {(name, "COPY_ON_WRITE"): _build(spark, root, case, "COPY_ON_WRITE") for name, case in CASES.items()}
    built[("millis", "MERGE_ON_READ")] = _build(spark, root, CASES["millis"], "MERGE_ON_READ")
    return built


TABLES = [("millis", "COPY_ON_WRITE"), ("seconds", "COPY_ON_WRITE"), ("date_string", "COPY_ON_WRITE"),
          ("millis", "MERGE_ON_READ")]


def _path(t: Table, version: int) -> str:
    return t.v6 if version == 6 else t.v9


def _read(spark, base: str, **opts):
    return spark.read.format("hudi").options(**opts).load(base)


def _rows(state: dict) -> list[tuple]:
    return sorted(state.values())


def _ours(df, column: str) -> list[tuple]:
    return sorted(tuple(r) for r in df.select(*COLUMNS, column).collect())


def test_v9_copies_are_laid_out_as_java_writes_them(tables):
    t = tables[("millis", "MERGE_ON_READ")]
    meta = HoodieTableMetaClient.load(t.v9)
    props = meta.table_config.props
    assert (props["hoodie.table.version"], props["hoodie.timeline.layout.version"]) == ("9", "2")
    assert props["hoodie.table.keygenerator.type"] == "TIMESTAMP" and "hoodie.table.keygenerator.class" not in props
    assert props["hoodie.table.partition.fields"] == "ts_millis"
    assert props["hoodie.table.ordering.fields"] == "ver"
    completed = meta.timeline.completed().write_timeline()
    assert len(completed) == 3 and all(i.completion_time > i.timestamp for i in completed)


@pytest.mark.parametrize("version", [6, 9])
@pytest.mark.parametrize("key", TABLES)
def test_snapshot_keeps_the_stored_type_and_agrees_with_hudi_rs(spark, tables, key, version):
    t = tables[key]
    base = _path(t, version)
    df = _read(spark, base)
    assert df.schema[t.case.column].dataType == t.case.dtype
    assert _ours(df, t.case.column) == _rows(t.expected)
    paths = {r.id: r._hoodie_partition_path for r in df.select("id", "_hoodie_partition_path").collect()}
    assert paths == {k: t.case.path_of(row[3]) for k, row in t.expected.items()}
    expected = hudi_rs_read(base)
    assert str(expected.schema.field(t.case.column).type) == ("string" if t.case.dtype == T.StringType() else "int64")
    columns = COLUMNS + [t.case.column]
    assert spark_rows(df, columns) == arrow_rows(expected, columns)


@pytest.mark.parametrize("version", [6, 9])
@pytest.mark.parametrize("key", TABLES)
def test_values_from_the_partition_path_are_the_path_strings(spark, tables, key, version):
    t = tables[key]
    df = _read(spark, _path(t, version), **{FROM_PATH: "true"})
    assert df.schema[t.case.column].dataType == T.StringType()
    assert df.columns == _read(spark, _path(t, version)).columns
    got = _ours(df, t.case.column)
    assert got == sorted(row[:3] + (t.case.path_of(row[3]),) for row in t.expected.values())


@pytest.mark.parametrize("version", [6, 9])
@pytest.mark.parametrize("key", [("millis", "COPY_ON_WRITE"), ("millis", "MERGE_ON_READ")])
def test_time_travel_and_incremental_keep_the_type(spark, tables, key, version):
    t = tables[key]
    base = _path(t, version)
    first, second = HoodieTableMetaClient.load(base).timeline.completed().write_timeline().instants[:2]
    point = first.completion_time or first.timestamp
    old = _read(spark, base, **{"as.of.instant": point})
    assert old.schema[t.case.column].dataType == T.LongType()
    assert _ours(old, t.case.column) == _rows(t.first_batch)
    columns = COLUMNS + [t.case.column]
    assert spark_rows(old, columns) == arrow_rows(hudi_rs_read(base, as_of=point), columns)
    end = second.completion_time or second.timestamp
    changes = _read(spark, base, **{"hoodie.datasource.query.type": "incremental",
                                    "hoodie.datasource.read.begin.instanttime": point,
                                    "hoodie.datasource.read.end.instanttime": end})
    assert changes.schema[t.case.column].dataType == T.LongType()
    v = t.case.values
    assert _ours(changes, t.case.column) == [(1, "a2", 2, v[0]), (5, "e", 1, v[3])]
    from_path = _read(spark, base, **{"hoodie.datasource.query.type": "incremental", FROM_PATH: "true",
                                      "hoodie.datasource.read.begin.instanttime": point,
                                      "hoodie.datasource.read.end.instanttime": end})
    assert _ours(from_path, t.case.column) == [(1, "a2", 2, t.case.path_of(v[0])), (5, "e", 1, t.case.path_of(v[3]))]


@pytest.mark.parametrize("version", [6, 9])
def test_read_optimized_mor(spark, tables, version):
    t = tables[("millis", "MERGE_ON_READ")]
    ro = _read(spark, _path(t, version), **{"hoodie.datasource.query.type": "read_optimized"})
    assert ro.schema["ts_millis"].dataType == T.LongType()
    # the update and the delete are still in log files; the insert of id 5 made a base file
    base_rows = {**t.first_batch, 5: t.expected[5]}
    assert _ours(ro, "ts_millis") == _rows(base_rows)
    ro_path = _read(spark, _path(t, version), **{"hoodie.datasource.query.type": "read_optimized", FROM_PATH: "true"})
    assert {r.id: r.ts_millis for r in ro_path.select("id", "ts_millis").collect()} == {
        k: t.case.path_of(row[3]) for k, row in base_rows.items()}


@pytest.mark.parametrize("version", [6, 9])
def test_sql_select_keeps_the_type(spark, tables, version):
    t = tables[("millis", "COPY_ON_WRITE")]
    v = t.case.values
    got = spark.sql(f"SELECT id, ts_millis FROM hudi.`{_path(t, version)}` WHERE ts_millis = {v[2]} ORDER BY id")
    assert got.schema["ts_millis"].dataType == T.LongType()
    assert [tuple(r) for r in got.collect()] == [(3, v[2]), (4, v[2])]
    spark.sql(f"SET {FROM_PATH}=true")
    try:
        by_path = spark.sql(f"SELECT id, ts_millis FROM hudi.`{_path(t, version)}` WHERE id = 3")
        assert [tuple(r) for r in by_path.collect()] == [(3, t.case.path_of(v[2]))]
    finally:
        spark.sql(f"RESET {FROM_PATH}")


@pytest.fixture(scope="module")
def java_string_table(spark, tables, tmp_path_factory):
    """The millis COW table after Java 1.1's SQL UPDATE: the second commit's files store ts_millis as a
    string and its schema says string; as version 6 and as version 9."""
    t = tables[("millis", "COPY_ON_WRITE")]
    root = tmp_path_factory.mktemp("java_string")
    v6 = str(root / "v6")
    shutil.copytree(t.v6, v6)
    second = HoodieTableMetaClient.load(v6).timeline.completed().write_timeline().instants[1].timestamp
    assert store_as_string(v6, second, "ts_millis")
    v9 = str(root / "v9")
    shutil.copytree(v6, v9)
    to_java_v9(v9)
    return t, {6: v6, 9: v9}


@pytest.mark.parametrize("version", [6, 9])
def test_java_string_partition_column_reads_as_the_declared_bigint(spark, java_string_table, version):
    t, paths = java_string_table
    base = paths[version]
    df = _read(spark, base)
    assert df.schema["ts_millis"].dataType == T.LongType()
    assert _ours(df, "ts_millis") == _rows(t.expected)
    # hudi-rs takes the latest commit's schema: it shows the same values as strings
    theirs = hudi_rs_read(base)
    assert str(theirs.schema.field("ts_millis").type) == "string"
    assert sorted(tuple(r[c] for c in COLUMNS) + (int(r["ts_millis"]),) for r in theirs.to_pylist()) == _rows(t.expected)
    from_path = _read(spark, base, **{FROM_PATH: "true"})
    assert {r.id: r.ts_millis for r in from_path.collect()} == {
        k: t.case.path_of(row[3]) for k, row in t.expected.items()}
