"""Data skipping (storage/read/data_skipping.py) on version 9 tables written with the metadata table's
column_stats and partition_stats: file groups whose values lie in disjoint ranges (ids, dates) and overlapping
ones (fares), some nulls, on COW and on MOR with updates and deletes in logs.

For seeded random predicates: every row DuckDB finds with the same filter in hudi-rs's read of the table comes
from a slice the plan keeps (skipping never drops a row); on COW the kept slices are exactly those whose actual
values (pyarrow over the base files, not the metadata table) can match; end to end, Spark's rows with skipping
equal the rows without, through read_table and through SQL (whose COW scan lists only the kept files)."""
from __future__ import annotations

import datetime as dt
import random
from decimal import Decimal
from pathlib import Path

import duckdb
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest

from hudi_oracle import hudi_rs_read, spark_rows
from storage.config import HoodieConfig
from storage.read import read_table
from storage.read.data_skipping import ValueRange, may_match, merge_ranges
from storage.read.predicates import And, Comparison, In, IsNotNull, IsNull, Or, between
from storage.read.reader import file_slices_to_read
from storage.table.meta_client import HoodieTableMetaClient

SCHEMA = "id int, name string, fare double, amount decimal(10,2), day date, ts long, dt string"
COLUMNS = ["id", "name", "fare", "amount", "day"]
DAY0 = dt.date(2024, 1, 1)
COMMITS, ROWS = 5, 24
SKIPPING_OFF = HoodieConfig.of({"hoodie.enable.data.skipping": "false"})


def _options(name: str, table_type: str) -> dict[str, str]:
    return {"hoodie.table.name": name, "hoodie.datasource.write.recordkey.field": "id",
            "hoodie.datasource.write.precombine.field": "ts", "hoodie.datasource.write.partitionpath.field": "dt",
            "hoodie.datasource.write.table.type": table_type, "hoodie.write.table.version": "9",
            "hoodie.metadata.enable": "true", "hoodie.metadata.index.column.stats.enable": "true",
            "hoodie.metadata.index.partition.stats.enable": "true", "hoodie.parquet.small.file.limit": "0",
            "hoodie.upsert.shuffle.parallelism": "2", "hoodie.insert.shuffle.parallelism": "2"}


def _row(commit: int, j: int, rng: random.Random) -> tuple:
    key = commit * ROWS + j
    name = None if j % 7 == 3 else f"n{key:03d}"
    return (key, name, round(rng.uniform(0, 50) + commit * 10, 2), Decimal(f"{key}.25"),
            DAY0 + dt.timedelta(days=commit * 30 + j % 20), commit, f"p{j % 2}")


@pytest.fixture(scope="module", params=["COPY_ON_WRITE", "MERGE_ON_READ"])
def skipping_table(request, spark, tmp_path_factory) -> tuple[str, str]:
    table_type = request.param
    base = tmp_path_factory.mktemp("skip") / table_type.lower()
    opts = _options(f"skip_{table_type.lower()}", table_type)
    rng = random.Random(7)

    def write(rows, operation):
        spark.createDataFrame(rows, SCHEMA).write.format("hudi").options(**opts) \
            .option("hoodie.datasource.write.operation", operation).mode("append").save(str(base))

    for commit in range(COMMITS):
        write([_row(commit, j, rng) for j in range(ROWS)], "insert")
    if table_type == "MERGE_ON_READ":  # logs: updates that move fares and days out of their range, deletes
        write([(k, f"u{k:03d}", 999.0, Decimal("1.00"), DAY0 + dt.timedelta(days=400), 9, f"p{k % ROWS % 2}")
               for k in (5, 30, 31)], "upsert")
        write([(k, None, 0.0, Decimal("0"), DAY0, 10, f"p{k % ROWS % 2}") for k in (50, 51, 52)], "delete")
    return str(base), table_type


