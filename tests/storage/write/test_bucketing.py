"""Each record's bucket, assigned in Spark: the CASE expressions of a small plan place every record where the
broadcast joins of a large plan do (partition paths and file ids with quotes, backslashes and non-ASCII text)."""
import random

import pytest

from storage.index.simple_index import LOC_FILE_ID, LOC_PARTITION
from storage.meta_fields import PARTITION_PATH, RECORD_KEY
from storage.write import bucketing
from storage.write.bucketing import assign_buckets
from storage.write.partitioner import SizingConfig, SmallFile, WorkloadProfile, plan_buckets
from storage.write.task_context import BUCKET_COLUMN

PARTITIONS = ["dt=2026-01-01", "it's", "back\\slash", "née/\\'`%", ""]
SIZING = SizingConfig(small_file_limit=40, max_file_size=50, record_size_estimate=1, insert_split_size=7,
                      auto_split=False)


def _batch(rng):
    """Records of each partition: updates of two stored file groups, and inserts (no location)."""
    rows, updates, inserts = [], {}, {}
    for p_index, partition in enumerate(PARTITIONS):
        files = [f"f'{p_index}-{i}" for i in range(2)]
        for n in range(rng.randint(20, 40)):
            stored = rng.random() < 0.4
            file_id = rng.choice(files) if stored else None
            rows.append((f"k{p_index}-{n}", partition, file_id, partition if stored else None))
            if stored:
                updates[(partition, file_id)] = updates.get((partition, file_id), 0) + 1
            else:
                inserts[partition] = inserts.get(partition, 0) + 1
    small = {p: [SmallFile(p, f"f'{i}-0", 45)] for i, p in enumerate(PARTITIONS)}
    return rows, plan_buckets(WorkloadProfile(updates=updates, inserts=inserts), small, SIZING, 1)


def _assigned(spark, rows, plan):
    tagged = spark.createDataFrame(
        rows, f"{RECORD_KEY} string, {PARTITION_PATH} string, {LOC_FILE_ID} string, {LOC_PARTITION} string")
    placement = {b.bucket_id: 100 + b.bucket_id for b in plan.buckets}
    out = assign_buckets(spark, tagged, plan, placement)
    assert LOC_FILE_ID not in out.columns and LOC_PARTITION not in out.columns
    return {r[RECORD_KEY]: r[BUCKET_COLUMN] for r in out.collect()}


@pytest.fixture
def escaped_literals(spark, request):
    """The session's string-literal parsing as the test asks (Spark's own escapes, or none)."""
    key = "spark.sql.parser.escapedStringLiterals"
    before = spark.conf.get(key)
    spark.conf.set(key, request.param)
    yield
    spark.conf.set(key, before)


@pytest.mark.parametrize("seed, escaped_literals", [(1, "false"), (2, "true")], indirect=["escaped_literals"])
def test_case_expressions_place_records_as_the_joins_do(spark, monkeypatch, seed, escaped_literals):
    rows, plan = _batch(random.Random(seed))
    shares = sum(len(r) for r in plan.insert_ranges().values())
    assert shares > len(PARTITIONS)  # some partitions split their inserts over several buckets
    inline = _assigned(spark, rows, plan)
    monkeypatch.setattr(bucketing, "_INLINE_BRANCHES", 0)
    joined = _assigned(spark, rows, plan)
    assert inline == joined
    bucket_of_update = {k: 100 + b for k, b in plan.update_bucket_of().items()}
    for key, partition, file_id, _ in rows:
        if file_id is not None:
            assert inline[key] == bucket_of_update[(partition, file_id)], key
        else:
            insert_buckets = {100 + b for _, _, b in plan.insert_ranges()[partition]}
            assert inline[key] in insert_buckets, key
    # every insert share receives records: the positions spread over all of a partition's ranges
    used = set(inline.values())
    assert {100 + b for ranges in plan.insert_ranges().values() for _, _, b in ranges} <= used
