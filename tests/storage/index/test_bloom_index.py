"""BLOOM / GLOBAL_BLOOM: the same locations as SIMPLE / GLOBAL_SIMPLE on the same tables (randomized batches of
updates, inserts and deletes, COW and MOR, keys moving partition under the global variants); range pruning and
bloom checks prune files; untrustworthy Java footers cost a read, never a lost update."""
from __future__ import annotations

import random

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from pyspark.sql import functions as F
from pyspark.sql.types import StringType, StructField, StructType

from hudi_oracle import apply_batch, rows, spark_rows
from storage.config import HoodieConfig, WriteConfigKeys as WK
from storage.exception import HoodieIndexError
from storage.index import LOC_FILE_ID, LOC_PARTITION, create_index
from storage.index import bloom_index
from storage.index.bloom_index import HoodieBloomIndex, partition_paths
from storage.index.index_file_filter import IndexFileFilter
from storage.index.key_lookup import bloom_candidates, keys_in_file, trusted_bloom_filter
from storage.index.simple_index import HoodieSimpleIndex
from storage.meta_fields import PARTITION_PATH, RECORD_KEY
from storage.table.fs_view import FileSystemView
from storage.table.meta_client import HoodieTableMetaClient

SCHEMA = "id string, name string, ts long, dt string"
COLS = ["id", "name", "ts", "dt"]
PARTITIONS = ["p0", "p1", "p2"]
READ_SCHEMA = StructType([StructField(RECORD_KEY, StringType()), StructField(PARTITION_PATH, StringType())])


def _key_columns(df):
    return F.col(RECORD_KEY), F.col(PARTITION_PATH)


def _opts(table_type: str, index_type: str, **extra) -> dict:
    opts = {"hoodie.table.name": "t", "hoodie.datasource.write.table.type": table_type,
            "hoodie.datasource.write.recordkey.field": "id", "hoodie.datasource.write.precombine.field": "ts",
            "hoodie.datasource.write.partitionpath.field": "dt", "hoodie.index.type": index_type,
            "hoodie.parquet.small.file.limit": "0"}  # every batch's inserts start new files: many files per partition
    opts.update(extra)
    return opts


def _write(spark, path: str, batch: list[tuple], opts: dict, operation: str) -> None:
    spark.createDataFrame(batch, SCHEMA).write.format("hudi").options(**opts) \
        .option("hoodie.datasource.write.operation", operation).mode("append").save(path)


def _records(spark, batch: list[tuple]):
    return spark.createDataFrame(batch, SCHEMA).withColumn(RECORD_KEY, F.col("id")).withColumn(PARTITION_PATH, F.col("dt"))


def _tags(spark, index, path: str, batch: list[tuple], broadcast: bool) -> list[tuple]:
    """What the write client's lookup does: the latest base files of the batch's partitions (global: all)."""
    fs_view = FileSystemView(HoodieTableMetaClient.load(path))
    partitions = sorted({r[3] for r in batch})
    base_files = fs_view.latest_base_files(None if index.is_global else partitions)
    tagged = index.tag_location(spark, _records(spark, batch), base_files, _key_columns, broadcast, READ_SCHEMA)
    return sorted(tuple(r) for r in tagged.select(RECORD_KEY, PARTITION_PATH, LOC_PARTITION, LOC_FILE_ID).collect())


def _new_key(rnd: random.Random, serial: int) -> str:
    # ordered keys (range pruning bites) mixed with random ones (ranges overlap: the bloom filters do the work)
    return f"k{serial:05d}" if rnd.random() < 0.6 else f"r{rnd.getrandbits(40):010x}"


