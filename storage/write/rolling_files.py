"""Base files that roll over at `hoodie.parquet.max.file.size`, measured from the bytes actually written.

Hudi's create handle asks its parquet writer `canWrite()` (bytes written plus those buffered, below the maximum
file size) before each record; once it says no, the handle is closed and the records that follow go to a new
create handle with a new file id. Here every task that writes base files (a new file group, the merge of an
upsert into a file group, a bulk insert) writes through one `RollingBaseFiles`: rows arrive as parts, and each
part is cut into slices sized to the room the open file has left, from the compressed bytes per row measured on
what the file already holds (a first slice of a file without a measurement is a probe of half the room). After
each slice the file's real size is known (row groups reach the stream whole) and, with an estimate of the
footer to come (parquet metadata, bloom filter), decides whether the file is full. A full file is closed with a
write stat of its own; the rest continue in a new file group, announced by a CREATE marker before it is opened.
So a file lands within a few percent of the limit, not at the mercy of an average record size.

The first file keeps the planned file group (for a merge: the group being rewritten, its stored rows first);
stored rows that overflow it move to a new file group with the inserts, as any lookup of the index finds them
there. Rows are stamped per file (file name, sequence numbers from 0 in each file).
"""
from __future__ import annotations

import logging
import time

import pyarrow as pa

from storage.config import WriteConfigKeys as WK
from storage.fs_utils import join_path, make_base_file_name, new_file_id
from storage.io.base_file_writer import _FOOTER_BYTES_PER_CHUNK, BaseFileWriter, BloomSeed
from storage.table.partition_metadata import write_partition_metadata
from storage.testing.crash_points import fail_task_once
from storage.timeline.commit_metadata import NULL_COMMIT, HoodieWriteStat, RuntimeStats
from storage.write.markers import IOType, create_marker
from storage.write.merge_rows import written_part
from storage.write.task_context import WriteTaskContext

log = logging.getLogger(__name__)

FULL_SHARE = 0.95  # a file with less room left than 5% of the limit is full
_PROBE_SHARE = 0.5  # without a measured bytes-per-row, a file's first slice takes half its room
_TARGET_SHARE = 0.97  # a measured slice aims at this share of the room left (compression varies a little)


class _File:
    """One file of the chain: its writer, identity and what it holds."""

    def __init__(self, writer: BaseFileWriter, file_id: str, file_name: str, prev_commit: str, started: float):
        self.writer, self.file_id, self.file_name, self.prev_commit = writer, file_id, file_name, prev_commit
        self.started = started
        self.new_rows = 0  # incoming rows written (their sequence numbers count from 0 in each file)
        self.inserts = 0
        self.updates = 0
        self.deletes = 0
        self.size = 0


