"""CALL upgrade_table / downgrade_table: by table name and by path, Hudi's version names and numbers, the rows the
same after, and a refusal as the CALL's error."""
from __future__ import annotations

import pytest

from sqlext.sql import HoodieSqlError
from storage.table.meta_client import HoodieTableMetaClient

DDL = ("CREATE TABLE {name} (id INT, name STRING, ts BIGINT, dt STRING) USING hudi PARTITIONED BY (dt) "
       "TBLPROPERTIES (primaryKey = 'id', preCombineField = 'ts', type = 'mor')")


def _rows(spark, name):
    return sorted(tuple(r) for r in spark.sql(f"SELECT id, name, ts, dt FROM {name}").collect())


def test_upgrade_by_name_and_downgrade_by_path(hudi_sql, warehouse):
    hudi_sql.sql(DDL.format(name="u") + "; INSERT INTO u VALUES (1, 'a', 1, 'p1'), (2, 'b', 1, 'p2'); "
                 "UPDATE u SET name = 'a2', ts = 2 WHERE id = 1")
    path = str(warehouse / "u")
    before = _rows(hudi_sql, "u")
    assert HoodieTableMetaClient.load(path).table_config.version == 6

    row = hudi_sql.sql("CALL upgrade_table(table => 'u', to_version => 'NINE')").collect()[0]
    assert (row["result"], row["from_version"], row["to_version"], row["steps"]) == (True, 6, 9, "6->8,8->9")
    assert HoodieTableMetaClient.load(path).table_config.version == 9
    assert _rows(hudi_sql, "u") == before
    hudi_sql.sql("UPDATE u SET name = 'b2', ts = 3 WHERE id = 2")  # a version-9 log file
    before = _rows(hudi_sql, "u")

    with pytest.raises(HoodieSqlError, match="CALL upgrade_table: .*use downgrade_table"):
        hudi_sql.sql("CALL upgrade_table('u', '6')")
    row = hudi_sql.sql(f"CALL downgrade_table(path => '{path}', to_version => '6')").collect()[0]
    assert (row["from_version"], row["to_version"], row["steps"]) == (9, 6, "9->8,8->6")
    assert row["log_files_renamed"] >= 1
    assert HoodieTableMetaClient.load(path).table_config.version == 6
    assert _rows(hudi_sql, "u") == before
    assert hudi_sql.sql("CALL downgrade_table('u', 'SIX')").collect()[0]["steps"] == ""


def test_an_unknown_version_is_the_calls_error(hudi_sql):
    hudi_sql.sql(DDL.format(name="v") + "; INSERT INTO v VALUES (1, 'a', 1, 'p1')")
    with pytest.raises(HoodieSqlError, match="unknown table version 'SEVEN'"):
        hudi_sql.sql("CALL upgrade_table(table => 'v', to_version => 'SEVEN')")
    assert "to_version" in hudi_sql.sql("CALL help(cmd => 'upgrade_table')").collect()[0][0]
