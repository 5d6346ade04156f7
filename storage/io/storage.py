"""HoodieStorage: every byte the table format reads or writes goes through here (Hudi's `HoodieStorage`).

One instance serves one location's file system (local, S3, GCS, HDFS, or an fsspec file system), chosen by the
path's scheme, and takes paths as given to it: plain absolute paths for local tables, URIs otherwise.

Instant files are created only if absent, atomically: a local file is written aside and hard-linked into
place; an S3 object is PUT with `If-None-Match: *`. File systems without append (object stores) never append
in place: log writers roll a new log file version per append. Each request is counted (`REQUESTS`) so a write
or scan can report what it cost on an object store.
"""
from __future__ import annotations

import errno
import functools
import logging
import os
import shutil
import threading
from collections import Counter
from dataclasses import dataclass

import pyarrow as pa
import pyarrow.fs as pafs

from storage.exception import HoodieFileAlreadyExistsError, HoodieIOError
from storage.io.filesystems import CreateMode, SchemeFileSystem, filesystem_for
from storage.io.storage_location import LOCAL_SCHEMES, S3_SCHEMES, StorageLocation, parse_location
from storage.io.storage_options import StorageOptions, default_storage_options, s3_settings

log = logging.getLogger(__name__)


class RequestCounter:
    """Requests made by this process, by kind (list, head, get, put, delete, copy); thread-safe."""

    def __init__(self) -> None:
        self._counts: Counter[str] = Counter()
        self._lock = threading.Lock()

    def add(self, kind: str, n: int = 1) -> None:
        with self._lock:
            self._counts[kind] += n

    def snapshot(self) -> Counter[str]:
        with self._lock:
            return Counter(self._counts)


REQUESTS = RequestCounter()


@dataclass(frozen=True)
class FileInfo:
    path: str
    size: int
    modification_time: float
    is_dir: bool

    @property
    def name(self) -> str:
        return self.path.rstrip("/").rsplit("/", 1)[-1]


