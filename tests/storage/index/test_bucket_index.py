"""BUCKET index (SIMPLE engine): Java's hash semantics, file ids named after buckets, the table contents
the model of randomized batches gives (COW and MOR, several partitions), hudi-rs reading the same rows, and
clear errors for settings a bucket table cannot take."""
from __future__ import annotations

import glob
import os
import random

import pyarrow as pa
import pytest

from hudi_oracle import apply_batch, arrow_rows, hudi_rs_read, rows, spark_rows
from storage.config import HoodieConfig
from storage.exception import HoodieIndexError
from storage.fs_utils import file_id_of, parse_log_file_name
from storage.index import create_index
from storage.index.bucket_identifier import (
    bucket_id_of_file_id,
    bucket_ids,
    java_list_hash,
    java_string_hash,
    new_bucket_file_id,
)
from storage.index.bucket_index import HoodieSimpleBucketIndex
from storage.table.fs_view import FileSystemView
from storage.table.meta_client import HoodieTableMetaClient

pytestmark = pytest.mark.usefixtures("write_engine")  # every test on both write engines

SCHEMA = "id string, name string, ts long, dt string"
COLS = ["id", "name", "ts", "dt"]
PARTITIONS = ["p0", "p1", "p2"]
NUM_BUCKETS = 4


def _java_hash(text: str) -> int:
    """String.hashCode by its definition, one UTF-16 code unit at a time (the reference for the vectorised one)."""
    h = 0
    units = text.encode("utf-16-be")
    for i in range(0, len(units), 2):
        h = (31 * h + int.from_bytes(units[i:i + 2], "big")) & 0xFFFFFFFF
    return h - (1 << 32) if h & 0x80000000 else h


def test_java_string_hash_matches_java():
    # values of Java's "...".hashCode(), worked out by hand: "abc" = 97*31^2 + 98*31 + 99
    assert java_string_hash(pa.array(["abc", "", "hello", None])).tolist() == [96354, 0, 99162322, 0]
    # U+1F600 is the surrogate pair D83D DE00 in UTF-16: 0xD83D*31 + 0xDE00
    assert java_string_hash(pa.array(["\U0001F600"])).tolist() == [0xD83D * 31 + 0xDE00]
    # overflow wraps to a negative int: "polygenelubricants".hashCode() is Integer.MIN_VALUE
    assert java_string_hash(pa.array(["polygenelubricants"])).tolist() == [-2**31]
    rng = random.Random(7)
    alphabet = "az09:,-é中\U0001F600\u00ff"
    texts = ["".join(rng.choice(alphabet) for _ in range(rng.randint(0, 40))) for _ in range(500)]
    sliced = pa.array(["skip"] + texts).slice(1)  # an array with an offset, as Spark batches can be
    assert java_string_hash(sliced).tolist() == [_java_hash(t) for t in texts]


def test_bucket_ids_as_hudi():
    # a simple key is hashed whole, as the list [key]: List.hashCode = 31 * 1 + "abc".hashCode()
    assert java_list_hash([java_string_hash(pa.array(["abc"]))]).tolist() == [31 + 96354]
    assert bucket_ids(pa.array(["abc"]), ["id"], 1000).tolist() == [(31 + 96354) % 1000]
    # a complex key gives the hash fields' values in the hash fields' order, whatever the key's order
    h = ((31 + _java_hash("7")) * 31 + _java_hash("x")) & 0x7FFFFFFF
    assert bucket_ids(pa.array(["id:7,name:x", "name:x,id:7"]), ["id", "name"], 97).tolist() == [h % 97] * 2
    assert bucket_ids(pa.array(["id:7,name:x"]), ["id"], 97).tolist() == [(31 + _java_hash("7")) % 97]
    # a negative hash is masked, not negated: "polygenelubricants" hashes to MIN_VALUE, 31 + that is negative
    masked = (31 - 2**31) & 0x7FFFFFFF
    assert bucket_ids(pa.array(["polygenelubricants"]), ["id"], 1000).tolist() == [masked % 1000]


