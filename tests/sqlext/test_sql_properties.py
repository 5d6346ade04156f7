"""`hoodie.datasource.insert.dup.policy` (drop / fail) for INSERT as `insert`, and Java class names in table
properties: accepted with a warning where they have a meaning here, rejected (nothing created or changed)
where they do not. Final rows are read with hudi-rs."""
from __future__ import annotations

import logging
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from hudi_oracle import hudi_rs_read  # noqa: E402

from conftest import SEED_ROWS
from sqlext.sql import HoodieSqlError

INSERT_AS_INSERT = "'hoodie.spark.sql.insert.into.operation' = 'insert'"


def _by_id(path, column: str = "name") -> dict:
    return {r["id"]: r[column] for r in hudi_rs_read(path).to_pylist()}


def _instants(path) -> list[str]:
    return sorted(p.name for p in (Path(path) / ".hoodie").iterdir() if p.is_file())


def test_insert_dup_policy_drop_and_fail(hudi_sql, seeded):
    path = seeded("t")
    hudi_sql.sql(f"ALTER TABLE t SET TBLPROPERTIES ({INSERT_AS_INSERT}, "
                 "'hoodie.datasource.insert.dup.policy' = 'drop')")
    counts = hudi_sql.sql("INSERT INTO t VALUES (1, 'dup', 1.0, 9, 'p1'), (6, 'f', 60.0, 1, 'p3')").collect()[0]
    assert counts.num_inserted_rows == 1
    expected = {r[0]: r[1] for r in SEED_ROWS} | {6: "f"}
    assert _by_id(path) == expected  # the duplicate of key 1 was dropped, not upserted
    hudi_sql.sql("ALTER TABLE t SET TBLPROPERTIES ('hoodie.datasource.insert.dup.policy' = 'fail')")
    before = _instants(path)
    with pytest.raises(HoodieSqlError, match=r"record key '2' already exists \(hoodie.datasource.insert.dup.policy="
                                           r"fail\)\. Nothing was written"):
        hudi_sql.sql("INSERT INTO t VALUES (7, 'g', 1.0, 1, 'p1'), (2, 'dup', 1.0, 9, 'p1')")
    assert _instants(path) == before and _by_id(path) == expected
    hudi_sql.sql("INSERT INTO t VALUES (7, 'g', 1.0, 1, 'p1')")
    assert _by_id(path) == expected | {7: "g"}
    hudi_sql.sql("ALTER TABLE t SET TBLPROPERTIES ('hoodie.datasource.insert.dup.policy' = 'sometimes')")
    with pytest.raises(HoodieSqlError, match="expected none, drop or fail"):
        hudi_sql.sql("INSERT INTO t VALUES (8, 'h', 1.0, 1, 'p1')")


def test_java_class_properties(hudi_sql, warehouse, caplog):
    caplog.set_level(logging.WARNING, logger="sqlext.sql.properties")
    hudi_sql.sql("""CREATE TABLE ok (id INT, v STRING, ts BIGINT) USING hudi TBLPROPERTIES (
        primaryKey = 'id', preCombineField = 'ts',
        payloadClass = 'org.apache.hudi.common.model.DefaultHoodieRecordPayload',
        'hoodie.datasource.write.record.merger.impls' = 'org.apache.hudi.HoodieSparkRecordMerger',
        'hoodie.write.lock.provider' = 'org.apache.hudi.client.transaction.lock.InProcessLockProvider',
        'hoodie.write.commit.callback.class' = 'com.acme.hudi.SlackCallback')""")
    warned = " ".join(r.getMessage() for r in caplog.records)
    assert "HoodieSparkRecordMerger" in warned and "InProcessLockProvider" not in warned  # a real lock now
    assert "com.acme.hudi.SlackCallback" in warned and "DefaultHoodieRecordPayload" not in warned
    hudi_sql.sql("INSERT INTO ok VALUES (1, 'a', 2); INSERT INTO ok VALUES (1, 'older', 1)")
    assert _by_id(warehouse / "ok", "v") == {1: "a"}  # DefaultHoodieRecordPayload: the larger ts wins
    rejected = [
        ("'hoodie.write.lock.provider' = 'org.apache.hudi.client.transaction.lock.ZookeeperBasedLockProvider'",
         "lock provider .*ZookeeperBasedLockProvider is not supported"),
        ("payloadClass = 'com.acme.MyPayload'", "payload class com.acme.MyPayload is not supported"),
        ("'hoodie.datasource.write.payload.class' = 'org.apache.hudi.common.model.PartialUpdateAvroPayload'",
         "PartialUpdateAvroPayload is not supported"),
    ]
    for prop, message in rejected:
        with pytest.raises(HoodieSqlError, match=message):
            hudi_sql.sql(f"CREATE TABLE bad (id INT) USING hudi TBLPROPERTIES (primaryKey = 'id', {prop})")
        assert not (warehouse / "bad").exists()


