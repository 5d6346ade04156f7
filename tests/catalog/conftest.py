"""Fixtures for the catalog tests: ONE real embedded Hive metastore for the whole test session."""
from __future__ import annotations

import logging
import time

import pytest
from quick_jvm import quick_jvm_env

from catalog.embedded_metastore import EmbeddedMetastore
from catalog.metastore_client import MetastoreClient

log = logging.getLogger(__name__)


@pytest.fixture(scope="session")
def embedded_metastore(tmp_path_factory):
    """A started `EmbeddedMetastore` on a fresh warehouse; stopped when the session ends. Its JVM runs on JIT tier 1
    only (see quick_jvm; as the one test_killed_metastore_restarts_once_and_client_reconnects starts in its place):
    the first catalog test waits for its start-up, and the catalog tests ask little of it."""
    metastore = EmbeddedMetastore(tmp_path_factory.mktemp("hms-warehouse"))
    started = time.monotonic()
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("JAVA_TOOL_OPTIONS", quick_jvm_env()["JAVA_TOOL_OPTIONS"])
        metastore.start()
    log.info("embedded metastore started in %.1fs at %s", time.monotonic() - started, metastore.uri)
    yield metastore
    metastore.stop()


@pytest.fixture
def metastore_client(embedded_metastore):
    with MetastoreClient(embedded_metastore.uri) as client:
        yield client
