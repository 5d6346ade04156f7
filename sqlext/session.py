"""`sqlext.session()`: a SparkSession ready for Hudi tables, local by default, attached to a Hive Metastore.

Which metastore (first match):
1. the `metastore` argument: ``thrift://host:port[,...]`` (nothing is started), ``"embedded"``, or
   ``False`` / ``"none"`` for no metastore (Spark's in-memory catalog, tables found in the warehouse only);
2. ``hive.metastore.uris`` / ``spark.hadoop.hive.metastore.uris`` in `conf`, or ``$HIVE_METASTORE_URIS``;
3. the embedded metastore of the warehouse (catalog.EmbeddedMetastore: started on first use, reused by
   later sessions and processes while it runs; this process holds a lease on it until it exits, and it stops by
   itself once nobody uses it).

With a metastore, Spark runs with Hive support on the same metastore (so plain Spark SQL sees every table the
SQL front end registers), the SQL front end is installed with a `MetastoreResolver`, and Hive sync runs after
each commit unless ``hoodie.datasource.hive_sync.enable=false``. A sync never re-points a catalog table registered
at another location: such a DataFrame write fails before writing (``sqlext.catalog.relocate.table=true``, a write
option, re-registers the table at the written path). An unreachable metastore fails here with an
error naming its URI; a metastore that dies later is reconnected to (the embedded one restarted) on the
next catalog call.
"""
from __future__ import annotations

import logging
import os
import sys
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

from pyspark.sql import SparkSession

from storage.io import class_data_sharing
from storage.io.storage_options import session_storage_options, set_default_storage_options

log = logging.getLogger(__name__)

DEFAULT_CONF = {
    "spark.sql.shuffle.partitions": "8",
    "spark.sql.adaptive.enabled": "true",
    # a cached plan's shuffle output may be coalesced like any other (AQE): the write client caches its small
    # prepared batches, and 8 near-empty partitions cost a Python task each in every stage that reads them
    "spark.sql.optimizer.canChangeCachedPlanOutputPartitioning": "true",
    "spark.sql.execution.arrow.pyspark.enabled": "true",
    "spark.sql.session.timeZone": "UTC",
    "spark.ui.showConsoleProgress": "true",
    "spark.sql.parquet.enableVectorizedReader": "true",
    # PySpark 4 records the Python call site of every DataFrame function around each call (10 of the 13 py4j
    # round trips of an F.col): a third of a small write's ~1,000 calls. Errors then lack the Python line of the
    # DataFrame call that failed (the SQL front end names statement positions itself).
    "spark.python.sql.dataFrameDebugging.enabled": "false",
}
METASTORE_ENV = "HIVE_METASTORE_URIS"
EMBEDDED = "embedded"


@dataclass
class SessionCatalog:
    """What `session()` attached: the metastore URI, the embedded metastore (None when external) and the
    resolver installed in the SQL front end. Kept as `spark._sqlext_catalog`."""

    uri: str | None
    embedded: object | None  # catalog.EmbeddedMetastore
    resolver: object          # sqlext.sql.resolver.TableResolver
    warehouse: str


def default_warehouse() -> Path:
    from catalog.metastore_resolution import default_warehouse as catalog_default

    return catalog_default()


def session(master: str | None = None, warehouse: str | os.PathLike | None = None, app_name: str = "sqlext",
            conf: dict[str, str] | None = None, metastore: str | bool | None = None) -> SparkSession:
    """A SparkSession (reused when one runs) with `format("hudi")`, the Hudi SQL front end and a metastore."""
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    from sqlext.datasource import install, register

    install()
    warehouse_dir = Path(warehouse or default_warehouse()).absolute()
    settings = {**DEFAULT_CONF, "spark.sql.warehouse.dir": str(warehouse_dir), **(conf or {}),
                "spark.app.name": app_name, "spark.master": master or os.environ.get("SPARK_MASTER", "local[*]")}
    _bind_loopback(settings)
    # the metastore starts while Spark's JVM launches (each takes seconds; neither needs the other yet)
    with ThreadPoolExecutor(1, thread_name_prefix="sqlext-metastore") as pool:
        attached = pool.submit(_metastore, metastore, dict(settings), warehouse_dir)
        _launch_jvm(settings)
        uri, embedded = attached.result()
    if uri is not None:
        settings["spark.sql.catalogImplementation"] = "hive"
        settings["spark.hadoop.hive.metastore.uris"] = uri
        settings.pop("hive.metastore.uris", None)
    builder = SparkSession.builder
    for key, value in settings.items():
        builder = builder.config(key, value)
    spark = register(builder.getOrCreate())
    _reread_dataframe_debugging()
    # code not handed a session (procedures, the catalog) reaches object stores as this session does
    set_default_storage_options(lambda: session_storage_options(spark))
    _attach(spark, uri, embedded, str(warehouse_dir))
    return spark


def _reread_dataframe_debugging() -> None:
    """PySpark reads `spark.python.sql.dataFrameDebugging.enabled` once per process, from whichever session was
    active first: read it again from this one."""
    import pyspark.errors.utils as errors_utils

    if hasattr(errors_utils, "_enable_debugging_cache"):
        errors_utils._enable_debugging_cache = None


