"""Copy-on-write writes end to end: our reader and hudi-rs read the same rows, equal to rows computed
independently here, for the snapshot and for time travel to every earlier commit."""
from __future__ import annotations

import os

import pyarrow.parquet as pq
import pytest
from crashing_writer import write_and_crash_before_commit
from hudi_oracle import arrow_rows, hudi_rs_read, rows, spark_rows

from storage.bloom import deserialize_bloom_filter
from storage.config import HoodieConfig
from storage.exception import HoodieWriteError
from storage.table.fs_view import FileSystemView
from storage.table.meta_client import HoodieTableMetaClient

pytestmark = pytest.mark.usefixtures("write_engine")  # every test on both write engines

SCHEMA = "id int, name string, price double, ts long, dt string"


def _opts(name, **extra):
    opts = {
        "hoodie.table.name": name,
        "hoodie.datasource.write.recordkey.field": "id",
        "hoodie.datasource.write.precombine.field": "ts",
        "hoodie.datasource.write.partitionpath.field": "dt",
        "hoodie.datasource.write.hive_style_partitioning": "true",
    }
    opts.update(extra)
    return opts


def _write(spark, path, data, opts, operation="upsert", mode="append", schema=SCHEMA):
    df = spark.createDataFrame(data, schema)
    df.write.format("hudi").options(**opts).option("hoodie.datasource.write.operation", operation).mode(mode).save(str(path))


def _check(spark, path, expected: dict, as_of=None):
    """Our reader and hudi-rs agree with the expected rows."""
    opts = {"as.of.instant": as_of} if as_of else {}
    ours = spark.read.format("hudi").options(**opts).load(str(path))
    theirs = hudi_rs_read(path, as_of)
    want = rows([dict(zip(["id", "name", "price", "ts", "dt"], r)) for r in expected.values()])
    assert spark_rows(ours) == want
    assert arrow_rows(theirs) == want


def _apply(state: dict, batch, delete=False):
    for r in batch:
        if delete:
            state.pop(r[0], None)
        elif r[0] not in state or r[3] >= state[r[0]][3]:
            state[r[0]] = r


def test_partitioned_lifecycle_matches_hudi_rs(spark, tmp_path):
    path = tmp_path / "t1"
    opts = _opts("t1")
    history = []
    state: dict = {}
    b1 = [(i, f"n{i}", i * 1.5, 1, f"2024-01-0{i % 3 + 1}") for i in range(1, 31)]
    _write(spark, path, b1, opts, "insert")
    _apply(state, b1)
    history.append(dict(state))
    # upsert: updates (one with a lower ts in the batch is deduplicated away) and inserts
    b2 = [(i, f"u{i}", i * 2.0, 2, f"2024-01-0{i % 3 + 1}") for i in range(20, 41)] + [(25, "stale", 0.0, 1, "2024-01-02")]
    _write(spark, path, b2, opts, "upsert")
    _apply(state, [r for r in b2 if r[1] != "stale"])
    history.append(dict(state))
    b3 = [(i, "", 0.0, 3, f"2024-01-0{i % 3 + 1}") for i in (1, 2, 21, 40)]
    _write(spark, path, b3, opts, "delete")
    _apply(state, b3, delete=True)
    history.append(dict(state))
    b4 = [(100 + i, f"o{i}", 1.0, 4, "2024-01-01") for i in range(5)]
    _write(spark, path, b4, opts, "insert_overwrite")
    state = {k: v for k, v in state.items() if v[4] != "2024-01-01"}
    _apply(state, b4)
    history.append(dict(state))

    _check(spark, path, state)
    meta = HoodieTableMetaClient.load(str(path))
    commits = meta.timeline.completed().write_timeline()
    assert [i.action for i in commits] == ["commit", "commit", "commit", "replacecommit"]
    for instant, expected in zip(commits, history):
        _check(spark, path, expected, as_of=instant.timestamp)
    ops = [meta.active_timeline.commit_metadata(i).operationType for i in commits]
    assert ops == ["INSERT", "UPSERT", "DELETE", "INSERT_OVERWRITE"]
    assert meta.table_config.props["hoodie.table.partition.fields"] == "dt"
    assert (path / "dt=2024-01-01" / ".hoodie_partition_metadata").exists()


