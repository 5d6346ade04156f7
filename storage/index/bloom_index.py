"""BLOOM and GLOBAL_BLOOM indexes (Hudi's HoodieBloomIndex / HoodieGlobalBloomIndex).

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

`hoodie.bloom.index.use.metadata` (with the metadata table's `bloom_filters` partition,
storage/metadata/bloom_filters.py): the key ranges come from `column_stats` of `_hoodie_record_key` and the
filters from `bloom_filters`, both read on the driver from a few MDT files; a lookup task then opens only the
files whose filter keeps a candidate key. Files the MDT has no record for are read from their footers as before.
"""
from __future__ import annotations

import logging
from collections import OrderedDict
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import StructType

from storage.arrow_util import constant_array
from storage.index.hoodie_index import (
    LOC_FILE_ID,
    LOC_PARTITION,
    LOOKUP_COUNT,
    LOOKUP_NULLS,
    BatchCounting,
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
from storage.metadata.bloom_filters import BLOOM_FILTERS, bloom_filter_of
from storage.metadata.records import BloomFilterInfo
from storage.metadata.table_metadata import COLUMN_STATS, HoodieTableMetadata
from storage.table.file_slice import HoodieBaseFile
from storage.engine.spark_partitioning import placement_keys

log = logging.getLogger(__name__)

_TASK, _FILE = "_hoodie_bloom_task", "_hoodie_bloom_file"
_PAIRS_SCHEMA = f"{_TASK} int, {_FILE} int, {RECORD_KEY} string"
_PAIR_FIELDS = [pa.field(_TASK, pa.int32()), pa.field(_FILE, pa.int32()), pa.field(RECORD_KEY, pa.string())]
_MATCHES_SCHEMA = f"{RECORD_KEY} string, {LOC_PARTITION} string, {LOC_FILE_ID} string"
_COUNT_FIELDS = [pa.field(LOOKUP_COUNT, pa.int64()), pa.field(LOOKUP_NULLS, pa.int64())]
_COUNTS_DDL = f", {LOOKUP_COUNT} long, {LOOKUP_NULLS} long"
_COUNT_FILE = -1  # the file number of a pair row that carries a task's batch counts
_RANGE_CACHE_SIZE = 100_000
_DRIVER_FOOTER_READS = 32  # up to this many uncached footers are read on the driver
_key_ranges: OrderedDict[tuple[str, int], tuple[str | None, str | None]] = OrderedDict()
METADATA_BLOOMS_USED = [0]  # filters taken from the metadata table by lookups of this process (observability)


def _bloom_metadata(fs_view) -> HoodieTableMetadata | None:
    """The metadata table the view lists through, when it has bloom_filters (else None: footers are read)."""
    metadata = getattr(fs_view, "metadata", None)
    if metadata is None or BLOOM_FILTERS not in metadata.enabled_partitions:
        return None
    return metadata


@dataclass
class HoodieBloomIndex(HoodieIndex):
    prune_by_ranges: bool = True
    use_caching: bool = True
    parallelism: int = 0
    use_metadata: bool = False
    _metadata: HoodieTableMetadata | None = field(default=None, repr=False)  # the view's MDT, during one lookup

    def tag_location_in_view(self, spark: SparkSession, records: DataFrame, fs_view, partitions: list[str],
                             key_columns: KeyColumns, broadcast_incoming: bool = False,
                             read_schema: StructType | None = None) -> DataFrame:
        self._metadata = _bloom_metadata(fs_view) if self.use_metadata else None
        try:
            return super().tag_location_in_view(spark, records, fs_view, partitions, key_columns,
                                                broadcast_incoming, read_schema)
        finally:
            self._metadata = None

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
        # counts reach the write only through the cached matches, which a broadcast lookup caches
        counting = self.counting if broadcast_incoming and self.cache is not None else None
        blooms = self._metadata_blooms(files)
        return attach_locations(records, self.find_matches(spark, records, files, counting, blooms), self.is_global,
                                broadcast_incoming, self.cache)

    def file_infos(self, spark: SparkSession, base_files: list[HoodieBaseFile]) -> list[BloomIndexFileInfo]:
        """The files to search, with their key ranges when range pruning is on."""
        partitions = partition_paths(base_files, self.base_path)
        if not self.prune_by_ranges:
            ranges = [(None, None)] * len(base_files)
        else:
            known = self._metadata_ranges(base_files, partitions)
            missing = [bf for bf in base_files if bf.path not in known]
            known.update(zip([bf.path for bf in missing], self._key_ranges(spark, missing) if missing else []))
            ranges = [known[bf.path] for bf in base_files]
        return [BloomIndexFileInfo(p, bf.file_id, bf.path, lo, hi)
                for bf, p, (lo, hi) in zip(base_files, partitions, ranges)]

    def _metadata_ranges(self, base_files: list[HoodieBaseFile],
                         partitions: list[str]) -> dict[str, tuple[str | None, str | None]]:
        """Path -> record key range of the files column_stats covers (none without the metadata table)."""
        metadata = self._metadata
        if metadata is None or COLUMN_STATS not in metadata.enabled_partitions:
            return {}
        wanted: dict[str, dict[str, str]] = {}
        for bf, p in zip(base_files, partitions):
            wanted.setdefault(p, {})[bf.name] = bf.path
        out = {}
        for p, names in wanted.items():
            for stats in metadata.column_stats(partition_path=p, columns=[RECORD_KEY]):
                path = names.get(stats.file_name or "")
                low = stats.min_value.to_python() if stats.min_value is not None else None
                high = stats.max_value.to_python() if stats.max_value is not None else None
                if path is not None and isinstance(low, str) and isinstance(high, str):
                    out[path] = (low, high)
        return out

    def _metadata_blooms(self, files: list[BloomIndexFileInfo]) -> list[tuple[str, bytes] | None]:
        """Per file, (type, serialized filter) from the metadata table's bloom_filters partition, or None."""
        metadata = self._metadata
        if metadata is None or BLOOM_FILTERS not in metadata.enabled_partitions:
            return [None] * len(files)
        wanted: dict[str, list[str]] = {}
        for info in files:
            wanted.setdefault(info.partition_path, []).append(info.path.rsplit("/", 1)[-1])
        found = {(p, name): record for p, names in wanted.items()
                 for name, record in metadata.bloom_filters(p, names).items()}
        out = [found.get((info.partition_path, info.path.rsplit("/", 1)[-1])) for info in files]
        log.debug("bloom lookup: %d of %d filters from the metadata table", sum(r is not None for r in out),
                  len(files))
        METADATA_BLOOMS_USED[0] += sum(r is not None for r in out)
        return [(r.type, r.bloom_filter) if r is not None else None for r in out]

    def find_matches(self, spark: SparkSession, records: DataFrame, files: list[BloomIndexFileInfo],
                     counting: BatchCounting | None = None,
                     blooms: list[tuple[str, bytes] | None] | None = None) -> DataFrame:
        """(`RECORD_KEY`, `LOC_PARTITION`, `LOC_FILE_ID`) of every incoming key found in `files`; with `counting`,
        plus the batch's counts (`BatchCounting`): the pairing step counts the records it pairs, each lookup task
        the keys it finds per file."""
        tasks = self._lookup_tasks(spark, len(files))
        placement = np.array(placement_keys(tasks), dtype=np.int32)
        task_of_file = placement[np.arange(len(files)) % tasks]
        columns = [RECORD_KEY, PARTITION_PATH] + ([F.col(f"`{counting.ordering}`")] if counting and counting.ordering
                                                  else [])
        counted = "" if counting is None else _COUNTS_DDL
        pairs = records.select(*columns).mapInArrow(
            _pair_with_files(IndexFileFilter(files, self.is_global), task_of_file, counting),
            _PAIRS_SCHEMA + counted)
        # one task per lookup task number, each looking up all its files (no sort into per-file groups)
        return pairs.repartition(tasks, _TASK).mapInArrow(
            _lookup_in_files(files, self.storage_options, counting is not None, blooms), _MATCHES_SCHEMA + counted)

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


def _pair_with_files(file_filter: IndexFileFilter, task_of_file: np.ndarray, counting: BatchCounting | None):
    """mapInArrow: (record key, partition path[, ordering value]) batches -> (lookup task, file, record key)
    candidate pairs (with the count columns when `counting`); when `counting.records`, then one row per partition
    path of the task's records, their count and null ordering values (file `_COUNT_FILE`, the path in the key
    column), sent to the first lookup task."""
    tally = counting is not None and counting.records
    counted = counting is not None

    def pair(batches):
        tallies = []
        for batch in batches:
            files, keys = file_filter.candidate_pairs(batch.column(0), batch.column(1))
            if files.size:
                arrays = [pa.array(task_of_file[files]), pa.array(files.astype(np.int32)), batch.column(0).take(keys)]
                if counted:
                    arrays += [pa.nulls(files.size, pa.int64()), pa.nulls(files.size, pa.int64())]
                yield pa.RecordBatch.from_arrays(arrays, schema=_pair_schema(counted))
            if tally:
                tallies.append(_tally(batch))
        if tallies:
            counts = _sum_by_path(pa.concat_tables(tallies))
            n = counts.num_rows
            yield pa.RecordBatch.from_arrays(
                [pa.array(np.full(n, task_of_file[0], np.int32)), pa.array(np.full(n, _COUNT_FILE, np.int32)),
                 *(column.combine_chunks() for column in counts.columns)], schema=_pair_schema(True))
    return pair


def _pair_schema(counting: bool) -> pa.Schema:
    return pa.schema(_PAIR_FIELDS + (_COUNT_FIELDS if counting else []))


def _tally(batch: pa.RecordBatch) -> pa.Table:
    """(path, records, null ordering values) per partition path of one batch of (key, path[, ordering])."""
    nulls = (pc.cast(pc.is_null(batch.column(2)), pa.int64()) if batch.num_columns > 2
             else pa.array(np.zeros(batch.num_rows, np.int64)))
    counted = pa.table([batch.column(1), nulls], names=["path", "nulls"]).group_by("path").aggregate(
        [("nulls", "count", pc.CountOptions(mode="all")), ("nulls", "sum")])
    return counted.select(["path", "nulls_count", "nulls_sum"]).rename_columns(["path", "count", "nulls"])


def _sum_by_path(tallies: pa.Table) -> pa.Table:
    """`_tally` rows of several batches summed per partition path."""
    summed = tallies.group_by("path").aggregate([("count", "sum"), ("nulls", "sum")])
    return summed.select(["path", "count_sum", "nulls_sum"]).rename_columns(["path", "count", "nulls"])


def _lookup_in_files(files: list[BloomIndexFileInfo], options: StorageOptions, counting: bool = False,
                     blooms: list[tuple[str, bytes] | None] | None = None):
    """mapInArrow: the candidate pairs of one lookup task -> the keys each of its files holds, with the file's
    location; `counting`: the batch counts passed on, and per file the number of keys found (`BatchCounting`);
    `blooms`: per file the metadata table's filter (type, serialized), used instead of the footer's."""
    def lookup(batches):
        pairs = pa.Table.from_batches(list(batches), schema=_pair_schema(counting))
        # one sort, then each file's pairs are a slice, the batch counts (file -1) first
        pairs = pairs.take(pc.sort_indices(pairs.column(_FILE)))
        file_of_pair = pairs.column(_FILE).to_numpy()
        starts = np.flatnonzero(np.diff(file_of_pair, prepend=_COUNT_FILE - 1))
        for start, end in zip(starts, [*starts[1:], len(file_of_pair)]):
            if file_of_pair[start] == _COUNT_FILE:
                counts = pairs.slice(start, end - start)
                yield _count_rows(*(counts.column(c).combine_chunks()
                                    for c in (RECORD_KEY, LOOKUP_COUNT, LOOKUP_NULLS)))
                continue
            info = files[int(file_of_pair[start])]
            candidates = pairs.column(RECORD_KEY).slice(start, end - start).combine_chunks()
            stored = blooms[int(file_of_pair[start])] if blooms else None
            bloom = bloom_filter_of(BloomFilterInfo(stored[0], "", stored[1])) if stored else None
            found = keys_in_file(info.path, candidates, options, bloom)
            n = len(found)
            arrays = [found.cast(pa.string()), constant_array(info.partition_path, n, pa.string()),
                      constant_array(info.file_id, n, pa.string())]
            if counting:
                arrays += [pa.nulls(n, pa.int64()), pa.nulls(n, pa.int64())]
            yield pa.RecordBatch.from_arrays(arrays, schema=_matches_schema(counting))
            if counting and n:
                yield _count_rows(pa.array([info.partition_path]), pa.array([n], pa.int64()),
                                  pa.nulls(1, pa.int64()), info.file_id)
    return lookup


def _matches_schema(counting: bool) -> pa.Schema:
    return pa.schema([pa.field(RECORD_KEY, pa.string()), pa.field(LOC_PARTITION, pa.string()),
                      pa.field(LOC_FILE_ID, pa.string())] + (_COUNT_FIELDS if counting else []))


def _count_rows(paths: pa.Array, counts: pa.Array, nulls: pa.Array, file_id: str | None = None) -> pa.RecordBatch:
    """Count rows of the lookup's output: no record key; a file group's found keys, or (`file_id` None) a
    partition's batch records."""
    n = len(paths)
    file_ids = pa.nulls(n, pa.string()) if file_id is None else constant_array(file_id, n, pa.string())
    return pa.RecordBatch.from_arrays([pa.nulls(n, pa.string()), paths, file_ids, counts, nulls],
                                      schema=_matches_schema(True))