def test_expression_indexes_are_accepted_without_effect(hudi_sql, seeded, caplog):
    path = seeded("t")
    before = _instants(path)
    caplog.set_level(logging.WARNING)
    hudi_sql.sql("CREATE INDEX IF NOT EXISTS price_idx ON t USING column_stats (price) OPTIONS (expr = 'identity')")
    hudi_sql.sql("DROP INDEX IF EXISTS price_idx ON t")
    warned = [r.getMessage() for r in caplog.records if "no effect" in r.getMessage()]
    assert len(warned) == 1 and "price_idx on default.t" in warned[0]
    assert _instants(path) == before and _by_id(path) == {r[0]: r[1] for r in SEED_ROWS}
    with pytest.raises(HoodieSqlError, match="'nope' is not a column of default.t"):
        hudi_sql.sql("CREATE INDEX bad_idx ON t USING column_stats (nope) OPTIONS (a = 'b')")


def test_create_index_refuses_what_hudi_refuses(hudi_sql, seeded, fixtures_cache, tmp_path):
    """Java Hudi's CREATE INDEX rules, each a clear error naming the index and the table, nothing written."""
    from fixture_tables import copy_fixture

    path = seeded("t")
    before = _instants(path)
    refused = {
        "CREATE INDEX i ON t USING hash_index (name)": "index type hash_index is not supported",
        "CREATE INDEX idx ON t USING record_index (id)": "a record index must be named record_index",
        "CREATE INDEX record_index ON t USING record_index (name)": "a record index is over the record key fields \\(id\\), not name",
        "CREATE INDEX i ON t USING secondary_index (name, price)": "over exactly one column, not 2",
        "CREATE INDEX i ON t (name, price)": "a secondary_index index is over exactly one column",
        "CREATE INDEX i ON t USING bloom_filters (name)": "expression index: give OPTIONS \\(expr",
    }
    for statement, message in refused.items():
        with pytest.raises(HoodieSqlError, match=f"CREATE INDEX \\w+ on default.t: .*{message}"):
            hudi_sql.sql(statement)
    hudi_sql.sql("CREATE INDEX record_index ON t (id)")  # the key fields: Hudi's record index, accepted
    assert _instants(path) == before
    java = copy_fixture("sample_cow_v9_txns_simple_meta", fixtures_cache, tmp_path)  # index.json has merchant_idx
    with pytest.raises(HoodieSqlError, match="CREATE INDEX merchant_idx on .*: index already exists"):
        hudi_sql.sql(f"CREATE INDEX merchant_idx ON hudi.`{java}` (merchant_name)")
    hudi_sql.sql(f"CREATE INDEX IF NOT EXISTS merchant_idx ON hudi.`{java}` USING secondary_index (merchant_name)")


def test_tblproperties_typo_warns_and_strict_rejects(hudi_sql, caplog):
    caplog.set_level(logging.WARNING, logger="storage.config")
    typo = "hoodie.cleaner.commits.retaind"
    hudi_sql.sql(f"""CREATE TABLE typo (id INT, v STRING, ts BIGINT) USING hudi TBLPROPERTIES (
        primaryKey = 'id', preCombineField = 'ts', '{typo}' = '3')""")
    warned = [r.getMessage() for r in caplog.records if r.name == "storage.config"]
    assert len(warned) == 1 and typo in warned[0] and "did you mean hoodie.cleaner.commits.retained?" in warned[0]
    caplog.clear()
    hudi_sql.sql("INSERT INTO typo VALUES (1, 'a', 1)")  # the table's own property: not warned again
    assert not [r for r in caplog.records if r.name == "storage.config"]
    with pytest.raises(HoodieSqlError, match="invalid value 'many' for option hoodie.cleaner.commits.retained"):
        hudi_sql.sql("ALTER TABLE typo SET TBLPROPERTIES ('hoodie.cleaner.commits.retained' = 'many')")
    with pytest.raises(HoodieSqlError, match=r"unknown option hoodie.keep.min.comits.*hoodie.strict.config=true"):
        hudi_sql.sql("ALTER TABLE typo SET TBLPROPERTIES ('hoodie.keep.min.comits' = '5', "
                     "'hoodie.strict.config' = 'true')")
    assert hudi_sql.sql("SELECT v FROM typo").collect()[0].v == "a"