def _random_predicate(rng: random.Random) -> tuple:
    """(Predicate, SQL) of one random filter over the columns."""
    kind = rng.choice(["id", "id", "fare", "amount", "day", "name", "in", "null", "between", "and", "or"])
    op = rng.choice(["=", "<", "<=", ">", ">="])
    if kind == "id":
        v = rng.randrange(-5, COMMITS * ROWS + 5)
        return Comparison("id", op, v), f"id {op} {v}"
    if kind == "fare":
        v = round(rng.uniform(-5, 100), 1)
        return Comparison("fare", op, Decimal(str(v))), f"fare {op} {v}"
    if kind == "amount":
        v = Decimal(f"{rng.randrange(0, COMMITS * ROWS)}.{rng.choice(['00', '25', '5'])}")
        return Comparison("AMOUNT", op, v), f"amount {op} {v}"
    if kind == "day":
        v = DAY0 + dt.timedelta(days=rng.randrange(-3, COMMITS * 30 + 3))
        return Comparison("day", op, v.isoformat()), f"day {op} DATE '{v.isoformat()}'"
    if kind == "name":
        v = f"n{rng.randrange(0, COMMITS * ROWS):03d}"
        return Comparison("name", op, v), f"name {op} '{v}'"
    if kind == "in":
        vs = tuple(sorted(rng.sample(range(COMMITS * ROWS), 3)))
        return In("id", vs), f"id IN {vs}"
    if kind == "null":
        return (IsNull("name"), "name IS NULL") if rng.random() < 0.5 else (IsNotNull("name"), "name IS NOT NULL")
    if kind == "between":
        lo = rng.randrange(0, COMMITS * ROWS)
        return between("id", lo, lo + 10), f"id BETWEEN {lo} AND {lo + 10}"
    (p1, s1), (p2, s2) = _random_predicate(rng), _random_predicate(rng)
    return (And((p1, p2)), f"({s1}) AND ({s2})") if kind == "and" else (Or((p1, p2)), f"({s1}) OR ({s2})")


def _file_id(name: str) -> str:
    return name.lstrip(".").split("_")[0]


def _actual_ranges(base: str, path: str) -> dict[str, ValueRange]:
    table = pq.read_table(path, columns=COLUMNS)
    out = {}
    for c in COLUMNS:
        values = table.column(c)
        mm = pc.min_max(values)
        out[c] = ValueRange(mm["min"].as_py(), mm["max"].as_py(), values.null_count, len(values))
    return out


def test_random_predicates_keep_every_matching_slice(skipping_table):
    base, table_type = skipping_table
    meta = HoodieTableMetaClient.load(base)
    every = file_slices_to_read(meta, HoodieConfig())
    assert len(every) >= COMMITS * 2  # a file group per partition per insert
    rows = hudi_rs_read(base)
    con = duckdb.connect()
    con.register("t", rows)
    rng = random.Random(11)
    kept_total = 0
    for _ in range(60):
        predicate, sql = _random_predicate(rng)
        kept = file_slices_to_read(meta, HoodieConfig(), data_filter=predicate)
        kept_ids = {s.file_id for s in kept}
        matching = {_file_id(n) for (n,) in con.execute(f"SELECT _hoodie_file_name FROM t WHERE {sql}").fetchall()}
        assert matching <= kept_ids, f"{sql}: rows of {sorted(matching - kept_ids)} skipped"
        assert file_slices_to_read(meta, SKIPPING_OFF, data_filter=predicate) == every
        if table_type == "COPY_ON_WRITE":  # exactly the slices whose actual values can match
            expected = {s.file_id for s in every if may_match(predicate, _actual_ranges(base, s.base_file.path))}
            assert kept_ids == expected, sql
        kept_total += len(kept)
    assert kept_total < 0.7 * 60 * len(every)  # half the random filters are ranges over half the values


@pytest.mark.parametrize("sql, predicate", [
    ("id < 30 AND name IS NOT NULL", And((Comparison("id", "<", 30), IsNotNull("name")))),
    ("fare >= 40 OR id IN (100, 119)", Or((Comparison("fare", ">=", 40), In("id", (100, 119))))),
    ("day = DATE '2024-01-05'", Comparison("day", "=", "2024-01-05")),
])
def test_spark_rows_with_skipping_equal_rows_without(skipping_table, spark, sql, predicate):
    base, _ = skipping_table
    with_skipping = read_table(spark, base, data_filter=predicate).where(sql)
    without = read_table(spark, base, SKIPPING_OFF, data_filter=predicate).where(sql)
    assert sorted(spark_rows(with_skipping)) == sorted(spark_rows(without))
    assert with_skipping.count() > 0


