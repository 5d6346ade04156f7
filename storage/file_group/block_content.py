"""The prefix of AVRO_DATA_BLOCK and DELETE_BLOCK content (spec §6.1, §6.2): int32 version — Hudi's log block
version, 3 — then an int32 that is the record count of a data block and the datum length of a delete block."""
from __future__ import annotations

import struct

from storage.exception import HoodieCorruptedLogError

CONTENT_VERSION = 3
PREFIX_SIZE = 8
_PREFIX = struct.Struct(">ii")


def content_prefix(value: int) -> bytes:
    """The prefix of content whose second int32 is `value`."""
    return _PREFIX.pack(CONTENT_VERSION, value)


def read_content_prefix(content: bytes, what: str) -> int:
    """The second int32 of `what` content, after checking the version."""
    if len(content) < PREFIX_SIZE:
        raise HoodieCorruptedLogError(f"{what} content of {len(content)} bytes has no version prefix")
    version, value = _PREFIX.unpack_from(content)
    if version != CONTENT_VERSION:
        raise HoodieCorruptedLogError(f"unsupported {what} content version {version}")
    return value
