"""Phase 2 of an in-process write (storage.write.locate and storage.write.bucketing on an Arrow table): each record
tagged with the file group holding its key, the workload profile counted, and each record's bucket assigned as the
Spark path assigns it (updates by file group, inserts by Spark's xxhash64 of the key within their partition's insert
shares: both engines put the same records together).

The lookup of a BLOOM or SIMPLE index runs per latest base file of the batch's partitions (of every partition, for a
global one) on the engine's thread pool, with the same per-file step as the Spark tasks
(storage.index.key_lookup.keys_in_file); a bucket index hashes the keys as its Spark UDF does
(storage.index.bucket_identifier)."""
from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from storage.arrow_util import constant_array
from storage.config import HoodieConfig
from storage.config import WriteConfigKeys as WK
from storage.engine.spark_hash import uniform_position
from storage.exception import HoodieWriteError
from storage.index import create_index
from storage.index.bloom_index import HoodieBloomIndex, partition_paths
from storage.index.bucket_identifier import bucket_ids
from storage.index.bucket_index import BUCKET_NUMBER, HoodieSimpleBucketIndex, with_table_index
from storage.index.hoodie_index import LOCATION_COLUMNS, HoodieIndex
from storage.index.key_lookup import keys_in_file
from storage.index.simple_index import LOC_FILE_ID, LOC_PARTITION
from storage.meta_fields import PARTITION_PATH, RECORD_KEY
from storage.read.file_slice_reader import FileSliceReadContext, read_file_slice
from storage.table.file_slice import FileSlice
from storage.table.fs_view import FileSystemView
from storage.table.schema_resolver import table_data_schema
from storage.write.bucketing import contiguous_shares
from storage.write.locate import profile_of_groups
from storage.write.operation import WriteOperationType
from storage.write.partitioner import BucketPlan, WorkloadProfile
from storage.write.table_settings import TableSettings
from storage.write.task_context import BUCKET_COLUMN, OP_COLUMN, OP_DELETE

_ROW = "_hoodie_row"


def table_index(config: HoodieConfig, fs_view: FileSystemView, settings: TableSettings) -> HoodieIndex:
    """The index of the write, with the table's recorded index settings (a bucket table's)."""
    meta = fs_view.meta_client
    config = with_table_index(config, meta.table_config, meta.base_path)
    return create_index(config.get(WK.INDEX_TYPE), config=config, base_path=meta.base_path,
                        storage_options=meta.storage_options, record_key_fields=settings.record_keys)


def tag_location(index: HoodieIndex, records: pa.Table, op: WriteOperationType, fs_view: FileSystemView,
                 partitions: list[str], engine, known_locations: bool = False) -> pa.Table:
    """`records` with the location of their key (`LOC_FILE_ID`, `LOC_PARTITION`; a bucket index adds each record's
    `BUCKET_NUMBER`), placed as the operation puts them (storage.write.locate.tag_location). `engine`: the
    LocalEngineContext whose threads look the keys up in the files."""
    if known_locations:
        if index.looks_up_stored_keys and index.requires_tagging(op):
            return _placed(records, op, index)
        records = records.drop_columns(list(LOCATION_COLUMNS))
    if isinstance(index, HoodieSimpleBucketIndex):
        bucketed = records.append_column(BUCKET_NUMBER, pa.array(bucket_ids(
            records.column(RECORD_KEY).combine_chunks(), list(index.spec.hash_fields), index.spec.num_buckets)))
        if not index.requires_tagging(op):
            return _untagged(bucketed)
        slices = fs_view.latest_file_slices(partitions)
        groups = index.bucket_file_groups([(s.partition_path, s.file_id) for s in slices])
        partition_of_group = pa.array([g[0] for g in groups], pa.string())
        located = pa.table({PARTITION_PATH: partition_of_group, LOC_PARTITION: partition_of_group,
                            BUCKET_NUMBER: pa.array([g[1] for g in groups], pa.int32()),
                            LOC_FILE_ID: pa.array([g[2] for g in groups], pa.string())})
        return _placed(_joined(bucketed, located, [PARTITION_PATH, BUCKET_NUMBER]), op, index)
    if not index.requires_tagging(op):
        return _untagged(records)
    matches = _stored_matches(index, records, fs_view, partitions, engine)
    if index.is_global:
        return _placed(_joined(records, matches, [RECORD_KEY]), op, index)
    matches = matches.append_column(PARTITION_PATH, matches.column(LOC_PARTITION))
    return _placed(_joined(records, matches, [RECORD_KEY, PARTITION_PATH]), op, index)


