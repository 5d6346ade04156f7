"""Phase 3 of an in-process write: one task per bucket on the engine's thread pool, each running the Spark path's
task body (storage.write.handle.write_bucket_files) on its bucket's records, returning its write stats."""
from __future__ import annotations

import numpy as np
import pyarrow as pa

from storage.timeline.commit_metadata import HoodieWriteStat
from storage.write.handle import write_bucket_files
from storage.write.task_context import BUCKET_COLUMN, WriteTaskContext


def run_write_tasks(assigned: pa.Table, ctx: WriteTaskContext, engine) -> list[HoodieWriteStat]:
    """The buckets of `assigned` (records with their `BUCKET_COLUMN`) written by `engine` (a LocalEngineContext)."""
    if not assigned.num_rows:
        return []
    placements = assigned.column(BUCKET_COLUMN).to_numpy()
    order = np.argsort(placements, kind="stable")
    keys, starts, counts = np.unique(placements[order], return_index=True, return_counts=True)
    # each task takes its own rows (in the pool, in parallel): the driver only sorts the row numbers
    groups = [(int(k), order[s:s + c]) for k, s, c in zip(keys, starts, counts)]
    groups.sort(key=lambda g: -_cost(g[0], len(g[1]), ctx))  # largest first: the pool's tasks end together

    def write(group: tuple[int, np.ndarray]):
        return write_bucket_files(assigned.take(pa.array(group[1])), ctx)

    return [stat for stats in engine.map_each(write, groups) for stat in stats]


def _cost(placement: int, rows: int, ctx: WriteTaskContext) -> int:
    """A bucket's work: its records, and the base file it rewrites (counted as records of the table's size)."""
    target = ctx.targets[ctx.placement[placement]]
    return rows + (1 << 20 if target.base_file_path and target.log is None else 0)
