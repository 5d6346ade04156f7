"""The workload whose JVM class loading becomes the class data sharing archive (storage.io.class_data_sharing):
a session without a metastore, copy-on-write and merge-on-read Hudi tables written, merged, read and compacted
through SQL and the DataFrame API — the classes a session loads for the work users do. Run as
`python -m sqlext.class_data_sharing_training` by the trainer, which sets where the archive is dumped; exits
with the JVM's own exit status, after the JVM has written the archive."""
from __future__ import annotations

import logging
import sys
import tempfile

log = logging.getLogger(__name__)


def _workload(spark, warehouse: str) -> None:
    from storage.config import WriteConfigKeys as WK

    spark.sql("SELECT 1").collect()
    for kind in ("cow", "mor"):
        spark.sql(f"""CREATE TABLE cds_{kind} (id INT, name STRING, ts BIGINT, day STRING) USING hudi
                      PARTITIONED BY (day) TBLPROPERTIES (type = '{kind}', primaryKey = 'id', preCombineField = 'ts')""")
        spark.sql(f"INSERT INTO cds_{kind} VALUES (1, 'a', 1, 'd1'), (2, 'b', 1, 'd2')")
        spark.sql(f"""MERGE INTO cds_{kind} t USING (SELECT 2 AS id, 'c' AS name, 2L AS ts, 'd2' AS day) s
                      ON t.id = s.id WHEN MATCHED THEN UPDATE SET * WHEN NOT MATCHED THEN INSERT *""")
        spark.sql(f"UPDATE cds_{kind} SET name = 'e' WHERE id = 1")
        spark.sql(f"SELECT day, count(*) FROM cds_{kind} GROUP BY day").collect()
    spark.sql("CALL run_compaction(op => 'scheduleAndExecute', table => 'cds_mor')").collect()
    frame = spark.createDataFrame([(3, "f", 3, "d1")], "id int, name string, ts long, day string")
    path = f"{warehouse}/cds_frame"
    frame.write.format("hudi").options(**{WK.TABLE_NAME.key: "cds_frame", WK.RECORDKEY_FIELD.key: "id",
                                          WK.PRECOMBINE_FIELD.key: "ts"}).mode("append").save(path)
    spark.read.format("hudi").load(path).toPandas()


def main() -> int:
    import sqlext
    from pyspark import SparkContext

    logging.basicConfig(level=logging.WARNING)
    with tempfile.TemporaryDirectory(prefix="sqlext-cds-") as warehouse:
        spark = sqlext.session(warehouse=warehouse, metastore=False,
                               conf={"spark.ui.enabled": "false", "spark.ui.showConsoleProgress": "false"})
        _workload(spark, warehouse)
        spark.stop()
    # the JVM dumps the archive when it exits: close its stdin (the gateway exits on EOF) and wait for it
    proc = SparkContext._gateway.proc
    proc.stdin.close()
    return proc.wait(timeout=600)


if __name__ == "__main__":
    sys.exit(main())
