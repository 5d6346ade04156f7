"""SQL index DDL on Hudi tables: SHOW INDEXES (Hudi's rows), DROP INDEX [IF EXISTS] name ON [TABLE] t (the
metadata partition, its table-config entry and its index.json entry go; data unchanged), CREATE INDEX
record_index (builds `.hoodie/metadata/record_index`); secondary/expression indexes stay accepted without effect.
On tables written here and on a copy of Java's v9 table with a record index and two secondary indexes."""
from __future__ import annotations

import json
import logging

import pytest

from conftest import SEED_ROWS, values_sql
from fixture_tables import copy_fixture
from sqlext.sql import HoodieSqlError
from storage.config import TableConfigKeys as TK
from storage.table.meta_client import HoodieTableMetaClient

COW_V9 = "sample_cow_v9_txns_simple_meta"
JAVA_INDEXES = [("column_stats", "column_stats", ""), ("partition_stats", "partition_stats", ""),
                ("record_index", "record_index", ""),
                ("secondary_index_merchant_idx", "secondary_index", "merchant_name"),
                ("secondary_index_txn_date_idx", "secondary_index", "txn_date")]
MDT_DDL = ("CREATE TABLE {name} (id INT, name STRING, price DOUBLE, ts BIGINT, dt STRING) USING hudi "
           "PARTITIONED BY (dt) TBLPROPERTIES (primaryKey = 'id', preCombineField = 'ts', "
           "'hoodie.write.table.version' = '9', 'hoodie.metadata.enable' = 'true', "
           "'hoodie.metadata.index.column.stats.enable' = 'true'{extra})")


def _rows(spark, text: str) -> list[tuple]:
    return [tuple(r) for r in spark.sql(text).collect()]


def _props(path) -> dict[str, str]:
    return dict(HoodieTableMetaClient.load(str(path)).table_config.props)


def _index_json(path) -> dict:
    return json.loads((path / ".hoodie" / ".index_defs" / "index.json").read_text())["indexDefinitions"]


def _timeline(path) -> list[str]:
    return sorted(p.name for p in (path / ".hoodie" / "timeline").iterdir() if p.is_file())


@pytest.fixture
def java(hudi_sql, fixtures_cache, tmp_path):
    """A private copy of Java's v9 COW table, registered as `j`."""
    path = copy_fixture(COW_V9, fixtures_cache, tmp_path)
    hudi_sql.sql(f"CREATE TABLE j USING hudi LOCATION '{path}'")
    return path


def _mdt_table(hudi_sql, warehouse, name="t", extra="") -> object:
    hudi_sql.sql(MDT_DDL.format(name=name, extra=extra) + f"; INSERT INTO {name} VALUES " + values_sql(SEED_ROWS))
    return warehouse / name


def test_show_indexes_with_column_stats(hudi_sql, warehouse):
    path = _mdt_table(hudi_sql, warehouse, extra=", 'hoodie.metadata.index.partition.stats.enable' = 'true'")
    assert _props(path)[TK.METADATA_PARTITIONS.key] == "column_stats,files,partition_stats"
    frame = hudi_sql.sql("SHOW INDEXES FROM t")
    assert frame.columns == ["index_name", "col_name", "index_type"]
    assert [tuple(r) for r in frame.collect()] == [("column_stats", "column_stats", ""),
                                                   ("partition_stats", "partition_stats", "")]
    assert _rows(hudi_sql, "SHOW INDEXES IN TABLE default.t") == _rows(hudi_sql, "show indexes from t;")


def test_show_indexes_without_metadata_table(hudi_sql, seeded):
    seeded("t")
    frame = hudi_sql.sql("SHOW INDEXES FROM t")
    assert frame.columns == ["index_name", "col_name", "index_type"] and frame.collect() == []


def test_show_indexes_of_java_table(hudi_sql, java):
    assert _rows(hudi_sql, "SHOW INDEXES FROM j") == JAVA_INDEXES
    assert _rows(hudi_sql, f"SHOW INDEXES IN hudi.`{java}`") == JAVA_INDEXES


