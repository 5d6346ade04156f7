"""`<t>_ro` / `<t>_rt` without a metastore: the warehouse resolver maps Hive sync's view names of a MOR table
to its read-optimized / snapshot reads (a COW table has no such views)."""
from __future__ import annotations

import shutil
import sys
from pathlib import Path

import pyarrow as pa
import pytest
from hudi import HudiReadOptions, HudiTableBuilder

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


def hudi_rs_read_optimized(path) -> list[tuple]:
    batches = HudiTableBuilder.from_base_uri(str(path)).with_hudi_option(
        "hoodie.read.use.read_optimized.mode", "true").build().read(HudiReadOptions())
    return sorted((r["uuid"], r["fare"]) for r in pa.Table.from_batches(batches).to_pylist())


def test_ro_view_of_mor_table_in_warehouse(hudi_sql, fixture_table, tmp_path):
    path = tmp_path / "trips"
    shutil.copytree(fixture_table("trips_mor_avro_v6_trips_8i1u"), path)
    hudi_sql.sql(f"CREATE TABLE trips USING hudi LOCATION '{path}'")
    got = sorted(tuple(r) for r in hudi_sql.sql("SELECT uuid, fare FROM trips_ro").collect())
    assert got == hudi_rs_read_optimized(path)
    assert len(got) == 8


def test_no_views_for_cow_tables(hudi_sql, fixture_table):
    path = fixture_table("sample_cow_v6_nonpartitioned")
    hudi_sql.sql(f"CREATE TABLE flat USING hudi LOCATION '{path}'")
    with pytest.raises(Exception, match="flat_ro"):
        hudi_sql.sql("SELECT * FROM flat_ro").collect()