def test_complex_keys_non_partitioned_and_overwrite_table(spark, tmp_path):
    path = tmp_path / "t2"
    opts = {
        "hoodie.table.name": "t2",
        "hoodie.datasource.write.recordkey.field": "id,name",
        "hoodie.datasource.write.precombine.field": "ts",
        "hoodie.datasource.write.keygenerator.class": "org.apache.hudi.keygen.ComplexKeyGenerator",
    }
    b1 = [(1, "a", 1.0, 1, "x"), (1, "b", 2.0, 1, "x"), (2, "a", 3.0, 1, "y")]
    _write(spark, path, b1, opts)
    _write(spark, path, [(1, "a", 9.0, 2, "x")], opts)
    df = spark.read.format("hudi").load(str(path))
    keys = sorted(r[0] for r in df.select("_hoodie_record_key").collect())
    assert keys == ["id:1,name:a", "id:1,name:b", "id:2,name:a"]
    assert {r["_hoodie_partition_path"] for r in df.collect()} == {""}
    assert arrow_rows(hudi_rs_read(path)) == spark_rows(df)
    _write(spark, path, [(7, "z", 7.0, 3, "q")], opts, mode="overwrite")
    assert [r.id for r in spark.read.format("hudi").load(str(path)).collect()] == [7]
    meta = HoodieTableMetaClient.load(str(path))
    assert meta.timeline.completed().last().action == "replacecommit"
    assert arrow_rows(hudi_rs_read(path)) == spark_rows(spark.read.format("hudi").load(str(path)))


def test_base_file_footer_and_meta_columns(spark, tmp_path):
    path = tmp_path / "t3"
    _write(spark, path, [(i, f"n{i}", 1.0, 1, "d") for i in range(50)], _opts("t3"))
    view = FileSystemView(HoodieTableMetaClient.load(str(path)))
    (bf,) = view.latest_base_files()
    meta = pq.read_metadata(bf.path)
    kv = meta.metadata
    assert kv[b"hoodie_bloom_filter_type_code"] == b"DYNAMIC_V0"
    assert kv[b"hoodie_min_record_key"] == b"0" and kv[b"hoodie_max_record_key"] == b"9"
    bloom = deserialize_bloom_filter("DYNAMIC_V0", kv[b"org.apache.hudi.bloomfilter"].decode())
    table = pq.read_table(bf.path)
    assert table.column_names[:5] == ["_hoodie_commit_time", "_hoodie_commit_seqno", "_hoodie_record_key",
                                      "_hoodie_partition_path", "_hoodie_file_name"]
    assert all(bloom.might_contain(k) for k in table.column("_hoodie_record_key").to_pylist())
    seqnos = table.column("_hoodie_commit_seqno").to_pylist()
    instant = table.column("_hoodie_commit_time")[0].as_py()
    assert all(s.startswith(instant + "_") for s in seqnos) and len(set(seqnos)) == 50
    assert set(table.column("_hoodie_file_name").to_pylist()) == {bf.name}


def test_small_files_receive_inserts(spark, tmp_path):
    path = tmp_path / "t4"
    opts = _opts("t4")
    _write(spark, path, [(1, "a", 1.0, 1, "d")], opts)
    _write(spark, path, [(2, "b", 1.0, 1, "d")], opts)
    view = FileSystemView(HoodieTableMetaClient.load(str(path)))
    groups = view.file_groups("dt=d")
    assert len(groups) == 1 and len(groups[0].slices) == 2  # the insert rewrote the small file


def test_default_payload_keeps_higher_stored_ordering_and_is_deleted(spark, tmp_path):
    path = tmp_path / "t5"
    opts = _opts("t5", **{"hoodie.datasource.write.payload.class": "org.apache.hudi.common.model.DefaultHoodieRecordPayload"})
    _write(spark, path, [(1, "new", 1.0, 10, "d"), (2, "keep", 1.0, 10, "d")], opts)
    _write(spark, path, [(1, "older", 1.0, 5, "d"), (2, "newer", 1.0, 11, "d")], opts)
    got = {r.id: r.name for r in spark.read.format("hudi").load(str(path)).collect()}
    assert got == {1: "new", 2: "newer"}
    schema = SCHEMA + ", _hoodie_is_deleted boolean"
    _write(spark, path, [(2, "x", 1.0, 12, "d", True), (3, "c", 1.0, 1, "d", False)], opts, schema=schema)
    got = {r.id: r.name for r in spark.read.format("hudi").load(str(path)).collect()}
    assert got == {1: "new", 3: "c"}


def test_global_index_moves_record_between_partitions(spark, tmp_path):
    path = tmp_path / "t6"
    opts = _opts("t6", **{"hoodie.index.type": "GLOBAL_SIMPLE"})
    _write(spark, path, [(1, "a", 1.0, 1, "p1"), (2, "b", 1.0, 1, "p1")], opts)
    _write(spark, path, [(1, "a2", 1.0, 2, "p2")], opts)
    got = sorted((r.id, r.dt) for r in spark.read.format("hudi").load(str(path)).collect())
    assert got == [(1, "p2"), (2, "p1")]
    keep = _opts("t6", **{"hoodie.index.type": "GLOBAL_SIMPLE", "hoodie.simple.index.update.partition.path": "false"})
    _write(spark, path, [(2, "b2", 1.0, 2, "p3")], keep)
    got = sorted((r.id, r.name, r._hoodie_partition_path) for r in spark.read.format("hudi").load(str(path)).collect())
    assert got == [(1, "a2", "dt=p2"), (2, "b2", "dt=p1")]


