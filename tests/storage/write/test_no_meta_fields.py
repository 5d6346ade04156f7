"""Tables with hoodie.populate.meta.fields=false: meta columns stay null (only _hoodie_file_name is set), keys of
stored rows come from the key fields; upserts and deletes still find them (COW merge, MOR logs)."""
from __future__ import annotations

import glob

import pyarrow.parquet as pq
import pytest
from hudi_oracle import apply_batch, arrow_rows, hudi_rs_read, rows, spark_rows

SCHEMA = "id int, name string, ts long, dt string"
COLS = ["id", "name", "ts", "dt"]


@pytest.mark.parametrize("table_type", ["COPY_ON_WRITE", "MERGE_ON_READ"])
def test_upsert_and_delete_without_meta_fields(spark, tmp_path, table_type):
    path = str(tmp_path / "t")
    opts = {"hoodie.table.name": "t", "hoodie.datasource.write.table.type": table_type,
            "hoodie.datasource.write.recordkey.field": "id", "hoodie.datasource.write.precombine.field": "ts",
            "hoodie.datasource.write.partitionpath.field": "dt", "hoodie.populate.meta.fields": "false"}
    state: dict = {}
    b1 = [(i, f"n{i}", 1, f"p{i % 2}") for i in range(6)]
    b2 = [(0, "u0", 2, "p0"), (3, "u3", 2, "p1"), (9, "new", 1, "p1")]
    b3 = [(1, None, 3, "p1"), (4, None, 3, "p0")]
    for batch, op in ((b1, "upsert"), (b2, "upsert"), (b3, "delete")):
        spark.createDataFrame(batch, SCHEMA).write.format("hudi").options(**opts) \
            .option("hoodie.datasource.write.operation", op).mode("append").save(path)
        apply_batch(state, batch, delete=op == "delete", ordering=2)
        expected = rows([dict(zip(COLS, r)) for r in state.values()], COLS)
        assert spark_rows(spark.read.format("hudi").load(path), COLS) == expected
        assert arrow_rows(hudi_rs_read(path), COLS) == expected
    for f in glob.glob(f"{path}/**/*.parquet", recursive=True):
        table = pq.read_table(f)
        assert table["_hoodie_record_key"].null_count == table.num_rows
        assert table["_hoodie_file_name"].null_count == 0
    assert "hoodie.populate.meta.fields=false" in open(f"{path}/.hoodie/hoodie.properties").read()