def _stored_matches(index: HoodieIndex, records: pa.Table, fs_view: FileSystemView, partitions: list[str],
                    engine) -> pa.Table:
    """(`RECORD_KEY`, `LOC_PARTITION`, `LOC_FILE_ID`) of every key of the batch stored in a latest base file of
    its partition (of any partition, for a global index): each file checked against the distinct keys that may be
    in it, by bloom filter then exactly (BLOOM), or exactly (SIMPLE)."""
    base_files = fs_view.latest_base_files(None if index.is_global else partitions)
    located = list(zip(base_files, partition_paths(base_files, fs_view.meta_client.base_path)))
    merged = _slices_to_merge(index, fs_view)
    if index.is_global:
        every_key = pc.unique(records.column(RECORD_KEY).combine_chunks())
        candidates = {partition: every_key for _, partition in located}
        merging = {(s.partition_path, s.file_id) for s in merged}
        located = [(bf, partition) for bf, partition in located if (partition, bf.file_id) not in merging]
    else:
        keys = records.select([PARTITION_PATH, RECORD_KEY]).group_by(PARTITION_PATH).aggregate(
            [(RECORD_KEY, "distinct")])
        candidates = dict(zip(keys[PARTITION_PATH].to_pylist(), _lists(keys[f"{RECORD_KEY}_distinct"])))
    jobs = [(bf, partition) for bf, partition in located if partition in candidates]
    jobs.sort(key=lambda job: -job[0].size)  # largest first: the pool's tasks end together
    probe_bloom = isinstance(index, HoodieBloomIndex)

    def lookup(job) -> pa.Table:
        bf, partition = job
        found = keys_in_file(bf.path, candidates[partition], index.storage_options, probe_bloom=probe_bloom)
        return pa.table({RECORD_KEY: found.cast(pa.string()),
                         LOC_PARTITION: constant_array(partition, len(found), pa.string()),
                         LOC_FILE_ID: constant_array(bf.file_id, len(found), pa.string())})

    found = [t for t in engine.map_each(lookup, jobs) if t.num_rows]
    if merged:
        found += [t for t in _live_keys(merged, every_key, fs_view.meta_client, engine) if t.num_rows]
    if not found:
        return pa.table({RECORD_KEY: pa.array([], pa.string()), LOC_PARTITION: pa.array([], pa.string()),
                         LOC_FILE_ID: pa.array([], pa.string())})
    return pa.concat_tables(found)


def _slices_to_merge(index: HoodieIndex, fs_view: FileSystemView) -> list[FileSlice]:
    """The latest slices with log files, when a global lookup on merge-on-read must read them merged: a key that a
    log block deleted or moved to another partition is still in its base file (storage.write.locate's
    `_live_keys`); none when the index knows what logs did (the record index)."""
    if not (index.is_global and fs_view.meta_client.table_config.is_mor) or index.sees_log_changes(fs_view):
        return []
    return [s for s in fs_view.latest_merged_file_slices() if s.log_files]


def _live_keys(slices: list[FileSlice], keys: pa.Array, meta, engine) -> list[pa.Table]:
    """(`RECORD_KEY`, `LOC_PARTITION`, `LOC_FILE_ID`) of the `keys` live in each slice, its base file and logs
    merged as a snapshot read merges them (storage.read.file_slice_reader), one slice per task."""
    ctx = FileSliceReadContext.for_table(meta)
    schema = table_data_schema(meta)

    def live(file_slice: FileSlice) -> pa.Table:
        stored = read_file_slice(file_slice, schema, ctx, columns=[RECORD_KEY]).column(RECORD_KEY).combine_chunks()
        found = pc.unique(stored.filter(pc.is_in(stored, value_set=keys))).cast(pa.string())
        return pa.table({RECORD_KEY: found,
                         LOC_PARTITION: constant_array(file_slice.partition_path, len(found), pa.string()),
                         LOC_FILE_ID: constant_array(file_slice.file_id, len(found), pa.string())})

    return engine.map_each(live, sorted(slices, key=lambda s: -s.total_size()))


