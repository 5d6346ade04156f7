"""Catalog layer: where Hudi tables are registered (a Hive Metastore).

With nothing configured, the catalog uses an embedded metastore: the real HMS Thrift service
from the jars pyspark ships, started on demand per warehouse directory (Derby database and a
generated hive-site.xml under ``<warehouse>/.metastore``) and reused by later sessions while it
runs. With ``hive.metastore.uris`` configured, that metastore is used and nothing is started.

Public API:
    EmbeddedMetastore(warehouse_dir)    start() -> uri, stop(), status() -> dict, uri
    resolve_metastore(conf, warehouse)  -> thrift URI (configured, or embedded started/reused)
    MetastoreClient(uri)                lazy, reconnecting wrapper over hmsclient.HMSClient
    MetastoreError, MetastoreUnavailableError, MetastoreStartError
    ttypes                              the HMS thrift types (Table, Partition, StorageDescriptor, ...)
"""
from hmsclient.genthrift.hive_metastore import ttypes

from catalog.metastore import (
    URI_CONF_KEYS,
    EmbeddedMetastore,
    MetastoreClient,
    MetastoreError,
    MetastoreStartError,
    MetastoreUnavailableError,
    configured_metastore_uri,
    parse_metastore_uris,
    resolve_metastore,
)

__all__ = [
    "URI_CONF_KEYS",
    "EmbeddedMetastore",
    "MetastoreClient",
    "MetastoreError",
    "MetastoreStartError",
    "MetastoreUnavailableError",
    "configured_metastore_uri",
    "parse_metastore_uris",
    "resolve_metastore",
    "ttypes",
]
