from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
from fixture_tables import FIXTURE_DIR, extract_fixture  # noqa: E402

os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)


@pytest.fixture(scope="session")
def fixtures_cache(tmp_path_factory) -> Path:
    if not FIXTURE_DIR.exists():
        pytest.skip(f"fixture tables not found at {FIXTURE_DIR}")
    return tmp_path_factory.mktemp("hudi-fixtures")


@pytest.fixture(scope="session")
def fixture_table(fixtures_cache):
    """fixture_table(name) -> base path of the extracted Java-written table (read-only use)."""
    return lambda name: extract_fixture(name, fixtures_cache)


@pytest.fixture(scope="session")
def spark(tmp_path_factory):
    """One local SparkSession for the whole test session."""
    import sqlext

    session = sqlext.session(
        master="local[2]",
        warehouse=tmp_path_factory.mktemp("warehouse"),
        conf={"spark.ui.enabled": "false", "spark.sql.shuffle.partitions": "4",
              "spark.ui.showConsoleProgress": "false", "spark.driver.memory": "2g"},
    )
    session.sparkContext.setLogLevel("ERROR")
    yield session
    session.stop()
