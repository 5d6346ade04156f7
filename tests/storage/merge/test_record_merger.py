"""The record merger on small Arrow tables, against rows worked out by hand."""
import pyarrow as pa
import pytest

from storage.merge.record_merger import (
    HoodieMergeError,
    RecordMergeMode,
    merge_records,
    record_keys_from_fields,
)

EVENT, COMMIT = RecordMergeMode.EVENT_TIME_ORDERING, RecordMergeMode.COMMIT_TIME_ORDERING


def _records(rows):
    """rows: (key, ts, value, write_seq[, is_deleted])"""
    cols = {"_hoodie_record_key": [r[0] for r in rows], "ts": pa.array([r[1] for r in rows], pa.int64()),
            "v": [r[2] for r in rows], "_hoodie_write_seq": pa.array([r[3] for r in rows], pa.int64())}
    if any(len(r) > 4 for r in rows):
        cols["_hoodie_is_deleted"] = [r[4] if len(r) > 4 else None for r in rows]
    return pa.table(cols)


def _deletes(rows, ordering_type=pa.int64()):
    return pa.table({"record_key": pa.array([r[0] for r in rows], pa.string()),
                     "ordering_value": pa.array([r[1] for r in rows], ordering_type),
                     "_hoodie_write_seq": pa.array([r[2] for r in rows], pa.int64())})


def _kv(table):
    return sorted(zip(table["_hoodie_record_key"].to_pylist(), table["v"].to_pylist()))


# base rows (seq -1), then two log blocks (seq 0 and 1)
BASE_AND_LOGS = [
    ("a", 5, "a-base", -1),
    ("b", 1, "b-base", -1),
    ("c", 7, "c-base", -1),
    ("a", 3, "a-log0", 0),   # lower ordering than the base: loses under event time
    ("b", 1, "b-log0", 0),   # tie with the base: the later write wins
    ("c", 9, "c-log0", 0),
    ("c", 8, "c-log1", 1),   # later but lower: event time keeps c-log0, commit time takes this
    ("d", 2, "d-log1", 1),   # insert in a log block
]


def test_event_time_ordering():
    merged = merge_records(_records(BASE_AND_LOGS), None, EVENT, "ts")
    assert _kv(merged) == [("a", "a-base"), ("b", "b-log0"), ("c", "c-log0"), ("d", "d-log1")]


def test_commit_time_ordering():
    merged = merge_records(_records(BASE_AND_LOGS), None, COMMIT, "ts")
    assert _kv(merged) == [("a", "a-log0"), ("b", "b-log0"), ("c", "c-log1"), ("d", "d-log1")]


def test_output_keeps_write_order():
    merged = merge_records(_records(BASE_AND_LOGS), None, EVENT, "ts")
    assert merged["_hoodie_record_key"].to_pylist() == ["a", "b", "c", "d"]
    assert merged.column_names == ["_hoodie_record_key", "ts", "v", "_hoodie_write_seq"]


def test_ties_within_one_block_go_to_the_last_row():
    rows = [("k", 1, "first", 0), ("k", 1, "second", 0)]
    assert _kv(merge_records(_records(rows), None, EVENT, "ts")) == [("k", "second")]
    assert _kv(merge_records(_records(rows), None, COMMIT, "ts")) == [("k", "second")]


def test_null_ordering_value_loses_to_any_value():
    rows = [("k", 4, "base", -1), ("k", None, "log", 0)]
    assert _kv(merge_records(_records(rows), None, EVENT, "ts")) == [("k", "base")]
    rows = [("k", None, "base", -1), ("k", None, "log", 0)]
    assert _kv(merge_records(_records(rows), None, EVENT, "ts")) == [("k", "log")]


def test_natural_order_deletes():
    """Ordering value 0 or null (what Spark SQL DELETE writes): delete whatever was written before it."""
    deletes = _deletes([("a", 0, 2), ("b", None, 2), ("d", 0, 0)])  # d's delete comes before d's insert
    for mode in (EVENT, COMMIT):
        merged = merge_records(_records(BASE_AND_LOGS), deletes, mode, "ts")
        assert [k for k, _ in _kv(merged)] == ["c", "d"]


