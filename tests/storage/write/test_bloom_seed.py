"""A copy-on-write merge starts the rewritten file's bloom filter from the old file's (storage.write.handle.bloom_seed):
the result holds the same keys as a filter built afresh and, while the keys fit the filter's rows, is the same
bytes; after deletes it holds their keys too, up to a bound; Java-written files and other filter settings build
afresh."""
from __future__ import annotations

import dataclasses
import glob
import os
from types import SimpleNamespace

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hudi_oracle import arrow_rows, hudi_rs_read, rows

from storage.bloom import (
    BLOOM_FILTER_FOOTER_KEY,
    BLOOM_FILTER_TYPE_CODE_KEY,
    BloomFilterSettings,
    continued_bloom_filter,
    create_bloom_filter,
    deserialize_bloom_filter,
)
from storage.io.base_file_writer import BloomSeed, KeyFooter, footer_metadata
from storage.write.handle import bloom_seed

SCHEMA = "id string, name string, ts long, dt string"
COLS = ["id", "name", "ts", "dt"]


def _keys(lo: int, hi: int) -> pa.Array:
    return pa.array([f"key{i:06d}" for i in range(lo, hi)])


@pytest.mark.parametrize("filter_type", ["SIMPLE", "DYNAMIC_V0"])
def test_a_seeded_footer_equals_a_fresh_one(filter_type):
    options = BloomFilterSettings(filter_type, 500, 1e-6, 2000)
    old = _keys(0, 300)
    stored = deserialize_bloom_filter(filter_type, footer_metadata(old, options)[BLOOM_FILTER_FOOTER_KEY.encode()])
    kept = old.filter(pa.array([i % 10 != 0 for i in range(300)]))  # 30 records updated
    incoming = pa.concat_arrays([old.filter(pa.array([i % 10 == 0 for i in range(300)])), _keys(300, 350)])
    written = pa.concat_arrays([kept, incoming])  # the merged file: kept rows first, then the incoming ones
    seeded = KeyFooter(options, BloomSeed(options.continued(stored), len(kept))).add(written)
    assert seeded.metadata() == footer_metadata(written, options)


def test_a_seeded_dynamic_filter_grows_rows_as_a_fresh_one():
    options = BloomFilterSettings("DYNAMIC_V0", 100, 1e-6, 1000)
    footer = footer_metadata(_keys(0, 150), options)
    stored = deserialize_bloom_filter("DYNAMIC_V0", footer[BLOOM_FILTER_FOOTER_KEY.encode()])
    assert stored.max_entries == 0  # not serialized: as read back, further keys would only fill existing rows
    seeded = KeyFooter(options, BloomSeed(options.continued(stored), 150)).add(_keys(0, 420))
    assert seeded.metadata() == footer_metadata(_keys(0, 420), options)
    grown = deserialize_bloom_filter("DYNAMIC_V0", seeded.metadata()[BLOOM_FILTER_FOOTER_KEY.encode()])
    assert grown.num_rows == 5 and grown.might_contain_many(_keys(0, 420)).all()


def test_other_settings_are_not_continued():
    stored = create_bloom_filter("DYNAMIC_V0", 500, 1e-6, 2000)
    assert continued_bloom_filter(stored, "SIMPLE", 500, 1e-6, 2000) is None
    assert continued_bloom_filter(stored, "DYNAMIC_V0", 600, 1e-6, 2000) is None
    assert continued_bloom_filter(stored, "DYNAMIC_V0", 500, 1e-9, 2000) is None
    assert continued_bloom_filter(stored, "DYNAMIC_V0", 500, 1e-6, 2000) is stored


def _counts(updates=0, deletes=0):
    return {"inserts": 0, "updates": updates, "deletes": deletes}


@pytest.mark.parametrize("filter_type", ["SIMPLE", "DYNAMIC_V0"])
def test_only_this_engines_files_seed_and_deletes_up_to_a_bound(tmp_path, filter_type):
    options = BloomFilterSettings(filter_type, 500, 1e-6, 2000)
    keys = _keys(0, 100)
    path = str(tmp_path / "f.parquet")
    pq.write_table(pa.table({"_hoodie_record_key": keys}).replace_schema_metadata(footer_metadata(keys, options)), path)
    base = pq.ParquetFile(path)
    ctx = SimpleNamespace(populate_meta_fields=True, bloom_settings=options)
    kept = pa.table({"_hoodie_record_key": keys.slice(20)})
    seed = bloom_seed(base, path, kept, _counts(updates=20), ctx)
    assert seed is not None and seed.rows == 80 and seed.bloom.might_contain_many(keys).all()
    # deleted keys stay in a continued filter: up to a tenth of the file's live keys, then it is built afresh
    assert bloom_seed(base, path, kept, _counts(updates=15, deletes=5), ctx) is not None
    assert bloom_seed(base, path, kept, _counts(deletes=20), ctx) is None
    assert bloom_seed(base, path, None, _counts(), ctx) is None
    java = SimpleNamespace(metadata=SimpleNamespace(created_by="parquet-mr version 1.12.3 (build ...)",
                                                   metadata=base.metadata.metadata))
    assert bloom_seed(java, path, kept, _counts(updates=20), ctx) is None
    assert bloom_seed(base, path, kept, _counts(updates=20), SimpleNamespace(
        populate_meta_fields=True, bloom_settings=dataclasses.replace(options, num_entries=100))) is None


