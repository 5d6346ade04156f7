"""Reader and writer of one Hudi log file (log format version 1, spec §6).

A log file is a concatenation of blocks::

    "#HUDI#" | int64 blockLength | int32 version=1 | int32 blockType | header | int64 contentLength | content
    | footer | int64 reverseLength (= total block bytes - 8)

`blockLength` counts every byte after itself, reverse length included. A block is corrupt when its magic is
missing, its length runs past the end of the file, or the reverse length does not match; the reader then reports
the damaged region as a `CorruptBlock` and resumes at the next magic, so a writer that died mid-block never hides
the blocks before it (nor, usually, those appended after it). File naming and roll-over are the caller's job.
"""
from __future__ import annotations

import dataclasses
import io
import logging
import os
import struct
from dataclasses import dataclass
from typing import Callable, Iterable, Iterator

from storage.config import HoodieConfig, LogFileConfigKeys
from storage.exception import HoodieFileAlreadyExistsError, HoodieIOError
from storage.io.storage import HoodieStorage
from storage.file_group.log_block import (
    AvroDataBlock,
    BoundedReader,
    CorruptBlock,
    HoodieCorruptedLogError,
    HoodieLogBlock,
    HoodieLogBlockType,
    decode_footer,
    decode_header,
    encode_metadata,
    make_block,
)

logger = logging.getLogger(__name__)

MAGIC = b"#HUDI#"
LOG_FORMAT_VERSION = 1
_PREFIX_SIZE = len(MAGIC) + 8  # magic + blockLength
# version, type, empty header, content length, empty footer, reverse length
_MIN_BLOCK_LENGTH = 4 + 4 + 4 + 8 + 4 + 8
_INT32 = struct.Struct(">i")
_INT64 = struct.Struct(">q")
_SCAN_CHUNK = 1 << 20
_REMOTE_CHUNK = 4 << 20  # object stores: ranged GETs of this size while walking a log file

DATA_BLOCK_MAX_SIZE = LogFileConfigKeys.DATA_BLOCK_MAX_SIZE
DATA_BLOCK_FORMAT = LogFileConfigKeys.DATA_BLOCK_FORMAT
LOG_FILE_MAX_SIZE = LogFileConfigKeys.LOG_FILE_MAX_SIZE


# ----------------------------------------------------------------------------------------------- encoding


def serialize_block(block: HoodieLogBlock) -> bytes:
    """The on-disk bytes of one block."""
    if block.block_type == HoodieLogBlockType.CORRUPT_BLOCK:
        raise ValueError("corrupt blocks are reported by the reader, never written")
    header, footer = encode_metadata(block.header), encode_metadata(block.footer)
    content = block.read_content()
    block_length = 4 + 4 + len(header) + 8 + len(content) + len(footer) + 8
    return b"".join((
        MAGIC,
        _INT64.pack(block_length),
        _INT32.pack(LOG_FORMAT_VERSION),
        _INT32.pack(int(block.block_type)),
        header,
        _INT64.pack(len(content)),
        content,
        footer,
        _INT64.pack(len(MAGIC) + 8 + block_length - 8),  # every byte of the block but this field
    ))


# ----------------------------------------------------------------------------------------------- writer


@dataclass(frozen=True)
class AppendResult:
    """Where one block landed: `block` is the block as written (a split piece, with offset and size set)."""

    offset: int
    size: int
    block: HoodieLogBlock