def test_drop_secondary_index_of_java_table(hudi_sql, java):
    query = "SELECT txn_id, merchant_name, txn_date, amount, region FROM j ORDER BY txn_id"
    before, timeline = _rows(hudi_sql, query), _timeline(java)
    hudi_sql.sql("DROP INDEX merchant_idx ON j")
    assert not (java / ".hoodie" / "metadata" / "secondary_index_merchant_idx").exists()
    assert _props(java)[TK.METADATA_PARTITIONS.key] == \
        "column_stats,files,partition_stats,record_index,secondary_index_txn_date_idx"
    assert "secondary_index_merchant_idx" not in _index_json(java)
    assert _rows(hudi_sql, "SHOW INDEXES FROM j") == [r for r in JAVA_INDEXES if r[0] != "secondary_index_merchant_idx"]
    assert _rows(hudi_sql, query) == before and _timeline(java) == timeline
    # by partition name, Hudi's `ON TABLE` spelling (which sqlglot does not parse)
    hudi_sql.sql("DROP INDEX IF EXISTS secondary_index_txn_date_idx ON TABLE j")
    assert not (java / ".hoodie" / "metadata" / "secondary_index_txn_date_idx").exists()
    assert set(_index_json(java)) == {"record_index", "column_stats"}
    assert [r[0] for r in _rows(hudi_sql, "SHOW INDEXES FROM j")] == ["column_stats", "partition_stats",
                                                                       "record_index"]
    assert _rows(hudi_sql, query) == before


def test_drop_missing_index(hudi_sql, java):
    props, index_json = _props(java), _index_json(java)
    for statement in ("DROP INDEX nope ON j", "DROP INDEX nope ON TABLE j"):
        with pytest.raises(HoodieSqlError, match="DROP INDEX nope on default.j: Index does not exist: nope") as err:
            hudi_sql.sql(statement)
        assert err.value.table == "default.j" and err.value.line == 1
    with pytest.raises(HoodieSqlError, match="line 2:12: DROP INDEX merchant on default.j: Index does not exist"):
        hudi_sql.sql("SELECT 1;\nDROP INDEX merchant ON j")  # position of the index name
    with pytest.raises(HoodieSqlError, match="files is the metadata table's file listing, not an index"):
        hudi_sql.sql("DROP INDEX files ON j")
    hudi_sql.sql("DROP INDEX IF EXISTS nope ON j")
    hudi_sql.sql("DROP INDEX IF EXISTS nope ON TABLE j")
    assert _props(java) == props and _index_json(java) == index_json


def test_drop_index_on_a_table_without_indexes(hudi_sql, seeded):
    path = seeded("t")
    props = _props(path)
    with pytest.raises(HoodieSqlError, match="DROP INDEX name_idx on default.t: Index does not exist: name_idx"):
        hudi_sql.sql("DROP INDEX name_idx ON t")
    hudi_sql.sql("DROP INDEX IF EXISTS name_idx ON t")
    assert _props(path) == props


def test_create_record_index(hudi_sql, warehouse):
    path = _mdt_table(hudi_sql, warehouse)
    query = "SELECT id, name, price, dt FROM t ORDER BY id"
    before = _rows(hudi_sql, query)
    hudi_sql.sql("CREATE INDEX record_index ON t (id)")
    assert (path / ".hoodie" / "metadata" / "record_index").is_dir()
    assert _props(path)[TK.METADATA_PARTITIONS.key] == "column_stats,files,record_index"  # the table's kept
    assert ("record_index", "record_index", "") in _rows(hudi_sql, "SHOW INDEXES FROM t")
    assert "record_index" in _index_json(path)
    assert _rows(hudi_sql, query) == before
    with pytest.raises(HoodieSqlError, match="CREATE INDEX record_index on default.t: index already exists"):
        hudi_sql.sql("CREATE INDEX record_index ON t USING record_index (id)")
    hudi_sql.sql("CREATE INDEX IF NOT EXISTS record_index ON TABLE t USING record_index (id)")
    hudi_sql.sql("INSERT INTO t VALUES (6, 'f', 60.0, 1, 'p3')")  # writers keep it in step
    assert "record_index" in _props(path)[TK.METADATA_PARTITIONS.key].split(",")
    assert _rows(hudi_sql, query) == before + [(6, "f", 60.0, "p3")]
    hudi_sql.sql("DROP INDEX record_index ON t")
    assert not (path / ".hoodie" / "metadata" / "record_index").exists()
    assert "record_index" not in _props(path)[TK.METADATA_PARTITIONS.key].split(",")
    assert "record_index" not in _index_json(path)
    hudi_sql.sql("INSERT INTO t VALUES (7, 'g', 70.0, 1, 'p1')")  # dropped stays dropped (the option is off)
    assert _props(path)[TK.METADATA_PARTITIONS.key] == "column_stats,files"
    assert not (path / ".hoodie" / "metadata" / "record_index").exists()
    assert _rows(hudi_sql, query) == sorted(before + [(6, "f", 60.0, "p3"), (7, "g", 70.0, "p1")])


