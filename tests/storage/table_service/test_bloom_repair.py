"""Tables whose bloom footers this engine wrote in Hadoop's hash order (before it hashed as Hudi does): our
lookups still find every key, and `repair_bloom_filters` makes the footers Java's order with the rows unchanged."""
from __future__ import annotations

from pathlib import PurePath

import pyarrow.parquet as pq
import pytest
from hudi_oracle import arrow_rows, hudi_rs_read, rows, spark_rows

from storage.bloom import TailOrder
from storage.bloom.footer import BLOOM_FILTER_TAIL_ORDER_KEY, footer_bloom_filter, footer_tail_order, is_legacy_footer
from storage.bloom.bloom_filter import deserialize_bloom_filter
from storage.index.key_lookup import trusted_bloom_filter
from storage.io.storage import HoodieStorage
from storage.meta_fields import RECORD_KEY
from storage.table_service.bloom_repair import legacy_footer_files, repair_bloom_filters, rewrite_footer_filter

COLUMNS = ["id", "name", "ts", "city"]
# keys of every UTF-8 length 1-12 and multi-byte ones: half of them have 2- or 3-byte tails
KEYS = [("k" * n)[:n] for n in range(1, 13)] + ["é", "éa", "中", "中文", "a中b", "😀", "x😀"] + \
       [f"key-{i}" for i in range(40)]


def _options(path) -> dict[str, str]:
    return {"hoodie.table.name": "legacy", "hoodie.datasource.write.recordkey.field": "id",
            "hoodie.datasource.write.precombine.field": "ts", "hoodie.datasource.write.partitionpath.field": "city",
            "hoodie.index.type": "BLOOM", "hoodie.datasource.write.table.type": "COPY_ON_WRITE",
            "path": str(path)}


def _write(spark, path, rows, operation: str) -> None:
    df = spark.createDataFrame(rows, "id string, name string, ts long, city string")
    df.write.format("hudi").options(**_options(path)).option("hoodie.datasource.write.operation", operation) \
        .mode("append").save(str(path))


def _base_files(path) -> list[str]:
    return sorted(str(p) for p in path.rglob("*.parquet") if ".hoodie" not in p.parts)


def _make_legacy(path) -> None:
    """Turn every footer into what this engine wrote before it followed Hudi's order: Hadoop order, unmarked."""
    storage = HoodieStorage.for_path(str(path))
    for f in _base_files(path):
        rewrite_footer_filter(storage, f, TailOrder.HADOOP, mark=False)


@pytest.fixture
def legacy_table(spark, tmp_path):
    path = tmp_path / "legacy"
    _write(spark, path, [(k, "v1", 1, "a" if i % 2 else "b") for i, k in enumerate(KEYS)], "insert")
    _make_legacy(path)
    return path


def test_new_footers_are_marked_and_hold_their_keys_in_hudi_order(spark, tmp_path):
    path = tmp_path / "fresh"
    _write(spark, path, [(k, "v1", 1, "a") for k in KEYS], "insert")
    for f in _base_files(path):
        meta = pq.read_metadata(f)
        assert meta.metadata[BLOOM_FILTER_TAIL_ORDER_KEY.encode()] == b"hudi"
        keys = pq.read_table(f, columns=[RECORD_KEY]).column(0)
        assert footer_bloom_filter(meta).might_contain_many(keys).all()


def test_legacy_footers_are_recognised_and_probed_as_built(legacy_table):
    """Partition b's min/max keys ('a中b', '中': 1 and 3 tail bytes) tell the order: its filter is used in Hadoop's
    order. Partition a's ('key-0', '😀': 1 and 0 tail bytes) hash alike in both orders: not used, keys checked."""
    files = _base_files(legacy_table)
    assert {PurePath(f).parent.name for f in files} == {"a", "b"}
    missed_by_java = 0
    for f in files:
        meta = pq.read_metadata(f)
        assert is_legacy_footer(meta) and footer_tail_order(meta) is TailOrder.HADOOP
        keys = pq.read_table(f, columns=[RECORD_KEY]).column(0)
        bloom = trusted_bloom_filter(meta, f)
        if PurePath(f).parent.name == "b":
            assert bloom is not None and bloom.tail_order is TailOrder.HADOOP
            assert bloom.might_contain_many(keys).all()  # still prunes, never misses
        else:
            assert bloom is None
        as_java = deserialize_bloom_filter(meta.metadata[b"hoodie_bloom_filter_type_code"],
                                           meta.metadata[b"org.apache.hudi.bloomfilter"])
        missed_by_java += int((~as_java.might_contain_many(keys)).sum())
    assert missed_by_java > 10  # what a Java writer would have treated as new keys


def test_unmarked_arrow_footer_in_hudi_order_is_told_by_its_own_keys(spark, tmp_path):
    """Another Arrow-based writer hashing as Hudi does, naming no order: used in Hudi's order where its min/max keys
    tell, never in Hadoop's."""
    path = tmp_path / "other-writer"
    _write(spark, path, [(k, "v1", 1, "a" if i % 2 else "b") for i, k in enumerate(KEYS)], "insert")
    storage = HoodieStorage.for_path(str(path))
    for f in _base_files(path):
        rewrite_footer_filter(storage, f, TailOrder.HUDI, mark=False)
        bloom = trusted_bloom_filter(pq.read_metadata(f), f)
        if PurePath(f).parent.name == "b":
            assert bloom.tail_order is TailOrder.HUDI
            assert bloom.might_contain_many(pq.read_table(f, columns=[RECORD_KEY]).column(0)).all()
        else:
            assert bloom is None


