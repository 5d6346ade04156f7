"""Run by tests/integration/test_local_cluster_s3.py in its own process: the S3 flows on a multi-process Spark
(`local-cluster`: executors in their own JVMs with their own Python workers), so nothing may depend on the
driver's local state. Prints one JSON document with what it read back.

Arguments: master, S3 endpoint, access key, secret key, bucket, then the table types whose DataFrame flow runs
(three writes - upsert, upsert, delete -, compaction for merge-on-read, a snapshot and a time-travel read); the
SQL flow (CREATE TABLE on an S3 location, INSERT, MERGE, SELECT) always runs."""
from __future__ import annotations

import json
import logging
import sys


def main(master: str, endpoint: str, access_key: str, secret_key: str, bucket: str, *table_types: str) -> None:
    import sqlext
    from storage.table.meta_client import HoodieTableMetaClient
    from storage.table_service.compaction import run_compaction, schedule_compaction

    logging.basicConfig(level=logging.WARNING)
    conf = {"spark.hadoop.fs.s3a.endpoint": endpoint, "spark.hadoop.fs.s3a.access.key": access_key,
            "spark.hadoop.fs.s3a.secret.key": secret_key, "spark.hadoop.fs.s3a.path.style.access": "true",
            "spark.ui.enabled": "false", "spark.ui.showConsoleProgress": "false",
            "spark.sql.shuffle.partitions": "4", "spark.executor.memory": "1g"}
    spark = sqlext.session(master=master, metastore=False, conf=conf)
    spark.sparkContext.setLogLevel("ERROR")
    schema = "id int, name string, price double, ts long, dt string"
    out = {}
    for table_type in table_types:
        path = f"s3a://{bucket}/{table_type.lower()}"
        opts = {"hoodie.table.name": "c", "hoodie.datasource.write.table.type": table_type,
                "hoodie.datasource.write.recordkey.field": "id", "hoodie.datasource.write.precombine.field": "ts",
                "hoodie.datasource.write.partitionpath.field": "dt"}
        b1 = [(i, f"n{i}", float(i), 1, f"d{i % 3}") for i in range(40)]
        b2 = [(i, f"u{i}", i * 2.0, 2, f"d{i % 3}") for i in range(0, 40, 5)] + [(50, "new", 5.0, 1, "d2")]
        b3 = [(i, "x", 0.0, 3, f"d{i % 3}") for i in (1, 2, 3)]
        instants = []
        for batch, op in ((b1, "upsert"), (b2, "upsert"), (b3, "delete")):
            spark.createDataFrame(batch, schema).write.format("hudi").options(**opts) \
                .option("hoodie.datasource.write.operation", op).mode("append").save(path)
            instants.append(HoodieTableMetaClient.load_in_session(spark, path).timeline.completed().last().timestamp)
        if table_type == "MERGE_ON_READ":
            instant = schedule_compaction(HoodieTableMetaClient.load_in_session(spark, path))
            run_compaction(spark, path, instant)
        snapshot = spark.read.format("hudi").load(path)
        first = spark.read.format("hudi").option("as.of.instant", instants[0]).load(path)
        out[table_type] = {
            "rows": sorted([r.id, r.name, r.price] for r in snapshot.collect()),
            "first": sorted(r.id for r in first.collect()),
            "instants": instants,
        }
    # SQL MERGE on an S3 location, through the SQL front end (no metastore: the warehouse resolver)
    location = f"s3a://{bucket}/sql"
    spark.sql(f"CREATE TABLE cl_orders (id INT, amount DOUBLE, ts BIGINT) USING hudi LOCATION '{location}' "
              "TBLPROPERTIES (primaryKey = 'id', preCombineField = 'ts')")
    spark.sql("INSERT INTO cl_orders VALUES (1, 1.0, 1), (2, 2.0, 1)")
    spark.sql("MERGE INTO cl_orders t USING (SELECT 2 AS id, 20.0 AS amount, 2L AS ts UNION ALL "
              "SELECT 3, 3.0, 2L) s ON t.id = s.id WHEN MATCHED THEN UPDATE SET * WHEN NOT MATCHED THEN INSERT *")
    out["sql"] = [list(r) for r in spark.sql("SELECT id, amount FROM cl_orders ORDER BY id").collect()]
    out["executors"] = spark.sparkContext._jsc.sc().getExecutorMemoryStatus().size() - 1  # minus the driver
    spark.stop()
    print(json.dumps(out))


if __name__ == "__main__":
    main(*sys.argv[1:])
