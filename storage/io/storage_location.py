"""Where a table lives: a local path or a URI (`s3://bucket/key`, `gs://...`, `hdfs://...`), and the file-system
scheme that serves it.

Local tables keep plain absolute paths (no `file:` prefix), as they always have; every other location keeps its
URI, with `s3a://` and `s3n://` (Hadoop's spellings) kept as the user wrote them. A scheme nothing here can serve
is an error at once, never a relative local directory named after the URI.
"""
from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlparse

from storage.exception import HoodieIOError

_URI = re.compile(r"^(?P<scheme>[A-Za-z][A-Za-z0-9+.-]*)://(?P<rest>.*)$")
LOCAL_SCHEMES = ("", "file", "local")
S3_SCHEMES = ("s3", "s3a", "s3n")
GCS_SCHEMES = ("gs", "gcs")
HDFS_SCHEMES = ("hdfs", "viewfs")


@dataclass(frozen=True)
class StorageLocation:
    """A parsed location: `scheme` ('' for local), `authority` (bucket or host:port) and `path` (without a
    leading slash for object stores, absolute for local and HDFS)."""

    scheme: str
    authority: str
    path: str

    @property
    def is_local(self) -> bool:
        return self.scheme in LOCAL_SCHEMES

    @property
    def uri(self) -> str:
        if self.is_local:
            return self.path
        return f"{self.scheme}://{self.authority}/{self.path.lstrip('/')}".rstrip("/")


def scheme_of(path: str) -> str:
    """The URI scheme of `path`, lower-case; '' for a plain local path."""
    m = _URI.match(str(path))
    if m:
        return m["scheme"].lower()
    if str(path).startswith("file:"):
        return "file"
    return ""


def parse_location(path: str | os.PathLike) -> StorageLocation:
    text = os.fspath(path)
    scheme = scheme_of(text)
    if scheme in LOCAL_SCHEMES:
        local = urlparse(text).path if scheme else text
        return StorageLocation("", "", str(Path(local).expanduser().absolute()).rstrip("/") or "/")
    m = _URI.match(text)
    if m is None:
        raise HoodieIOError(f"cannot parse storage location {text!r}")
    rest = m["rest"]
    authority, _, key = rest.partition("/")
    if not authority:
        raise HoodieIOError(f"storage location {text!r} names no bucket or host")
    return StorageLocation(scheme, authority, key.strip("/"))


def normalize_base_path(path: str | os.PathLike) -> str:
    """A table base path: an absolute local path without scheme, or a URI without trailing slash. A scheme no
    file system here serves raises `HoodieIOError` naming it."""
    location = parse_location(path)
    check_scheme_supported(location.scheme, os.fspath(path))
    return location.uri


def is_local_path(path: str) -> bool:
    return scheme_of(path) in LOCAL_SCHEMES


def check_scheme_supported(scheme: str, path: str) -> None:
    if scheme in LOCAL_SCHEMES or scheme in S3_SCHEMES or scheme in GCS_SCHEMES or scheme in HDFS_SCHEMES:
        return
    if fsspec_class(scheme) is None:
        raise HoodieIOError(f"unsupported storage scheme {scheme!r} in {path!r}: supported are local paths, "
                            f"{', '.join(S3_SCHEMES + GCS_SCHEMES + HDFS_SCHEMES)} and schemes of installed "
                            "fsspec file systems")


def fsspec_class(scheme: str):
    """The fsspec file system class serving `scheme`, or None (no fsspec, or no such scheme)."""
    try:
        import fsspec
    except ImportError:
        return None
    try:
        return fsspec.get_filesystem_class(scheme)
    except (ValueError, ImportError):
        return None
