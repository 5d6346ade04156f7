"""Which Hive Metastore a session uses: the configured one (``hive.metastore.uris``) or the warehouse's embedded one."""
from __future__ import annotations

import logging
from collections.abc import Mapping
from pathlib import Path

from catalog.embedded_metastore import EmbeddedMetastore
from catalog.metastore_client import parse_metastore_uris

log = logging.getLogger(__name__)

URI_CONF_KEYS = ("hive.metastore.uris", "spark.hadoop.hive.metastore.uris")


def configured_metastore_uri(conf: Mapping[str, str] | None) -> str | None:
    """The metastore URI set in `conf` (``hive.metastore.uris`` or its ``spark.hadoop.`` form)."""
    for key in URI_CONF_KEYS:
        value = (conf or {}).get(key)
        if value and str(value).strip():
            return str(value).strip()
    return None


def default_warehouse() -> Path:
    """The warehouse sqlext uses when none is given: ./spark-warehouse."""
    return (Path.cwd() / "spark-warehouse").absolute()


def resolve_metastore(conf: Mapping[str, str] | None, warehouse_dir: Path | str) -> str:
    """Thrift URI to use: the configured metastore (nothing started) or the embedded one.

    The embedded metastore of `warehouse_dir` is reused when running, otherwise started."""
    configured = configured_metastore_uri(conf)
    if configured is not None:
        parse_metastore_uris(configured)  # validate early, with a clear message
        log.debug("using configured metastore %s", configured)
        return configured
    return EmbeddedMetastore(warehouse_dir).start()
