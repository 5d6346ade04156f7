"""The engine interface the runner drives."""
from __future__ import annotations

from dataclasses import dataclass

import pyarrow as pa


@dataclass
class ScanResult:
    count: int
    total: float | None = None  # sum(f1); None for a lookup


class Unsupported(Exception):
    """The engine has no such operation (the cell is left out, not failed)."""


class Engine:
    """One engine on one table type. `name` is the column label ("ours_df/cow", "deltalake", ...);
    `table_type` is "cow", "mor" or None (a format without the distinction). Writers own a table at `path`;
    readers get the path of the table they read through `scan`/`lookup`."""

    name = "?"
    family = "?"        # ours | peer | floor | reader
    writes = True
    uses_spark = False  # report the JVM's memory for it
    table_type: str | None = None

    def start(self, workdir: str) -> None:
        """Once per run, before any lane (e.g. warm-up)."""

    def prepare(self, data: pa.Table, tag: str):
        """The engine's natural in-memory form of the input, made before the clock starts."""
        return data

    def before_read(self, path: str) -> None:
        """Untimed set-up of a reader before it scans `path`."""

    def load(self, path: str, data: pa.Table) -> None:
        raise Unsupported

    def upsert(self, path: str, batch: pa.Table) -> None:
        raise Unsupported

    def delete(self, path: str, rows: pa.Table) -> None:
        raise Unsupported

    def scan(self, path: str) -> ScanResult:
        raise Unsupported

    def lookup(self, path: str, keys: list[int]) -> ScanResult:
        raise Unsupported

    def compact(self, path: str) -> None:
        raise Unsupported

    def watch_dir(self, path: str) -> str:
        """The directory whose new files count as written by this engine's operations on `path`."""
        return path