class HoodieLogFormatWriter:
    """Appends blocks to one log file (created if absent). Avro data blocks larger than `data_block_max_size`
    are split; `size()` / `should_roll_over()` let the caller move on to the next log version."""

    def __init__(self, path: str | os.PathLike[str], *, data_block_max_size: int = DATA_BLOCK_MAX_SIZE.default,
                 log_file_max_size: int = LOG_FILE_MAX_SIZE.default, fsync: bool = False,
                 storage: HoodieStorage | None = None, exclusive: bool = False) -> None:
        if data_block_max_size <= 0 or log_file_max_size <= 0:
            raise ValueError("block and file size limits must be positive")
        self.path = os.fspath(path)
        self.storage = storage or HoodieStorage.for_path(self.path)
        self.data_block_max_size = data_block_max_size
        self.log_file_max_size = log_file_max_size
        self._fsync = fsync
        self._exclusive = exclusive
        self._file, self._size = self._open()
        self._closed = False

    def _open(self):
        """Append where the file system can; elsewhere (object stores), and always when `exclusive`, a log file
        is written once, whole, when the writer closes, and only if no file has its name (create-if-absent): the
        caller rolls a new log version per append, as Hudi does on storage without append. Exclusive creation is
        what keeps two concurrent writers (or a writer and a rollback) from ever sharing one log file."""
        if self.storage.supports_append and not self._exclusive:
            existing = self.storage.size(self.path) if self.storage.exists(self.path) else 0
            return self.storage.open_append_stream(self.path), existing
        return io.BytesIO(), 0

    @classmethod
    def from_config(cls, path: str | os.PathLike[str], config: HoodieConfig = HoodieConfig(),
                    *, fsync: bool = False, storage: HoodieStorage | None = None) -> "HoodieLogFormatWriter":
        return cls(path, data_block_max_size=config.get_or(DATA_BLOCK_MAX_SIZE, DATA_BLOCK_MAX_SIZE.default),
                   log_file_max_size=config.get_or(LOG_FILE_MAX_SIZE, LOG_FILE_MAX_SIZE.default), fsync=fsync,
                   storage=storage)

    def size(self) -> int:
        """Current length of the log file in bytes."""
        return self._size

    def should_roll_over(self) -> bool:
        return self._size >= self.log_file_max_size

    def append_block(self, block: HoodieLogBlock) -> list[AppendResult]:
        return self.append_blocks([block])

    def append_blocks(self, blocks: Iterable[HoodieLogBlock]) -> list[AppendResult]:
        """Append `blocks` in order with one write; one result per block written (more if a block was split)."""
        if self._closed:
            raise ValueError(f"log writer for {self.path} is closed")
        pieces = [piece for block in blocks for piece in self._split(block)]
        payloads = [serialize_block(piece) for piece in pieces]
        results, offset = [], self._size
        for piece, payload in zip(pieces, payloads):
            written = dataclasses.replace(piece, offset=offset, size=len(payload))
            results.append(AppendResult(offset, len(payload), written))
            offset += len(payload)
        self._write(b"".join(payloads))
        logger.debug("appended %d blocks to %s, now %d bytes", len(results), self.path, self._size)
        return results

    def _split(self, block: HoodieLogBlock) -> list[HoodieLogBlock]:
        if isinstance(block, AvroDataBlock):
            return list(block.split(self.data_block_max_size))
        return [block]

    def _write(self, data: bytes) -> None:
        self._file.write(data)
        self._file.flush()
        self._size += len(data)

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        if isinstance(self._file, io.BytesIO):
            try:
                self.storage.create(self.path, self._file.getvalue())
            except HoodieFileAlreadyExistsError:
                if self._exclusive:
                    raise
                raise HoodieIOError(f"cannot append to {self.path}: {self.storage.scheme}:// has no append; "
                                    "write the next log file version instead") from None
            return
        self._file.close()
        if self._fsync:
            self.storage.fsync(self.path)

    def __enter__(self) -> "HoodieLogFormatWriter":
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()


@dataclass(frozen=True)
class NewLogFile:
    """A log file created whole by `create_new_log_file`."""

    name: str
    version: int
    size: int
    results: list[AppendResult]


MAX_LOG_VERSION_PROBES = 1000


def create_new_log_file(storage: HoodieStorage, directory: str, file_id: str, base_instant: str, version: int,
                        write_token: str | None, blocks: Iterable[HoodieLogBlock], *,
                        data_block_max_size: int = DATA_BLOCK_MAX_SIZE.default,
                        before_create: Callable[[str], None] | None = None,
                        on_taken: Callable[[str], None] | None = None) -> NewLogFile:
    """`blocks` in a new log file of the slice (file_id, base_instant): version `version`, or the next free one
    when someone else created that name first. Create-if-absent decides, on every storage, so a log file always
    belongs to exactly one write: concurrent writers planning the same next version (their write tokens can
    coincide across Spark applications) never append into one file, and undoing one write never deletes
    another's log. `before_create(name)` runs before each attempt (the write's marker), `on_taken(name)` after
    a name turned out to be taken."""
    from storage.fs_utils import join_path, make_log_file_name

    blocks = list(blocks)
    for v in range(version, version + MAX_LOG_VERSION_PROBES):
        name = make_log_file_name(file_id, base_instant, v, write_token)
        if before_create is not None:
            before_create(name)
        try:
            with HoodieLogFormatWriter(join_path(directory, name), data_block_max_size=data_block_max_size,
                                       storage=storage, exclusive=True) as writer:
                results = writer.append_blocks(blocks)
                size = writer.size()
        except HoodieFileAlreadyExistsError:
            logger.info("log file %s in %s was created by another write; taking the next version", name, directory)
            if on_taken is not None:
                on_taken(name)
            continue
        return NewLogFile(name, v, size, results)
    raise HoodieIOError(f"no free log file version for file group {file_id} (slice {base_instant}) in {directory} "
                        f"after {MAX_LOG_VERSION_PROBES} attempts from version {version}")


