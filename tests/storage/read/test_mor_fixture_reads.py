"""Every merge-on-read fixture written by Java Hudi reads here exactly as hudi-rs reads it: snapshot (merged in
Spark tasks), read-optimized (base files only) and time travel to every completed instant."""
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from hudi_oracle import arrow_rows, hudi_rs_read, spark_rows
from storage.table.fs_view import FileSystemView
from storage.table.meta_client import HoodieTableMetaClient

MOR_FIXTURES = [
    "sample_mor_parquet_v6_nonpartitioned",
    "sample_mor_parquet_v6_nonpartitioned_rollback",
    "sample_mor_parquet_v6_simplekeygen_hivestyle_no_metafields",
    "trips_mor_avro_v6_trips_8i1u",
    "trips_mor_avro_v8_trips_8i3u1d",
]


def _read(spark, base, **opts):
    return spark.read.format("hudi").options(**opts).load(str(base))


def _data_columns(expected: pa.Table) -> list[str]:
    return [c for c in expected.column_names if not c.startswith("_hoodie")]


def _points(base) -> list[str]:
    meta = HoodieTableMetaClient.load(str(base))
    return [i.completion_time or i.timestamp for i in meta.timeline.completed().write_timeline()]


@pytest.mark.parametrize("name", MOR_FIXTURES)
def test_snapshot_matches_hudi_rs(spark, fixture_table, name):
    base = fixture_table(name)
    expected = hudi_rs_read(base)
    ours = _read(spark, base)
    columns = _data_columns(expected)
    rows = spark_rows(ours, columns)
    assert len(rows) == expected.num_rows
    assert rows == arrow_rows(expected, columns)


@pytest.mark.parametrize("name", MOR_FIXTURES)
def test_time_travel_matches_hudi_rs(spark, fixture_table, name):
    base = fixture_table(name)
    points = _points(base)
    assert points
    for point in points:
        expected = hudi_rs_read(base, as_of=point)
        columns = _data_columns(expected)
        ours = _read(spark, base, **{"as.of.instant": point})
        assert spark_rows(ours, columns) == arrow_rows(expected, columns), f"as of {point}"


@pytest.mark.parametrize("name", MOR_FIXTURES)
def test_read_optimized_is_base_files_only(spark, fixture_table, name):
    """hudi-rs's read-optimized mode, and independently the rows of the latest base files read with pyarrow."""
    from hudi import HudiReadOptions, HudiTableBuilder

    base = fixture_table(name)
    table = HudiTableBuilder.from_base_uri(str(base)).with_option("hoodie.read.use.read_optimized.mode", "true").build()
    batches = table.read(HudiReadOptions())
    expected = pa.Table.from_batches(batches) if batches else None
    ours = _read(spark, base, **{"hoodie.datasource.query.type": "read_optimized"})
    meta = HoodieTableMetaClient.load(str(base))
    files = [s.base_file.path for s in FileSystemView(meta).latest_merged_file_slices() if s.base_file]
    direct = pa.concat_tables([pq.read_table(f) for f in files], promote_options="permissive")
    columns = [c for c in direct.column_names if not c.startswith("_hoodie")]
    assert spark_rows(ours, columns) == arrow_rows(direct, columns)
    if expected is not None:
        assert spark_rows(ours, columns) == arrow_rows(expected, columns)


def test_update_visible_only_in_snapshot(spark, fixture_table):
    """trips 8i1u: rider-D's fare update lives only in a log block."""
    base = fixture_table("trips_mor_avro_v6_trips_8i1u")
    snap = {r.rider: r.fare for r in _read(spark, base).collect()}
    ro = {r.rider: r.fare for r in _read(spark, base, **{"hoodie.datasource.query.type": "read_optimized"}).collect()}
    assert snap["rider-D"] == 25.0 and ro["rider-D"] == 33.9
    assert len(snap) == len(ro) == 8


def test_v8_deletes_and_compaction(spark, fixture_table):
    """v8 8i3u1d: rider-F deleted (log delete block), rider-J updated then deleted, rider-G updated after the
    compaction (a log on the new slice)."""
    base = fixture_table("trips_mor_avro_v8_trips_8i3u1d")
    snap = {r.rider: r.fare for r in _read(spark, base).collect()}
    assert "rider-F" not in snap and "rider-J" not in snap
    assert snap["rider-A"] == 0.0 and snap["rider-G"] == 0.0
    assert len(snap) == 6


def test_rollback_fixture_ignores_rolled_back_block(spark, fixture_table):
    """The rolled-back deltacommit's block (isActive=false for Alice) is cancelled by the command block."""
    base = fixture_table("sample_mor_parquet_v6_nonpartitioned_rollback")
    rows = {r.id: r for r in _read(spark, base).collect()}
    assert sorted(rows) == [1, 2, 3]
    assert rows[1].isActive is True  # the rolled-back update set it to false
    assert rows[2].isActive is True  # the later, committed update


def test_incremental_on_mor(spark, fixture_table):
    base = fixture_table("trips_mor_avro_v6_trips_8i1u")
    points = _points(base)
    df = _read(spark, base, **{"hoodie.datasource.query.type": "incremental",
                               "hoodie.datasource.read.begin.instanttime": points[0]})
    rows = df.collect()
    assert [(r.rider, r.fare) for r in rows] == [("rider-D", 25.0)]
    everything = _read(spark, base, **{"hoodie.datasource.query.type": "incremental",
                                       "hoodie.datasource.read.begin.instanttime": "000"})
    assert everything.count() == 8
