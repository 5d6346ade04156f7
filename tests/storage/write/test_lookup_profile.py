"""An upsert's workload profile counted by the bloom index's lookup on the way (storage.index.hoodie_index
.BatchCounting, storage.write.locate.matches_profile): the pairing step counts the batch per partition (and its null
ordering values), each lookup task the keys it finds per file group, and the profile reads those rows from the
cached matches instead of joining the matches back onto the batch. The profile equals what the table held; the
table afterwards equals a replay of the upserts read by hudi-rs; rejected batches leave the table as it was."""
from __future__ import annotations

import os
import random

import pytest
from hudi_oracle import apply_batch, arrow_rows, hudi_rs_read, rows

import storage.write.write_operation as write_operation
from storage.exception import HoodieWriteError
from storage.index.hoodie_index import LOOKUP_COUNT

SCHEMA = "id int, name string, ts long, dt string"
COLS = ["id", "name", "ts", "dt"]
PARTS = ["2024-01-01", "2024-01-02", "2024-01-03"]


def _opts(table_type):
    return {"hoodie.table.name": "lp", "hoodie.datasource.write.table.type": table_type,
            "hoodie.sqlext.engine": "SPARK",  # the Spark path's profile counted by the lookup
            "hoodie.datasource.write.recordkey.field": "id", "hoodie.datasource.write.precombine.field": "ts",
            "hoodie.datasource.write.partitionpath.field": "dt", "hoodie.index.type": "BLOOM"}


def _write(spark, path, data, opts, operation, staged):
    """`data` staged as parquet first: Spark then knows the batch's size and the lookup broadcasts it (and caches
    its matches), as for any batch read from files."""
    df = spark.createDataFrame(data, SCHEMA).coalesce(2)
    df.write.parquet(staged)
    spark.read.parquet(staged).write.format("hudi").options(**opts) \
        .option("hoodie.datasource.write.operation", operation).mode("append").save(path)


def _spy(monkeypatch):
    seen = []
    counted = write_operation.matches_profile

    def spy(lookup, *rest):
        seen.append([LOOKUP_COUNT in lookup.columns, None])  # before the call: it may reject the batch
        seen[-1][1] = counted(lookup, *rest)
        return seen[-1][1]

    monkeypatch.setattr(write_operation, "matches_profile", spy)
    return seen


def _stored(path):
    """key -> (partition path, file id) of every live record, read by hudi-rs."""
    table = hudi_rs_read(path)
    out = {}
    for r in table.select(["id", "_hoodie_partition_path", "_hoodie_file_name"]).to_pylist():
        out[r["id"]] = (r["_hoodie_partition_path"], r["_hoodie_file_name"].split("_")[0])
    return out


@pytest.mark.parametrize("table_type", ["COPY_ON_WRITE", "MERGE_ON_READ"])
def test_profile_from_the_lookups_counts(spark, tmp_path, monkeypatch, table_type):
    path, opts, rng = str(tmp_path / "t"), _opts(table_type), random.Random(7)
    state: dict = {}
    base = [(i, f"b{i}", 1, PARTS[i % 3]) for i in range(60)]
    for part, chunk in enumerate((base[:30], base[30:])):  # two file groups per partition
        _write(spark, path, chunk, opts, "upsert", str(tmp_path / f"load{part}"))
        apply_batch(state, chunk, ordering=2)
    seen = _spy(monkeypatch)
    for step in range(3):
        stored = _stored(path)
        updates = rng.sample(sorted(stored), 12)
        inserts = [100 + 10 * step + k for k in range(6)]
        batch = [(k, f"u{step}", 2 + step, stored[k][0].split("=")[-1]) for k in updates]
        batch += [(k, f"n{step}", 2 + step, PARTS[k % 3] if k % 4 else "2024-02-01") for k in inserts]
        batch += [(updates[0], f"late{step}", 0, batch[0][3])]  # a repeated key: the older version loses
        rng.shuffle(batch)
        _write(spark, path, batch, opts, "upsert", str(tmp_path / f"batch{step}"))
        apply_batch(state, batch, ordering=2)

        was_counted, profile = seen[-1]
        assert was_counted and len(seen) == step + 1
        expected_updates: dict = {}
        for k in updates:
            expected_updates[stored[k]] = expected_updates.get(stored[k], 0) + 1
        assert profile.updates == expected_updates  # each stored key found once, in its file group
        expected_inserts: dict = {}
        for _, _, _, dt in batch:
            expected_inserts[dt] = expected_inserts.get(dt, 0)
        for k in inserts:
            dt = PARTS[k % 3] if k % 4 else "2024-02-01"
            expected_inserts[dt] += 1
        expected_inserts[batch[[r[0] for r in batch].index(updates[0])][3]] += 1  # the repeated record counts too
        assert profile.inserts == {p: max(n, 1) for p, n in expected_inserts.items()}
        assert arrow_rows(hudi_rs_read(path), COLS) == rows([dict(zip(COLS, r)) for r in state.values()], COLS)


def test_a_key_stored_twice_does_not_hide_an_insert(spark, tmp_path, monkeypatch):
    """Two bulk inserts store key 1 in two file groups of one partition: the lookup finds it twice, so the
    partition's records less the keys found would leave no insert, yet key 2 is new. Inserts are counted at
    least one per partition of the batch, so key 2 still finds a bucket."""
    path, opts = str(tmp_path / "t"), _opts("COPY_ON_WRITE")
    _write(spark, path, [(1, "a", 1, PARTS[0])], opts, "bulk_insert", str(tmp_path / "a"))
    _write(spark, path, [(1, "b", 1, PARTS[0])], opts, "bulk_insert", str(tmp_path / "b"))
    assert len({f for f in os.listdir(os.path.join(path, PARTS[0])) if f.endswith(".parquet")}) == 2
    seen = _spy(monkeypatch)
    _write(spark, path, [(1, "c", 2, PARTS[0]), (2, "d", 2, PARTS[0])], opts, "upsert", str(tmp_path / "c"))
    was_counted, profile = seen[-1]
    assert was_counted and sum(profile.updates.values()) == 2 and profile.inserts == {PARTS[0]: 1}
    got = sorted((r["id"], r["name"]) for r in hudi_rs_read(path).select(["id", "name"]).to_pylist())
    assert got == [(1, "c"), (1, "c"), (2, "d")]  # both stored copies updated, the new key written


@pytest.mark.parametrize("batch, message", [
    ([(2, "b", None, PARTS[0]), (3, "c", None, PARTS[1])], "2 records have a null precombine field 'ts'"),
    ([(2, "b", 1, "_tmp")], "partition paths _tmp start a directory"),
])
def test_counted_checks_reject_the_batch_before_any_write(spark, tmp_path, monkeypatch, batch, message):
    path, opts = str(tmp_path / "t"), _opts("MERGE_ON_READ")
    _write(spark, path, [(1, "a", 1, PARTS[0])], opts, "upsert", str(tmp_path / "a"))
    before = sorted(os.listdir(os.path.join(path, ".hoodie")))
    seen = _spy(monkeypatch)
    with pytest.raises(HoodieWriteError, match=message):
        _write(spark, path, batch, opts, "upsert", str(tmp_path / "b"))
    assert [counted for counted, _ in seen] == [True]  # the lookup's counts checked the batch
    assert sorted(os.listdir(os.path.join(path, ".hoodie"))) == before
