"""Exact bucket-to-task placement on Spark.

`repartition(n, col)` places a row in task `pmod(murmur3(col, 42), n)`. Hashing bucket ids directly
leaves ~1/e of tasks empty and doubles others; instead each bucket gets a key whose hash lands it in the task
chosen for it: its own (n buckets as n tasks), or one of fewer tasks that each write several buckets
(`pack_tasks`), since every task with Python in it costs a fixed ~20-25 ms here.
"""
from __future__ import annotations

import heapq

SPARK_HASH_SEED = 42
_MASK = 0xFFFFFFFF
EXACT_PLACEMENT_LIMIT = 4096


def _rotl(x: int, r: int) -> int:
    return ((x << r) | (x >> (32 - r))) & _MASK


def murmur3_hash_int(value: int, seed: int = SPARK_HASH_SEED) -> int:
    """Spark's Murmur3_x86_32.hashInt, as a signed 32-bit int."""
    k1 = (value & _MASK) * 0xCC9E2D51 & _MASK
    k1 = _rotl(k1, 15) * 0x1B873593 & _MASK
    h1 = (seed & _MASK) ^ k1
    h1 = (_rotl(h1, 13) * 5 + 0xE6546B64) & _MASK
    h1 ^= 4
    h1 ^= h1 >> 16
    h1 = h1 * 0x85EBCA6B & _MASK
    h1 ^= h1 >> 13
    h1 = h1 * 0xC2B2AE35 & _MASK
    h1 ^= h1 >> 16
    return h1 - (1 << 32) if h1 & 0x80000000 else h1


def placement_keys(num_buckets: int) -> list[int]:
    """keys[b] is an int whose Spark hash partition among `num_buckets` tasks is exactly b."""
    return placement_keys_for(list(range(num_buckets)), num_buckets)


def placement_keys_for(task_of_bucket: list[int], num_tasks: int) -> list[int]:
    """Distinct keys, keys[b] an int whose Spark hash partition among `num_tasks` tasks is `task_of_bucket[b]`."""
    if num_tasks > EXACT_PLACEMENT_LIMIT:
        return list(range(len(task_of_bucket)))  # with this many tasks, hash collisions no longer matter
    waiting: dict[int, list[int]] = {}  # task -> its buckets still without a key
    for bucket, task in enumerate(task_of_bucket):
        waiting.setdefault(task, []).append(bucket)
    keys = [0] * len(task_of_bucket)
    missing, candidate = len(task_of_bucket), 0
    while missing:
        buckets = waiting.get(murmur3_hash_int(candidate) % num_tasks)
        if buckets:
            keys[buckets.pop()] = candidate
            missing -= 1
        candidate += 1
    return keys


def pack_tasks(costs: list[float], max_tasks: int) -> tuple[int, list[int]]:
    """(number of tasks, task of each bucket): the buckets spread over at most `max_tasks` tasks, largest first
    onto the least loaded task (LPT), so that tasks finish together; one task per bucket when they are few."""
    if len(costs) <= max_tasks:
        return len(costs), list(range(len(costs)))
    loads = [(0.0, t) for t in range(max_tasks)]
    task_of = [0] * len(costs)
    for bucket in sorted(range(len(costs)), key=lambda b: -costs[b]):
        load, task = heapq.heappop(loads)
        task_of[bucket] = task
        heapq.heappush(loads, (load + costs[bucket], task))
    return max_tasks, task_of


TASKS_PER_CORE = 2  # tasks per core when file-level jobs are packed: room for cost estimates that are off
JOBS_PER_TASK = 4  # ... unless each core's one task gets this many jobs: then their estimates' errors even out


def packed_task_limit(jobs: int, cores: int) -> int:
    """How many tasks `jobs` file-level jobs are packed into on `cores` cores: two tasks a core, so that a task
    whose cost was underestimated does not hold the stage alone, or one task a core when each gets several jobs
    (a second task a core then costs its fixed start, some 50-70 ms of Spark and Python here, for nothing)."""
    return cores if jobs >= JOBS_PER_TASK * cores else TASKS_PER_CORE * cores


def max_packed_tasks(spark, jobs: int) -> int:
    """How many tasks `jobs` file-level jobs (write buckets, compactions, clustering groups) are packed into."""
    return packed_task_limit(jobs, spark.sparkContext.defaultParallelism)


def packed_frame(spark, rows: list[tuple], costs: list[float], schema):
    """`rows` (one per file-level job) as a DataFrame whose tasks each hold several of them, packed by `costs`
    (`pack_tasks`): a table service's `mapInArrow` then runs a few Python tasks instead of one per file."""
    tasks, task_of = pack_tasks(costs, max_packed_tasks(spark, len(rows)))
    per_task: list[list[tuple]] = [[] for _ in range(tasks)]
    for row, task in zip(rows, task_of):
        per_task[task].append(row)
    # one element per slice: parallelize cuts n elements into n slices of one
    return spark.createDataFrame(spark.sparkContext.parallelize(per_task, tasks).flatMap(lambda rs: rs), schema)