def test_bucket_file_ids():
    fid = new_bucket_file_id(12)
    assert fid.startswith("00000012-") and fid.endswith("-0") and len(fid) == 38
    assert bucket_id_of_file_id(fid) == 12
    with pytest.raises(HoodieIndexError, match="not written by the BUCKET index"):
        bucket_id_of_file_id("d880d4ea-1111-2222-3333-444455556666-0")


def _opts(table_type: str, index_type: str, **extra) -> dict:
    opts = {"hoodie.table.name": "t", "hoodie.datasource.write.table.type": table_type,
            "hoodie.datasource.write.recordkey.field": "id", "hoodie.datasource.write.precombine.field": "ts",
            "hoodie.datasource.write.partitionpath.field": "dt", "hoodie.index.type": index_type,
            "hoodie.parquet.small.file.limit": "0"}
    if index_type == "BUCKET":
        opts["hoodie.bucket.index.num.buckets"] = str(NUM_BUCKETS)
    opts.update(extra)
    return opts


def _write(spark, path: str, batch: list[tuple], opts: dict, operation: str) -> None:
    spark.createDataFrame(batch, SCHEMA).write.format("hudi").options(**opts) \
        .option("hoodie.datasource.write.operation", operation).mode("append").save(path)


def _check_layout(path: str) -> None:
    """Every file group's id starts with its bucket, every record in it hashes to that bucket, and a
    partition has at most one file group per bucket."""
    meta = HoodieTableMetaClient.load(path)
    slices = FileSystemView(meta).latest_file_slices()
    seen = set()
    for s in slices:
        bucket = bucket_id_of_file_id(s.file_id)
        assert bucket < NUM_BUCKETS and (s.partition_path, bucket) not in seen
        seen.add((s.partition_path, bucket))
    data = hudi_rs_read(path)
    if data.num_rows:
        keys = data.column("_hoodie_record_key").combine_chunks()
        buckets = bucket_ids(keys, ["id"], NUM_BUCKETS)
        names = data.column("_hoodie_file_name").to_pylist()
        for name, bucket in zip(names, buckets):
            # a base file's rows carry its name; rows in logs carry their file id
            file_id = file_id_of(name) or name
            assert bucket_id_of_file_id(file_id) == bucket, (name, bucket)


@pytest.mark.parametrize("table_type", ["COPY_ON_WRITE", "MERGE_ON_READ"])
def test_bucket_index_upserts_inserts_and_deletes_as_the_model(spark, tmp_path, table_type):
    """The model state of the batches is the oracle: this engine and hudi-rs read exactly it after every step."""
    rng = random.Random(20 + len(table_type))
    bucket_path, bucket_opts = str(tmp_path / "bucket"), _opts(table_type, "BUCKET")
    state: dict = {}
    next_id, ts = 0, 0
    for step in range(6):
        ts += 1
        existing = sorted(state)
        if step in (2, 5) and existing:
            batch = [state[k][:2] + (ts, state[k][3]) for k in rng.sample(existing, min(8, len(existing)))]
            op = "delete"
        else:
            updates = [(k, f"u{step}", ts, state[k][3]) for k in rng.sample(existing, min(10, len(existing)))]
            inserts = [(f"k{next_id + i:04d}", f"n{step}", ts, rng.choice(PARTITIONS)) for i in range(25)]
            next_id += 25
            # an insert goes through the buckets too (new keys: the SIMPLE index's insert does not look keys up)
            op = "insert" if step == 3 else "upsert"
            batch = inserts if op == "insert" else updates + inserts
        _write(spark, bucket_path, batch, bucket_opts, op)
        apply_batch(state, batch, delete=op == "delete", ordering=2)
        want = rows([{"id": k, "name": v[1], "ts": v[2], "dt": v[3]} for k, v in state.items()], COLS)
        assert spark_rows(spark.read.format("hudi").load(bucket_path), COLS) == want
        assert arrow_rows(hudi_rs_read(bucket_path), COLS) == want
        _check_layout(bucket_path)
    if table_type == "MERGE_ON_READ":  # updates and inserts into existing buckets went to logs
        assert glob.glob(os.path.join(bucket_path, "**", ".*.log.*"), recursive=True)
        names = [os.path.basename(p) for p in glob.glob(os.path.join(bucket_path, "**", ".*.log.*"), recursive=True)]
        assert all(bucket_id_of_file_id(parse_log_file_name(n).file_id) < NUM_BUCKETS for n in names)
    props = HoodieTableMetaClient.load(bucket_path).table_config.props
    assert props["hoodie.index.type"] == "BUCKET" and props["hoodie.bucket.index.num.buckets"] == str(NUM_BUCKETS)
    assert props["hoodie.bucket.index.hash.field"] == "id"