class RollingBaseFiles:
    """The base files one task writes for one planned file group (or, for a bulk insert, one partition).

    `first_file_id` / `first_prev_commit` / `first_io_type`: the planned group (a merge continues it, under a
    MERGE marker; later files are new groups under CREATE markers); `max_records` > 0 also rolls over at a record
    count (hoodie.copyonwrite.insert.split.size); `bytes_per_row`: the compressed bytes a row is expected to
    take (`measured`: read off a base file of these rows, else a guess that the first slice probes); `seed`: the
    bloom filter the first file starts from."""

    def __init__(self, ctx: WriteTaskContext, partition: str, partition_id: int, write_token: str,
                 first_file_id: str | None = None, first_prev_commit: str = NULL_COMMIT,
                 first_io_type: IOType = IOType.CREATE,
                 max_records: int = 0, bytes_per_row: float = 0.0, measured: bool = False,
                 seed: BloomSeed | None = None):
        self.ctx, self.partition, self.partition_id, self.token = ctx, partition, partition_id, write_token
        self.max_bytes = max(1, int(ctx.max_file_size)) if ctx.max_file_size > 0 else 0
        self.max_records = max(0, int(max_records))
        self._next_id, self._next_prev, self._next_io = first_file_id, first_prev_commit, first_io_type
        self._planned = first_file_id is not None
        self._expected_more = 0
        self._seed = seed
        self._per_row = float(bytes_per_row) if bytes_per_row > 0 else float(max(1, ctx.avg_record_size))
        self._measured = measured
        self._chunk_bytes = _FOOTER_BYTES_PER_CHUNK
        self._open: _File | None = None
        self._done: list[_File] = []
        self._files = 0
        self._metadata_written = False

    def expected_to_fit(self, rows: int) -> bool:
        """Whether `rows` rows are expected to fit one file (no roll-over foreseen)."""
        if self.max_records and rows > self.max_records:
            return False
        return not self.max_bytes or rows * self._per_row <= FULL_SHARE * self.max_bytes

    def seed_first(self, seed: BloomSeed | None) -> None:
        """The bloom filter the first file starts from (a merge's: the rewritten file's own, see
        storage.write.handle.bloom_seed); only for a write expected to fit one file, as the seed holds every
        stored key the first file keeps."""
        if not self._done and self._open is None:
            self._seed = seed

    # -- writing ---------------------------------------------------------------------------------------------
    def write(self, kept: pa.Table | None, new: pa.Table | None, updates: int | pa.Array = 0) -> None:
        """Stored rows `kept` (renamed to their file), then incoming rows `new` (stamped with this write's meta
        columns), in slices that fit the open file (kept and new rows of one slice in one write); `updates`: how
        many of `new` update stored records (a count, attributed to the first rows when `new` is split over
        files, or a boolean mask for an exact split)."""
        kept = kept if kept is not None and kept.num_rows else None
        new = new if new is not None and new.num_rows else None
        n_kept = kept.num_rows if kept is not None else 0
        total = n_kept + (new.num_rows if new is not None else 0)
        if not self._measured and total:  # a guess: no smaller than the rows' Arrow bytes (parquet compresses)
            arrow = (kept.nbytes if kept is not None else 0) + (new.nbytes if new is not None else 0)
            self._per_row = max(self._per_row, arrow / total)
        offset = 0
        while offset < total:
            self._ensure_open()
            n = min(self._slice_rows(max(total - offset, self._expected_more)), total - offset)
            f = self._open
            kept_part = kept.slice(offset, min(n, n_kept - offset)) if offset < n_kept else None
            lo = max(0, offset - n_kept)
            hi = offset + n - n_kept
            new_part = new.slice(lo, hi - lo) if new is not None and hi > lo else None
            incoming = new_part if new_part is not None else self._empty(kept)
            f.writer.write(written_part(kept_part, incoming, self.ctx, f.file_name, self.partition_id, f.new_rows))
            if new_part is not None:
                m = new_part.num_rows
                f.new_rows += m
                up = self._updates_in(updates, lo, m)
                f.updates += up
                f.inserts += m - up
                if isinstance(updates, int):
                    updates -= up
            offset += n
            self._measure()
            self._expected_more = max(0, self._expected_more - n)
            if self._is_full(max(total - offset, self._expected_more)):
                self._close_open()

    @staticmethod
    def _empty(kept: pa.Table) -> pa.Table:
        return kept.slice(0, 0)

    def add_deletes(self, count: int) -> None:
        """Stored records the write deleted: counted on the planned group's (first) file."""
        if not count:
            return
        self._ensure_open() if not self._done else None
        (self._done[0] if self._done else self._open).deletes += count

    @staticmethod
    def _updates_in(updates: int | pa.Array | None, offset: int, n: int) -> int:
        if updates is None:
            return 0
        if isinstance(updates, int):
            return min(max(updates, 0), n)
        import pyarrow.compute as pc

        return int(pc.sum(updates.slice(offset, n).cast(pa.int64())).as_py() or 0)

    def _projected(self, f: _File) -> int:
        """The open file's size were it closed now (rows written plus the footer to come)."""
        return f.writer.bytes_written + f.writer.footer_estimate(self._chunk_bytes)

    def _slice_rows(self, rows_left: int) -> int:
        """Rows the open file takes in its next slice: those that fit its room (one at least), or all `rows_left`
        when they are measured to fit."""
        f = self._open
        if self._measured and self.max_bytes and not self.max_records and self._fits(f, rows_left):
            return rows_left
        limit = 1 << 62
        if self.max_records:
            limit = self.max_records - f.writer.num_rows
        if self.max_bytes:
            # the next slice adds a row group: its metadata is part of the room it takes
            room = self.max_bytes - self._projected(f) - self._chunk_bytes * len(self.ctx.schema)
            share = _TARGET_SHARE if self._measured else _PROBE_SHARE
            n = max(0, int(room * share / self._per_row))
            for _ in range(4):  # the rows' keys may grow the bloom filter: fewer rows until they fit with it
                fewer = max(0, int((room - f.writer.footer_growth(n)) * share / self._per_row))
                if fewer >= n:
                    break
                n = fewer
            limit = min(limit, n)
        return max(1, limit)

    def _measure(self) -> None:
        """Bytes per row from the open file (its data pages, without the footer)."""
        w = self._open.writer
        if w.num_rows >= 16:
            self._per_row = max(1.0, (w.bytes_written - 4) / w.num_rows)
            self._measured = True

    def _is_full(self, rows_left: int) -> bool:
        """Whether the open file takes no more rows: at the record limit, or with less room than 5% of the byte
        limit unless the `rows_left` still to come all fit in it (a merge that stays below the limit is not split,
        a file over it always is)."""
        f = self._open
        if self.max_records and f.writer.num_rows >= self.max_records:
            return True
        if not self.max_bytes:
            return False
        room = self.max_bytes - self._projected(f)
        if room <= 0:
            return True
        if room >= (1 - FULL_SHARE) * self.max_bytes and room >= self._per_row:
            return False
        return rows_left == 0 or not self._fits(f, rows_left)

    def _fits(self, f: _File, rows: int) -> bool:
        """Whether `rows` more rows (a row group of their own) are expected to fit the file's room."""
        rest = rows * self._per_row + f.writer.footer_growth(rows) + self._chunk_bytes * len(self.ctx.schema)
        return rest <= self.max_bytes - self._projected(f)

    def expect(self, rows: int) -> None:
        """`rows` more rows will come in later `write` calls (an estimate; a streamed merge knows its total)."""
        self._expected_more = max(0, rows)

    # -- files -----------------------------------------------------------------------------------------------
    def _ensure_open(self) -> None:
        if self._open is not None:
            return
        ctx, storage = self.ctx, self.ctx.storage
        file_id = self._next_id or new_file_id(self._files)
        prev, io_type = self._next_prev, self._next_io
        self._next_id, self._next_prev, self._next_io = None, NULL_COMMIT, IOType.CREATE
        file_name = make_base_file_name(file_id, self.token, ctx.instant_time)
        if not self._metadata_written:
            write_partition_metadata(storage, ctx.base_path, self.partition, ctx.instant_time)
            self._metadata_written = True
        create_marker(storage, ctx.marker_dir, self.partition, file_name, io_type)
        seed, self._seed = self._seed, None
        writer = BaseFileWriter(storage, join_path(ctx.base_path, self.partition, file_name), ctx.schema,
                                ctx.bloom_settings, ctx.compression, ctx.row_group_bytes, ctx.populate_meta_fields,
                                seed)
        self._open = _File(writer, file_id, file_name, prev, time.time())
        self._files += 1

    def _close_open(self) -> None:
        f, self._open = self._open, None
        f.size = f.writer.close()
        chunks = f.writer.num_row_groups * len(self.ctx.schema)
        if chunks:  # the footer's real size calibrates the estimate of a column chunk's metadata for the next file
            rest = f.writer.footer_bytes - f.writer.key_footer_bytes - f.writer.schema_footer_estimate()
            self._chunk_bytes = min(4 * _FOOTER_BYTES_PER_CHUNK, max(32, rest // chunks))
        self.ctx.storage.fsync(join_path(self.ctx.base_path, self.partition))  # the file's name is durable too
        fail_task_once("write.task_after_file")
        log.debug("%s/%s: %d rows, %d bytes (limit %d)", self.partition, f.file_name, f.writer.num_rows, f.size,
                  self.max_bytes)
        self._done.append(f)

    def finish(self, counts: dict[str, int] | None = None, merged: bool = False) -> list[HoodieWriteStat]:
        """Close the open file; one write stat per file written. `counts` (inserts, updates, deletes of the whole
        write): exact for a single file. `merged`: the first file rewrote a base file (its time is merge time)."""
        if self._open is None and not self._done and self._planned:
            self._ensure_open()  # a merge that kept nothing still writes its (empty) file, as Hudi's merge handle
        if self._open is not None:
            self._close_open()
        if counts is not None and len(self._done) == 1:
            only = self._done[0]
            only.inserts, only.updates, only.deletes = counts["inserts"], counts["updates"], counts["deletes"]
        if len(self._done) > 1:
            log.info("%s: rolled over at %s=%d into %d files (%s bytes)", self.partition, WK.PARQUET_MAX_FILE_SIZE.key,
                     self.max_bytes, len(self._done), ", ".join(str(f.size) for f in self._done))
        now = time.time()
        stats = []
        for i, f in enumerate(self._done):
            took = int((now - f.started) * 1000)
            merge = merged and i == 0
            stats.append(HoodieWriteStat(
                fileId=f.file_id,
                path=f"{self.partition}/{f.file_name}" if self.partition else f.file_name,
                prevCommit=f.prev_commit, numWrites=f.writer.num_rows, numDeletes=f.deletes,
                numUpdateWrites=f.updates, numInserts=f.inserts, totalWriteBytes=f.size,
                partitionPath=self.partition, fileSizeInBytes=f.size,
                runtimeStats=RuntimeStats(0, took if merge else 0, 0 if merge else took)))
        return stats

    def abort(self) -> None:
        if self._open is not None:
            self._open.writer.abort()