def _next_batch(rnd: random.Random, state: dict, deleted: set, serial: int, ts: int, moving: bool):
    """(upsert batch, delete batch, next serial): updates (moving partition when `moving`), inserts, deletes."""
    live = sorted(state)
    updates = rnd.sample(live, min(len(live), rnd.randint(5, 25)))
    dels = set(rnd.sample([k for k in live if k not in updates], min(len(live) - len(updates), rnd.randint(0, 6))))
    batch = []
    for key in updates:
        partition = rnd.choice(PARTITIONS) if moving and rnd.random() < 0.4 else state[key][3]
        batch.append((key, f"u{ts}", ts, partition))
    for _ in range(rnd.randint(5, 30)):
        serial += 1
        key = _new_key(rnd, serial)
        if key not in state and key not in deleted:
            batch.append((key, f"i{ts}", ts, rnd.choice(PARTITIONS)))
    deletes = [(key, None, ts, state[key][3]) for key in sorted(dels)]
    return batch, deletes, serial


@pytest.mark.parametrize("table_type,is_global", [("COPY_ON_WRITE", False), ("MERGE_ON_READ", False),
                                                  ("COPY_ON_WRITE", True), ("MERGE_ON_READ", True)])
def test_bloom_finds_what_simple_finds(spark, tmp_path, table_type, is_global):
    rnd = random.Random(f"{table_type}{is_global}")
    path = str(tmp_path / "t")
    prefix = "GLOBAL_" if is_global else ""
    opts = _opts(table_type, f"{prefix}BLOOM")
    bloom = create_index(f"{prefix}BLOOM", config=HoodieConfig.of(opts), base_path=path)
    simple = create_index(f"{prefix}SIMPLE", True, base_path=path)
    assert isinstance(bloom, HoodieBloomIndex) and bloom.is_global == is_global
    state: dict = {}
    deleted: set = set()
    serial = 0
    first = []
    for _ in range(30):
        serial += 1
        first.append((_new_key(rnd, serial), "n", 1, rnd.choice(PARTITIONS)))
    _write(spark, path, first, opts, "insert")
    apply_batch(state, first, ordering=2)
    for step in range(2):  # both broadcast modes of the tagging join
        ts = step + 2
        batch, deletes, serial = _next_batch(rnd, state, deleted, serial, ts, moving=is_global)
        expected = _tags(spark, simple, path, batch, broadcast=True)
        assert sum(1 for t in expected if t[3] is not None) >= 5  # the batch does hit stored keys
        assert _tags(spark, bloom, path, batch, broadcast=step % 2 == 0) == expected
        _write(spark, path, batch, opts, "upsert")
        for row in batch:  # a global index moves a key; per partition, keys here never change partition
            state[row[0]] = row
        if deletes:
            _write(spark, path, deletes, opts, "delete")
            apply_batch(state, deletes, delete=True, ordering=2)
            deleted.update(d[0] for d in deletes)
    if table_type == "MERGE_ON_READ" and is_global:
        # not checked: a key moved out of a MOR file group is deleted in its log but stays in its base file, where
        # every index that reads base files (GLOBAL_SIMPLE too) finds it again on the next update
        return
    want = rows([dict(zip(COLS, r)) for r in state.values()], COLS)
    assert spark_rows(spark.read.format("hudi").load(path), COLS) == want


def _table_of_ordered_files(spark, path: str, files: int, per_file: int) -> None:
    """One partition, one base file per insert batch; file i holds the even keys of range i (odd keys absent)."""
    opts = _opts("COPY_ON_WRITE", "BLOOM")
    for i in range(files):
        batch = [(f"k{i * per_file * 2 + 2 * j:06d}", "n", 1, "p0") for j in range(per_file)]
        _write(spark, path, batch, opts, "insert")