# ----------------------------------------------------------------------------------------------- sources


class _BytesSource:
    """A log file already in memory."""

    def __init__(self, data: bytes | bytearray | memoryview) -> None:
        self._data = bytes(data)
        self.size = len(self._data)
        self.name = "<bytes>"

    def read_at(self, pos: int, n: int) -> bytes:
        return self._data[pos : pos + n]

    def find(self, pattern: bytes, start: int, end: int) -> int:
        return self._data.find(pattern, start, end)

    def loader(self, pos: int, n: int) -> Callable[[], bytes]:
        return lambda: self._data[pos : pos + n]

    def close(self) -> None:
        pass


class _FileSource:
    """A log file read at random positions through `HoodieStorage`; its size is fixed when opened (a concurrent
    append is not seen). On object stores reads go in aligned chunks, so walking block headers costs a few
    ranged GETs rather than one per header. Lazy content loads read their range anew, so blocks outlive the
    reader."""

    def __init__(self, path: str, storage: HoodieStorage) -> None:
        self.name = path
        self._storage = storage
        self._file = storage.open_input_file(path)
        self.size = self._file.size()
        self._chunk = 0 if storage.is_local else _REMOTE_CHUNK
        self._cached: tuple[int, bytes] | None = None

    def read_at(self, pos: int, n: int) -> bytes:
        if not self._chunk or n > self._chunk:
            return self._file.read_at(n, pos)
        out = b""
        while n > 0 and pos < self.size:
            start = pos - pos % self._chunk
            if self._cached is None or self._cached[0] != start:
                self._cached = (start, self._file.read_at(self._chunk, start))
            piece = self._cached[1][pos - start: pos - start + n]
            if not piece:
                break
            out += piece
            pos += len(piece)
            n -= len(piece)
        return out

    def find(self, pattern: bytes, start: int, end: int) -> int:
        """First occurrence of `pattern` entirely inside [start, end), read in chunks."""
        pos = start
        while pos < end:
            chunk = self.read_at(pos, min(_SCAN_CHUNK, end - pos))
            hit = chunk.find(pattern)
            if hit >= 0:
                return pos + hit
            if pos + len(chunk) >= end or not chunk:
                return -1
            pos += len(chunk) - (len(pattern) - 1)  # overlap so a pattern across chunks is found
        return -1

    def loader(self, pos: int, n: int) -> Callable[[], bytes]:
        return lambda: _read_range(self._storage, self.name, pos, n)

    def close(self) -> None:
        self._file.close()


def _read_range(storage: HoodieStorage, path: str, pos: int, n: int) -> bytes:
    data = storage.read_range(path, pos, n)
    if len(data) != n:
        raise HoodieCorruptedLogError(f"{path}: {n} bytes expected at {pos}, the file now ends at {pos + len(data)}")
    return data


# ----------------------------------------------------------------------------------------------- reader


