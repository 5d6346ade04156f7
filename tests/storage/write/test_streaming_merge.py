"""Copy-on-write merges of base files over `hoodie.memory.merge.max.size` stream the file by row groups
(storage.write.merge_handle): the same rows, stats and footer as the in-memory merge, in bounded memory."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest
from hudi_oracle import arrow_rows, hudi_rs_read, rows, spark_rows

from storage.bloom import deserialize_bloom_filter
from storage.config import HoodieConfig
from storage.bloom import BloomFilterSettings
from storage.io.base_file_writer import write_base_file
from storage.io.storage import HoodieStorage
from storage.merge.merge_resolver import MergeSpec
from storage.merge.record_merger import RecordMergeMode
from storage.meta_fields import with_meta_columns
from storage.table.fs_view import FileSystemView
from storage.table.meta_client import HoodieTableMetaClient
from storage.write.handle import write_bucket
from storage.write.merge_rows import null_meta_fields
from storage.write.partitioner import BucketType
from storage.write.task_context import (
    BUCKET_COLUMN,
    OP_COLUMN,
    OP_DELETE,
    OP_WRITE,
    BucketTarget,
    WriteTaskContext,
    serialize_schema,
)

REPO = Path(__file__).resolve().parents[3]
DATA_SCHEMA = pa.schema([("id", pa.string()), ("name", pa.string()), ("ts", pa.int64())])
SCHEMA = with_meta_columns(DATA_SCHEMA)
EVENT_TIME = MergeSpec(RecordMergeMode.EVENT_TIME_ORDERING, "ts")
COMMIT_TIME = MergeSpec(RecordMergeMode.COMMIT_TIME_ORDERING, "ts")
BLOOM_KEY, MIN_KEY, MAX_KEY = b"org.apache.hudi.bloomfilter", b"hoodie_min_record_key", b"hoodie_max_record_key"


# ------------------------------------------------------------------------------------ the write task, directly


def _stored(n: int, payload: int = 0) -> pa.Table:
    ids = pa.array([f"k{i:06d}" for i in range(n)])
    return pa.table({
        "_hoodie_commit_time": pa.array(["001"] * n), "_hoodie_commit_seqno": pa.array([f"001_0_{i}" for i in range(n)]),
        "_hoodie_record_key": ids, "_hoodie_partition_path": pa.array([""] * n),
        "_hoodie_file_name": pa.array(["base.parquet"] * n), "id": ids,
        "name": pa.array([f"v{i}" + "x" * payload for i in range(n)]), "ts": pa.array([10] * n, pa.int64()),
    }).cast(SCHEMA)


def _incoming(records: list[tuple[str, str, int, int]]) -> pa.Table:
    """(key, name, ts, op) rows as a write task receives them (meta columns, data, operation, bucket)."""
    keys = [r[0] for r in records]
    n = len(records)
    return pa.table({
        "_hoodie_commit_time": pa.nulls(n, pa.string()), "_hoodie_commit_seqno": pa.nulls(n, pa.string()),
        "_hoodie_record_key": pa.array(keys, pa.string()), "_hoodie_partition_path": pa.array([""] * n, pa.string()),
        "_hoodie_file_name": pa.nulls(n, pa.string()), "id": pa.array(keys, pa.string()),
        "name": pa.array([r[1] for r in records], pa.string()), "ts": pa.array([r[2] for r in records], pa.int64()),
        OP_COLUMN: pa.array([r[3] for r in records], pa.int8()), BUCKET_COLUMN: pa.array([0] * n, pa.int32()),
    })


def _ctx(base_path: Path, base_file: str, merge: MergeSpec, merge_max_size: int,
         populate_meta_fields: bool = True) -> WriteTaskContext:
    target = BucketTarget(BucketType.UPDATE, "", "fg-1", base_file, "001")
    return WriteTaskContext(
        base_path=str(base_path), instant_time="002", marker_dir=str(base_path / ".hoodie" / ".temp" / "002"),
        schema_ipc=serialize_schema(SCHEMA), targets={0: target}, placement={0: 0}, merge=merge,
        bloom_settings=BloomFilterSettings.of(HoodieConfig.of({})), row_group_bytes=2048, merge_max_size=merge_max_size,
        populate_meta_fields=populate_meta_fields, record_key_fields=("id",))


DELETED = [i for i in range(3, 3000, 53) if i % 37 and i % 41 != 5]  # one version per key, as after dedup


def _batch() -> list[tuple[str, str, int, int]]:
    """Updates all over the file, late records (lower ts), deletes (of stored and absent keys), inserts."""
    records = [(f"k{i:06d}", f"new{i}", 20, OP_WRITE) for i in range(0, 3000, 37)]
    records += [(f"k{i:06d}", f"late{i}", 5, OP_WRITE) for i in range(5, 3000, 41) if i % 37]
    records += [(f"k{i:06d}", "", 0, OP_DELETE) for i in DELETED]
    records += [("zz-absent", "", 0, OP_DELETE)]
    records += [(f"n{i:04d}", f"ins{i}", 1, OP_WRITE) for i in range(40)]
    return records


def _merge_both(tmp_path: Path, merge: MergeSpec, populate_meta_fields: bool = True):
    """The same batch merged into the same base file (many row groups) in memory and streamed."""
    storage = HoodieStorage.for_path(str(tmp_path))
    base_file = str(tmp_path / "stored" / "base.parquet")
    stored = _stored(3000) if populate_meta_fields else null_meta_fields(_stored(3000))
    write_base_file(storage, base_file, stored, BloomFilterSettings.of(HoodieConfig.of({})), row_group_bytes=4096,
                    populate_meta_fields=populate_meta_fields)
    assert pq.ParquetFile(base_file).num_row_groups > 20
    incoming = _incoming(_batch())
    out = {}
    for name, limit in (("memory", 1024 * 1024 * 1024), ("streamed", 1)):
        stat = write_bucket(incoming, _ctx(tmp_path / name, base_file, merge, limit, populate_meta_fields))
        out[name] = (stat, str(tmp_path / name / stat.path))
    return out


@pytest.mark.parametrize("merge", [EVENT_TIME, COMMIT_TIME], ids=["event_time", "commit_time"])
def test_streamed_merge_writes_the_rows_of_the_in_memory_merge(tmp_path, merge):
    out = _merge_both(tmp_path, merge)
    (mem_stat, mem_path), (st_stat, st_path) = out["memory"], out["streamed"]
    memory, streamed = pq.read_table(mem_path), pq.read_table(st_path)
    drop = ["_hoodie_commit_seqno"]  # numbered in write order, which differs
    assert streamed.drop(drop).sort_by("_hoodie_record_key").equals(memory.drop(drop).sort_by("_hoodie_record_key"))
    for field in ("numWrites", "numDeletes", "numUpdateWrites", "numInserts"):
        assert getattr(st_stat, field) == getattr(mem_stat, field), field
    assert st_stat.numDeletes == len(DELETED) and st_stat.numInserts == 40
    by_key = dict(zip(streamed["id"].to_pylist(), streamed["name"].to_pylist()))
    assert by_key["k000005"] == ("v5" if merge is EVENT_TIME else "late5")  # a late record loses under event time
    assert by_key["k000037"] == "new37" and "k000003" not in by_key and by_key["n0001"] == "ins1"
    # the streamed file was written row group by row group: updates follow their group, not the file's end
    times = streamed["_hoodie_commit_time"].to_pylist()
    assert times.index("002") < len(times) - times[::-1].index("001") - 1
    assert memory["_hoodie_commit_time"].to_pylist() == sorted(memory["_hoodie_commit_time"].to_pylist())
    seqnos = streamed["_hoodie_commit_seqno"].filter(pc.equal(streamed["_hoodie_commit_time"], "002")).to_pylist()
    assert len(set(seqnos)) == len(seqnos)
    assert pq.ParquetFile(st_path).num_row_groups > 20


def test_streamed_merge_without_meta_fields(tmp_path):
    """hoodie.populate.meta.fields=false: stored keys come from the key field, meta columns stay null, no footer."""
    out = _merge_both(tmp_path, EVENT_TIME, populate_meta_fields=False)
    memory, streamed = pq.read_table(out["memory"][1]), pq.read_table(out["streamed"][1])
    assert streamed.sort_by("id").equals(memory.sort_by("id"))
    assert streamed["_hoodie_record_key"].null_count == streamed.num_rows
    assert streamed.num_rows == 3000 - len(DELETED) + 40
    assert BLOOM_KEY not in (pq.read_metadata(out["streamed"][1]).metadata or {})
    assert out["streamed"][0].numUpdateWrites == out["memory"][0].numUpdateWrites > 0


def test_streamed_merge_footer_covers_every_key(tmp_path):
    out = _merge_both(tmp_path, EVENT_TIME)
    memory_kv = pq.read_metadata(out["memory"][1]).metadata
    streamed_kv = pq.read_metadata(out["streamed"][1]).metadata
    keys = pq.read_table(out["streamed"][1], columns=["_hoodie_record_key"]).column(0).to_pylist()
    assert streamed_kv[MIN_KEY] == memory_kv[MIN_KEY] == min(keys).encode()
    assert streamed_kv[MAX_KEY] == memory_kv[MAX_KEY] == max(keys).encode() == b"n0039"
    bloom = deserialize_bloom_filter(streamed_kv[b"hoodie_bloom_filter_type_code"], streamed_kv[BLOOM_KEY])
    assert all(bloom.might_contain(k) for k in keys)
    assert not bloom.might_contain("k000003")  # deleted: not written, so (fpp 1e-9) not in the filter


MEMORY_PROBE = """
import json, sys
import pyarrow as pa
from storage.io.parquet import open_parquet
from storage.io.storage import HoodieStorage
from tests_probe import ctx, incoming
from storage.write.merge_handle import stream_merge

