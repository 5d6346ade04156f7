from __future__ import annotations

import os
import shutil
import sys
import tempfile
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
from fixture_tables import extract_fixture, missing_fixtures_message, running_in_ci  # noqa: E402
from s3_server import s3_server, s3_spark  # noqa: E402,F401 - fixtures

os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)


def pytest_sessionstart(session):
    """Outside CI the tests that need the Java fixtures skip when they are missing; in CI a missing fixture
    directory fails the run instead of silently skipping the tests that compare with Java Hudi.

    The embedded metastores this test session starts (here and in its subprocesses) are recorded in a registry
    of its own, so the session stops exactly those at its end and never lists or stops anyone else's."""
    problem = missing_fixtures_message()
    if problem and running_in_ci():
        raise pytest.UsageError(f"CI=true and {problem}")
    from catalog.metastore_registry import REGISTRY_ENV

    session.config._metastore_registry = (os.environ.get(REGISTRY_ENV), tempfile.mkdtemp(prefix="sqlext-test-hms-"))
    os.environ[REGISTRY_ENV] = session.config._metastore_registry[1]


def pytest_sessionfinish(session, exitstatus):
    """Stop every embedded metastore this session started that is still running (a test that failed half-way
    may have left one behind)."""
    saved = getattr(session.config, "_metastore_registry", None)
    if saved is None:
        return
    from catalog import embedded_metastores
    from catalog.metastore_registry import REGISTRY_ENV

    for metastore in embedded_metastores():
        metastore.stop()
    previous, registry = saved
    shutil.rmtree(registry, ignore_errors=True)
    if previous is None:
        os.environ.pop(REGISTRY_ENV, None)
    else:
        os.environ[REGISTRY_ENV] = previous


@pytest.fixture(scope="session")
def fixtures_cache(tmp_path_factory) -> Path:
    problem = missing_fixtures_message()
    if problem:
        pytest.skip(problem)
    return tmp_path_factory.mktemp("hudi-fixtures")


@pytest.fixture(scope="session")
def fixture_table(fixtures_cache):
    """fixture_table(name) -> base path of the extracted Java-written table (read-only use)."""
    return lambda name: extract_fixture(name, fixtures_cache)


@pytest.fixture(scope="session")
def mdt_hfiles(fixture_table):
    """Every HFile of the fixtures' metadata tables (base files and log-block HFiles)."""
    from mdt_fixture_files import mdt_hfiles as find_mdt_hfiles

    return find_mdt_hfiles(fixture_table)


@pytest.fixture(params=["SPARK", "LOCAL"])
def write_engine(request, monkeypatch):
    """Runs a test's writes on each engine (storage.write.local): SPARK forced, or in this process wherever the
    in-process engine supports the write (AUTO without a size limit); a test's own hoodie.sqlext.engine stands."""
    import storage.write.write_operation as write_operation
    from storage.config import EngineConfigKeys as EK

    chosen = {EK.ENGINE.key: "SPARK"} if request.param == "SPARK" else \
        {EK.ENGINE.key: "AUTO", EK.LOCAL_MAX_BYTES.key: str(1 << 40)}
    original = write_operation.runs_in_process

    def runs_in_process(spark, data, op, config, *rest):
        if not config.contains(EK.ENGINE):
            config = config.with_values(chosen)
        return original(spark, data, op, config, *rest)

    monkeypatch.setattr(write_operation, "runs_in_process", runs_in_process)
    return request.param


@pytest.fixture(scope="session")
def spark(tmp_path_factory):
    """One local SparkSession for the whole test session, attached (Hive support) to ONE real embedded Hive
    metastore started for this test session, with the Hudi SQL front end installed (metastore resolver).

    Post-commit Hive sync is off in this shared session (`hoodie.datasource.hive_sync.enable=false`) so tests
    that write many tables do not fill the metastore; the catalog tests switch it on where they test it."""
    import sqlext

    warehouse = tmp_path_factory.mktemp("warehouse")
    session = sqlext.session(
        master="local[2]",
        warehouse=warehouse,
        conf={"spark.ui.enabled": "false", "spark.sql.shuffle.partitions": "4",
              "spark.ui.showConsoleProgress": "false", "spark.driver.memory": "2g",
              "hoodie.datasource.hive_sync.enable": "false"},
    )
    session.sparkContext.setLogLevel("ERROR")
    catalog = getattr(session, "_sqlext_catalog", None)
    # sessions started by subprocesses of tests use this metastore instead of starting (and leaving behind)
    # an embedded one of their own
    previous = os.environ.get("HIVE_METASTORE_URIS")
    if catalog is not None and catalog.uri:
        os.environ["HIVE_METASTORE_URIS"] = catalog.uri
    yield session
    if previous is None:
        os.environ.pop("HIVE_METASTORE_URIS", None)
    else:
        os.environ["HIVE_METASTORE_URIS"] = previous
    session.stop()
    if catalog is not None and catalog.embedded is not None:
        catalog.embedded.stop()


def pytest_collection_modifyitems(session, config, items):
    """The benchmark smoke test runs last: it is the slowest, and tests/catalog must run before anything starts
    the session's SparkContext (one of them checks a plain PySpark session of its own)."""
    items.sort(key=lambda item: "tests/bench/" in str(item.fspath).replace(os.sep, "/"))