def test_time_travel_and_incremental_reads_skip_too(skipping_table, spark):
    base, _ = skipping_table
    meta = HoodieTableMetaClient.load(base)
    instants = meta.timeline.completed().write_timeline().timestamps()
    predicate, sql = Comparison("id", ">=", 2 * ROWS), f"id >= {2 * ROWS}"
    # version 9 time travel compares completion times: the 4th commit's request time sees the first three
    as_of = HoodieConfig.of({"as.of.instant": instants[3]})
    kept = file_slices_to_read(meta, as_of, data_filter=predicate)
    assert len(kept) == 2 and len(file_slices_to_read(meta, as_of)) == 6
    got = read_table(spark, base, as_of, data_filter=predicate).where(sql)
    assert sorted(spark_rows(got)) == sorted(spark_rows(read_table(spark, base, as_of).where(sql)))
    incremental = HoodieConfig.of({"hoodie.datasource.query.type": "incremental",
                                   "hoodie.datasource.read.begin.instanttime": instants[0]})
    got = read_table(spark, base, incremental, data_filter=predicate).where(sql)
    assert sorted(spark_rows(got)) == sorted(spark_rows(read_table(spark, base, incremental).where(sql)))


def test_sql_where_skips_files(skipping_table, spark, caplog):
    base, table_type = skipping_table
    name = f"skip_sql_{table_type.lower()}"
    spark.sql(f"CREATE TABLE {name} USING hudi LOCATION '{base}'")
    try:
        query = f"SELECT id, name FROM {name} WHERE id BETWEEN 30 AND 40 AND day < '2024-03-01'"
        with caplog.at_level("INFO", logger="storage.read.data_skipping"):
            got = spark.sql(query)
            rows = sorted(tuple(r) for r in got.collect())
        spark.sql("SET hoodie.enable.data.skipping=false")
        try:
            assert rows == sorted(tuple(r) for r in spark.sql(query).collect())
        finally:
            spark.sql("RESET hoodie.enable.data.skipping")
        assert rows and all(30 <= r[0] <= 40 for r in rows)
        meta = HoodieTableMetaClient.load(base)
        total = len(file_slices_to_read(meta, HoodieConfig()))
        assert f"2 of {total} file slices may match" in caplog.text  # the file groups of ids 24..47
        if table_type == "COPY_ON_WRITE":
            assert {_file_id(Path(f).name) for f in got.inputFiles()} == \
                {s.file_id for s in file_slices_to_read(meta, HoodieConfig(),
                                                        data_filter=between("id", 30, 40))}
    finally:
        spark.sql(f"DROP TABLE IF EXISTS {name}")


def test_dataframe_where_skips_files(skipping_table, spark):
    """`format("hudi").load(path).where(...)` (a SQL string or a Column) reads only the slices the stats keep."""
    from pyspark.sql import functions as F

    base, table_type = skipping_table
    meta = HoodieTableMetaClient.load(base)
    kept = {s.file_id for s in file_slices_to_read(meta, HoodieConfig(), data_filter=Comparison("id", "<", 20))}
    assert len(kept) == 2
    for condition in ("id < 20", F.col("id") < 20):
        frame = spark.read.format("hudi").load(base).where(condition)
        assert sorted(r.id for r in frame.collect()) == list(range(20))
        if table_type == "COPY_ON_WRITE":
            assert {_file_id(Path(f).name) for f in frame.inputFiles()} == kept
    udf_filtered = spark.read.format("hudi").load(base).where(F.udf(lambda i: i < 20, "boolean")("id"))
    assert udf_filtered.count() == 20  # untranslatable: no skipping, the same rows


