"""Direct marker files: `.hoodie/.temp/<instant>/<partition>/<file name>.marker.<IO type>`.

A write task creates the marker before it creates the data file, so a failed write can always be
rolled back by deleting exactly the files its markers name.
"""
from __future__ import annotations

import os
from dataclasses import dataclass

from storage.fs_utils import join_path
from storage.io.storage import HoodieFileAlreadyExistsError, HoodieStorage

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


def list_markers(marker_dir: str) -> list[Marker]:
    markers = []
    for directory, _dirs, files in os.walk(marker_dir):
        partition = os.path.relpath(directory, marker_dir)
        partition = "" if partition == "." else partition
        for name in files:
            if MARKER_SUFFIX in name:
                file_name, _, io_type = name.rpartition(MARKER_SUFFIX)
                markers.append(Marker(partition, file_name, io_type))
    return markers


def delete_marker_dir(storage: HoodieStorage, marker_dir: str) -> None:
    storage.delete_dir(marker_dir)