def test_range_pruning_and_bloom_checks_prune_files(spark, tmp_path):
    path = str(tmp_path / "t")
    _table_of_ordered_files(spark, path, files=5, per_file=50)
    base_files = FileSystemView(HoodieTableMetaClient.load(path)).latest_base_files(["p0"])
    assert len(base_files) == 5
    index = HoodieBloomIndex(base_path=path)
    infos = index.file_infos(spark, base_files)
    assert all(info.has_key_range for info in infos)
    target = next(i for i, info in enumerate(infos) if info.min_record_key == "k000200")  # keys k000200..k000298
    # keys of that file's range, half stored (even), half absent (odd), and keys beyond every range
    inside = [f"k{200 + j:06d}" for j in range(99)]
    probe = inside + [f"z{j}" for j in range(20)]
    keys, parts = pa.array(probe), pa.array(["p0"] * len(probe))
    pruned_files, pruned_keys = IndexFileFilter(infos, False).candidate_pairs(keys, parts)
    unpruned_files, _ = IndexFileFilter(HoodieBloomIndex(prune_by_ranges=False, base_path=path).file_infos(spark, base_files),
                                        False).candidate_pairs(keys, parts)
    assert len(set(unpruned_files.tolist())) == 5 and unpruned_files.size == 5 * len(probe)
    assert set(pruned_files.tolist()) == {target} and pruned_keys.size == len(inside)
    # bloom filters: every file rules out all the absent (odd) keys; the target keeps exactly its stored ones
    odd = pa.array([f"k{2 * j + 1:06d}" for j in range(250)])
    assert all(len(bloom_candidates(pq.ParquetFile(i.path), i.path, odd)) == 0 for i in infos)
    info = infos[target]
    survivors = bloom_candidates(pq.ParquetFile(info.path), info.path, keys.take(pa.array(pruned_keys)))
    stored = [f"k{200 + j:06d}" for j in range(0, 99, 2)]
    assert sorted(survivors.to_pylist()) == stored
    # and the lookup returns exactly the stored half, located in that file
    found = HoodieBloomIndex().find_matches(spark, _records(spark, [(k, "x", 9, "p0") for k in probe]), infos)
    assert sorted(tuple(r) for r in found.collect()) == [(k, "p0", info.file_id) for k in stored]


@pytest.mark.parametrize("in_spark", [True, False])
def test_key_ranges_are_cached_between_lookups(spark, tmp_path, monkeypatch, in_spark):
    # many uncached footers are read by a Spark job; a few (the last commit's files) by the driver, with no job
    if in_spark:
        monkeypatch.setattr(bloom_index, "_DRIVER_FOOTER_READS", 0)
    path = str(tmp_path / "t")
    _table_of_ordered_files(spark, path, files=2, per_file=5)
    base_files = FileSystemView(HoodieTableMetaClient.load(path)).latest_base_files(["p0"])
    jobs = spark.sparkContext.statusTracker()
    group = f"bloom-range-cache-{in_spark}"
    spark.sparkContext.setJobGroup(group, "range cache")
    try:
        HoodieBloomIndex(use_caching=True, base_path=path).file_infos(spark, base_files)
        first = len(jobs.getJobIdsForGroup(group))
        assert first == (1 if in_spark else 0)
        cached = HoodieBloomIndex(use_caching=True, base_path=path).file_infos(spark, base_files)
        assert len(jobs.getJobIdsForGroup(group)) == first  # second lookup: no footer job
        uncached = HoodieBloomIndex(use_caching=False, base_path=path).file_infos(spark, base_files)
        assert len(jobs.getJobIdsForGroup(group)) == first + (1 if in_spark else 0)
    finally:
        spark.sparkContext.setLocalProperty("spark.jobGroup.id", None)
    assert cached == uncached
    assert sorted(i.min_record_key for i in cached) == ["k000000", "k000010"]


def test_java_footers_are_trusted_and_prune(fixture_table):
    """Every Java-written footer is trusted (Hudi's hash order) and rules out a key its file does not hold."""
    base = fixture_table("sample_cow_v6_complexkeygen_hivestyle")
    files = sorted(base.rglob("*.parquet"))
    for f in files:
        parquet = pq.ParquetFile(f)
        assert trusted_bloom_filter(parquet.metadata, str(f)) is not None
        stored = parquet.read(columns=[RECORD_KEY]).column(0).to_pylist()
        probes = pa.array(stored + ["id:9,name:Zed", "id:99,name:Nobody"])
        assert bloom_candidates(parquet, str(f), probes).to_pylist() == stored
        assert keys_in_file(str(f), probes).to_pylist() == sorted(set(stored), key=stored.index)


