"""SQL front door and Spark entry points for Hudi tables.

`sqlext.session()` returns a SparkSession on which `df.write.format("hudi")` and
`spark.read.format("hudi")` run through this project's storage engine, attached (Hive support) to a Hive
Metastore — the configured one (`hive.metastore.uris`, `metastore=` or $HIVE_METASTORE_URIS) or the embedded
one of the warehouse — with the Hudi SQL front end installed on a metastore-backed resolver and Hive sync
after every commit (`hoodie.datasource.hive_sync.enable`, on by default). `metastore=False` gives the
file-system-only catalog instead.
"""
from sqlext.session import session  # noqa: F401
