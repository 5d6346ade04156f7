"""storage.table_service.index_admin: SHOW INDEXES / DROP INDEX / CREATE INDEX record_index without SQL, on a copy
of Java's v9 table with a record index, column_stats, partition_stats and two secondary indexes (merchant_idx,
txn_date_idx), and on a table written here."""
from __future__ import annotations

import json

import pytest

from fixture_tables import copy_fixture
from hudi_oracle import spark_rows
from service_helpers import COLS, options, write
from storage.config import HoodieConfig
from storage.config import MetadataConfigKeys as MK
from storage.config import TableConfigKeys as TK
from storage.exception import HoodieIndexError
from storage.metadata.index_definitions import IndexDefinition, index_definitions, put_index_definition
from storage.metadata.table_metadata import enabled_partitions
from storage.table.meta_client import HoodieTableMetaClient
from storage.table_service.index_admin import create_record_index, drop_index, resolve_index, show_indexes

COW_V9 = "sample_cow_v9_txns_simple_meta"
JAVA_INDEXES = [("column_stats", "column_stats", ""), ("partition_stats", "partition_stats", ""),
                ("record_index", "record_index", ""),
                ("secondary_index_merchant_idx", "secondary_index", "merchant_name"),
                ("secondary_index_txn_date_idx", "secondary_index", "txn_date")]


@pytest.fixture
def java_table(fixtures_cache, tmp_path):
    return copy_fixture(COW_V9, fixtures_cache, tmp_path)


def _meta(base) -> HoodieTableMetaClient:
    return HoodieTableMetaClient.load(str(base))


def _index_json(base) -> dict:
    return json.loads((base / ".hoodie" / ".index_defs" / "index.json").read_text())["indexDefinitions"]


def test_show_indexes_as_java_gives_them(java_table):
    """Hudi's rows: (partition, type, source fields) for secondary indexes, (partition, partition, "") else, no
    `files`."""
    assert show_indexes(str(java_table)) == JAVA_INDEXES


def test_resolve_index_by_user_or_partition_name(java_table):
    meta = _meta(java_table)
    assert resolve_index(meta, "merchant_idx") == ["secondary_index_merchant_idx"]
    assert resolve_index(meta, "secondary_index_merchant_idx") == ["secondary_index_merchant_idx"]
    assert resolve_index(meta, "`TXN_DATE_IDX`") == ["secondary_index_txn_date_idx"]
    assert resolve_index(meta, "record_index") == ["record_index"]
    assert resolve_index(meta, "column_stats") == ["column_stats"]
    assert resolve_index(meta, "nope") == [] and resolve_index(meta, "secondary_index_nope") == []


def test_drop_secondary_index(spark, java_table):
    def read():
        return spark_rows(spark.read.format("hudi").load(str(java_table)), ["txn_id", "merchant_name", "region"])

    before = read()
    instants = sorted(p.name for p in (java_table / ".hoodie" / "timeline").iterdir())
    assert drop_index(str(java_table), "merchant_idx") == "secondary_index_merchant_idx"
    assert not (java_table / ".hoodie" / "metadata" / "secondary_index_merchant_idx").exists()
    assert (java_table / ".hoodie" / "metadata" / "secondary_index_txn_date_idx").is_dir()
    meta = _meta(java_table)
    assert "secondary_index_merchant_idx" not in enabled_partitions(meta)
    assert meta.table_config.props[TK.METADATA_PARTITIONS.key] == \
        "column_stats,files,partition_stats,record_index,secondary_index_txn_date_idx"
    assert set(_index_json(java_table)) == {"record_index", "column_stats", "secondary_index_txn_date_idx"}
    assert show_indexes(str(java_table)) == [r for r in JAVA_INDEXES if r[0] != "secondary_index_merchant_idx"]
    assert sorted(p.name for p in (java_table / ".hoodie" / "timeline").iterdir()) == instants  # no data action
    assert read() == before
    assert drop_index(str(java_table), "merchant_idx") is None  # gone: Hudi's "Index does not exist"


def test_drop_by_partition_name(java_table):
    assert drop_index(str(java_table), "secondary_index_txn_date_idx") == "secondary_index_txn_date_idx"
    assert drop_index(str(java_table), "column_stats") == "column_stats"
    assert not (java_table / ".hoodie" / "metadata" / "column_stats").exists()
    assert "column_stats" not in _index_json(java_table)
    assert [r[0] for r in show_indexes(str(java_table))] == ["partition_stats", "record_index",
                                                              "secondary_index_merchant_idx"]


def test_drop_files_is_refused(java_table):
    before = _meta(java_table).table_config.props[TK.METADATA_PARTITIONS.key]
    with pytest.raises(HoodieIndexError, match="files is the metadata table's file listing, not an index"):
        drop_index(str(java_table), "files")
    assert _meta(java_table).table_config.props[TK.METADATA_PARTITIONS.key] == before
    assert (java_table / ".hoodie" / "metadata" / "files").is_dir()


def test_drop_a_definition_without_partition(java_table):
    """An index.json entry the table does not list (an index whose build never finished) is dropped too."""
    put_index_definition(_meta(java_table), IndexDefinition("expr_index_day", "column_stats", "from_unixtime",
                                                            ("txn_ts",), (("expr", "from_unixtime"),), "V2"))
    assert resolve_index(_meta(java_table), "day") == ["expr_index_day"]
    assert drop_index(str(java_table), "day") == "expr_index_day"
    assert "expr_index_day" not in index_definitions(_meta(java_table))
    assert show_indexes(str(java_table)) == JAVA_INDEXES


def test_show_indexes_without_metadata_table(spark, tmp_path):
    path = tmp_path / "plain"
    write(spark, path, [(1, "a", 1, "p0")], options("plain", **{MK.ENABLE.key: "false"}), "insert")
    assert show_indexes(str(path)) == []
    assert drop_index(str(path), "record_index") is None


def test_create_record_index(spark, tmp_path):
    path = tmp_path / "rli"
    rows = [(i, f"n{i}", 1, f"p{i % 2}") for i in range(20)]
    opts = options("rli", **{MK.ENABLE.key: "true", "hoodie.write.table.version": "9"})
    write(spark, path, rows, opts, "insert")
    before = spark_rows(spark.read.format("hudi").load(str(path)), COLS)
    assert "record_index" not in enabled_partitions(_meta(path))
    assert create_record_index(str(path), _meta(path).table_config.with_options(HoodieConfig.of(opts)))
    meta = _meta(path)
    assert "record_index" in enabled_partitions(meta) and "files" in enabled_partitions(meta)
    assert (path / ".hoodie" / "metadata" / "record_index").is_dir()
    assert ("record_index", "record_index", "") in show_indexes(str(path))
    assert "record_index" in index_definitions(meta)
    assert spark_rows(spark.read.format("hudi").load(str(path)), COLS) == before
    assert drop_index(str(path), "record_index") == "record_index"
    assert not (path / ".hoodie" / "metadata" / "record_index").exists()
    assert "record_index" not in index_definitions(_meta(path))