def test_create_record_index_on_version_6_table(hudi_sql, seeded):
    """SQL's default table version (6): Hudi 0.x's layout, no index.json."""
    path = seeded("t")
    before = _rows(hudi_sql, "SELECT id, name FROM t ORDER BY id")
    hudi_sql.sql("CREATE INDEX record_index ON t (id)")
    assert _props(path)[TK.METADATA_PARTITIONS.key] == "files,record_index"
    assert _rows(hudi_sql, "SHOW INDEXES FROM t") == [("record_index", "record_index", "")]
    assert _rows(hudi_sql, "SELECT id, name FROM t ORDER BY id") == before
    with pytest.raises(HoodieSqlError, match="index already exists"):
        hudi_sql.sql("CREATE INDEX record_index ON t (id)")


def test_create_record_index_refused_writes_nothing(hudi_sql, warehouse):
    path = _mdt_table(hudi_sql, warehouse)
    props, timeline = _props(path), _timeline(path)
    for statement in ("CREATE INDEX record_index ON t USING record_index (name)",
                      "CREATE INDEX rli ON t USING record_index (id)",
                      "CREATE INDEX record_index ON t (nope)"):
        with pytest.raises(HoodieSqlError, match="CREATE INDEX \\w+.* default.t"):
            hudi_sql.sql(statement)
    assert _props(path) == props and _timeline(path) == timeline
    assert not (path / ".hoodie" / "metadata" / "record_index").exists()


def test_create_record_index_needs_meta_fields(hudi_sql, warehouse):
    path = _mdt_table(hudi_sql, warehouse, extra=", 'hoodie.populate.meta.fields' = 'false'")
    props = _props(path)
    with pytest.raises(HoodieSqlError, match="CREATE INDEX record_index on default.t: .*the record index needs "
                                             "the meta fields") as err:
        hudi_sql.sql("CREATE INDEX record_index ON t (id)")
    assert err.value.table == "default.t"
    assert _props(path) == props and not (path / ".hoodie" / "metadata" / "record_index").exists()


def test_create_secondary_index_builds_and_keeps_it(hudi_sql, warehouse, spark):
    from hudi_oracle import check_secondary_indexes

    path = _mdt_table(hudi_sql, warehouse, extra=", 'hoodie.metadata.record.index.enable' = 'true'")
    query = "SELECT id, name, price, dt FROM t ORDER BY id"
    before = _rows(hudi_sql, query)
    hudi_sql.sql("CREATE INDEX name_idx ON t (name)")
    assert "secondary_index_name_idx" in _props(path)[TK.METADATA_PARTITIONS.key].split(",")
    assert _index_json(path)["secondary_index_name_idx"]["sourceFields"] == ["name"]
    assert ("secondary_index_name_idx", "secondary_index", "name") in _rows(hudi_sql, "SHOW INDEXES FROM t")
    assert _rows(hudi_sql, query) == before
    hudi_sql.sql("INSERT INTO t VALUES (6, 'f', 60.0, 1, 'p3')")  # writers keep it in step
    hudi_sql.sql("UPDATE t SET name = 'renamed' WHERE id = 1")
    entries = check_secondary_indexes(spark, path)["secondary_index_name_idx"]
    assert "f$6" in entries and "renamed$1" in entries
    with pytest.raises(HoodieSqlError, match="name_idx on default.t: index already exists"):
        hudi_sql.sql("CREATE INDEX name_idx ON t (name)")
    hudi_sql.sql("DROP INDEX name_idx ON t")
    assert "secondary_index_name_idx" not in _props(path)[TK.METADATA_PARTITIONS.key]
    assert not (path / ".hoodie" / "metadata" / "secondary_index_name_idx").exists()


def test_create_secondary_index_refusals_write_nothing(hudi_sql, warehouse, seeded, caplog):
    path = _mdt_table(hudi_sql, warehouse)  # no record index
    props, timeline = _props(path), _timeline(path)
    with pytest.raises(HoodieSqlError, match="name_idx on default.t: .*Record index is required"):
        hudi_sql.sql("CREATE INDEX name_idx ON t (name)")
    assert _props(path) == props and _timeline(path) == timeline and "secondary_index_name_idx" not in \
        json.dumps(_index_json(path) if (path / ".hoodie" / ".index_defs" / "index.json").exists() else {})
    v6 = seeded("s")  # SQL's default version 6: no index definitions
    with pytest.raises(HoodieSqlError, match="table version 6 has no index definitions"):
        hudi_sql.sql("CREATE INDEX name_idx ON s (name)")
    caplog.set_level(logging.WARNING)
    hudi_sql.sql("CREATE INDEX price_idx ON t USING bloom_filters (price) OPTIONS (expr = 'identity')")
    warned = [r.getMessage() for r in caplog.records if "no effect" in r.getMessage()]
    assert len(warned) == 1 and "bloom_filters" in warned[0]
    assert HoodieTableMetaClient.load(str(v6)).table_config.props.get(TK.METADATA_PARTITIONS.key) == \
        _props(v6).get(TK.METADATA_PARTITIONS.key)
