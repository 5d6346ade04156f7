"""A BUCKET index table through SQL: CREATE records the bucket settings, INSERT / MERGE / UPDATE / DELETE keep
one file group per bucket, rows read with hudi-rs."""
from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from hudi_oracle import hudi_rs_read  # noqa: E402

from storage.index.bucket_identifier import bucket_id_of_file_id
from storage.table.fs_view import FileSystemView
from storage.table.meta_client import HoodieTableMetaClient


def test_bucket_table_through_sql(hudi_sql, warehouse):
    hudi_sql.sql("""CREATE TABLE b (id INT, name STRING, ts BIGINT, dt STRING) USING hudi PARTITIONED BY (dt)
        TBLPROPERTIES (primaryKey = 'id', preCombineField = 'ts', type = 'mor',
                       'hoodie.index.type' = 'BUCKET', 'hoodie.bucket.index.num.buckets' = '2')""")
    path = str(warehouse / "b")
    props = HoodieTableMetaClient.load(path).table_config.props
    assert props["hoodie.index.type"] == "BUCKET" and props["hoodie.bucket.index.num.buckets"] == "2"
    hudi_sql.sql("INSERT INTO b VALUES (1, 'a', 1, 'p1'), (2, 'b', 1, 'p1'), (3, 'c', 1, 'p2'), (4, 'd', 1, 'p2')")
    hudi_sql.sql("CREATE OR REPLACE TEMPORARY VIEW src AS SELECT * FROM VALUES (1, 'A', 2, 'p1'), (5, 'E', 2, 'p2') "
                 "AS s(id, name, ts, dt)")
    # ON leaves the partition out: the bucket table is not switched to a global index
    hudi_sql.sql("MERGE INTO b USING src s ON b.id = s.id WHEN MATCHED THEN UPDATE SET * WHEN NOT MATCHED THEN INSERT *")
    hudi_sql.sql("UPDATE b SET name = 'C', ts = 3 WHERE id = 3")
    hudi_sql.sql("DELETE FROM b WHERE id = 2")
    got = {r["id"]: r["name"] for r in hudi_rs_read(path).to_pylist()}
    assert got == {1: "A", 3: "C", 4: "d", 5: "E"}
    slices = FileSystemView(HoodieTableMetaClient.load(path)).latest_file_slices()
    buckets = [(s.partition_path, bucket_id_of_file_id(s.file_id)) for s in slices]
    assert len(buckets) == len(set(buckets)) and all(b < 2 for _, b in buckets)
