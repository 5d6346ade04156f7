"""BLOOM and GLOBAL_BLOOM indexes (seeds 003 and 004, Hudi's HoodieBloomIndex / HoodieGlobalBloomIndex).

1. The driver plans: the latest base files of the batch's partitions (global: of all partitions) with the
   record key range of each, read from their footers in a Spark job (`hoodie.bloom.index.prune.by.ranges`).
2. Each incoming key is paired with the files whose range holds it (`IndexFileFilter`, sorted search in the
   tasks that already hold the batch).
3. The pairs are shuffled to their file's task (`hoodie.bloom.index.parallelism` tasks, files spread evenly
   over them); for each of its files a task reads the footer bloom filter, drops the keys it rules out, and checks the
   remaining ones exactly against the file's record key column (`key_lookup.py`).
4. The matches are joined back onto the records.

A bloom filter needs Hudi's meta fields: a table written with `hoodie.populate.meta.fields=false` has no footers
and no stored record keys, so there the lookup is the simple index's join on keys computed from the data.

`hoodie.bloom.index.use.caching`: Hudi persists the input RDD with it, to compute its parallelism and
partitions without recomputing the batch; our write client persists the prepared batch itself, so here the
flag keeps the key ranges of base files (immutable, named by path) from one write to the next: the footer job
reads only files it has not seen.
"""
from __future__ import annotations

import logging
from collections import OrderedDict
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql.types import StructType

from storage.arrow_util import constant_array
from storage.index.hoodie_index import (
    LOC_FILE_ID,
    LOC_PARTITION,
    HoodieIndex,
    KeyColumns,
    attach_locations,
    untagged,
)
from storage.index.index_file_filter import BloomIndexFileInfo, IndexFileFilter
from storage.fs_utils import relative_partition_path
from storage.index.key_lookup import footer_key_range, keys_in_file
from storage.io.storage_options import StorageOptions
from storage.index.simple_index import HoodieSimpleIndex
from storage.meta_fields import PARTITION_PATH, RECORD_KEY
from storage.table.file_slice import HoodieBaseFile
from storage.write.spark_partitioning import placement_keys

log = logging.getLogger(__name__)

_TASK, _FILE = "_hoodie_bloom_task", "_hoodie_bloom_file"
_PAIRS_SCHEMA = f"{_TASK} int, {_FILE} int, {RECORD_KEY} string"
_PAIR_FIELDS = [pa.field(_TASK, pa.int32()), pa.field(_FILE, pa.int32()), pa.field(RECORD_KEY, pa.string())]
_MATCHES_SCHEMA = f"{RECORD_KEY} string, {LOC_PARTITION} string, {LOC_FILE_ID} string"
_RANGE_CACHE_SIZE = 100_000
_DRIVER_FOOTER_READS = 32  # up to this many uncached footers are read on the driver
_key_ranges: OrderedDict[tuple[str, int], tuple[str | None, str | None]] = OrderedDict()


@dataclass
class HoodieBloomIndex(HoodieIndex):
    prune_by_ranges: bool = True
    use_caching: bool = True
    parallelism: int = 0

    def tag_location(self, spark: SparkSession, records: DataFrame, base_files: list[HoodieBaseFile],
                     key_columns: KeyColumns, broadcast_incoming: bool = False,
                     read_schema: StructType | None = None) -> DataFrame:
        if not base_files:
            return untagged(records)
        if read_schema is None or RECORD_KEY not in read_schema.fieldNames():
            # no meta fields: no footers to prune with, the keys come from the data columns
            return HoodieSimpleIndex(self.is_global, self.update_partition_path, self.base_path,
                                     self.storage_options, self.cache).tag_location(
                spark, records, base_files, key_columns, broadcast_incoming, read_schema)
        files = self.file_infos(spark, base_files)
        return attach_locations(records, self.find_matches(spark, records, files), self.is_global,
                                broadcast_incoming, self.cache)

    def file_infos(self, spark: SparkSession, base_files: list[HoodieBaseFile]) -> list[BloomIndexFileInfo]:
        """The files to search, with their key ranges when range pruning is on."""
        partitions = partition_paths(base_files, self.base_path)
        ranges = self._key_ranges(spark, base_files) if self.prune_by_ranges else [(None, None)] * len(base_files)
        return [BloomIndexFileInfo(p, bf.file_id, bf.path, lo, hi)
                for bf, p, (lo, hi) in zip(base_files, partitions, ranges)]

    def find_matches(self, spark: SparkSession, records: DataFrame, files: list[BloomIndexFileInfo]) -> DataFrame:
        """(`RECORD_KEY`, `LOC_PARTITION`, `LOC_FILE_ID`) of every incoming key found in `files`."""
        tasks = self._lookup_tasks(spark, len(files))
        placement = np.array(placement_keys(tasks), dtype=np.int32)
        task_of_file = placement[np.arange(len(files)) % tasks]
        pairs = records.select(RECORD_KEY, PARTITION_PATH).mapInArrow(
            _pair_with_files(IndexFileFilter(files, self.is_global), task_of_file), _PAIRS_SCHEMA)
        # one task per lookup task number, each looking up all its files (no sort into per-file groups)
        return pairs.repartition(tasks, _TASK).mapInArrow(_lookup_in_files(files, self.storage_options),
                                                          _MATCHES_SCHEMA)

    def _lookup_tasks(self, spark: SparkSession, num_files: int) -> int:
        """`hoodie.bloom.index.parallelism`, or (0) one task per file up to the cluster's cores."""
        if self.parallelism > 0:
            return self.parallelism
        return max(1, min(num_files, spark.sparkContext.defaultParallelism))

    def _key_ranges(self, spark: SparkSession, base_files: list[HoodieBaseFile]) -> list[tuple[str | None, str | None]]:
        """Footer key range of each file, read in Spark tasks (those not cached from an earlier lookup)."""
        ids = [(bf.path, bf.size) for bf in base_files]
        cached = {i: _key_ranges[i] for i in ids if self.use_caching and i in _key_ranges}
        missing = [path for path, size in ids if (path, size) not in cached]
        if missing:
            read = _read_key_ranges(spark, missing, self.storage_options)
            fresh = dict(zip(missing, read))
            for path, size in ids:
                if path in fresh:
                    cached[(path, size)] = fresh[path]
                    if self.use_caching:
                        _remember(_key_ranges, (path, size), fresh[path])
        return [cached[i] for i in ids]


