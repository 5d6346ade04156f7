"""Hudi's file naming (spec §5): file ids, write tokens, base and log file names,
and the `.hoodie_partition_metadata` file."""
from __future__ import annotations

import re
import uuid
from dataclasses import dataclass


META_FOLDER = ".hoodie"
TEMP_FOLDER = ".temp"
PARTITION_METAFILE = ".hoodie_partition_metadata"
BASE_FILE_EXTENSION = ".parquet"
LOG_FILE_EXTENSION = ".log"

_BASE_RE = re.compile(r"^(?P<file_id>.+?)_(?P<token>\d+-\d+-\d+)_(?P<instant>\d+)\.(?P<ext>parquet|hfile|orc|lance)$")
_BASE_NO_TOKEN_RE = re.compile(r"^(?P<file_id>.+)_(?P<instant>\d+)\.(?P<ext>parquet|hfile|orc|lance)$")
_LOG_RE = re.compile(
    r"^\.(?P<file_id>.+?)_(?P<instant>\d+)\.(?P<ext>log|archive)\.(?P<version>\d+)(?:_(?P<token>\d+-\d+-\d+))?(?:\.cdc)?$"
)


def new_file_id(index: int = 0) -> str:
    """`<uuid>-<n>`: Spark writers add the index of the file within one task."""
    return f"{uuid.uuid4()}-{index}"


def make_write_token(task_partition_id: int, stage_id: int, task_attempt_id: int) -> str:
    return f"{task_partition_id}-{stage_id}-{task_attempt_id}"


def make_base_file_name(file_id: str, write_token: str, instant_time: str, ext: str = BASE_FILE_EXTENSION) -> str:
    return f"{file_id}_{write_token}_{instant_time}{ext}"


def make_log_file_name(file_id: str, base_instant: str, version: int, write_token: str | None) -> str:
    suffix = f"{file_id}_{base_instant}{LOG_FILE_EXTENSION}.{version}"
    return f".{suffix}_{write_token}" if write_token else f".{suffix}"


@dataclass(frozen=True)
class BaseFileName:
    file_id: str
    write_token: str | None
    instant_time: str
    extension: str


@dataclass(frozen=True)
class LogFileName:
    file_id: str
    instant_time: str  # base instant in v6; the creating deltacommit in v8
    version: int
    write_token: str | None


def parse_base_file_name(name: str) -> BaseFileName | None:
    m = _BASE_RE.match(name)
    if m:
        return BaseFileName(m["file_id"], m["token"], m["instant"], m["ext"])
    m = _BASE_NO_TOKEN_RE.match(name)
    if m and not name.startswith("."):
        return BaseFileName(m["file_id"], None, m["instant"], m["ext"])
    return None


def parse_log_file_name(name: str) -> LogFileName | None:
    m = _LOG_RE.match(name)
    if not m or m["ext"] != "log":
        return None
    return LogFileName(m["file_id"], m["instant"], int(m["version"]), m["token"])


def file_id_of(name: str) -> str | None:
    parsed = parse_base_file_name(name) or parse_log_file_name(name)
    return parsed.file_id if parsed else None


def join_path(base: str, partition_path: str, name: str | None = None) -> str:
    parts = [base.rstrip("/")]
    if partition_path:
        parts.append(partition_path.strip("/"))
    if name:
        parts.append(name)
    return "/".join(parts)


def relative_partition_path(base: str, directory: str) -> str:
    base = base.rstrip("/")
    if directory.rstrip("/") == base:
        return ""
    return directory[len(base) + 1:].strip("/")
