"""Compaction plan strategies (Hudi's `CompactionStrategy`): which file slices a compaction plan compacts.

LogFileSizeBasedCompactionStrategy (default): slices with log files, largest total log size first, keeping
only slices whose log size reaches `hoodie.compaction.logfile.size.threshold`, bounded by
`hoodie.compaction.target.io` (MB of base + log IO). UnBoundedCompactionStrategy: every slice with logs."""
from __future__ import annotations

from dataclasses import dataclass

from storage.config import CompactionConfigKeys as CK
from storage.table.file_slice import FileSlice

LOG_FILE_SIZE_BASED = "org.apache.hudi.table.action.compact.strategy.LogFileSizeBasedCompactionStrategy"
UNBOUNDED = "org.apache.hudi.table.action.compact.strategy.UnBoundedCompactionStrategy"
_MB = 1024 * 1024


@dataclass(frozen=True)
class OperationMetrics:
    total_log_size: int
    total_log_files: int
    total_io_mb: float

    def as_map(self) -> dict[str, float]:
        # Metric names as Hudi's CompactionStrategy.captureMetrics spells them.
        return {
            "TOTAL_LOG_FILES_SIZE": float(self.total_log_size),
            "TOTAL_LOG_FILES": float(self.total_log_files),
            "TOTAL_IO_MB": self.total_io_mb,
            "TOTAL_IO_READ_MB": self.total_io_mb / 2,
            "TOTAL_IO_WRITE_MB": self.total_io_mb / 2,
        }


def metrics_of(fs: FileSlice) -> OperationMetrics:
    log_size = sum(lf.size for lf in fs.log_files)
    base = fs.base_file.size if fs.base_file else 0
    read_mb = (base + log_size) / _MB
    write_mb = (base if base else log_size) / _MB
    return OperationMetrics(log_size, len(fs.log_files), read_mb + write_mb)


def select_slices(slices: list[FileSlice], strategy: str, target_io_mb: int, log_size_threshold: int) -> list[FileSlice]:
    """The slices to compact, in plan order."""
    candidates = [s for s in slices if s.log_files]
    if strategy.endswith("UnBoundedCompactionStrategy"):
        return candidates
    if not strategy.endswith("LogFileSizeBasedCompactionStrategy"):
        raise ValueError(f"unsupported compaction strategy {strategy!r} ({CK.STRATEGY.key}); "
                         f"use {LOG_FILE_SIZE_BASED} or {UNBOUNDED}")
    candidates = [s for s in candidates if metrics_of(s).total_log_size >= log_size_threshold]
    candidates.sort(key=lambda s: metrics_of(s).total_log_size, reverse=True)
    chosen, io = [], 0.0
    for s in candidates:
        if chosen and io + metrics_of(s).total_io_mb > target_io_mb:
            break  # bounded IO per compaction run; the first slice always goes in
        chosen.append(s)
        io += metrics_of(s).total_io_mb
    return chosen
