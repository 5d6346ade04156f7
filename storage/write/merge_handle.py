"""Copy-on-write merge of a base file larger than `hoodie.memory.merge.max.size`, without loading it whole.

Hudi's merge handle walks the old base file record by record and keeps only the incoming records in memory
(spilling them past the same budget). Here the walk is by row group: each stored row group is merged with the
incoming rows of the keys it holds (the same `merge_with_stored` and `MergeSpec` as the in-memory merge: updates,
deletes, event-time ordering), its survivors go to the open base file (storage.write.rolling_files: a new file
group once it is full), and the incoming rows of keys the file does not hold (inserts) are written last. Memory holds the incoming batch and about one row group.

The rows written are those of the in-memory merge; their order differs (an update follows its row group
instead of the file's end) and sequence numbers count in that order. A key repeated in several row groups of
the old file (an insert that kept duplicates) is merged once per group, as Hudi's merge handle does, where the
in-memory merge keeps a single version.
"""
from __future__ import annotations

import logging

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from storage.io.base_file_writer import BaseFileWriter
from storage.io.parquet import iter_row_groups
from storage.io.storage import HoodieStorage
from storage.meta_fields import RECORD_KEY
from storage.write.merge_rows import merge_with_stored, split_deletes, stored_rows, written_part
from storage.write.rolling_files import RollingBaseFiles
from storage.write.task_context import WriteTaskContext

log = logging.getLogger(__name__)


def stream_merge(base: pq.ParquetFile, incoming: pa.Table, ctx: WriteTaskContext, storage: HoodieStorage,
                 path: str, file_name: str, partition_id: int) -> tuple[int, dict, int]:
    """`stream_merge_into` one file `path` named `file_name`, whatever its size (no roll-over). Returns (rows
    written, counts, file size in bytes)."""
    one = _OneFile(BaseFileWriter(storage, path, ctx.schema, ctx.bloom_settings, ctx.compression,
                                  ctx.row_group_bytes, ctx.populate_meta_fields), ctx, file_name, partition_id)
    try:
        counts = stream_merge_into(base, incoming, ctx, one)
    except BaseException:
        one.writer.abort()
        raise
    return one.writer.num_rows, counts, one.writer.close()


class _OneFile:
    """The part of `RollingBaseFiles` a streamed merge uses, for a single file of a given name."""

    def __init__(self, writer: BaseFileWriter, ctx: WriteTaskContext, file_name: str, partition_id: int):
        self.writer, self.ctx, self.file_name, self.partition_id = writer, ctx, file_name, partition_id

    def expect(self, rows: int) -> None:
        pass

    def write(self, kept: pa.Table, new: pa.Table, updates: int = 0) -> None:
        self.writer.write(written_part(kept, new, self.ctx, self.file_name, self.partition_id,
                                       first_seqno=self.writer.num_rows))


def stream_merge_into(base: pq.ParquetFile, incoming: pa.Table, ctx: WriteTaskContext,
                      files: RollingBaseFiles) -> dict:
    """Merge `incoming` (the bucket's rows in the write schema plus the operation column) into the stored rows
    of `base`, writing them through `files` (which rolls over to new files at the size limit). Returns the counts
    (inserts, updates, deletes)."""
    schema = ctx.schema
    writes, delete_rows = split_deletes(incoming)
    write_keys, delete_keys = writes.column(RECORD_KEY), delete_rows.column(RECORD_KEY)
    matched_writes = np.zeros(writes.num_rows, dtype=bool)  # incoming rows whose key some row group holds
    matched_deletes = np.zeros(delete_rows.num_rows, dtype=bool)
    counts = {"inserts": 0, "updates": 0, "deletes": 0}
    files.expect(base.metadata.num_rows + writes.num_rows)  # at most: a merge that fits stays one file
    for group in iter_row_groups(base):
        stored = stored_rows(group, ctx)
        keys = stored.column(RECORD_KEY).combine_chunks()
        in_group = _holds(write_keys, keys)
        deletes_in_group = _holds(delete_keys, keys)
        kept, new, part = merge_with_stored(stored, writes.filter(in_group), delete_rows.filter(deletes_in_group),
                                            ctx)
        files.write(kept, new, part["updates"])
        _add(counts, part)
        matched_writes |= in_group.to_numpy(zero_copy_only=False)
        matched_deletes |= deletes_in_group.to_numpy(zero_copy_only=False)
    # keys the file does not hold: merged among themselves (and with their deletes) as the in-memory merge does
    rest = writes.filter(pa.array(~matched_writes))
    rest_deletes = delete_rows.filter(pa.array(~matched_deletes))
    kept, new, part = merge_with_stored(schema.empty_table(), rest, rest_deletes, ctx)
    files.write(kept, new, part["updates"])
    _add(counts, part)
    log.debug("streamed merge of %d row groups: %s", base.num_row_groups, counts)
    return counts


def _holds(keys: pa.ChunkedArray, group_keys: pa.Array) -> pa.Array:
    """Which of `keys` the row group's keys contain."""
    return pc.fill_null(pc.is_in(keys, value_set=group_keys), False).combine_chunks()


def _add(counts: dict, part: dict) -> None:
    for name in counts:
        counts[name] += part[name]