@pytest.mark.parametrize("count", [10, 400, 3000])
def test_a_simple_filter_estimates_the_keys_it_holds(count):
    bloom = create_bloom_filter("SIMPLE", 2000, 1e-6, 0)
    bloom.add_keys(_keys(0, count))
    assert abs(bloom.keys_held() - count) <= max(2, count // 50)
    dynamic = create_bloom_filter("DYNAMIC_V0", 500, 1e-6, 2000)
    dynamic.add_keys(_keys(0, count))
    assert dynamic.keys_held() == count


def test_a_file_rewritten_after_deletes_keeps_finding_its_keys(spark, tmp_path):
    """Deletes continue the file's filter (the deleted keys stay in it): every key of the file is still found, and a
    deleted key written again is a new record (found nowhere), not a second copy."""
    path = str(tmp_path / "d")
    opts = {"hoodie.table.name": "s", "hoodie.datasource.write.recordkey.field": "id",
            "hoodie.datasource.write.precombine.field": "ts", "hoodie.datasource.write.partitionpath.field": "dt"}
    base = [(f"k{i:04d}", "v0", 1, "p0") for i in range(200)]
    spark.createDataFrame(base, SCHEMA).write.format("hudi").options(**opts).mode("append").save(path)
    gone = [r for r in base if int(r[0][1:]) % 20 == 0]
    spark.createDataFrame(gone, SCHEMA).write.format("hudi").options(**opts) \
        .option("hoodie.datasource.write.operation", "delete").mode("append").save(path)
    [latest] = sorted(glob.glob(f"{path}/p0/*.parquet"), key=lambda p: os.path.basename(p).rsplit("_", 1)[1])[-1:]
    stored = deserialize_bloom_filter("DYNAMIC_V0", pq.read_metadata(latest).metadata[BLOOM_FILTER_FOOTER_KEY.encode()])
    keys = pq.read_table(latest, columns=["_hoodie_record_key"]).column(0)
    assert len(keys) == 190 and stored.might_contain_many(keys).all()
    assert stored.keys_held() == 200  # continued: the deleted keys stay
    back = [(k, "v1", 2, "p0") for k, *_ in gone[:5]]
    spark.createDataFrame(back, SCHEMA).write.format("hudi").options(**opts).mode("append").save(path)
    state = {r[0]: r for r in base if r not in gone} | {r[0]: r for r in back}
    assert arrow_rows(hudi_rs_read(path), COLS) == rows([dict(zip(COLS, r)) for r in state.values()], COLS)


def test_rewritten_files_carry_the_footer_of_all_their_keys(spark, tmp_path):
    filter_type = "DYNAMIC_V0"  # Hudi's default; SIMPLE continues the same way (test_a_seeded_footer_equals_a_fresh_one)
    path = str(tmp_path / filter_type)
    opts = {"hoodie.table.name": "s", "hoodie.datasource.write.recordkey.field": "id",
            "hoodie.datasource.write.precombine.field": "ts", "hoodie.datasource.write.partitionpath.field": "dt",
            "hoodie.bloom.index.filter.type": filter_type}
    state = {}
    for n, (lo, hi) in enumerate([(0, 200), (150, 260), (0, 40), (250, 300)]):
        batch = [(f"k{i:04d}", f"v{n}", n, f"p{i % 2}") for i in range(lo, hi)]
        spark.createDataFrame(batch, SCHEMA).write.format("hudi").options(**opts).mode("append").save(path)
        state.update({r[0]: r for r in batch})
    latest = {}
    for f in glob.glob(f"{path}/*/*.parquet"):
        file_id = os.path.basename(f).split("_")[0]
        latest[file_id] = max(latest.get(file_id, f), f, key=lambda p: os.path.basename(p).rsplit("_", 1)[1])
    for f in latest.values():
        keys = pq.read_table(f, columns=["_hoodie_record_key"]).column(0).combine_chunks()
        footer = pq.read_metadata(f).metadata
        fresh = footer_metadata(keys, BloomFilterSettings(filter_type, 60000, 1e-9, 100000))
        assert footer[BLOOM_FILTER_FOOTER_KEY.encode()] == fresh[BLOOM_FILTER_FOOTER_KEY.encode()]
        assert footer[BLOOM_FILTER_TYPE_CODE_KEY.encode()] == fresh[BLOOM_FILTER_TYPE_CODE_KEY.encode()]
    assert arrow_rows(hudi_rs_read(path), COLS) == rows([dict(zip(COLS, r)) for r in state.values()], COLS)
