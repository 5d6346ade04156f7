"""show_fsview_all, show_fsview_latest: the file system view (file groups, slices, base and log files)."""
from __future__ import annotations

import fnmatch
import logging

from sqlext.sql.procedures.registry import optional, procedure, required
from storage.table.file_slice import FileSlice
from storage.table.fs_view import FileSystemView
from storage.timeline.instant import Action

log = logging.getLogger(__name__)

ALL_PARTITIONS = "ALL_PARTITIONS"
_PARAMETERS_ALL = [required("table", "string"), optional("max_instant", "string", ""),
                   optional("include_max", "boolean", False), optional("include_in_flight", "boolean", False),
                   optional("exclude_compaction", "boolean", False), optional("limit", "int", 10),
                   optional("path_regex", "string", ALL_PARTITIONS)]
_PARAMETERS_LATEST = _PARAMETERS_ALL + [optional("partition_path", "string", ALL_PARTITIONS),
                                        optional("merge", "boolean", True)]
_SLICE = ("partition string, file_id string, base_instant string, data_file string, data_file_size long, "
          "num_delta_files long, total_delta_file_size long")


def _view(call, args) -> tuple[FileSystemView, object]:
    meta = call.meta_client(args)
    if args["include_in_flight"]:
        log.warning("show_fsview: include_in_flight is not supported; only completed instants are shown")
    as_of = None
    if args["max_instant"]:
        cutoff = args["max_instant"]
        eligible = [i.timestamp for i in meta.timeline.completed().write_timeline()
                    if i.timestamp < cutoff or (args["include_max"] and i.timestamp == cutoff)]
        as_of = max(eligible) if eligible else "0"
    view = FileSystemView(meta, as_of=as_of, include_pending_compaction=not args["exclude_compaction"])
    return view, meta


def _partitions(view: FileSystemView, pattern: str) -> list[str]:
    if not pattern or pattern == ALL_PARTITIONS:
        return view.partitions()
    return [p for p in view.partitions() if fnmatch.fnmatchcase(p, pattern.strip("/"))]


def _log_list(logs) -> str:
    return "[" + ", ".join(f"HoodieLogFile{{pathStr='{lf.path}', fileLen={lf.size}}}" for lf in logs) + "]"


@procedure("show_fsview_all", _PARAMETERS_ALL, _SLICE + ", delta_files string",
           "every file slice of every file group")
def show_fsview_all(call, args):
    view, _ = _view(call, args)
    rows = []
    for partition in _partitions(view, args["path_regex"]):
        for group in view.file_groups(partition):
            for s in group.ordered_slices():
                logs = s.sorted_log_files()
                rows.append((partition, s.file_id, s.base_instant, s.base_file.path if s.base_file else "",
                             s.base_file.size if s.base_file else 0, len(logs), sum(lf.size for lf in logs),
                             _log_list(logs)))
    return rows[: max(args["limit"], 0)]


@procedure("show_fsview_latest", _PARAMETERS_LATEST,
           _SLICE + ", delta_size_compaction_scheduled long, delta_size_compaction_unscheduled long, "
                    "delta_to_base_radio_compaction_scheduled double, delta_to_base_radio_compaction_unscheduled double, "
                    "delta_files_compaction_scheduled string, delta_files_compaction_unscheduled string",
           "the latest file slice of every file group (merged over a pending compaction)")
def show_fsview_latest(call, args):
    regex_given = args["path_regex"] != ALL_PARTITIONS
    if regex_given and args["partition_path"] != ALL_PARTITIONS:
        raise call.error("path_regex and partition_path cannot be used together")
    view, meta = _view(call, args)
    pattern = args["path_regex"] if regex_given else args["partition_path"]
    completed = {i.timestamp for i in meta.timeline.completed()}
    pending_compaction = {i.timestamp for i in meta.timeline.pending().of_actions([Action.COMPACTION])}
    rows = []
    for partition in _partitions(view, pattern):
        for group in view.file_groups(partition):
            s = _merged(group) if args["merge"] else group.latest_slice()
            if s is None:
                continue
            rows.append(_latest_row(s, completed, pending_compaction))
    return rows[: max(args["limit"], 0)]


def _merged(group) -> FileSlice | None:
    """The latest slice; when it is the log-only slice of a pending compaction, joined with the slice before
    it (what a reader merges), as Hudi's getLatestMergedFileSlicesBeforeOrOn does."""
    slices = [s for s in group.ordered_slices() if not s.is_empty()]
    if not slices:
        return None
    latest = slices[0]
    if latest.base_file is None and len(slices) > 1:
        previous = slices[1]
        return FileSlice(latest.file_group_id, previous.base_instant, previous.base_file,
                         previous.log_files + latest.log_files)
    return latest


def _latest_row(s: FileSlice, completed: set[str], pending_compaction: set[str]) -> tuple:
    logs = s.sorted_log_files()
    base_size = s.base_file.size if s.base_file else 0
    done = [lf for lf in logs if lf.instant_time in completed or lf.instant_time in pending_compaction]
    scheduled = sum(lf.size for lf in done)
    unscheduled = sum(lf.size for lf in logs) - scheduled
    ratio = (lambda n: n / base_size if base_size > 0 else -1.0)
    same = [lf for lf in logs if lf.instant_time == s.base_instant]
    other = [lf for lf in logs if lf.instant_time != s.base_instant]
    return (s.partition_path, s.file_id, s.base_instant, s.base_file.path if s.base_file else "", base_size,
            len(logs), sum(lf.size for lf in logs), scheduled, unscheduled, float(ratio(scheduled)),
            float(ratio(unscheduled)), _log_list(same), _log_list(other))