LOOPBACK = "127.0.0.1"


def _bind_loopback(settings: dict[str, str]) -> None:
    """A local-mode driver (and its block manager and UI) listens on the loopback interface only: nothing outside
    this host needs to reach it, and Spark's default is every interface. A cluster master, or an address the
    user configured (`spark.driver.bindAddress` / `spark.driver.host`, `SPARK_LOCAL_IP`), is left alone."""
    if not settings["spark.master"].startswith("local") or os.environ.get("SPARK_LOCAL_IP") \
            or "spark.driver.bindAddress" in settings or "spark.driver.host" in settings:
        return
    settings["spark.driver.bindAddress"] = LOOPBACK
    settings["spark.driver.host"] = LOOPBACK
    os.environ["SPARK_LOCAL_IP"] = LOOPBACK  # read by the JVM launched next: the UI's bind address


def _launch_jvm(settings: dict[str, str]) -> None:
    """Start Spark's JVM (the py4j gateway) unless one runs, mapping the class data sharing archive; the
    SparkContext is made later on it, with the metastore settings known by then."""
    from pyspark import SparkConf, SparkContext

    if SparkContext._gateway is not None:
        return
    options = class_data_sharing.java_options(
        class_data_sharing.spark_archive_key(settings.get("spark.driver.extraClassPath", "")),
        [sys.executable, "-m", "sqlext.class_data_sharing_training"])
    if options:
        user = settings.get("spark.driver.extraJavaOptions", "")
        settings["spark.driver.extraJavaOptions"] = f"{options} {user}".strip()
    launch = [(k, v) for k, v in settings.items() if k.startswith("spark.")]  # spark-submit warns about others
    SparkContext._ensure_initialized(conf=SparkConf(loadDefaults=False).setAll(launch))


def client_session(spark: SparkSession) -> SparkSession:
    """A new session on `spark`'s SparkContext, catalog and metastore, with its own current database, SQL
    settings and temporary views (what Spark's Thrift server gives each client: `newSession()`), and its own
    Hudi SQL front end whose resolver follows that session's current database."""
    from sqlext.datasource import register
    from sqlext.sql import install

    # a new session starts with no Python data sources: Spark reaches `hudi` itself when it expands a stored
    # view over a Hudi table
    child = register(spark.newSession())
    catalog = getattr(spark, "_sqlext_catalog", None)
    if catalog is None:
        install(child)
        return child
    resolver = catalog.resolver.for_session(child.catalog.currentDatabase)
    install(child, resolver)
    child._sqlext_catalog = SessionCatalog(catalog.uri, catalog.embedded, resolver, catalog.warehouse)
    return child


def _metastore(metastore: str | bool | None, settings: dict[str, str], warehouse_dir: Path):
    """(uri, EmbeddedMetastore or None); (None, None) when no metastore is wanted. Checks reachability."""
    # submodules, not the package: an editable install made before catalog/__init__.py existed maps `catalog`
    # as a namespace package outside the repository
    from catalog.embedded_metastore import EmbeddedMetastore
    from catalog.metastore_client import MetastoreClient, parse_metastore_uris
    from catalog.metastore_resolution import configured_metastore_uri

    if metastore is False or (isinstance(metastore, str) and metastore.lower() in ("none", "false", "off")):
        return None, None
    if isinstance(metastore, str) and metastore.lower() != EMBEDDED:
        uri = metastore
    elif metastore is None:
        uri = configured_metastore_uri(settings) or os.environ.get(METASTORE_ENV) or None
    else:
        uri = None
    if uri:
        parse_metastore_uris(uri)  # malformed: ValueError naming it
        with MetastoreClient(uri, connect_timeout_s=5.0) as client:
            client.get_all_databases()  # unreachable: MetastoreUnavailableError naming the URI
        return uri, None
    embedded = EmbeddedMetastore(warehouse_dir)
    return embedded.start(), embedded


def _attach(spark: SparkSession, uri: str | None, embedded, warehouse: str) -> None:
    from catalog import hive_sync
    from catalog.metastore_client import MetastoreClient
    from sqlext.sql import WarehouseResolver, install

    if uri is None:
        resolver = WarehouseResolver(warehouse, spark.catalog.currentDatabase)
    else:
        if spark.conf.get("spark.sql.catalogImplementation", "in-memory") != "hive":
            log.warning("the running SparkSession has no Hive support (catalogImplementation is static): "
                        "tables are registered in %s, but plain Spark SQL of this session will not see them", uri)
        else:
            spark_uri = spark.sparkContext.getConf().get("spark.hadoop.hive.metastore.uris", None)
            if spark_uri and spark_uri != uri:
                log.warning("the running SparkSession is attached to metastore %s (static); the SQL front end "
                            "uses %s", spark_uri, uri)
        from sqlext.sql.metastore_resolver import MetastoreResolver

        reviver = embedded.start if embedded is not None else None
        client = MetastoreClient(uri, reviver=reviver)
        resolver = MetastoreResolver(client, spark.catalog.currentDatabase, warehouse)
    install(spark, resolver)
    hive_sync.use_metastore(uri)
    spark._sqlext_catalog = SessionCatalog(uri, embedded, resolver, warehouse)
