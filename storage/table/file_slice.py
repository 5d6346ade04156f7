"""File groups and file slices (Hudi's HoodieFileGroup / FileSlice): a file group is keyed by (partition path, file id) and
holds file slices ordered by base instant; a slice is at most one base file plus its log files."""
from __future__ import annotations

from dataclasses import dataclass, field

from storage.fs_utils import LogFileName, parse_base_file_name, parse_log_file_name


@dataclass(frozen=True, order=True)
class HoodieFileGroupId:
    partition_path: str
    file_id: str


@dataclass(frozen=True)
class HoodieBaseFile:
    path: str  # absolute
    size: int
    file_id: str
    instant_time: str
    write_token: str | None

    @classmethod
    def of(cls, path: str, size: int) -> "HoodieBaseFile":
        parsed = parse_base_file_name(path.rsplit("/", 1)[-1])
        if parsed is None:
            raise ValueError(f"not a base file name: {path}")
        return cls(path, size, parsed.file_id, parsed.instant_time, parsed.write_token)

    @property
    def name(self) -> str:
        return self.path.rsplit("/", 1)[-1]


@dataclass(frozen=True)
class HoodieLogFile:
    path: str
    size: int
    parsed: LogFileName

    @classmethod
    def of(cls, path: str, size: int) -> "HoodieLogFile":
        parsed = parse_log_file_name(path.rsplit("/", 1)[-1])
        if parsed is None:
            raise ValueError(f"not a log file name: {path}")
        return cls(path, size, parsed)

    @property
    def name(self) -> str:
        return self.path.rsplit("/", 1)[-1]

    @property
    def file_id(self) -> str:
        return self.parsed.file_id

    @property
    def instant_time(self) -> str:
        return self.parsed.instant_time

    def order_key(self) -> tuple:
        return (self.parsed.instant_time, self.parsed.version, self.parsed.write_token or "")


@dataclass
class FileSlice:
    file_group_id: HoodieFileGroupId
    base_instant: str
    base_file: HoodieBaseFile | None = None
    log_files: list[HoodieLogFile] = field(default_factory=list)

    @property
    def partition_path(self) -> str:
        return self.file_group_id.partition_path

    @property
    def file_id(self) -> str:
        return self.file_group_id.file_id

    def sorted_log_files(self) -> list[HoodieLogFile]:
        return sorted(self.log_files, key=HoodieLogFile.order_key)

    def is_empty(self) -> bool:
        return self.base_file is None and not self.log_files

    def total_size(self) -> int:
        return (self.base_file.size if self.base_file else 0) + sum(lf.size for lf in self.log_files)


@dataclass
class HoodieFileGroup:
    file_group_id: HoodieFileGroupId
    slices: dict[str, FileSlice] = field(default_factory=dict)  # base instant -> slice

    def slice_at(self, base_instant: str) -> FileSlice:
        if base_instant not in self.slices:
            self.slices[base_instant] = FileSlice(self.file_group_id, base_instant)
        return self.slices[base_instant]

    def ordered_slices(self) -> list[FileSlice]:
        """Slices newest first."""
        return [self.slices[k] for k in sorted(self.slices, reverse=True)]

    def latest_slice(self) -> FileSlice | None:
        for s in self.ordered_slices():
            if not s.is_empty():
                return s
        return None