def test_chained_dataframe_filters_skip_by_all_of_them(skipping_table, spark):
    """`load(p).where(a).where(b)` reads only the slices whose stats can match `a AND b`; an untranslatable
    condition in the chain filters without skipping, the others still skip; a Column bound to the loaded frame
    works too."""
    from pyspark.sql import functions as F

    base, table_type = skipping_table
    meta = HoodieTableMetaClient.load(base)
    both = {s.file_id for s in file_slices_to_read(meta, HoodieConfig(), data_filter=between("id", 10, 19))}
    first = {s.file_id for s in file_slices_to_read(meta, HoodieConfig(), data_filter=Comparison("id", ">=", 10))}
    assert len(both) < len(first)
    loaded = spark.read.format("hudi").load(base)
    udf = F.udf(lambda i: i % 2 == 0, "boolean")("id")
    first_where = loaded.where("id >= 10")
    for frame, ids in ((first_where.where(F.col("id") <= 19), range(10, 20)),
                       (loaded.where(udf).where("id >= 10").where(loaded["id"] <= 19), range(10, 20, 2)),
                       (first_where.where(first_where["id"] <= 19).where(loaded["id"] > 0), range(10, 20))):
        assert sorted(r.id for r in frame.collect()) == list(ids)
        if table_type == "COPY_ON_WRITE":
            assert {_file_id(Path(f).name) for f in frame.inputFiles()} == both


def test_dataframe_where_keeps_the_snapshot_it_was_loaded_at(skipping_table, spark, tmp_path):
    import shutil

    base, table_type = skipping_table
    copy = tmp_path / "copy"
    shutil.copytree(base, copy)
    frame = spark.read.format("hudi").load(str(copy))
    row = (1000, "late", 1.0, Decimal("1.00"), DAY0, 99, "p0")
    spark.createDataFrame([row], SCHEMA).write.format("hudi").options(**_options(f"skip_{table_type.lower()}", table_type)) \
        .option("hoodie.datasource.write.operation", "insert").mode("append").save(str(copy))
    assert frame.where("id >= 1000").count() == 0  # the frame's snapshot, not the table's latest
    assert spark.read.format("hudi").load(str(copy)).where("id >= 1000").count() == 1


