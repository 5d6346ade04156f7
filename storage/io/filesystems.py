"""The file system behind each scheme, on pyarrow.fs (local, S3, GCS, HDFS), or a user's fsspec file system for
any other scheme fsspec knows; and what each can do, as Hudi's `StorageSchemes` records it (append support,
how a file is created only if absent).
"""
from __future__ import annotations

import functools
import logging
from dataclasses import dataclass
from enum import Enum

import pyarrow.fs as pafs

from storage.exception import HoodieIOError
from storage.io.storage_location import GCS_SCHEMES, HDFS_SCHEMES, LOCAL_SCHEMES, S3_SCHEMES, StorageLocation, fsspec_class
from storage.io.storage_options import StorageOptions, s3_settings

log = logging.getLogger(__name__)


class CreateMode(str, Enum):
    """How a file is created only if absent (instant files must never be overwritten)."""

    LINK = "link"  # local: write a temp file, hard-link it to the target (fails if present), atomic and exclusive
    CONDITIONAL_PUT = "conditional_put"  # S3: PUT with `If-None-Match: *`
    EXCLUSIVE_OPEN = "exclusive_open"  # fsspec file systems that honour mode "xb"
    CHECK_THEN_WRITE = "check_then_write"  # no primitive: exclusive only under a lock provider


@dataclass(frozen=True)
class SchemeFileSystem:
    """A pyarrow file system with the capabilities of its scheme."""

    filesystem: pafs.FileSystem
    supports_append: bool
    create_mode: CreateMode
    is_object_store: bool


def filesystem_for(location: StorageLocation, options: StorageOptions) -> SchemeFileSystem:
    """The (cached) file system serving `location` with `options`."""
    authority = location.authority if location.scheme in S3_SCHEMES + HDFS_SCHEMES else ""
    return _filesystem(location.scheme, authority, options)


@functools.lru_cache(maxsize=64)
def _filesystem(scheme: str, authority: str, options: StorageOptions) -> SchemeFileSystem:
    if scheme in LOCAL_SCHEMES:
        return SchemeFileSystem(pafs.LocalFileSystem(), True, CreateMode.LINK, False)
    if scheme in S3_SCHEMES:
        s3 = s3_settings(options, authority)
        fs = pafs.S3FileSystem(
            access_key=s3.access_key, secret_key=s3.secret_key, session_token=s3.session_token,
            anonymous=s3.anonymous, region=s3.region, scheme=s3.scheme, endpoint_override=s3.endpoint,
            force_virtual_addressing=not s3.path_style, connect_timeout=s3.connect_timeout_s,
            request_timeout=s3.request_timeout_s, background_writes=False,
            # small files as one PutObject instead of create / upload part / complete (3 requests)
            allow_delayed_open=True,
            retry_strategy=pafs.AwsStandardS3RetryStrategy(max_attempts=s3.max_attempts))
        return SchemeFileSystem(fs, False, CreateMode.CONDITIONAL_PUT, True)
    if scheme in GCS_SCHEMES:
        endpoint = options.get("fs.gs.storage.root.url")
        fs = pafs.GcsFileSystem(endpoint_override=endpoint.split("://", 1)[-1] if endpoint else None,
                                scheme=endpoint.split("://", 1)[0] if endpoint and "://" in endpoint else "https")
        return SchemeFileSystem(fs, False, CreateMode.CHECK_THEN_WRITE, True)
    if scheme in HDFS_SCHEMES:
        host, _, port = authority.partition(":")
        fs = pafs.HadoopFileSystem(host or "default", int(port or 0))
        return SchemeFileSystem(fs, True, CreateMode.CHECK_THEN_WRITE, False)
    cls = fsspec_class(scheme)
    if cls is None:
        raise HoodieIOError(f"unsupported storage scheme {scheme!r}")
    fs = pafs.PyFileSystem(pafs.FSSpecHandler(cls()))
    return SchemeFileSystem(fs, False, CreateMode.EXCLUSIVE_OPEN, True)
