"""Local spill files for work that must not hold all its rows in memory (the spillable map of log merges, the
external sort of clustering): Arrow IPC streams under `hoodie.memory.spillable.map.path`, lz4-compressed when
`hoodie.common.diskmap.compression.enabled`, in a private directory that is removed when its owner closes (or
is collected, also after an error)."""
from __future__ import annotations

import os
import shutil
import tempfile
import weakref
from collections.abc import Iterator

import pyarrow as pa


def spill_codec(compression: bool) -> str | None:
    return "lz4" if compression and pa.Codec.is_available("lz4_frame") else None


class SpillFile:
    """One spill file: an Arrow IPC stream of tables of one schema, written, then read back once or more."""

    def __init__(self, path: str, schema: pa.Schema, compression: str | None):
        self.path, self.schema, self.bytes, self.num_rows = path, schema, 0, 0
        options = pa.ipc.IpcWriteOptions(compression=compression)
        self._sink = pa.OSFile(path, "wb")
        self._writer: pa.ipc.RecordBatchStreamWriter | None = pa.ipc.new_stream(self._sink, schema, options=options)

    def write(self, table: pa.Table) -> None:
        assert self._writer is not None
        self._writer.write_table(table)
        self.bytes += table.nbytes
        self.num_rows += table.num_rows

    @property
    def finished(self) -> bool:
        return self._writer is None

    def finish(self) -> None:
        if self._writer is not None:
            self._writer.close()
            self._sink.close()
            self._writer = None

    def batches(self) -> Iterator[pa.RecordBatch]:
        self.finish()
        with pa.OSFile(self.path, "rb") as source:
            yield from pa.ipc.open_stream(source)

    def read(self) -> pa.Table:
        self.finish()
        with pa.OSFile(self.path, "rb") as source:
            return pa.ipc.open_stream(source).read_all()

    def remove(self) -> None:
        self.finish()
        try:
            os.remove(self.path)
        except FileNotFoundError:
            pass


def spill_target(files: list[SpillFile], directory: str, name: str, schema: pa.Schema,
                 compression: str | None) -> SpillFile:
    """The file of `files` to append tables of `schema` to: the last one while it is open and of that schema, else a
    new `<name>-<n>.arrow` in `directory`, appended to `files` (one IPC stream holds one schema)."""
    if not files or files[-1].finished or not files[-1].schema.equals(schema):
        if files:
            files[-1].finish()
        files.append(SpillFile(os.path.join(directory, f"{name}-{len(files)}.arrow"), schema, compression))
    return files[-1]


class SpillDirectory:
    """A private directory under `spill_path`, made on first use, removed by `close()` or when its owner goes."""

    def __init__(self, owner: object, spill_path: str, prefix: str):
        self._owner = weakref.ref(owner)
        self.spill_path, self.prefix = spill_path or tempfile.gettempdir(), prefix
        self.path: str | None = None
        self._cleanup: weakref.finalize | None = None

    def make(self) -> str:
        if self.path is None:
            os.makedirs(self.spill_path, exist_ok=True)
            self.path = tempfile.mkdtemp(prefix=self.prefix, dir=self.spill_path)
            owner = self._owner()
            self._cleanup = weakref.finalize(owner if owner is not None else self, shutil.rmtree, self.path, True)
        return self.path

    def close(self) -> None:
        if self._cleanup is not None:
            self._cleanup()  # removes the directory (once)