def _lists(column: pa.ChunkedArray) -> list[pa.Array]:
    """Each list value of a list column as an array."""
    array = column.combine_chunks()
    offsets = array.offsets.to_numpy()
    values = array.values
    return [values.slice(offsets[i], offsets[i + 1] - offsets[i]) for i in range(len(array))]


def _joined(records: pa.Table, located: pa.Table, on: list[str]) -> pa.Table:
    """`records` left-joined with `located` (`on` plus `LOC_FILE_ID` and `LOC_PARTITION`), in the records' order.
    The join runs on the key columns alone (Arrow's join carries no nested columns); a key located twice (a key
    stored in two files) repeats its record, as Spark's join does."""
    joined = _row_join(records, located.select(on + [LOC_FILE_ID, LOC_PARTITION]), on, "left outer").sort_by(_ROW)
    out = records.take(joined.column(_ROW))
    return out.append_column(LOC_FILE_ID, joined.column(LOC_FILE_ID)).append_column(
        LOC_PARTITION, joined.column(LOC_PARTITION))


def _row_join(records: pa.Table, located: pa.Table, on: list[str], join_type: str) -> pa.Table:
    """The row number (`_ROW`) of each record joined with `located` on the `on` columns alone: Arrow's join carries
    no nested columns, so the records' other columns are taken by row number afterwards."""
    narrow = records.select(on).append_column(_ROW, pa.array(np.arange(records.num_rows, dtype=np.int64)))
    return narrow.join(located, keys=on, join_type=join_type)


def _untagged(records: pa.Table) -> pa.Table:
    nulls = pa.nulls(records.num_rows, pa.string())
    return records.append_column(LOC_FILE_ID, nulls).append_column(LOC_PARTITION, nulls)


def _placed(tagged: pa.Table, op: WriteOperationType, index: HoodieIndex) -> pa.Table:
    """Tagged records where the operation puts them (storage.write.locate's `_placed`): a delete keeps the keys
    found, in their stored partition; a global index moves or keeps a record whose partition changed."""
    if op is WriteOperationType.DELETE:
        found = tagged.filter(pc.is_valid(tagged.column(LOC_FILE_ID)))
        return _set(found, PARTITION_PATH, found.column(LOC_PARTITION))
    if index.is_global:
        return _global_partition_change(tagged, index.update_partition_path)
    return tagged


def _global_partition_change(tagged: pa.Table, update_partition_path: bool) -> pa.Table:
    """A record found in another partition: moved there (a delete in its old file group, an insert in the new
    partition) or kept in its stored partition, as `update_partition_path` says."""
    moved = pc.fill_null(pc.not_equal(tagged.column(LOC_PARTITION), tagged.column(PARTITION_PATH)), False)
    if not pc.any(moved).as_py():
        return tagged
    if not update_partition_path:
        return _set(tagged, PARTITION_PATH, pc.if_else(moved, tagged.column(LOC_PARTITION),
                                                       tagged.column(PARTITION_PATH)))
    old = tagged.filter(moved)
    old = _set(_set(old, PARTITION_PATH, old.column(LOC_PARTITION)), OP_COLUMN,
               constant_array(OP_DELETE, old.num_rows, tagged.schema.field(OP_COLUMN).type))
    nulls = pa.scalar(None, pa.string())
    new = _set(_set(tagged, LOC_FILE_ID, pc.if_else(moved, nulls, tagged.column(LOC_FILE_ID))),
               LOC_PARTITION, pc.if_else(moved, nulls, tagged.column(LOC_PARTITION)))
    return pa.concat_tables([new, old])


def _set(table: pa.Table, name: str, column) -> pa.Table:
    return table.set_column(table.schema.get_field_index(name), name, column)


