"""The timeline and file layout of a table, as rows (`CALL show_timeline`) and as a picture
(`sqlext timeline TABLE --png out.png`, matplotlib).

Rows: one per instant of the active timeline (its latest state): instant time, action, state, completion time
and what its commit metadata says it touched. Picture: the instants by action and state over time (top), and
the file layout (bottom): each file group of each partition as a row of its file slices, oldest first, each
slice a bar of its base file size followed by its log file sizes.
"""
from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import datetime

from storage.table.fs_view import FileSystemView
from storage.table.meta_client import HoodieTableMetaClient
from storage.timeline.instant import Action, HoodieInstant, State
from storage.timeline.instant_time import parse_instant

log = logging.getLogger(__name__)

_WRITE_ACTIONS = frozenset({Action.COMMIT, Action.DELTA_COMMIT, Action.REPLACE_COMMIT})


@dataclass(frozen=True)
class TimelineEntry:
    instant_time: str
    action: str
    state: str
    completion_time: str | None
    files_touched: int
    partitions_touched: int
    records_written: int


@dataclass(frozen=True)
class FileSliceLayout:
    partition_path: str
    file_id: str
    base_instant: str
    base_file_size: int  # 0 without a base file
    log_file_sizes: tuple[int, ...]


def timeline_entries(meta: HoodieTableMetaClient) -> list[TimelineEntry]:
    """Every instant of the active timeline, oldest first."""
    from sqlext.sql.procedures._timeline import state_transition_time

    return [_entry(meta, i, state_transition_time(meta, i)) for i in meta.timeline]


def _entry(meta: HoodieTableMetaClient, instant: HoodieInstant, completed_at: str | None) -> TimelineEntry:
    files = partitions = records = 0
    if instant.is_completed and instant.action in _WRITE_ACTIONS:
        try:
            md = meta.active_timeline.commit_metadata(instant)
        except ValueError as exc:
            log.warning("%s", exc)
        else:
            stats = md.write_stats()
            files = len(stats) + len(md.replaced_file_ids())
            partitions = len(set(md.partitionToWriteStats) | set(md.partitionToReplaceFileIds or {}))
            records = sum(int(s.numWrites or 0) for s in stats)
    return TimelineEntry(instant.timestamp, instant.action, instant.state.value, completed_at, files, partitions,
                         records)


def file_layout(meta: HoodieTableMetaClient) -> list[FileSliceLayout]:
    """Every file slice of every file group (replaced groups included), by partition, file group, base instant."""
    layout = []
    for group in FileSystemView(meta).file_groups():
        for s in group.ordered_slices():
            layout.append(FileSliceLayout(s.partition_path, s.file_id, s.base_instant,
                                          s.base_file.size if s.base_file else 0,
                                          tuple(lf.size for lf in s.sorted_log_files())))
    return sorted(layout, key=lambda s: (s.partition_path, s.file_id, s.base_instant))


# -- the picture ----------------------------------------------------------------------------------------------
_STATE_MARKERS = {State.COMPLETED.value: ("o", "full"), State.INFLIGHT.value: ("o", "none"),
                  State.REQUESTED.value: ("x", "full")}
_BASE_COLOR, _LOG_COLOR = "#4C72B0", "#DD8452"


def draw_timeline_png(meta: HoodieTableMetaClient, out_path: str, title: str | None = None) -> str:
    """Draw the table's timeline and file layout into `out_path` (PNG); returns it."""
    import matplotlib

    matplotlib.use("Agg")  # no display: files only
    import matplotlib.pyplot as plt

    entries, layout = timeline_entries(meta), file_layout(meta)
    groups = sorted({(s.partition_path, s.file_id) for s in layout})
    fig, (top, bottom) = plt.subplots(2, 1, figsize=(11, 3.2 + 0.32 * max(len(groups), 3)),
                                      gridspec_kw={"height_ratios": [2, max(len(groups), 3) * 0.35]})
    _draw_instants(top, entries)
    _draw_layout(bottom, layout, groups)
    fig.suptitle(title or f"{meta.table_config.name}  ({meta.table_config.table_type})", fontsize=12)
    fig.tight_layout()
    fig.savefig(out_path, dpi=110)
    plt.close(fig)
    return out_path


def _when(instant_time: str) -> datetime:
    return parse_instant(instant_time)


def _draw_instants(ax, entries: list[TimelineEntry]) -> None:
    actions = sorted({e.action for e in entries}) or [Action.COMMIT]
    colors = {a: f"C{i}" for i, a in enumerate(actions)}
    for e in entries:
        y = actions.index(e.action)
        start = _when(e.instant_time)
        if e.completion_time:
            ax.plot([start, _when(e.completion_time)], [y, y], color=colors[e.action], lw=3, alpha=0.35)
        marker, fill = _STATE_MARKERS[e.state]
        ax.plot([start], [y], marker=marker, fillstyle=fill, markersize=9, color=colors[e.action], linestyle="")
        if e.records_written:
            ax.annotate(f"{e.records_written} rec", (start, y), textcoords="offset points", xytext=(0, 8),
                        ha="center", fontsize=7)
    ax.set_yticks(range(len(actions)), actions)
    ax.set_ylim(-0.7, len(actions) - 0.3)
    ax.set_title("timeline: ● completed  ○ inflight  × requested (bar: requested → completed)", fontsize=9)
    ax.grid(axis="x", alpha=0.3)
    ax.tick_params(axis="x", labelsize=8)


def _draw_layout(ax, layout: list[FileSliceLayout], groups: list[tuple[str, str]]) -> None:
    rows = {g: i for i, g in enumerate(groups)}
    for g in groups:
        left = 0.0
        for s in (s for s in layout if (s.partition_path, s.file_id) == g):
            y = rows[g]
            if s.base_file_size:
                ax.barh(y, s.base_file_size / 1024, left=left, color=_BASE_COLOR, edgecolor="black", lw=0.5)
                left += s.base_file_size / 1024
            for size in s.log_file_sizes:
                ax.barh(y, size / 1024, left=left, color=_LOG_COLOR, edgecolor="black", lw=0.5)
                left += size / 1024
            if s.log_file_sizes:  # log files are often too small to see next to their base file
                ax.text(left, y, f" +{len(s.log_file_sizes)} log", fontsize=7, va="center", color=_LOG_COLOR)
            left += 0.02 * max(left, 1)  # a gap between slices
    ax.set_yticks(range(len(groups)), [f"{p or '(root)'} / {f[:8]}" for p, f in groups], fontsize=8)
    ax.invert_yaxis()
    ax.set_xlabel("KiB (slices left to right, oldest first; blue: base file, orange: log files)", fontsize=8)
    ax.set_title("file layout: file groups per partition", fontsize=9)
    if not groups:
        ax.text(0.5, 0.5, "no file groups", transform=ax.transAxes, ha="center")