def test_bucket_table_keeps_its_settings(spark, tmp_path):
    path = str(tmp_path / "b")
    _write(spark, path, [("a", "x", 1, "p0"), ("b", "y", 1, "p1")], _opts("COPY_ON_WRITE", "BUCKET"), "upsert")
    # the recorded settings apply when a write gives none
    plain = _opts("COPY_ON_WRITE", "BUCKET")
    del plain["hoodie.index.type"], plain["hoodie.bucket.index.num.buckets"]
    _write(spark, path, [("c", "z", 1, "p0")], plain, "upsert")
    _check_layout(path)
    with pytest.raises(HoodieIndexError, match="hoodie.bucket.index.num.buckets=8 differs from the table's 4"):
        _write(spark, path, [("a", "x", 2, "p0")], _opts("COPY_ON_WRITE", "BUCKET",
                                                         **{"hoodie.bucket.index.num.buckets": "8"}), "upsert")
    with pytest.raises(HoodieIndexError, match="hoodie.index.type=SIMPLE differs from the table's BUCKET"):
        _write(spark, path, [("a", "x", 2, "p0")], _opts("COPY_ON_WRITE", "SIMPLE"), "upsert")
    assert sorted(r.id for r in spark.read.format("hudi").load(path).collect()) == ["a", "b", "c"]


def test_bucket_index_refuses_bad_settings(spark, tmp_path):
    with pytest.raises(HoodieIndexError, match="hoodie.index.bucket.engine=CONSISTENT_HASHING is not supported"):
        create_index("BUCKET", config=HoodieConfig.of({"hoodie.index.bucket.engine": "consistent_hashing"}),
                     record_key_fields=["id"])
    with pytest.raises(HoodieIndexError, match="unknown bucket index engine 'RANGE'"):
        create_index("BUCKET", config=HoodieConfig.of({"hoodie.index.bucket.engine": "range"}),
                     record_key_fields=["id"])
    with pytest.raises(HoodieIndexError, match="hash fields name .*not record key fields"):
        create_index("BUCKET", config=HoodieConfig.of({"hoodie.bucket.index.hash.field": "name"}),
                     record_key_fields=["id"])
    index = create_index("BUCKET", config=HoodieConfig.of({"hoodie.bucket.index.hash.field": "ID"}),
                         record_key_fields=["id", "name"])
    assert isinstance(index, HoodieSimpleBucketIndex) and index.spec.hash_fields == ("id",)
    assert index.spec.num_buckets == 256  # Hudi's default
    # nothing is written when the hash field is not in the record key
    path = tmp_path / "bad"
    with pytest.raises(HoodieIndexError, match="not record key fields"):
        _write(spark, str(path), [("a", "x", 1, "p0")],
               _opts("COPY_ON_WRITE", "BUCKET", **{"hoodie.bucket.index.hash.field": "name"}), "upsert")
    assert not os.path.exists(path / ".hoodie" / "hoodie.properties") or not HoodieTableMetaClient.load(
        str(path)).timeline.completed().instants


