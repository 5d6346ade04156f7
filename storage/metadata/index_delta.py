"""The changes one action makes to an index partition of the metadata table (record_index, secondary indexes), as
Arrow tables with a key column and a deleted flag: reduced to one change per key, then split by the shard (MDT
file group) each key goes to. Shared by record_index_writer and secondary_index_writer."""
from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc


def reduce_by_key(changes: pa.Table, key: str, deleted: str) -> pa.Table:
    """One row per key, sorted by key: an insert wins over a delete of the same key (Hudi's reduceByKeys keeps the
    record that is not deleted: a partition move deletes in one file group and inserts in another), and among
    rows of the same kind the last wins."""
    if changes.num_rows == 0:
        return changes
    changes = changes.append_column("_pos", pa.array(np.arange(changes.num_rows)))
    ordered = changes.sort_by([(key, "ascending"), (deleted, "ascending"), ("_pos", "descending")])
    keys = ordered[key].combine_chunks()
    first = np.ones(len(keys), dtype=bool)
    if len(keys) > 1:
        first[1:] = pc.not_equal(keys.slice(1), keys.slice(0, len(keys) - 1)).to_numpy(zero_copy_only=False)
    return ordered.filter(pa.array(first)).drop_columns(["_pos"])


def split_by_shard(changes: pa.Table, shard_of_row: np.ndarray) -> list[tuple[int, pa.Table]]:
    """(shard, its rows) for each shard that has rows, in shard order; rows keep their order within a shard."""
    if changes.num_rows == 0:
        return []
    order = np.argsort(shard_of_row, kind="stable")
    shards = np.asarray(shard_of_row)[order]
    changes = changes.take(pa.array(order))
    bounds = np.flatnonzero(np.diff(shards)) + 1
    starts, ends = np.concatenate([[0], bounds]), np.concatenate([bounds, [len(shards)]])
    return [(int(shards[s]), changes.slice(int(s), int(e - s))) for s, e in zip(starts, ends)]


def upserts_and_deletes(part: pa.Table, deleted: str) -> tuple[pa.Table, pa.Table]:
    """The rows of a shard that insert and those that delete."""
    flags = part[deleted].combine_chunks()
    return part.filter(pc.invert(flags)), part.filter(flags)