def test_event_time_deletes_compare_ordering_values():
    deletes = _deletes([
        ("a", 4, 2),    # below the winner's 5: the record stays
        ("b", 1, 2),    # tie with the winner, written later: deleted
        ("c", 10, 0),   # greater than c-log0's 9 although in an earlier block than c-log1: deleted
        ("d", 1, 2),    # below d's 2: stays
    ])
    merged = merge_records(_records(BASE_AND_LOGS), deletes, EVENT, "ts")
    assert _kv(merged) == [("a", "a-base"), ("d", "d-log1")]


def test_event_time_delete_tie_written_earlier_loses():
    rows = [("k", 3, "log1", 1)]
    merged = merge_records(_records(rows), _deletes([("k", 3, 0)]), EVENT, "ts")
    assert _kv(merged) == [("k", "log1")]


def test_commit_time_deletes_follow_write_order():
    deletes = _deletes([("a", 100, -1), ("b", 0, 0), ("c", 1, 0), ("d", 0, 5)])
    # a: a delete at seq -1 is not after a-log0; b: seq 0 is not after b-log0 (same block: data first);
    # c: c-log1 at seq 1 is after the delete; d: deleted
    merged = merge_records(_records(BASE_AND_LOGS), deletes, COMMIT, "ts")
    assert _kv(merged) == [("a", "a-log0"), ("b", "b-log0"), ("c", "c-log1")]


def test_delete_ordering_values_of_another_type_are_converted():
    deletes = _deletes([("c", 10, 0)], pa.int32())
    merged = merge_records(_records(BASE_AND_LOGS), deletes, EVENT, "ts")
    assert "c" not in merged["_hoodie_record_key"].to_pylist()


def test_is_deleted_flag_on_the_winning_version():
    rows = [("a", 1, "a-base", -1, False), ("a", 2, "a-del", 0, True),
            ("b", 5, "b-base", -1, False), ("b", 4, "b-del", 0, True)]
    assert _kv(merge_records(_records(rows), None, EVENT, "ts")) == [("b", "b-base")]
    assert _kv(merge_records(_records(rows), None, COMMIT, "ts")) == []


def test_event_time_needs_the_ordering_field():
    with pytest.raises(HoodieMergeError, match="ordering field 'nope'"):
        merge_records(_records(BASE_AND_LOGS), None, EVENT, "nope")


def test_record_keys_from_fields():
    table = pa.table({"id": [1, None, 3], "name": ["x", "y", ""]})
    assert record_keys_from_fields(table, ["id"]).to_pylist() == ["1", "__null__", "3"]
    assert record_keys_from_fields(table, ["id", "name"]).to_pylist() == [
        "id:1,name:x", "id:__null__,name:y", "id:3,name:__empty__"]


def test_combine_records_keeps_each_keys_greatest_ordering_as_duckdb_does():
    """Hudi's preCombine of an incoming batch (the write tasks' combine): per key the greatest (ordering value,
    input order), a null ordering value below any value; against DuckDB's window over the same rows."""
    import duckdb
    import numpy as np

    from storage.merge.record_merger import combine_records

    rng = np.random.default_rng(7)
    n = 2000
    ts = rng.integers(0, 4, n).astype(float)
    ts[rng.random(n) < 0.1] = np.nan
    batch = pa.table({"_hoodie_record_key": pa.array([f"k{i}" for i in rng.integers(0, 300, n)]),
                      "ts": pa.array(ts, pa.int64(), from_pandas=True),
                      "_hoodie_input_order": pa.array(rng.permutation(n) * 3, pa.int64()),
                      "v": pa.array(np.arange(n))})
    combined = combine_records(batch, ["ts", "_hoodie_input_order"])
    want = duckdb.sql("""SELECT v FROM batch QUALIFY row_number() OVER (PARTITION BY _hoodie_record_key
                         ORDER BY ts DESC NULLS LAST, _hoodie_input_order DESC) = 1""").fetchall()
    assert sorted(combined["v"].to_pylist()) == sorted(v for (v,) in want)
    assert combined.num_rows == len(set(batch["_hoodie_record_key"].to_pylist())) < n
    assert combined["v"].to_pylist() == sorted(combined["v"].to_pylist())  # in input (row) order


