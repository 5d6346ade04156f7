"""Every Spark SQL script that Java Hudi ran to produce a fixture table, run here as it is into a new warehouse,
yields the same rows (data columns) as the table Java Hudi wrote (read with hudi-rs from the fixture)."""
from __future__ import annotations

import re
import shutil

import pytest

from fixture_tables import FIXTURE_DIR
from hudi_oracle import arrow_rows, hudi_rs_read, spark_rows

SCRIPTS = sorted(p.stem for p in FIXTURE_DIR.glob("*.sql"))
_CREATE = re.compile(r"(?is)create\s+table\s+(\w+)")
_LOCATION = re.compile(r"(?is)\blocation\s+'([^']+)'")
# the rollback script rolls back to an instant time of Java's run ('20250126035006837'), which no other run
# can reproduce: the CALL must fail clearly, naming the instant, and leave the table as it was
_JAVA_INSTANT_BOUND = {"sample_mor_parquet_v6_nonpartitioned_rollback": "20250126035006837"}
# Java ran these scripts with a session time zone of UTC-5 (CAST('2023-04-01 12:01:00' AS TIMESTAMP) is stored as
# 17:01 UTC); the others in UTC. The session time zone is part of the run, not of the script.
_SESSION_TIME_ZONE = {name: "America/Chicago" for name in (
    "sample_cow_v6_complexkeygen_hivestyle", "sample_cow_v6_nonpartitioned",
    "sample_cow_v6_simplekeygen_nonhivestyle_overwritetable", "sample_cow_v9_txns_nonpart_nometa",
    "sample_cow_v9_txns_simple_meta", "sample_mor_avro_v9_txns_simple_meta")}


def _table_version(name: str) -> str | None:
    """The table version Java wrote the fixture at, where it is not this engine's default (6)."""
    return next((v for v in ("8", "9") if f"_v{v}_" in f"{name}_"), None)


def _data_columns(base_path: str) -> list[str]:
    """The data columns of the Java table, in its schema's order (hudi-rs returns no columns for an empty table)."""
    from storage.table.meta_client import HoodieTableMetaClient
    from storage.table.schema_resolver import table_data_schema

    return [n for n in table_data_schema(HoodieTableMetaClient.load(base_path)).names if not n.startswith("_hoodie")]


def _table_name(script: str) -> str:
    return _CREATE.search(script).group(1)


@pytest.mark.parametrize("name", SCRIPTS)
def test_fixture_script_reproduces_java_table(hudi_sql, warehouse, fixture_table, name):
    script = (FIXTURE_DIR / f"{name}.sql").read_text()
    table = _table_name(script)
    location = _LOCATION.search(script)
    if location:  # an absolute LOCATION of Java's machine: start from a clean directory there
        shutil.rmtree(location.group(1), ignore_errors=True)
    previous_zone = hudi_sql.conf.get("spark.sql.session.timeZone")
    hudi_sql.conf.set("spark.sql.session.timeZone", _SESSION_TIME_ZONE.get(name, "UTC"))
    version = _table_version(name)
    if version:  # a new table at the fixture's version, as Java's default made it
        hudi_sql.conf.set("hoodie.write.table.version", version)
    try:
        if name in _JAVA_INSTANT_BOUND:
            with pytest.raises(Exception, match=_JAVA_INSTANT_BOUND[name]):
                hudi_sql.sql(script)
            return
        hudi_sql.sql(script)
        java_table = str(fixture_table(name))
        expected = hudi_rs_read(java_table)
        ours = hudi_sql.sql(f"SELECT * FROM {table}")
        columns = _data_columns(java_table)
        assert [c for c in ours.columns if not c.startswith("_hoodie")] == columns
        assert spark_rows(ours, columns) == (arrow_rows(expected, columns) if expected.num_rows else [])
        from storage.table.meta_client import HoodieTableMetaClient

        path = hudi_sql.sql(f"DESCRIBE FORMATTED {table}").where("col_name = 'Location'").first()[1]
        assert str(HoodieTableMetaClient.load(path).table_config.version) == (version or "6")
    finally:
        hudi_sql.conf.set("spark.sql.session.timeZone", previous_zone)
        hudi_sql.conf.unset("hoodie.write.table.version")
        if location:
            shutil.rmtree(location.group(1), ignore_errors=True)
