"""Records of a key combined in the write tasks (storage.write.prepare.combines_in_tasks) instead of by a Spark
aggregation before the index lookup: the same table and the same commit stats as the aggregation gives (forced
here by `hoodie.<op>.shuffle.parallelism`), and the rows an independent replay of the batch expects."""
from __future__ import annotations

import pytest
from hudi_oracle import apply_batch, arrow_rows, hudi_rs_read, rows

import storage.write.write_operation as write_operation
from storage.table.meta_client import HoodieTableMetaClient

SCHEMA = "id int, name string, ts long, dt string"
COLS = ["id", "name", "ts", "dt"]


def _opts(table_type, **extra):
    return {"hoodie.table.name": "c", "hoodie.datasource.write.table.type": table_type,
            "hoodie.datasource.write.recordkey.field": "id", "hoodie.datasource.write.precombine.field": "ts",
            "hoodie.datasource.write.partitionpath.field": "dt",
            "hoodie.datasource.write.hive_style_partitioning": "true", **extra}


def _write(spark, path, data, opts, operation, cached=False):
    df = spark.createDataFrame(data, SCHEMA).coalesce(1)
    if cached:  # a cached input is read again by each step instead of being cached a second time
        df = df.cache()
    df.write.format("hudi").options(**opts).option("hoodie.datasource.write.operation", operation) \
        .mode("append").save(path)
    if cached:
        df.unpersist()


def _dt(i):
    return f"2024-01-0{1 + i % 3}"


BASE = [(i, f"b{i}", 5, _dt(i)) for i in range(30)]
# each key of the batch two or three times, in input order: later ties win, greater ordering values win
BATCH = ([(i, f"lo{i}", 4, _dt(i)) for i in range(0, 30, 2)]  # older than stored: stored stays
         + [(i, f"hi{i}", 9, _dt(i)) for i in range(0, 30, 4)]
         + [(i, f"tie{i}", 9, _dt(i)) for i in range(0, 30, 8)]  # the later of two equal values
         + [(i, f"new{i}", 3, _dt(i)) for i in range(40, 50)]
         + [(i, f"newer{i}", 6, _dt(i)) for i in range(40, 50, 3)]
         + [(i, f"stale{i}", 1, _dt(i)) for i in range(40, 50, 2)])
DELETES = [(i, "x", 0, _dt(i)) for i in (1, 3, 3, 40, 40, 99)]


def _combined(batch):
    """The batch's record of each key: the greatest `ts`, the later row on a tie (Hudi's preCombine)."""
    state: dict = {}
    apply_batch(state, batch, ordering=2)
    return state


def _totals(path):
    meta = HoodieTableMetaClient.load(path)
    stats = meta.active_timeline.commit_metadata(meta.timeline.completed().instants[-1]).write_stats()
    return tuple(sum(getattr(s, f) for s in stats) for f in ("numWrites", "numInserts", "numUpdateWrites",
                                                              "numDeletes"))


@pytest.mark.parametrize("table_type,cached", [("COPY_ON_WRITE", False), ("MERGE_ON_READ", True)])
def test_tasks_combine_as_the_dedup_shuffle_does(spark, tmp_path, monkeypatch, table_type, cached):
    state = _combined(BASE)
    state.update(_combined(BATCH))  # the table's default payload: the batch's record replaces the stored one
    after_upsert = rows([dict(zip(COLS, r)) for r in state.values()], COLS)
    apply_batch(state, DELETES, delete=True)
    after_delete = rows([dict(zip(COLS, r)) for r in state.values()], COLS)

    shuffled = str(tmp_path / "shuffled")
    opts = _opts(table_type, **{"hoodie.upsert.shuffle.parallelism": "2", "hoodie.delete.shuffle.parallelism": "2"})
    _write(spark, shuffled, BASE, opts, "upsert")
    _write(spark, shuffled, BATCH, opts, "upsert")
    shuffled_upsert = _totals(shuffled)
    _write(spark, shuffled, DELETES, opts, "delete")

    combined = str(tmp_path / "combined")
    opts = _opts(table_type)
    _write(spark, combined, BASE, opts, "upsert")
    calls = []
    dedup = write_operation.dedup
    monkeypatch.setattr(write_operation, "dedup", lambda *a, **k: calls.append(a) or dedup(*a, **k))
    _write(spark, combined, BATCH, opts, "upsert", cached)
    assert arrow_rows(hudi_rs_read(combined), COLS) == after_upsert
    assert _totals(combined) == shuffled_upsert
    assert shuffled_upsert[1] + shuffled_upsert[2] == len({r[0] for r in BATCH})  # one record per key of the batch
    _write(spark, combined, DELETES, opts, "delete", cached)
    assert not calls  # the tasks combined: no aggregation before the lookup
    assert _totals(combined) == _totals(shuffled)
    assert arrow_rows(hudi_rs_read(combined), COLS) == arrow_rows(hudi_rs_read(shuffled), COLS) == after_delete


def test_insert_combines_in_its_tasks_when_asked(spark, tmp_path):
    path = str(tmp_path / "ins")
    opts = _opts("COPY_ON_WRITE", **{"hoodie.combine.before.insert": "true"})
    _write(spark, path, BASE[:10], opts, "insert")
    batch = [(i, f"v{i}", 7, _dt(i)) for i in range(20, 26)] * 2 + [(20, "last", 7, _dt(20))]
    _write(spark, path, batch, opts, "insert")
    state = _combined(BASE[:10])
    state.update(_combined(batch))
    assert arrow_rows(hudi_rs_read(path), COLS) == rows([dict(zip(COLS, r)) for r in state.values()], COLS)


def test_a_cached_input_is_not_cached_again(spark):
    from storage.write.write_operation import _is_cached

    df = spark.createDataFrame(BASE, SCHEMA)
    assert not _is_cached(df)
    df.cache()
    try:
        assert _is_cached(df) and not _is_cached(df.select("id"))
    finally:
        df.unpersist()