class HoodieStorage:
    """File operations on the file system that serves one location (local by default)."""

    def __init__(self, location: StorageLocation | None = None, options: StorageOptions | None = None):
        self.location = location or StorageLocation("", "", "/")
        self.options = options if options is not None else StorageOptions()
        self._scheme_fs: SchemeFileSystem = filesystem_for(self.location, self.options)
        self.fs: pafs.FileSystem = self._scheme_fs.filesystem

    @classmethod
    def for_path(cls, path: str, options: StorageOptions | None = None) -> "HoodieStorage":
        """The storage serving `path` (options: the session's default ones when not given)."""
        location = parse_location(path)
        if location.scheme in LOCAL_SCHEMES:
            return _local_storage()
        return _remote_storage(location.scheme, location.authority,
                               options if options is not None else default_storage_options())

    # -- capabilities ------------------------------------------------------------------------------------
    @property
    def is_local(self) -> bool:
        return self.location.is_local

    @property
    def supports_append(self) -> bool:
        return self._scheme_fs.supports_append

    @property
    def scheme(self) -> str:
        return self.location.scheme

    # -- paths -------------------------------------------------------------------------------------------
    def _fs_path(self, path: str) -> str:
        """The path as the pyarrow file system takes it (bucket/key on object stores)."""
        if self.is_local:
            return path
        loc = parse_location(path)
        if self.scheme in S3_SCHEMES or self._scheme_fs.is_object_store:
            return f"{loc.authority}/{loc.path}".rstrip("/")
        return "/" + loc.path

    def _uri(self, fs_path: str) -> str:
        if self.is_local:
            return fs_path
        if self.scheme in S3_SCHEMES or self._scheme_fs.is_object_store:
            return f"{self.scheme}://{fs_path.lstrip('/')}"
        return f"{self.scheme}://{self.location.authority}/{fs_path.lstrip('/')}"

    # -- reading -----------------------------------------------------------------------------------------
    def exists(self, path: str) -> bool:
        return self._info(path).type != pafs.FileType.NotFound

    def is_dir(self, path: str) -> bool:
        return self._info(path).type == pafs.FileType.Directory

    def is_file(self, path: str) -> bool:
        return self._info(path).type == pafs.FileType.File

    def size(self, path: str) -> int:
        info = self._info(path)
        if info.type == pafs.FileType.NotFound:
            raise FileNotFoundError(f"no such file: {path}")
        return info.size

    def modification_time(self, path: str) -> float:
        info = self._info(path)
        return info.mtime.timestamp() if info.mtime is not None else 0.0

    def _info(self, path: str) -> pafs.FileInfo:
        REQUESTS.add("head")
        return self._call(path, lambda: self.fs.get_file_info(self._fs_path(path)))

    def list_dir(self, path: str) -> list[FileInfo]:
        """Entries directly under `path` (none when it does not exist)."""
        return self._list(path, recursive=False)

    def list_files(self, path: str) -> list[FileInfo]:
        """Every file below `path`, recursively, in one listing (one paginated request on object stores)."""
        return [f for f in self._list(path, recursive=True) if not f.is_dir]

    def _list(self, path: str, recursive: bool) -> list[FileInfo]:
        REQUESTS.add("list")
        selector = pafs.FileSelector(self._fs_path(path), recursive=recursive, allow_not_found=True)
        try:
            infos = self._call(path, lambda: self.fs.get_file_info(selector))
        except FileNotFoundError:  # deleted while listing (a concurrent rollback or clean)
            return []
        return [FileInfo(self._uri(i.path), i.size or 0, i.mtime.timestamp() if i.mtime else 0.0,
                         i.type == pafs.FileType.Directory)
                for i in infos if i.type != pafs.FileType.NotFound]

    def read_bytes(self, path: str) -> bytes:
        REQUESTS.add("get")
        fs_path = self._fs_path(path)

        def read() -> bytes:
            with self.fs.open_input_stream(fs_path) as f:
                return f.read()
        return self._call(path, read)

    def read_text(self, path: str) -> str:
        return self.read_bytes(path).decode("utf-8")

    def read_range(self, path: str, offset: int, length: int) -> bytes:
        REQUESTS.add("get")
        fs_path = self._fs_path(path)

        def read() -> bytes:
            with self.fs.open_input_file(fs_path) as f:
                return f.read_at(length, offset)
        return self._call(path, read)

    def open_input_file(self, path: str) -> pa.NativeFile:
        """A random-access file (for parquet readers); each read is a ranged GET on object stores."""
        REQUESTS.add("get")
        return self._call(path, lambda: self.fs.open_input_file(self._fs_path(path)))

    # -- writing -----------------------------------------------------------------------------------------
    def open_output_stream(self, path: str) -> pa.NativeFile:
        """A new file (replacing one at `path`); on object stores it appears whole when the stream closes."""
        REQUESTS.add("put")
        if self.is_local:
            os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
        return self._call(path, lambda: self.fs.open_output_stream(self._fs_path(path)))

    def open_append_stream(self, path: str) -> pa.NativeFile:
        """Appends to `path` (created if absent); only on file systems that support append."""
        if not self.supports_append:
            raise HoodieIOError(f"{self.scheme}:// does not support appending to {path}; write a new file instead")
        REQUESTS.add("put")
        if self.is_local:
            os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
        return self._call(path, lambda: self.fs.open_append_stream(self._fs_path(path)))

    def write_bytes(self, path: str, data: bytes) -> None:
        """Write `path` (replacing it); readers see the old or the new content on object stores."""
        if self.is_local:
            self.write_atomic(path, data)
            return
        with self.open_output_stream(path) as out:
            out.write(data)

    def create(self, path: str, data: bytes = b"") -> None:
        """Create `path` with `data`, atomically and never overwriting an existing file
        (`HoodieFileAlreadyExistsError` if it exists): readers never see a half-written instant file."""
        mode = self._scheme_fs.create_mode
        if mode is CreateMode.LINK:
            REQUESTS.add("put")
            _create_local(path, data)
        elif mode is CreateMode.CONDITIONAL_PUT:
            REQUESTS.add("put")
            from storage.io.conditional_put import put_if_absent

            loc = parse_location(path)
            put_if_absent(s3_settings(self.options, loc.authority), loc.authority, loc.path, data, path)
        elif mode is CreateMode.EXCLUSIVE_OPEN:
            self._create_exclusive_fsspec(path, data)
        else:
            if self.exists(path):
                raise HoodieFileAlreadyExistsError(f"file already exists: {path}")
            self.write_bytes(path, data)

    def create_if_absent(self, path: str, data: bytes = b"") -> bool:
        """`create`, where an existing file is not an error (False then). Locally a stat first spares writing and
        syncing a temporary file; on object stores the conditional PUT alone decides (one request)."""
        if self.is_local and self.exists(path):
            return False
        try:
            self.create(path, data)
            return True
        except HoodieFileAlreadyExistsError:
            return False

    def _create_exclusive_fsspec(self, path: str, data: bytes) -> None:
        handler = self.fs.handler  # pafs.PyFileSystem(FSSpecHandler)
        REQUESTS.add("put")
        try:
            with handler.fs.open(self._fs_path(path), "xb") as f:
                f.write(data)
        except FileExistsError:
            raise HoodieFileAlreadyExistsError(f"file already exists: {path}") from None

    def write_atomic(self, path: str, data: bytes) -> None:
        """Replace `path` with `data` atomically (local: a temporary file renamed over it; object stores: one PUT)."""
        if not self.is_local:
            self.write_bytes(path, data)
            return
        REQUESTS.add("put")
        os.replace(_write_synced(f"{path}.{os.getpid()}.{threading.get_ident()}.tmp", data), path)

    def copy(self, src: str, dst: str) -> None:
        REQUESTS.add("copy")
        if self.is_local:
            os.makedirs(os.path.dirname(dst) or ".", exist_ok=True)
        self._call(src, lambda: self.fs.copy_file(self._fs_path(src), self._fs_path(dst)))

    def rename(self, src: str, dst: str) -> None:
        """Move one file: a rename where the file system has one (local), else a copy then a delete (object stores:
        until the delete both names hold the same bytes)."""
        if self.is_local:
            REQUESTS.add("rename")
            os.replace(src, dst)
            return
        self.copy(src, dst)
        self.delete(src)

    def delete(self, path: str) -> bool:
        """Delete one file; False when it did not exist."""
        REQUESTS.add("delete")
        try:
            self._call(path, lambda: self.fs.delete_file(self._fs_path(path)))
            return True
        except FileNotFoundError:
            return False

    def delete_dir(self, path: str) -> None:
        """Delete `path` and everything below it (nothing when absent)."""
        REQUESTS.add("delete")
        if self.is_local:
            shutil.rmtree(path, ignore_errors=True)
            return
        try:
            self._call(path, lambda: self.fs.delete_dir(self._fs_path(path)))
        except FileNotFoundError:
            pass

    def mkdirs(self, path: str) -> None:
        """Local and HDFS directories; object stores have none (a prefix exists once a file has it)."""
        if self._scheme_fs.is_object_store:
            return
        if self.is_local:  # os directly: pyarrow's create_dir costs ~0.2 ms even when the directory exists
            os.makedirs(path, exist_ok=True)
            return
        self._call(path, lambda: self.fs.create_dir(self._fs_path(path), recursive=True))

    def fsync(self, path: str) -> None:
        """Make a closed local file (or directory) durable; object stores are durable once a write returns."""
        if not self.is_local:
            return
        fd = os.open(path, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)

    # -- errors ------------------------------------------------------------------------------------------
    def _call(self, path: str, fn):
        """Run a file-system call; a missing file stays FileNotFoundError, any other failure of a remote store
        becomes a `HoodieIOError` naming the path (an unreachable endpoint, a denied request)."""
        try:
            return fn()
        except FileNotFoundError:
            raise
        except OSError as exc:
            if self.is_local or isinstance(exc, HoodieIOError):
                raise
            text = str(exc)
            if "Path does not exist" in text or "NoSuchKey" in text or "does not exist" in text:
                raise FileNotFoundError(f"no such file: {path}") from None
            raise HoodieIOError(f"{self.scheme} request for {path} failed: {text}") from exc