def test_require_unique_keys_rejects_before_writing(spark, tmp_path):
    from storage.exception import HoodieDuplicateKeyError
    from storage.client.write_client import write_dataframe

    path = tmp_path / "t_unique"
    opts = _opts("t_unique")
    _write(spark, path, [(1, "a", 1.0, 1, "p1"), (1, "a", 1.0, 1, "p2")], opts)  # one key in two partitions
    before = HoodieTableMetaClient.load(str(path)).timeline.instants

    def write(data, **extra):
        df = spark.createDataFrame(data, SCHEMA)
        return write_dataframe(spark, df, str(path), HoodieConfig.of(opts, extra), require_unique_keys=True)

    with pytest.raises(HoodieDuplicateKeyError, match="record key '2' occurs 2 times") as info:
        write([(2, "x", 1.0, 2, "p1"), (2, "y", 1.0, 3, "p1"), (3, "z", 1.0, 2, "p1")])
    assert (info.value.record_key, info.value.count) == ("2", 2)
    # through a global index the stored key 1 is found twice: ambiguous, rejected
    with pytest.raises(HoodieDuplicateKeyError, match="more than one partition"):
        write([(1, "b", 1.0, 2, "p3")], **{"hoodie.index.type": "GLOBAL_SIMPLE"})
    meta = HoodieTableMetaClient.load(str(path))
    assert meta.timeline.instants == before  # no requested/inflight instant either
    assert not os.path.isdir(meta.temp_path) or not os.listdir(meta.temp_path)  # no markers: no file was written
    # the same key in two partitions is two records of a per-partition index: accepted
    md = write([(2, "x", 1.0, 2, "p1"), (2, "y", 1.0, 3, "p2")])
    assert sum(s.numInserts for s in md.write_stats()) == 2


def test_no_empty_commit_when_disallowed(spark, tmp_path):
    from storage.client.write_client import write_dataframe

    path = tmp_path / "t_empty"
    opts = _opts("t_empty")
    _write(spark, path, [(1, "a", 1.0, 1, "p1")], opts)
    before = HoodieTableMetaClient.load(str(path)).timeline.instants
    nothing = spark.createDataFrame([(9, None, None, None, "p1")], SCHEMA)
    delete = {"hoodie.datasource.write.operation": "delete"}
    assert write_dataframe(spark, nothing, str(path),
                           HoodieConfig.of(opts, delete, {"hoodie.allow.empty.commit": "false"})) is None
    assert HoodieTableMetaClient.load(str(path)).timeline.instants == before
    write_dataframe(spark, nothing, str(path), HoodieConfig.of(opts, delete))
    assert len(HoodieTableMetaClient.load(str(path)).timeline.instants) == len(before) + 1  # Hudi's default


def test_incremental_query(spark, tmp_path):
    path = tmp_path / "t7"
    opts = _opts("t7")
    _write(spark, path, [(1, "a", 1.0, 1, "d"), (2, "b", 1.0, 1, "d")], opts)
    _write(spark, path, [(2, "b2", 1.0, 2, "d"), (3, "c", 1.0, 2, "e")], opts)
    _write(spark, path, [(3, "c3", 1.0, 3, "e")], opts)
    meta = HoodieTableMetaClient.load(str(path))
    t1, t2, t3 = meta.timeline.completed().timestamps()
    inc = spark.read.format("hudi").options(**{
        "hoodie.datasource.query.type": "incremental",
        "hoodie.datasource.read.begin.instanttime": t1,
        "hoodie.datasource.read.end.instanttime": t2}).load(str(path))
    # changes committed in (t1, t2], as of t2: record 3's later update (t3) is outside the range
    assert sorted((r.id, r.name) for r in inc.collect()) == [(2, "b2"), (3, "c")]
    inc_all = spark.read.format("hudi").options(**{
        "hoodie.datasource.query.type": "incremental",
        "hoodie.datasource.read.begin.instanttime": t1}).load(str(path))
    assert sorted((r.id, r.name) for r in inc_all.collect()) == [(2, "b2"), (3, "c3")]