class HoodieLogFileReader:
    """Blocks of one log file (a path or its bytes), in order.

    Headers are read as the iteration goes; with `lazy` (default) a block's content is loaded only when asked
    for (`block.read_content()` or the typed decoders). Damaged regions come back as `CorruptBlock`s.
    """

    def __init__(self, source: str | os.PathLike[str] | bytes | bytearray | memoryview, *, lazy: bool = True,
                 storage: HoodieStorage | None = None) -> None:
        if isinstance(source, (bytes, bytearray, memoryview)):
            self._source: _BytesSource | _FileSource = _BytesSource(source)
        else:
            path = os.fspath(source)
            self._source = _FileSource(path, storage or HoodieStorage.for_path(path))
        self._lazy = lazy

    @property
    def name(self) -> str:
        return self._source.name

    def __iter__(self) -> Iterator[HoodieLogBlock]:
        return self._scan(0, self._source.size)

    def blocks(self) -> list[HoodieLogBlock]:
        return list(self)

    def reverse_blocks(self) -> Iterator[HoodieLogBlock]:
        """Blocks from last to first, following the reverse lengths; at the first place where no sound block
        ends it falls back to a forward scan of what lies before (for damage the forward scan recovers from,
        the result is the forward iteration reversed)."""
        end = self._source.size
        while end > 0:
            block = self._block_ending_at(end)
            if block is None:
                logger.debug("%s: no block ends at %d; scanning the first %d bytes forward", self.name, end, end)
                yield from reversed(list(self._scan(0, end)))
                return
            yield block
            end = block.offset

    def close(self) -> None:
        self._source.close()

    def __enter__(self) -> "HoodieLogFileReader":
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    # -- forward scan

    def _scan(self, pos: int, limit: int) -> Iterator[HoodieLogBlock]:
        while pos < limit:
            block = self._block_at(pos, limit)
            yield block
            pos = block.offset + block.size  # always > pos: a block or region is at least one byte

    def _block_at(self, pos: int, limit: int) -> HoodieLogBlock:
        end, problem = self._frame(pos, limit)
        if end is None:
            return self._corrupt_region(pos, limit, problem)
        try:
            return self._parse_framed(pos, end)
        except HoodieCorruptedLogError as exc:
            # the frame is sound, so the next block starts right after it
            return self._corrupt(pos, end, f"malformed block: {exc}")

    def _frame(self, pos: int, limit: int) -> tuple[int | None, str]:
        """End of the block starting at `pos` if its framing holds, else (None, what is wrong)."""
        prefix = self._source.read_at(pos, _PREFIX_SIZE)
        if prefix[: len(MAGIC)] != MAGIC:
            return None, "no magic"
        if pos + _PREFIX_SIZE > limit or len(prefix) < _PREFIX_SIZE:
            return None, "block length cut off by the end of the file"
        block_length = _INT64.unpack_from(prefix, len(MAGIC))[0]
        if block_length < _MIN_BLOCK_LENGTH:
            return None, f"impossible block length {block_length}"
        end = pos + _PREFIX_SIZE + block_length
        if end > limit:
            return None, f"block of {block_length} bytes runs past the end of the file"
        reverse = self._source.read_at(end - 8, 8)
        if len(reverse) != 8 or _INT64.unpack(reverse)[0] != block_length + len(MAGIC):
            return None, "reverse length does not match the block length"
        return end, ""

    def _parse_framed(self, pos: int, end: int) -> HoodieLogBlock:
        reader = BoundedReader(self._source.read_at, pos + _PREFIX_SIZE, end - 8)
        version = reader.int32("log format version")
        if version != LOG_FORMAT_VERSION:
            raise HoodieCorruptedLogError(f"unsupported log format version {version}")
        block_type = _block_type(reader.int32("block type"))
        header = decode_header(reader)
        content_length = reader.int64("content length")
        content_pos = reader.pos
        reader.skip(content_length, "content")
        footer = decode_footer(reader)
        if reader.remaining():
            raise HoodieCorruptedLogError(f"{reader.remaining()} stray bytes between footer and reverse length")
        return self._make(block_type, header, footer, pos, end, content_pos, content_length)

    def _make(self, block_type: HoodieLogBlockType, header: dict, footer: dict, pos: int, end: int,
              content_pos: int, content_length: int) -> HoodieLogBlock:
        loader = self._source.loader(content_pos, content_length)
        content = None if self._lazy else loader()
        return make_block(block_type, header, footer, content, offset=pos, size=end - pos, content_loader=loader)

    def _corrupt_region(self, pos: int, limit: int, problem: str) -> CorruptBlock:
        """From `pos` to the next magic (or `limit`): where the next block may start."""
        following = self._source.find(MAGIC, pos + 1, limit)
        return self._corrupt(pos, following if following >= 0 else limit, problem)

    def _corrupt(self, pos: int, end: int, reason: str) -> CorruptBlock:
        logger.warning("%s: corrupt block at offset %d (%d bytes): %s", self.name, pos, end - pos, reason)
        loader = self._source.loader(pos, end - pos)
        return CorruptBlock(content=None if self._lazy else loader(), offset=pos, size=end - pos,
                            content_loader=loader, reason=reason)

    # -- reverse walk

    def _block_ending_at(self, end: int) -> HoodieLogBlock | None:
        """The well-framed block whose reverse length sits just before `end`, or None if there is none."""
        if end < _PREFIX_SIZE + _MIN_BLOCK_LENGTH:
            return None
        reverse = _INT64.unpack(self._source.read_at(end - 8, 8))[0]
        start = end - 8 - reverse
        if not 0 <= start < end:
            return None
        block_end, _ = self._frame(start, end)
        if block_end != end:
            return None
        return self._block_at(start, end)


def _block_type(ordinal: int) -> HoodieLogBlockType:
    try:
        return HoodieLogBlockType(ordinal)
    except ValueError:
        raise HoodieCorruptedLogError(f"unknown block type {ordinal}") from None


def read_log_blocks(source: str | os.PathLike[str] | bytes, *, lazy: bool = False) -> list[HoodieLogBlock]:
    """Every block of a log file, content loaded unless `lazy`."""
    with HoodieLogFileReader(source, lazy=lazy) as reader:
        return reader.blocks()