@functools.lru_cache(maxsize=1)
def _local_storage() -> HoodieStorage:
    return HoodieStorage()


@functools.lru_cache(maxsize=64)
def _remote_storage(scheme: str, authority: str, options: StorageOptions) -> HoodieStorage:
    return HoodieStorage(StorageLocation(scheme, authority, ""), options)


def _create_local(path: str, data: bytes) -> None:
    """Write aside and hard-link into place: the link fails if the target exists, and the content is complete
    and synced before the name appears. An empty file (a marker) has no content to complete or sync: an exclusive
    open creates it in one call."""
    if not data:
        os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
        try:
            os.close(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644))
        except FileExistsError:
            raise HoodieFileAlreadyExistsError(f"file already exists: {path}") from None
        return
    tmp = _write_synced(f"{path}.{os.getpid()}.{threading.get_ident()}.creating", data)
    try:
        os.link(tmp, path)
    except OSError as exc:
        if exc.errno == errno.EEXIST:
            raise HoodieFileAlreadyExistsError(f"file already exists: {path}") from None
        raise
    finally:
        os.remove(tmp)


def _write_synced(tmp: str, data: bytes) -> str:
    """Write `data` to the temporary file `tmp` (creating its directory) and fsync it, so that publishing it by
    link or rename never exposes a half-written file after a crash."""
    os.makedirs(os.path.dirname(tmp), exist_ok=True)
    with open(tmp, "wb") as f:
        f.write(data)
        f.flush()
        os.fsync(f.fileno())
    return tmp