def workload_profile(tagged: pa.Table) -> WorkloadProfile:
    """Updates per file group and inserts per partition (and per bucket), counted from the tagged records."""
    bucketed = BUCKET_NUMBER in tagged.column_names
    keys = [PARTITION_PATH, LOC_FILE_ID, OP_COLUMN] + ([BUCKET_NUMBER] if bucketed else [])
    counts = tagged.select(keys).group_by(keys).aggregate([([], "count_all")])
    columns = [counts.column(k).to_pylist() for k in keys] + [counts.column("count_all").to_pylist()]
    if not bucketed:
        columns.insert(3, [None] * counts.num_rows)
    return profile_of_groups(zip(*columns), bucketed)


def assign_buckets(tagged: pa.Table, plan: BucketPlan, placement_of_bucket: dict[int, int]) -> pa.Table:
    """`tagged` with each record's bucket placement key (`BUCKET_COLUMN`), as storage.write.bucketing.assign_buckets
    computes it in Spark; the location columns dropped."""
    n = tagged.num_rows
    placement = np.full(n, -1, dtype=np.int32)
    by_number = plan.bucket_number_of()
    if by_number:
        _place(placement, tagged, [PARTITION_PATH, BUCKET_NUMBER],
               {(p, number): placement_of_bucket[b] for (p, number), b in by_number.items()})
    else:
        _place(placement, tagged, [PARTITION_PATH, LOC_FILE_ID],
               {key: placement_of_bucket[b] for key, b in plan.update_bucket_of().items()})
        _place_inserts(placement, tagged, plan.insert_ranges(), placement_of_bucket)
    if (placement < 0).any():
        raise HoodieWriteError(f"{int((placement < 0).sum())} records of the batch found no bucket of the write's "
                               "plan: nothing was written")
    drop = [c for c in (LOC_FILE_ID, LOC_PARTITION, BUCKET_NUMBER) if c in tagged.column_names]
    return tagged.drop_columns(drop).append_column(BUCKET_COLUMN, pa.array(placement))


def _place(placement: np.ndarray, tagged: pa.Table, on: list[str], targets: dict[tuple, int]) -> None:
    """Sets the placement of the records whose `on` columns equal a key of `targets`."""
    if not targets:
        return
    keys = list(targets)
    located = pa.table({on[0]: pa.array([k[0] for k in keys], tagged.schema.field(on[0]).type),
                        on[1]: pa.array([k[1] for k in keys], tagged.schema.field(on[1]).type),
                        BUCKET_COLUMN: pa.array(list(targets.values()), pa.int32())})
    joined = _row_join(tagged, located, on, "inner")
    placement[joined.column(_ROW).to_numpy()] = joined.column(BUCKET_COLUMN).to_numpy()


def _place_inserts(placement: np.ndarray, tagged: pa.Table, ranges: dict[str, list[tuple[float, float, int]]],
                   placement_of_bucket: dict[int, int]) -> None:
    """New records by the uniform hash of their key within their partition's insert shares (the first share whose
    upper end lies above it)."""
    inserts = np.flatnonzero(tagged.column(LOC_FILE_ID).is_null().to_numpy(zero_copy_only=False))
    if not inserts.size or not ranges:
        return
    rows = tagged.select([PARTITION_PATH, RECORD_KEY])
    if inserts.size < tagged.num_rows:  # a bulk insert's are all of them: no copy
        rows = rows.take(pa.array(inserts))
    encoded = rows.column(PARTITION_PATH).combine_chunks().dictionary_encode()
    codes = encoded.indices.to_numpy(zero_copy_only=False)
    by_code = np.argsort(codes, kind="stable")  # each partition's rows, one contiguous run
    bounds = np.concatenate([[0], np.cumsum(np.bincount(codes, minlength=len(encoded.dictionary)))])
    for code, partition in enumerate(encoded.dictionary.to_pylist()):
        shares = contiguous_shares(ranges.get(partition, []))
        if not shares:
            continue
        mine = by_code[bounds[code]:bounds[code + 1]]
        buckets = np.array([placement_of_bucket[b] for _, _, b in shares], dtype=np.int32)
        if len(shares) == 1:  # one share takes all: no hash needed
            placement[inserts[mine]] = buckets[0]
            continue
        his = np.array([hi for _, hi, _ in shares])
        position = uniform_position(rows.column(RECORD_KEY).take(pa.array(mine)))
        placement[inserts[mine]] = buckets[np.searchsorted(his, position, side="right")]
