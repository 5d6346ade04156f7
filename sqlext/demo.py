"""The main job: a short demo on embedded defaults — create a Hudi table, write, upsert, delete, query and travel
back in time with the DataFrame API; then, in SQL, a merge-on-read table: INSERT, MERGE INTO, its read-optimized
(`_ro`) and real-time (`_rt`) tables in the metastore, and a compaction.

Run with `python -m sqlext.demo [--path DIR]`. Everything runs locally: Spark in-process, an embedded Hive
Metastore, files under ./spark-warehouse unless a path is given.
"""
from __future__ import annotations

import argparse
import logging
import shutil
from pathlib import Path

log = logging.getLogger("sqlext.demo")


def _show(title: str, df) -> None:
    print(f"\n== {title}")
    df.orderBy("id").show(truncate=False)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--path", default=str(Path.cwd() / "spark-warehouse" / "demo_trips"))
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")

    import sqlext
    from storage.config import WriteConfigKeys as WK
    from storage.table.meta_client import HoodieTableMetaClient

    spark = sqlext.session(conf={"spark.ui.showConsoleProgress": "false"})
    spark.sparkContext.setLogLevel("ERROR")
    shutil.rmtree(args.path, ignore_errors=True)
    options = {
        WK.TABLE_NAME.key: "demo_trips",
        WK.RECORDKEY_FIELD.key: "id",
        WK.PRECOMBINE_FIELD.key: "ts",
        WK.PARTITIONPATH_FIELD.key: "city",
        WK.HIVE_STYLE_PARTITIONING.key: "true",
    }
    schema = "id int, rider string, fare double, ts long, city string"
    trips = [(1, "alice", 12.5, 1, "paris"), (2, "bob", 7.0, 1, "paris"), (3, "carol", 30.0, 1, "tokyo")]
    spark.createDataFrame(trips, schema).write.format("hudi").options(**options).mode("overwrite").save(args.path)
    _show("after insert", spark.read.format("hudi").load(args.path).select("id", "rider", "fare", "city"))

    changes = [(2, "bob", 9.5, 2, "paris"), (4, "dave", 15.0, 2, "tokyo")]
    spark.createDataFrame(changes, schema).write.format("hudi").options(**options).mode("append").save(args.path)
    _show("after upsert (bob's fare changed, dave added)",
          spark.read.format("hudi").load(args.path).select("id", "rider", "fare", "city"))

    spark.createDataFrame([(1, "alice", 0.0, 3, "paris")], schema).write.format("hudi").options(**options) \
        .option(WK.OPERATION.key, "delete").mode("append").save(args.path)
    table = spark.read.format("hudi").load(args.path)
    _show("after delete (alice removed)", table.select("id", "rider", "fare", "city"))
    table.createOrReplaceTempView("trips")
    print("\n== SELECT city, count(*), sum(fare) FROM trips GROUP BY city")
    spark.sql("SELECT city, count(*) AS trips, sum(fare) AS fares FROM trips GROUP BY city ORDER BY city").show()

    meta = HoodieTableMetaClient.load(args.path)
    first = meta.timeline.completed().first().timestamp
    _show(f"time travel: as of the first commit {first}",
          spark.read.format("hudi").option("as.of.instant", first).load(args.path).select("id", "rider", "fare", "city"))
    print("\ntimeline:", ", ".join(f"{i.timestamp}.{i.action}" for i in meta.timeline.completed()))
    _merge_on_read_in_sql(spark)
    spark.stop()
    return 0


def _merge_on_read_in_sql(spark) -> None:
    rides = "id, rider, fare, city"
    spark.sql("DROP TABLE IF EXISTS demo_rides")
    spark.sql("""CREATE TABLE demo_rides (id INT, rider STRING, fare DOUBLE, ts BIGINT, city STRING) USING hudi
                 PARTITIONED BY (city) TBLPROPERTIES (type = 'mor', primaryKey = 'id', preCombineField = 'ts')""")
    spark.sql("INSERT INTO demo_rides VALUES (1, 'alice', 12.5, 1, 'paris'), (2, 'bob', 7.0, 1, 'paris'), "
              "(3, 'carol', 30.0, 1, 'tokyo')")
    print("\n== SQL, merge-on-read: MERGE INTO demo_rides (bob's fare changed, dave added)")
    spark.sql("""MERGE INTO demo_rides t
                 USING (SELECT * FROM VALUES (2, 'bob', 9.5D, 2L, 'paris'), (4, 'dave', 15.0D, 2L, 'tokyo')
                        AS v(id, rider, fare, ts, city)) s
                 ON t.id = s.id
                 WHEN MATCHED THEN UPDATE SET *
                 WHEN NOT MATCHED THEN INSERT *""").show()
    print("== SHOW TABLES: the table and its read-optimized / real-time tables in the metastore")
    spark.sql("SHOW TABLES").where("tableName LIKE 'demo_rides%'").show()
    _show("SELECT FROM demo_rides_rt (real-time: base files merged with the logs)",
          spark.sql(f"SELECT {rides} FROM demo_rides_rt"))
    _show("SELECT FROM demo_rides_ro (read-optimized: base files only, bob's update is still in a log)",
          spark.sql(f"SELECT {rides} FROM demo_rides_ro"))
    print("== CALL run_compaction(op => 'scheduleAndExecute', table => 'demo_rides')")
    spark.sql("CALL run_compaction(op => 'scheduleAndExecute', table => 'demo_rides')").show(truncate=False)
    _show("SELECT FROM demo_rides_ro after the compaction", spark.sql(f"SELECT {rides} FROM demo_rides_ro"))


if __name__ == "__main__":
    raise SystemExit(main())