base, out = sys.argv[1], sys.argv[2]
storage = HoodieStorage.for_path(base)
file, size = open_parquet(storage, base)
written, counts, _ = stream_merge(file, incoming(), ctx(), storage, out, "out.parquet", 0)
print(json.dumps({"peak": pa.default_memory_pool().max_memory(), "written": written, "counts": counts}))
"""


ROWS = 40_000  # 2.7 MB peak measured; 80 000 rows (twice the file) peak the same


def test_streamed_merge_memory_stays_near_one_row_group(tmp_path):
    """The arrow memory a streamed merge of a 40-row-group file peaks at, in a fresh process (the pool's peak
    counts from the start): a few row groups, far below the file's rows in memory."""
    storage = HoodieStorage.for_path(str(tmp_path))
    base = str(tmp_path / "base.parquet")
    write_base_file(storage, base, _stored(ROWS, payload=400), BloomFilterSettings(), row_group_bytes=512 * 1024)
    file = pq.ParquetFile(base)
    whole = file.read().nbytes
    group = max(file.read_row_group(i).nbytes for i in range(file.num_row_groups))
    assert file.num_row_groups >= 30
    (tmp_path / "tests_probe.py").write_text(
        "import pyarrow as pa\n"
        "from test_streaming_merge import _ctx, _incoming, EVENT_TIME\n"
        "from pathlib import Path\n"
        f"ROWS = {ROWS}\n"
        f"def ctx(): return _ctx(Path({str(tmp_path)!r}), {base!r}, EVENT_TIME, 1)\n"
        "def incoming(): return _incoming([(f'k{i:06d}', 'new', 20, 0) for i in range(0, ROWS, 400)]"
        " + [('new-key', 'n', 1, 0)]).drop(['_hoodie_bucket'])\n")
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(REPO), str(tmp_path), str(Path(__file__).parent),
                                                      str(REPO / "tests")]))
    probe = subprocess.run([sys.executable, "-c", MEMORY_PROBE, base, str(tmp_path / "out.parquet")],
                           check=False, capture_output=True, text=True, env=env, timeout=300)
    assert probe.returncode == 0, probe.stderr
    result = json.loads(probe.stdout.strip().splitlines()[-1])
    assert result["written"] == ROWS + 1 and result["counts"] == {"inserts": 1, "updates": ROWS // 400, "deletes": 0}
    assert result["peak"] < 8 * group, (result["peak"], group, whole)
    assert result["peak"] < whole / 6, (result["peak"], whole)


# ------------------------------------------------------------------------------------ tables, end to end

ROW_SCHEMA = "id int, name string, price double, ts long, dt string"
COLUMNS = ["id", "name", "price", "ts", "dt"]


def _opts(name: str, streamed: bool, event_time: bool) -> dict:
    opts = {
        "hoodie.table.name": name,
        "hoodie.datasource.write.recordkey.field": "id",
        "hoodie.datasource.write.precombine.field": "ts",
        "hoodie.datasource.write.partitionpath.field": "dt",
        "hoodie.parquet.block.size": "2048",  # many row groups per base file
    }
    if event_time:
        opts["hoodie.datasource.write.payload.class"] = "org.apache.hudi.common.model.DefaultHoodieRecordPayload"
    if streamed:
        opts["hoodie.memory.merge.max.size"] = "1"
    return opts


def _apply(state: dict, batch, event_time: bool, delete: bool = False) -> None:
    for r in batch:
        if delete:
            state.pop(r[0], None)
        elif r[0] not in state or not event_time or r[3] >= state[r[0]][3]:
            state[r[0]] = r


@pytest.mark.parametrize("event_time", [True, False], ids=["event_time", "commit_time"])
def test_streamed_tables_match_in_memory_tables(spark, tmp_path, event_time):
    b1 = [(i, f"n{i}", i * 1.5, 10, f"p{i % 2}") for i in range(600)]
    b2 = [(i, f"u{i}", 2.0, 20, f"p{i % 2}") for i in range(0, 600, 7)] \
        + [(i, f"late{i}", 3.0, 5, f"p{i % 2}") for i in range(1, 600, 11) if i % 7] \
        + [(i, f"i{i}", 4.0, 1, f"p{i % 2}") for i in range(600, 660)]
    b3 = [(i, "", 0.0, 0, f"p{i % 2}") for i in range(2, 660, 13)]
    state: dict = {}
    paths = {}
    for streamed in (False, True):
        path = tmp_path / ("streamed" if streamed else "memory")
        opts = _opts(f"t_{path.name}", streamed, event_time)
        for batch, op in ((b1, "insert"), (b2, "upsert"), (b3, "delete")):
            spark.createDataFrame(batch, ROW_SCHEMA).write.format("hudi").options(**opts) \
                .option("hoodie.datasource.write.operation", op).mode("append").save(str(path))
        paths[streamed] = path
    _apply(state, b1, event_time)
    _apply(state, b2, event_time)
    _apply(state, b3, event_time, delete=True)
    want = rows([dict(zip(COLUMNS, r)) for r in state.values()])
    for path in paths.values():
        assert spark_rows(spark.read.format("hudi").load(str(path)).select(*COLUMNS)) == want
        assert arrow_rows(hudi_rs_read(str(path)).select(COLUMNS)) == want
    streamed_meta = HoodieTableMetaClient.load(str(paths[True]))
    memory_meta = HoodieTableMetaClient.load(str(paths[False]))
    assert _stat_totals(streamed_meta) == _stat_totals(memory_meta)
    interleaved = []
    for bf in FileSystemView(streamed_meta).latest_base_files():
        file = pq.ParquetFile(bf.path)
        assert file.num_row_groups > 1
        times = file.read(columns=["_hoodie_commit_time"]).column(0).to_pylist()
        interleaved.append(times != sorted(times))  # streamed: updates follow their row group, not the file's end
        keys = file.read(columns=["_hoodie_record_key"]).column(0).to_pylist()
        kv = file.metadata.metadata
        assert kv[MIN_KEY] == min(keys).encode() and kv[MAX_KEY] == max(keys).encode()
        bloom = deserialize_bloom_filter(kv[b"hoodie_bloom_filter_type_code"], kv[BLOOM_KEY])
        assert all(bloom.might_contain(k) for k in keys)
    assert all(interleaved)
    for bf in FileSystemView(memory_meta).latest_base_files():
        times = pq.read_table(bf.path, columns=["_hoodie_commit_time"]).column(0).to_pylist()
        assert times == sorted(times)


def _stat_totals(meta: HoodieTableMetaClient) -> list[tuple]:
    """Per commit: the write counts summed over its files."""
    out = []
    for inst in meta.timeline.completed().write_timeline():
        stats = meta.active_timeline.commit_metadata(inst).write_stats()
        out.append(tuple(sum(getattr(s, f) for s in stats)
                         for f in ("numWrites", "numDeletes", "numUpdateWrites", "numInserts")))
    return out