def test_corrupted_column_stats_never_drop_a_row(skipping_table, spark, tmp_path, caplog):
    """Damaged column_stats files (bytes flipped inside every file of the partition): the read falls back to
    every slice with a warning, or keeps the slices whose stats survive intact; either way no row is lost."""
    import shutil

    base, _ = skipping_table
    copy = tmp_path / "copy"
    shutil.copytree(base, copy)
    damaged = 0
    for path in (copy / ".hoodie" / "metadata" / "column_stats").iterdir():
        data = bytearray(path.read_bytes())
        if len(data) > 1000:
            data[len(data) // 2:len(data) // 2 + 64] = bytes(64)
            path.write_bytes(bytes(data))
            damaged += 1
    assert damaged >= COMMITS
    meta = HoodieTableMetaClient.load(str(copy))
    predicate = Comparison("id", "<", 10)
    with caplog.at_level("WARNING"):
        kept = file_slices_to_read(meta, HoodieConfig(), data_filter=predicate)
    every = file_slices_to_read(meta, HoodieConfig())
    assert len(kept) == len(every) and "data skipping is off for this read" in caplog.text
    assert read_table(spark, str(copy), data_filter=predicate).where("id < 10").count() == 10


# -- pure evaluation ---------------------------------------------------------------------------------------------
def test_may_match_follows_spark_comparisons():
    ints = {"x": ValueRange(10, 20, 0, 5)}
    assert may_match(Comparison("x", "=", 10), ints) and not may_match(Comparison("x", "=", 21), ints)
    assert not may_match(Comparison("X", "<", 10), ints) and may_match(Comparison("x", "<=", 10), ints)
    assert not may_match(Comparison("x", ">", 20), ints) and may_match(Comparison("x", ">", Decimal("19.5")), ints)
    assert may_match(Comparison("x", "=", "15"), ints)  # a string literal: Spark casts, kept
    assert not may_match(Comparison("x", "=", None), ints)  # = NULL is never true
    assert not may_match(IsNull("x"), ints) and may_match(IsNotNull("x"), ints)
    assert may_match(Comparison("y", "=", 1), ints)  # no stats: kept
    floats = {"f": ValueRange(0.1, 0.5, 0, 3)}
    assert may_match(Comparison("f", ">", 7.0), floats)  # NaN sorts above every number in Spark
    assert not may_match(Comparison("f", "<", Decimal("0.1")), floats)
    assert may_match(Comparison("f", "<=", Decimal("0.1")), floats)  # 0.1 as a double, as Spark casts it
    nulls = {"n": ValueRange(None, None, 4, 4)}
    assert not may_match(Comparison("n", "=", 1), nulls) and may_match(IsNull("n"), nulls)
    dates = {"d": ValueRange(dt.date(2024, 1, 1), dt.date(2024, 1, 31), 0, 9)}
    assert not may_match(Comparison("d", ">", "2024-01-31"), dates)
    assert may_match(Comparison("d", ">", "2024-1-31"), dates)  # a spelling Spark's cast accepts: kept
    assert may_match(Or((Comparison("x", "=", 1), In("x", (3, 12)))), ints)
    assert not may_match(And((Comparison("x", ">", 15), Comparison("x", ">", 25))), ints)


def test_in_lists_match_as_any_of_their_equalities():
    """IN is decided by bisecting its sorted literals: the same answer as an `=` per literal, for every kind of
    range and literal (ints, decimals, floats, strings, dates and ISO strings, NULLs, uncomparable literals)."""
    from storage.read.data_skipping import _compare

    rng = random.Random(7)
    ranges = [ValueRange(10, 20, 0, 5), ValueRange(0.1, 0.5, 0, 3), ValueRange(None, None, 4, 4),
              ValueRange(Decimal("1.5"), Decimal("2.5"), 1, 4), ValueRange("b", "d", 0, 2),
              ValueRange(dt.date(2024, 1, 1), dt.date(2024, 1, 31), 0, 9), ValueRange(None, 5, 0, 3)]
    pools = [[5, 10, 15, 20, 21, Decimal("19.5"), 0.3, None, "15"], ["a", "b", "c", "e", None],
             [dt.date(2023, 12, 31), dt.date(2024, 1, 15), "2024-01-10", "2024-02-01", "2024-1-31"]]
    for _ in range(400):
        r = rng.choice(ranges)
        values = tuple(rng.choice(rng.choice(pools)) for _ in range(rng.randint(0, 5)))
        naive = any(_compare(r, "=", v) for v in values)
        assert may_match(In("x", values), {"x": r}) == naive, (r, values)


def test_a_slice_is_judged_by_all_its_files():
    base = ValueRange(10, 20, 0, 5)
    log = ValueRange(100, 100, 0, 1)
    merged = merge_ranges([base, log])
    assert (merged.low, merged.high, merged.values) == (10, 100, 6)
    assert merge_ranges([base, ValueRange(None, None, 0, 0)]) == ValueRange(10, 20, 0, 5)  # a deletes-only log
    unknown = merge_ranges([base, ValueRange(None, None, 0, 3)])  # values without bounds
    assert may_match(Comparison("x", "=", 999), {"x": unknown})
    assert merge_ranges([base, ValueRange("a", "b", 0, 1)]) is None  # values of different types


def test_sql_where_becomes_a_predicate_only_where_it_is_implied():
    import sqlglot

    from sqlext.sql.pruning import data_filter

    def translate(where: str):
        tree = sqlglot.parse_one(f"SELECT * FROM t WHERE {where}", dialect="spark")
        return data_filter(tree.args["where"].this, ["id", "Name", "d"], {"t"}, True)

    assert translate("id = 1 AND upper(name) = 'X'") == Comparison("id", "=", 1)
    assert translate("id = 1 OR upper(name) = 'X'") is None
    assert translate("5 < t.id") == Comparison("id", ">", 5)
    assert translate("NAME IN ('a', 'b')") == In("Name", ("a", "b"))
    assert translate("id BETWEEN 1 AND 2.5") == between("id", 1, Decimal("2.5"))
    assert translate("NOT (name IS NULL)") == IsNotNull("Name")
    assert translate("d >= DATE '2024-02-01'") == Comparison("d", ">=", dt.date(2024, 2, 1))
    assert translate("id = 1e3") == Comparison("id", "=", 1000.0)
    assert translate("other.id = 1") is None and translate("id <> 1") is None and translate("NOT id = 1") is None


def test_predicates_refuse_unknown_operators():
    with pytest.raises(ValueError, match="unknown comparison"):
        Comparison("x", "!=", 1)
