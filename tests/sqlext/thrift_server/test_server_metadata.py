"""The catalog RPCs and result-set metadata of `sqlext serve` against Spark's own Thrift server
(HiveThriftServer2 from pyspark's jars) on the same metastore: the same layouts (column names and types) and
the same rows for a COW Hudi table, a MOR Hudi table and its `_ro` / `_rt` tables, and the same types and
values for a query over every Spark type. GetPrimaryKeys answers Hudi's record key fields (Spark: none)."""
from __future__ import annotations

import uuid

import pytest

from thrift_server.support import run_client

ALL_TYPES = ("SELECT true AS b, CAST(1 AS TINYINT) AS ti, CAST(2 AS SMALLINT) AS si, 3 AS i, 4L AS l, "
             "CAST(1.5 AS FLOAT) AS f, 2.5D AS d, CAST(3.25 AS DECIMAL(10,2)) AS de, "
             "CAST(1.123456789 AS DECIMAL(38,18)) AS de38, 's' AS s, CAST('c' AS CHAR(5)) AS c, "
             "DATE'2024-01-02' AS dt, TIMESTAMP'2024-01-02 03:04:05.12' AS ts, TIMESTAMP'2024-01-02 03:04:05' AS ts0, "
             "TIMESTAMP_NTZ'2024-01-02 03:04:05.000001' AS tn, X'0102' AS bi, array(1, NULL) AS a, map('k', 1) AS m, "
             "named_struct('x', 1, 'y z', 'q') AS st, CAST(NULL AS INT) AS n_i, CAST(NULL AS STRING) AS n_s, "
             "CAST(NULL AS DECIMAL(5,1)) AS n_de, NULL AS n")
NULL_PATTERN = ("SELECT id, IF(id % 3 = 0, NULL, id) AS maybe_int, IF(id % 2 = 0, NULL, CAST(id AS STRING)) AS maybe_s, "
                "IF(id % 5 = 0, NULL, id % 2 = 0) AS maybe_b, IF(id % 7 = 0, NULL, id / 4) AS maybe_d "
                "FROM range(0, 37) ORDER BY id")


@pytest.fixture(scope="module")
def answers(hive_server, spark_thrift_server):
    db = f"srvmeta_{uuid.uuid4().hex[:6]}"
    setup = [f"CREATE DATABASE {db}",
             f"CREATE TABLE {db}.cow_t (id BIGINT, name STRING, price DECIMAL(10,2), qty INT, "
             f"ok BOOLEAN, d DATE, ts TIMESTAMP, dt STRING) USING hudi PARTITIONED BY (dt) "
             f"TBLPROPERTIES (primaryKey = 'id', preCombineField = 'ts') COMMENT 'a cow table'",
             f"CREATE TABLE {db}.mor_t (id INT, v STRING, ts BIGINT) USING hudi "
             f"TBLPROPERTIES (type = 'mor', primaryKey = 'id', preCombineField = 'ts')",
             f"INSERT INTO {db}.mor_t VALUES (1, 'x', 1)",
             f"INSERT INTO {db}.mor_t VALUES (1, 'y', 2)"]  # a deltacommit: Hive sync makes mor_t_ro / mor_t_rt
    probes = {"all_types": ALL_TYPES, "nulls": NULL_PATTERN}
    ours = run_client("catalog", port=hive_server.port, db=db, setup=setup, probes=probes, pk_table="cow_t")
    spark = run_client("catalog", port=spark_thrift_server, db=db, probes=probes, pk_table="cow_t")
    return ours, spark, db


RPCS = ("catalogs", "schemas", "tables", "tables_typed", "table_types", "columns", "columns_pattern", "type_info",
        "functions")


@pytest.mark.parametrize("rpc", RPCS)
def test_catalog_rpc_answers_as_spark_thrift_server(answers, rpc):
    ours, spark, _ = answers
    assert "error" not in ours[rpc], ours[rpc]
    assert ours[rpc]["columns"] == spark[rpc]["columns"]
    assert sorted(map(repr, ours[rpc]["rows"])) == sorted(map(repr, spark[rpc]["rows"]))


def test_hudi_tables_and_synced_views_are_listed(answers):
    ours, _, db = answers
    tables = {(r[1], r[2], r[3]) for r in ours["tables"]["rows"]}
    assert {(db, "cow_t", "TABLE"), (db, "mor_t", "TABLE"), (db, "mor_t_ro", "TABLE"), (db, "mor_t_rt", "TABLE")} \
        <= tables
    columns = {(r[2], r[3]): r for r in ours["columns"]["rows"]}
    assert columns[("cow_t", "price")][4:7] == [3, "DECIMAL(10,2)", 8]
    assert {r[2] for r in ours["columns_pattern"]["rows"]} == {"mor_t_ro", "mor_t_rt"}


def test_primary_keys_are_the_record_key_fields(answers):
    ours, spark, db = answers
    assert ours["primary_keys"]["columns"] == spark["primary_keys"]["columns"]
    assert ours["primary_keys"]["rows"] == [[None, db, "cow_t", "id", 1, None]]


@pytest.mark.parametrize("probe", ["all_types", "nulls"])
def test_result_types_and_values_as_spark_thrift_server(answers, probe):
    ours, spark, _ = answers
    assert ours["probes"][probe]["columns"] == spark["probes"][probe]["columns"]
    assert ours["probes"][probe]["rows"] == spark["probes"][probe]["rows"]