def test_bucket_index_refuses_a_table_of_another_layout(spark, tmp_path):
    # a table written by another index: its file ids name no bucket (a random uuid starts with 8 digits one time
    # in 43: then it names a bucket beyond the number of buckets)
    path = str(tmp_path / "simple")
    _write(spark, path, [("a", "x", 1, "p0")], _opts("COPY_ON_WRITE", "SIMPLE"), "upsert")
    with pytest.raises(HoodieIndexError, match="does not start with an 8-digit bucket number|, but hoodie.bucket"):
        _write(spark, path, [("a", "x", 2, "p0")], _opts("COPY_ON_WRITE", "BUCKET"), "upsert")
    # a bucket table whose number of buckets shrank (no record of it in hoodie.properties, as Java Hudi writes)
    index = HoodieSimpleBucketIndex(spec=create_index(
        "BUCKET", config=HoodieConfig.of({"hoodie.bucket.index.num.buckets": "2"}), record_key_fields=["id"]).spec)
    with pytest.raises(HoodieIndexError, match="is bucket 3, but hoodie.bucket.index.num.buckets=2"):
        index.bucket_file_groups([("p0", new_bucket_file_id(3))])
    with pytest.raises(HoodieIndexError, match="two file groups in bucket 1"):
        index.bucket_file_groups([("p0", new_bucket_file_id(1)), ("p0", new_bucket_file_id(1))])


@pytest.mark.parametrize("table_type", ["COPY_ON_WRITE", "MERGE_ON_READ"])
def test_inserts_and_overwrites_keep_the_bucket_layout(spark, tmp_path, table_type):
    path = str(tmp_path / "b")
    opts = _opts(table_type, "BUCKET")
    first = [(f"k{i}", "a", 1, PARTITIONS[i % 2]) for i in range(20)]
    _write(spark, path, first, opts, "bulk_insert")
    _check_layout(path)
    # an insert of a stored key goes to its bucket's file group: it updates the record, as Hudi's bucket index
    _write(spark, path, [("k1", "b", 2, "p1"), ("k99", "n", 2, "p0")], opts, "insert")
    got = {r.id: r.name for r in spark.read.format("hudi").load(path).collect()}
    assert len(got) == 21 and got["k1"] == "b" and got["k99"] == "n"
    _check_layout(path)
    # an overwrite replaces the partition's file groups with new ones, still one per bucket
    _write(spark, path, [("z1", "o", 3, "p0"), ("z2", "o", 3, "p0")], opts, "insert_overwrite")
    want = sorted([("z1", "p0"), ("z2", "p0")] + [(k, "p1") for k in got if int(k[1:]) % 2 == 1 and k != "k99"])
    assert sorted((r.id, r.dt) for r in spark.read.format("hudi").load(path).collect()) == want
    assert arrow_rows(hudi_rs_read(path), ["id", "dt"]) == rows([{"id": k, "dt": d} for k, d in want], ["id", "dt"])
    _check_layout(path)


def test_bucket_mor_table_through_compaction(spark, tmp_path):
    from storage.table_service.compaction import run_compaction, schedule_compaction

    path = str(tmp_path / "m")
    opts = _opts("MERGE_ON_READ", "BUCKET")
    state: dict = {}
    batches = [[(f"k{i}", "a", 1, PARTITIONS[i % 3]) for i in range(30)],
               [(f"k{i}", "b", 2, PARTITIONS[i % 3]) for i in range(0, 40, 2)]]
    for batch in batches:
        _write(spark, path, batch, opts, "upsert")
        apply_batch(state, batch, ordering=2)
    pending = schedule_compaction(path)
    assert pending
    # written while the compaction is pending: the new slices have no base file yet, the buckets stay the same
    late = [(f"k{i}", "c", 3, PARTITIONS[i % 3]) for i in range(0, 50, 5)]
    _write(spark, path, late, opts, "upsert")
    apply_batch(state, late, ordering=2)
    _check_layout(path)
    run_compaction(spark, path, pending)
    last = [(f"k{i}", "d", 4, PARTITIONS[i % 3]) for i in range(0, 60, 7)]
    _write(spark, path, last, opts, "upsert")
    apply_batch(state, last, ordering=2)
    _check_layout(path)
    want = rows([{"id": k, "name": v[1], "ts": v[2], "dt": v[3]} for k, v in state.items()], COLS)
    assert arrow_rows(hudi_rs_read(path), COLS) == want
    assert spark_rows(spark.read.format("hudi").load(path), COLS) == want
