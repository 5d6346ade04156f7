"""File-system access for a table, local for now, behind one small interface.

Everything that touches the file system goes through `HoodieStorage`, so object stores can be added in
one place. Instant files are created exclusively: creating an existing file raises instead of
overwriting it, which is what keeps the timeline append-only.
"""
from __future__ import annotations

import errno
import os
import shutil
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlparse
from storage.exception import HoodieFileAlreadyExistsError


def normalize_base_path(path: str | os.PathLike) -> str:
    """A table base path as an absolute local path without scheme or trailing slash."""
    text = os.fspath(path)
    if text.startswith("file:"):
        text = urlparse(text).path
    return str(Path(text).expanduser().absolute()).rstrip("/") or "/"


@dataclass(frozen=True)
class FileInfo:
    path: str
    size: int
    modification_time: float
    is_dir: bool

    @property
    def name(self) -> str:
        return os.path.basename(self.path)


class HoodieStorage:
    """Local file-system operations used by the table format."""

    def exists(self, path: str) -> bool:
        return os.path.exists(path)

    def is_dir(self, path: str) -> bool:
        return os.path.isdir(path)

    def list_dir(self, path: str) -> list[FileInfo]:
        try:
            entries = list(os.scandir(path))
        except FileNotFoundError:
            return []
        infos = []
        for entry in entries:
            try:
                st = entry.stat()
            except FileNotFoundError:  # deleted while listing (a concurrent rollback or clean)
                continue
            infos.append(FileInfo(entry.path, st.st_size, st.st_mtime, entry.is_dir()))
        return infos

    def read_bytes(self, path: str) -> bytes:
        with open(path, "rb") as f:
            return f.read()

    def read_text(self, path: str) -> str:
        return self.read_bytes(path).decode("utf-8")

    def create(self, path: str, data: bytes = b"") -> None:
        """Create `path` with `data`, atomically and never overwriting an existing file.

        The content is written to a temporary file first and published with a hard link, which fails if
        the target exists: readers never see a half-written instant file.
        """
        tmp = _write_synced(f"{path}.{os.getpid()}.{id(data)}.creating", data)
        try:
            os.link(tmp, path)
        except OSError as exc:
            if exc.errno == errno.EEXIST:
                raise HoodieFileAlreadyExistsError(f"file already exists: {path}") from None
            raise
        finally:
            os.remove(tmp)

    def write_atomic(self, path: str, data: bytes) -> None:
        """Replace `path` with `data` atomically (write a temporary file, then rename over)."""
        os.replace(_write_synced(f"{path}.{os.getpid()}.tmp", data), path)

    def copy(self, src: str, dst: str) -> None:
        shutil.copyfile(src, dst)

    def delete(self, path: str) -> bool:
        try:
            os.remove(path)
            return True
        except FileNotFoundError:
            return False

    def delete_dir(self, path: str) -> None:
        shutil.rmtree(path, ignore_errors=True)

    def mkdirs(self, path: str) -> None:
        os.makedirs(path, exist_ok=True)

    def size(self, path: str) -> int:
        return os.path.getsize(path)


def _write_synced(tmp: str, data: bytes) -> str:
    """Write `data` to the temporary file `tmp` (creating its directory) and fsync it, so that publishing it by
    link or rename never exposes a half-written file after a crash."""
    os.makedirs(os.path.dirname(tmp), exist_ok=True)
    with open(tmp, "wb") as f:
        f.write(data)
        f.flush()
        os.fsync(f.fileno())
    return tmp
