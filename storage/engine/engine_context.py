"""Where the per-file tasks of a table service run (Hudi's HoodieEngineContext: Spark, Flink, or the in-process
Java client's local context): `SparkEngineContext` packs the tasks' inputs into a few Spark tasks and runs them with
`mapInArrow`; `LocalEngineContext` runs the same task function over the same packed inputs on a thread pool in
this process, with no Spark job (pyarrow releases the GIL for decoding, compression and file writes). The task
bodies are shared, not copied: a task is a `mapInArrow` function (record batches of input rows in, record batches
of output rows out) whichever engine runs it.

`engine_for(spark, input_bytes, config)` chooses per operation from the bytes its plan reads, known before any
job (`hoodie.sqlext.engine`: AUTO, SPARK or LOCAL; AUTO runs plans of at most
`hoodie.sqlext.engine.local.max.bytes` in process, and everything in process when there is no Spark session).
A Spark job costs a fixed ~0.3-0.5 s here however small its input; a compaction or clustering of a few small
slices costs less than that in process.
"""
from __future__ import annotations

import itertools
import logging
import os
import random
import threading
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Protocol, TypeVar

import pyarrow as pa

from storage.config import EngineConfigKeys as EK
from storage.config import HoodieConfig
from storage.engine.spark_partitioning import pack_tasks, packed_frame, packed_task_limit

log = logging.getLogger(__name__)

T, R = TypeVar("T"), TypeVar("R")
ArrowTask = Callable[[Iterator[pa.RecordBatch]], Iterator[pa.RecordBatch]]
SPARK, LOCAL, AUTO = "SPARK", "LOCAL", "AUTO"
_LOCAL_STAGES = itertools.count(random.randrange(1, 1 << 20))  # a write token's stage: unique in this process
_LOCAL_TASK = threading.local()


def local_task_ids() -> tuple[int, int, int] | None:
    """(task, stage, attempt) of the local engine's task running in this thread; None outside one."""
    return getattr(_LOCAL_TASK, "ids", None)


class EngineContext(Protocol):
    name: str

    def map_packed(self, rows: list[tuple], costs: list[float], schema, task: ArrowTask,
                   out_schema: str) -> list[tuple]:
        """Run `task` over `rows` (of Spark schema `schema`: a StructType or DDL string) packed by `costs` into a
        few tasks; the rows the tasks yield (of DDL `out_schema`), as tuples."""
        ...

    def map_each(self, fn: Callable[[T], R], items: list[T], max_tasks: int | None = None) -> list[R]:
        """`fn` of each item (at most `max_tasks` tasks at once), results in the items' order."""
        ...

    @property
    def accumulates(self) -> bool:
        """Whether tasks run in other processes (their storage requests then reach the driver by accumulator)."""
        ...


class SparkEngineContext:
    name = SPARK
    accumulates = True

    def __init__(self, spark):
        self.spark = spark

    def map_packed(self, rows: list[tuple], costs: list[float], schema, task: ArrowTask,
                   out_schema: str) -> list[tuple]:
        if not rows:
            return []
        return [tuple(r) for r in packed_frame(self.spark, rows, costs, schema).mapInArrow(task, out_schema).collect()]

    def map_each(self, fn: Callable[[T], R], items: list[T], max_tasks: int | None = None) -> list[R]:
        if not items:
            return []
        return self.spark.sparkContext.parallelize(items, min(len(items), max_tasks or len(items))).map(fn).collect()


class LocalEngineContext:
    name = LOCAL
    accumulates = False

    def __init__(self, threads: int | None = None):
        self.threads = max(1, threads or os.cpu_count() or 1)

    def map_packed(self, rows: list[tuple], costs: list[float], schema, task: ArrowTask,
                   out_schema: str) -> list[tuple]:
        if not rows:
            return []
        arrow_schema = _arrow_schema(schema)
        tasks, task_of = pack_tasks(costs, packed_task_limit(len(rows), self.threads))
        per_task: list[list[tuple]] = [[] for _ in range(tasks)]
        for row, t in zip(rows, task_of):
            per_task[t].append(row)
        names = arrow_schema.names
        stage = next(_LOCAL_STAGES)

        def run(numbered: tuple[int, list[tuple]]) -> list[tuple]:
            number, task_rows = numbered
            _LOCAL_TASK.ids = (number, stage, 0)
            try:
                batch = pa.RecordBatch.from_pylist([dict(zip(names, r)) for r in task_rows], schema=arrow_schema)
                return [tuple(r.values()) for out in task(iter([batch])) for r in out.to_pylist()]
            finally:
                _LOCAL_TASK.ids = None

        with ThreadPoolExecutor(max_workers=min(self.threads, tasks), thread_name_prefix="hudi-local-task") as pool:
            return [r for result in pool.map(run, enumerate(per_task)) for r in result]

    def map_each(self, fn: Callable[[T], R], items: list[T], max_tasks: int | None = None) -> list[R]:
        """`fn` of each item, each call one task of its own on the thread pool (a write token of its own: see
        `local_task_ids`), at most `max_tasks` at once; results in the items' order; items are best given largest
        first."""
        if not items:
            return []
        stage = next(_LOCAL_STAGES)

        def run(numbered: tuple[int, T]) -> R:
            number, item = numbered
            _LOCAL_TASK.ids = (number, stage, 0)
            try:
                return fn(item)
            finally:
                _LOCAL_TASK.ids = None

        if len(items) == 1:  # no thread hop for a single task
            return [run((0, items[0]))]
        with ThreadPoolExecutor(max_workers=min(self.threads, len(items), max_tasks or len(items)),
                                thread_name_prefix="hudi-local-task") as pool:
            return list(pool.map(run, enumerate(items)))


def _arrow_schema(schema) -> pa.Schema:
    from pyspark.sql.pandas.types import to_arrow_schema
    from pyspark.sql.types import StructType, _parse_datatype_string

    return to_arrow_schema(schema if isinstance(schema, StructType) else _parse_datatype_string(schema))


def engine_for(spark, input_bytes: int, config: HoodieConfig, what: str = "") -> EngineContext:
    """The engine one operation runs on, chosen from the bytes its plan reads (see the module doc)."""
    return _chosen(spark, input_bytes, EK.LOCAL_MAX_BYTES, "bytes to read", config, what)


def engine_for_deletes(spark, files: int, config: HoodieConfig, what: str = "") -> EngineContext:
    """The engine that deletes `files` files (a clean), chosen by their number (`hoodie.sqlext.engine.local.max.files`):
    a deletion is one storage request, a Spark job's fixed cost is worth paying only for many of them."""
    return _chosen(spark, files, EK.LOCAL_MAX_FILES, "files to delete", config, what)


def _chosen(spark, size: int, limit_key, unit: str, config: HoodieConfig, what: str) -> EngineContext:
    choice = config.get(EK.ENGINE)
    limit = int(config.get(limit_key))
    if spark is None or choice == LOCAL or (choice == AUTO and size <= limit):
        engine: EngineContext = LocalEngineContext()
    else:
        engine = SparkEngineContext(spark)
    log.debug("%s: %d %s, runs on %s (%s=%s, local up to %d)", what or "operation", size, unit, engine.name,
              EK.ENGINE.key, choice, limit)
    return engine
