"""Direct marker files: `.hoodie/.temp/<instant>/<partition>/<file name>.marker.<IO type>`.

A write task creates the marker before it creates the data file, so a failed write can always be
rolled back by deleting exactly the files its markers name.
"""
from __future__ import annotations

from dataclasses import dataclass

from storage.fs_utils import join_path
from storage.exception import HoodieFileAlreadyExistsError
from storage.io.storage import HoodieStorage

MARKER_SUFFIX = ".marker."


class IOType:
    CREATE = "CREATE"
    MERGE = "MERGE"
    APPEND = "APPEND"


@dataclass(frozen=True)
class Marker:
    partition_path: str
    file_name: str
    io_type: str


def marker_path(marker_dir: str, partition_path: str, file_name: str, io_type: str) -> str:
    return join_path(marker_dir, partition_path, f"{file_name}{MARKER_SUFFIX}{io_type}")


def create_marker(storage: HoodieStorage, marker_dir: str, partition_path: str, file_name: str, io_type: str) -> None:
    try:
        storage.create(marker_path(marker_dir, partition_path, file_name, io_type))
    except HoodieFileAlreadyExistsError:
        pass  # a retried task attempt writes the same marker


def delete_marker(storage: HoodieStorage, marker_dir: str, partition_path: str, file_name: str, io_type: str) -> None:
    storage.delete(marker_path(marker_dir, partition_path, file_name, io_type))


def list_markers(storage: HoodieStorage, marker_dir: str) -> list[Marker]:
    """Every marker of a write (one recursive listing)."""
    markers = []
    root = marker_dir.rstrip("/")
    for info in storage.list_files(root):
        relative = info.path[len(root) + 1:]
        partition, _, name = relative.rpartition("/")
        if MARKER_SUFFIX in name:
            file_name, _, io_type = name.rpartition(MARKER_SUFFIX)
            markers.append(Marker(partition, file_name, io_type))
    return markers


def delete_marker_dir(storage: HoodieStorage, marker_dir: str) -> None:
    storage.delete_dir(marker_dir)


def reconcile_against_markers(storage: HoodieStorage, base_path: str, marker_dir: str,
                              committed: set[str]) -> list[str]:
    """Hudi's reconcileAgainstMarkers (finalize write): files the markers name that the commit does not
    (`committed`: paths relative to the base path) were left by failed or speculative task attempts; they
    are deleted before the commit is published, so no reader ever sees two files of one file group and instant."""
    removed = []
    for marker in list_markers(storage, marker_dir):
        relative = join_path(marker.partition_path, marker.file_name) if marker.partition_path else marker.file_name
        if relative not in committed:
            storage.delete(join_path(base_path, relative))
            removed.append(relative)
    return removed