def test_upsert_into_a_legacy_table_finds_every_key(spark, legacy_table):
    updates = [(k, "v2", 2, "a" if i % 2 else "b") for i, k in enumerate(KEYS)]
    _write(spark, legacy_table, updates + [("brand-new", "v2", 2, "a")], "upsert")
    got = spark_rows(spark.read.format("hudi").load(str(legacy_table)), COLUMNS)
    expected = rows([dict(zip(COLUMNS, r)) for r in updates + [("brand-new", "v2", 2, "a")]], COLUMNS)
    assert got == expected
    assert arrow_rows(hudi_rs_read(str(legacy_table)), COLUMNS) == expected


def test_repair_rewrites_legacy_footers_with_rows_unchanged(spark, legacy_table):
    before = spark_rows(spark.read.format("hudi").load(str(legacy_table)), COLUMNS, drop_meta=False)
    planned = repair_bloom_filters(str(legacy_table), dry_run=True)
    assert len(planned) == len(_base_files(legacy_table)) and all(r.keys == -1 for r in planned)
    assert all(is_legacy_footer(pq.read_metadata(f)) for f in _base_files(legacy_table))  # dry run wrote nothing

    repaired = repair_bloom_filters(str(legacy_table))
    assert sum(r.keys for r in repaired) == len(KEYS)
    for f in _base_files(legacy_table):
        meta = pq.read_metadata(f)
        assert not is_legacy_footer(meta) and footer_tail_order(meta) is TailOrder.HUDI
        keys = pq.read_table(f, columns=[RECORD_KEY]).column(0)
        assert footer_bloom_filter(meta).might_contain_many(keys).all()
    assert legacy_footer_files(str(legacy_table)) == []
    assert repair_bloom_filters(str(legacy_table)) == []  # nothing left to do
    assert spark_rows(spark.read.format("hudi").load(str(legacy_table)), COLUMNS, drop_meta=False) == before
    assert arrow_rows(hudi_rs_read(str(legacy_table)), COLUMNS) == spark_rows(
        spark.read.format("hudi").load(str(legacy_table)), COLUMNS)


def test_rewrite_rebuilds_a_java_footer_bit_for_bit(fixture_table, tmp_path):
    """The rebuilt filter has the stored one's type and shape: a Java footer rewritten in Hudi's order is itself."""
    import shutil

    src = next(p for p in sorted(fixture_table("sample_cow_v6_nonpartitioned").rglob("*.parquet"))
               if ".hoodie" not in p.parts)
    copy = tmp_path / src.name
    shutil.copy(src, copy)
    rewrite_footer_filter(HoodieStorage.for_path(str(copy)), str(copy), TailOrder.HUDI)
    old, new = pq.read_metadata(src).metadata, pq.read_metadata(copy).metadata
    assert new[b"org.apache.hudi.bloomfilter"] == old[b"org.apache.hudi.bloomfilter"]
    assert pq.read_table(copy).equals(pq.read_table(src))


# Java-written tables with meta fields (their base files carry bloom footers), table versions 6, 8 and 9
JAVA_TABLES = ["sample_cow_v6_complexkeygen_hivestyle", "sample_cow_v6_nonpartitioned",
               "sample_cow_v6_simplekeygen_nonhivestyle_overwritetable", "sample_mor_parquet_v6_nonpartitioned",
               "sample_mor_parquet_v6_nonpartitioned_rollback", "trips_mor_avro_v6_trips_8i1u",
               "sample_cow_v8_nonpartitioned", "trips_mor_avro_v8_trips_8i3u1d",
               "sample_cow_v9_txns_simple_meta", "sample_mor_avro_v9_txns_simple_meta"]


@pytest.mark.parametrize("name", JAVA_TABLES)
def test_bloom_upsert_into_java_table_finds_every_existing_key(spark, fixtures_cache, tmp_path, name):
    from fixture_tables import copy_fixture
    from storage.table.meta_client import HoodieTableMetaClient
    from storage.table.fs_view import FileSystemView

    base = copy_fixture(name, fixtures_cache, tmp_path)
    meta = HoodieTableMetaClient.load(str(base))
    for f in FileSystemView(meta).latest_base_files():  # every footer trusted: the lookups use the filters
        assert trusted_bloom_filter(pq.read_metadata(f.path), f.path) is not None
    before = spark.read.format("hudi").load(str(base))
    stored = sorted(r[0] for r in before.select(RECORD_KEY).collect())
    data = before.drop(*[c for c in before.columns if c.startswith("_hoodie_")])
    data.write.format("hudi").option("hoodie.index.type", "BLOOM") \
        .option("hoodie.datasource.write.operation", "upsert").mode("append").save(str(base))
    after = sorted(r[0] for r in spark.read.format("hudi").load(str(base)).select(RECORD_KEY).collect())
    assert after == stored  # every key found: none inserted a second time
    assert sorted(hudi_rs_read(str(base)).column(RECORD_KEY).to_pylist()) == stored