@pytest.mark.parametrize("case", ["missing_key", "null_key", "missing_precombine", "bad_type", "bad_operation"])
def test_bad_input_is_rejected_and_table_unchanged(spark, tmp_path, case):
    path = tmp_path / "t8"
    opts = _opts("t8")
    _write(spark, path, [(1, "a", 1.0, 1, "d")], opts)
    before = sorted(os.listdir(path / ".hoodie")), sorted(os.listdir(path / "dt=d"))
    with pytest.raises((HoodieWriteError, ValueError)) as err:
        if case == "missing_key":
            _write(spark, path, [("a", 1.0, 2, "d")], _opts("t8"), schema="name string, price double, ts long, dt string")
        elif case == "null_key":
            _write(spark, path, [(None, "a", 1.0, 2, "d")], opts)
        elif case == "missing_precombine":
            _write(spark, path, [(1, "a", 1.0, "d")], opts, schema="id int, name string, price double, dt string")
        elif case == "bad_type":
            _write(spark, path, [(1, "a", "not a number", 2, "d")], opts, schema="id int, name string, price string, ts long, dt string")
        else:
            _write(spark, path, [(1, "a", 1.0, 2, "d")], opts, operation="merge_everything")
    message = str(err.value)
    expected = {"missing_key": "'id'", "null_key": "'id' cannot be null", "missing_precombine": "precombine field 'ts'",
                "bad_type": "column 'price'", "bad_operation": "unknown write operation"}[case]
    assert expected in message
    after = sorted(os.listdir(path / ".hoodie")), sorted(os.listdir(path / "dt=d"))
    assert after == before
    assert [r.id for r in spark.read.format("hudi").load(str(path)).collect()] == [1]


def test_killed_writer_is_rolled_back_by_next_write(spark, tmp_path):
    path = tmp_path / "t9"
    opts = _opts("t9")
    _write(spark, path, [(1, "a", 1.0, 1, "d")], opts)
    write_and_crash_before_commit(path, [(2, "b", 1.0, 1, "d"), (1, "a2", 1.0, 2, "d")], SCHEMA, opts, tmp_path)
    meta = HoodieTableMetaClient.load(str(path))
    (pending,) = meta.timeline.pending().instants
    data_files = [f for f in os.listdir(path / "dt=d") if f.endswith(".parquet")]
    assert len(data_files) == 2  # the failed write's file exists but is not visible
    assert [(r.id, r.name) for r in spark.read.format("hudi").load(str(path)).collect()] == [(1, "a")]
    assert arrow_rows(hudi_rs_read(path)) == spark_rows(spark.read.format("hudi").load(str(path)))
    _write(spark, path, [(3, "c", 1.0, 1, "d")], opts)
    meta = HoodieTableMetaClient.load(str(path))
    assert [i.action for i in meta.timeline.completed()] == ["commit", "rollback", "commit"]
    assert not meta.timeline.pending().instants
    assert not any(pending.timestamp in f for f in os.listdir(path / "dt=d"))
    assert sorted(r.id for r in spark.read.format("hudi").load(str(path)).collect()) == [1, 3]


def test_spark_places_each_bucket_in_its_own_task(spark):
    from pyspark.sql import functions as F

    from storage.engine.spark_partitioning import placement_keys

    assert spark.sql("SELECT hash(0), hash(1)").collect()[0] == (933211791, -559580957)
    keys = placement_keys(6)
    df = spark.createDataFrame([(k,) for k in keys], "k int").repartition(6, "k")
    got = dict(df.select("k", F.spark_partition_id().alias("p")).collect())
    assert [got[k] for k in keys] == list(range(6))


def test_many_buckets_are_written_by_fewer_tasks(spark, tmp_path):
    """An upsert touching more file groups than twice the cores runs them as groups of a few tasks (each Python
    task costs a fixed overhead): every file group is still rewritten exactly once, with its own rows."""
    path = tmp_path / "packed"
    opts = _opts("packed", **{"hoodie.copyonwrite.insert.auto.split": "false",
                              "hoodie.copyonwrite.insert.split.size": "3", "hoodie.parquet.small.file.limit": "0"})
    state: dict = {}
    first = [(i, f"n{i}", float(i), 1, f"d{i % 3}") for i in range(36)]
    _write(spark, path, first, opts, operation="insert")
    _apply(state, first)
    meta = HoodieTableMetaClient.load(str(path))
    groups = {(s.partition_path, s.file_id) for s in FileSystemView(meta).latest_file_slices()}
    max_tasks = 2 * spark.sparkContext.defaultParallelism
    assert len(groups) > max_tasks
    update = [(i, f"u{i}", float(-i), 2, f"d{i % 3}") for i in range(36) if i % 3 != 2]
    _write(spark, path, update, opts)
    _apply(state, update)
    meta = HoodieTableMetaClient.load(str(path))
    instant = meta.timeline.completed().instants[-1].timestamp
    written = [f for p in ("dt=d0", "dt=d1", "dt=d2") for f in os.listdir(path / p)
               if f.endswith(f"_{instant}.parquet")]
    assert len(written) == len([g for g in groups if g[0] != "dt=d2"])  # d0's and d1's, once each
    task_ids = {f.split("_")[1].split("-")[0] for f in written}  # write token: task partition-stage-attempt
    assert len(task_ids) <= max_tasks
    _check(spark, path, state)
