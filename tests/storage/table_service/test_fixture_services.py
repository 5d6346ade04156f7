"""Java-written version 6 tables read as before (same rows as hudi-rs) after we clean and archive a copy."""
from __future__ import annotations

import pytest

from fixture_tables import copy_fixture
from hudi_oracle import arrow_rows, hudi_rs_read, spark_rows
from storage.config import HoodieConfig
from storage.table_service.archival import archive
from storage.table_service.clean import run_clean

V6 = ["sample_cow_v6_complexkeygen_hivestyle", "sample_cow_v6_nonpartitioned",
      "sample_cow_v6_simplekeygen_nonhivestyle_overwritetable", "sample_mor_parquet_v6_nonpartitioned",
      "sample_mor_parquet_v6_nonpartitioned_rollback", "trips_mor_avro_v6_trips_8i1u"]
AGGRESSIVE = HoodieConfig.of({"hoodie.cleaner.commits.retained": "1", "hoodie.keep.min.commits": "2",
                              "hoodie.keep.max.commits": "3", "hoodie.commits.archival.batch": "1"})


@pytest.mark.parametrize("name", V6)
def test_v6_fixture_reads_the_same_after_clean_and_archival(spark, fixtures_cache, tmp_path, name):
    base = copy_fixture(name, fixtures_cache, tmp_path)
    before = arrow_rows(hudi_rs_read(str(base)))
    run_clean(spark, str(base), AGGRESSIVE)
    archive(str(base), AGGRESSIVE)
    assert arrow_rows(hudi_rs_read(str(base))) == before
    assert spark_rows(spark.read.format("hudi").load(str(base))) == before
