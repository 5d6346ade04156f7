"""SQL on a table whose LOCATION is on S3 (moto's server): CREATE, INSERT, MERGE, UPDATE, DELETE, SELECT and
time travel through the SQL front end; hudi-rs reading the bucket agrees."""
from __future__ import annotations

from hudi_oracle import arrow_rows, hudi_rs_read

from storage.table.meta_client import HoodieTableMetaClient


def test_sql_dml_on_s3(s3_spark, s3_server):
    spark = s3_spark
    bucket = s3_server.new_bucket()
    location = f"s3a://{bucket}/sql/orders"
    spark.sql(f"""CREATE TABLE s3_orders (id INT, amount DOUBLE, ts BIGINT, region STRING) USING hudi
                  PARTITIONED BY (region) LOCATION '{location}'
                  TBLPROPERTIES (primaryKey = 'id', preCombineField = 'ts')""")
    try:
        spark.sql("INSERT INTO s3_orders VALUES (1, 10.0, 1, 'eu'), (2, 20.0, 1, 'us'), (3, 30.0, 1, 'eu')")
        first = HoodieTableMetaClient.load_in_session(spark, location).timeline.completed().last().timestamp
        spark.sql("""MERGE INTO s3_orders t
                     USING (SELECT 1 AS id, 11.0 AS amount, 2L AS ts, 'eu' AS region
                            UNION ALL SELECT 4, 40.0, 2L, 'us') s
                     ON t.id = s.id WHEN MATCHED THEN UPDATE SET * WHEN NOT MATCHED THEN INSERT *""")
        spark.sql("UPDATE s3_orders SET amount = amount + 1, ts = 3 WHERE id = 2")
        spark.sql("DELETE FROM s3_orders WHERE id = 3")
        got = [tuple(r) for r in spark.sql("SELECT id, amount, region FROM s3_orders ORDER BY id").collect()]
        assert got == [(1, 11.0, "eu"), (2, 21.0, "us"), (4, 40.0, "us")]
        then = spark.sql(f"SELECT id, amount FROM s3_orders TIMESTAMP AS OF '{first}' ORDER BY id").collect()
        assert [tuple(r) for r in then] == [(1, 10.0), (2, 20.0), (3, 30.0)]
        rs = arrow_rows(hudi_rs_read(location, storage_options=s3_server.hudi_rs_options()), ["id", "amount"])
        assert rs == [(("id", 1), ("amount", 11.0)), (("id", 2), ("amount", 21.0)), (("id", 4), ("amount", 40.0))]
        assert any(k.startswith("sql/orders/region=us/") for k in s3_server.keys(bucket))
    finally:
        spark.sql("DROP TABLE IF EXISTS s3_orders")