def test_combine_records_returns_a_batch_without_repeated_keys_as_it_is():
    from storage.merge.record_merger import combine_records

    batch = _records([("a", 1, "x", 0), ("b", None, "y", 0)])
    assert combine_records(batch, ["ts"]) is batch


@pytest.mark.parametrize("mode", [EVENT, COMMIT])
@pytest.mark.parametrize("seed", range(4))
def test_merge_of_unique_keys_decides_as_the_sorting_merge(mode, seed):
    """The hash-lookup merge of unique keys (the usual copy-on-write upsert) keeps and writes exactly the rows the
    general merge does, over random keys and ordering values with nulls and ties."""
    import numpy as np

    from storage.merge.record_merger import merge_unique_keys

    rng = np.random.default_rng(seed)

    def side(keys, seq):
        ts = rng.integers(0, 3, len(keys)).astype(float)
        ts[rng.random(len(keys)) < 0.2] = np.nan
        return pa.table({"_hoodie_record_key": pa.array([f"k{k}" for k in keys]),
                         "ts": pa.array(ts, pa.int64(), from_pandas=True),
                         "_hoodie_write_seq": pa.array([seq] * len(keys), pa.int64())})

    stored = side(rng.permutation(400)[:300], -1)
    incoming = side(rng.permutation(600)[:200], 0)
    keep_stored, written = merge_unique_keys(stored, incoming, mode, "ts")
    both = pa.concat_tables([stored, incoming]).append_column("pos", pa.array(np.arange(500)))
    survivors = merge_records(both, None, mode, "ts")["pos"].to_pylist()
    fast = [i for i, k in enumerate(keep_stored.to_pylist()) if k] + \
           [300 + i for i, w in enumerate(written.to_pylist()) if w]
    assert fast == survivors
    assert 0 < sum(written.to_pylist()) < 200 or mode is COMMIT


def test_merge_of_unique_keys_leaves_repeated_keys_to_the_sorting_merge():
    from storage.merge.record_merger import merge_unique_keys

    twice = _records([("a", 1, "x", -1), ("a", 2, "y", -1)])
    once = _records([("a", 3, "z", 0)])
    assert merge_unique_keys(twice, once, EVENT, "ts") is None
    assert merge_unique_keys(once, twice, EVENT, "ts") is None


@pytest.mark.parametrize("mode,natural", [(COMMIT, False), (EVENT, True), (EVENT, False)])
def test_deletes_of_unique_keys_decide_as_the_sorting_merge(mode, natural):
    """The hash-lookup delete (a bucket of deletes only, the usual copy-on-write delete) keeps exactly the stored
    rows the general merge does; deletes whose ordering values must be compared are left to the general merge."""
    import numpy as np

    from storage.merge.record_merger import DELETE_KEY, DELETE_ORDERING, delete_unique_keys

    rng = np.random.default_rng(7)
    keys = rng.permutation(400)[:300]
    stored = pa.table({"_hoodie_record_key": pa.array([f"k{k}" for k in keys]),
                       "ts": pa.array(rng.integers(1, 5, 300), pa.int64()),
                       "_hoodie_write_seq": pa.array([-1] * 300, pa.int64()), "pos": pa.array(np.arange(300))})
    gone = [f"k{k}" for k in rng.permutation(500)[:120]]  # some stored, some not
    ordering = [0] * 120 if natural else rng.integers(0, 6, 120).tolist()
    deletes = pa.table({DELETE_KEY: pa.array(gone), DELETE_ORDERING: pa.array(ordering, pa.int64()),
                        "_hoodie_write_seq": pa.array([0] * 120, pa.int64())})
    keep = delete_unique_keys(stored, deletes, mode)
    if mode is EVENT and not natural:
        assert keep is None
        return
    survivors = merge_records(stored, deletes, mode, "ts")["pos"].to_pylist()
    assert [i for i, k in enumerate(keep.to_pylist()) if k] == survivors
    assert 180 <= len(survivors) < 300
    twice = pa.concat_tables([stored, stored.slice(0, 1)])
    assert delete_unique_keys(twice, deletes, mode) is None