def _read_key_ranges(spark: SparkSession, paths: list[str], options: StorageOptions) -> list[tuple]:
    """Footer key ranges of `paths`: a few (typically the files of the last commit, the others being cached) are read
    by driver threads, footers only, which costs less than scheduling a Spark job; many in Spark tasks."""
    if len(paths) <= _DRIVER_FOOTER_READS:
        with ThreadPoolExecutor(max_workers=min(len(paths), 8)) as pool:
            return list(pool.map(lambda p: footer_key_range(p, options), paths))
    slices = max(1, min(len(paths), spark.sparkContext.defaultParallelism))
    return spark.sparkContext.parallelize(paths, slices).map(lambda p: footer_key_range(p, options)).collect()


def _remember(cache: OrderedDict, key, value) -> None:
    cache[key] = value
    cache.move_to_end(key)
    while len(cache) > _RANGE_CACHE_SIZE:
        cache.popitem(last=False)


def partition_paths(base_files: list[HoodieBaseFile], base_path: str) -> list[str]:
    """Partition path of each base file: its directory relative to the table's base path."""
    return [relative_partition_path(base_path, bf.path.rsplit("/", 1)[0]) for bf in base_files]


def _pair_with_files(file_filter: IndexFileFilter, task_of_file: np.ndarray):
    """mapInArrow: (record key, partition path) batches -> (lookup task, file, record key) candidate pairs."""
    def pair(batches):
        for batch in batches:
            files, keys = file_filter.candidate_pairs(batch.column(0), batch.column(1))
            if files.size:
                yield pa.RecordBatch.from_arrays(
                    [pa.array(task_of_file[files]), pa.array(files.astype(np.int32)), batch.column(0).take(keys)],
                    names=[_TASK, _FILE, RECORD_KEY])
    return pair


def _lookup_in_files(files: list[BloomIndexFileInfo], options: StorageOptions):
    """mapInArrow: the candidate pairs of one lookup task -> the keys each of its files holds, with the file's
    location."""
    def lookup(batches):
        pairs = pa.Table.from_batches(list(batches), schema=pa.schema(_PAIR_FIELDS))
        pairs = pairs.take(pc.sort_indices(pairs.column(_FILE)))  # one sort, then each file's pairs are a slice
        file_of_pair = pairs.column(_FILE).to_numpy()
        starts = np.flatnonzero(np.diff(file_of_pair, prepend=-1))
        for start, end in zip(starts, [*starts[1:], len(file_of_pair)]):
            info = files[int(file_of_pair[start])]
            candidates = pairs.column(RECORD_KEY).slice(start, end - start).combine_chunks()
            found = keys_in_file(info.path, candidates, options)
            n = len(found)
            yield pa.RecordBatch.from_arrays(
                [found.cast(pa.string()), constant_array(info.partition_path, n, pa.string()),
                 constant_array(info.file_id, n, pa.string())], names=[RECORD_KEY, LOC_PARTITION, LOC_FILE_ID])
    return lookup