def test_java_fixture_tags_equal_simple(spark, fixture_table):
    base = str(fixture_table("sample_cow_v6_complexkeygen_hivestyle"))
    stored = spark.read.format("hudi").load(base).select(RECORD_KEY, PARTITION_PATH).collect()
    batch = [(k, "x", 9, p) for k, p in stored] + [("id:7,name:New", "x", 9, "byteField=10/shortField=300")]
    for prefix in ("", "GLOBAL_"):
        bloom = create_index(f"{prefix}BLOOM", True, base_path=base)
        simple = create_index(f"{prefix}SIMPLE", True, base_path=base)
        expected = _tags(spark, simple, base, batch, broadcast=True)
        assert sum(1 for t in expected if t[3] is not None) == len(stored)
        assert _tags(spark, bloom, base, batch, broadcast=False) == expected


def test_partition_paths_are_relative_to_the_table(fixture_table):
    base = fixture_table("sample_cow_v6_complexkeygen_hivestyle")
    base_files = FileSystemView(HoodieTableMetaClient.load(str(base))).latest_base_files()
    assert sorted(set(partition_paths(base_files, str(base)))) == ["byteField=10/shortField=300", "byteField=20/shortField=100",
                                                        "byteField=30/shortField=100"]


def test_factory_and_defaults():
    assert HoodieConfig().get(WK.INDEX_TYPE) == "BLOOM"
    config = HoodieConfig.of({"hoodie.bloom.index.prune.by.ranges": "false", "hoodie.bloom.index.parallelism": "7",
                              "hoodie.bloom.index.use.caching": "false",
                              "hoodie.bloom.index.update.partition.path": "false"})
    index = create_index("global_bloom", config=config)
    assert isinstance(index, HoodieBloomIndex)
    assert (index.is_global, index.prune_by_ranges, index.parallelism, index.use_caching,
            index.update_partition_path) == (True, False, 7, False, False)
    assert create_index("BLOOM", True) == HoodieBloomIndex()
    assert isinstance(create_index("SIMPLE", True), HoodieSimpleIndex)
    with pytest.raises(HoodieIndexError, match="hoodie.index.type"):
        create_index("HBASE", True)


def test_broadcast_lookup_caches_its_matches_until_released(spark, tmp_path):
    """A broadcast lookup caches only its matches (the write then caches no tagged rows); the write's cache
    releases them, and a write leaves nothing cached behind."""
    from storage.index.hoodie_index import FrameCache

    path = str(tmp_path / "t")
    opts = _opts("COPY_ON_WRITE", "BLOOM")
    _write(spark, path, [("a", "x", 1, "p0"), ("b", "y", 1, "p1")], opts, "upsert")
    cache_manager = spark._jsparkSession.sharedState().cacheManager()
    was_empty = cache_manager.isEmpty()
    cache = FrameCache()
    index = HoodieBloomIndex(base_path=path, cache=cache)
    assert _tags(spark, index, path, [("a", "z", 2, "p0"), ("c", "z", 2, "p2")], True)[0][3] is not None
    assert cache.holds_lookup and not cache_manager.isEmpty()
    cache.release()
    assert not cache.holds_lookup and cache_manager.isEmpty() == was_empty
    _write(spark, path, [("a", "z", 2, "p0"), ("c", "z", 2, "p2")], opts, "upsert")
    assert cache_manager.isEmpty() == was_empty
    assert sorted((r.id, r.name) for r in spark.read.format("hudi").load(path).collect()) == \
        [("a", "z"), ("b", "y"), ("c", "z")]
