"""Tables on S3 (moto's server on loopback, configured as Spark users do with `spark.hadoop.fs.s3a.*`):
copy-on-write and merge-on-read writes, compaction, time travel and incremental reads land in the bucket, nothing
on the local disk, and hudi-rs reading the same bucket agrees row for row."""
from __future__ import annotations

import pytest
from hudi_oracle import apply_batch, arrow_rows, hudi_rs_read, rows, spark_rows

from storage.exception import HoodieIOError, HoodieWriteError
from storage.io.storage import REQUESTS
from storage.table.meta_client import HoodieTableMetaClient
from storage.table_service.compaction import run_compaction, schedule_compaction

SCHEMA = "id int, name string, price double, ts long, dt string"
COLS = ["id", "name", "price", "ts", "dt"]


def _opts(name: str, table_type: str = "COPY_ON_WRITE") -> dict[str, str]:
    return {"hoodie.table.name": name, "hoodie.datasource.write.table.type": table_type,
            "hoodie.datasource.write.recordkey.field": "id", "hoodie.datasource.write.precombine.field": "ts",
            "hoodie.datasource.write.partitionpath.field": "dt",
            "hoodie.datasource.write.hive_style_partitioning": "true"}


def _write(spark, path, data, opts, operation="upsert"):
    spark.createDataFrame(data, SCHEMA).write.format("hudi").options(**opts) \
        .option("hoodie.datasource.write.operation", operation).mode("append").save(path)


def _expected(state) -> list[tuple]:
    return rows([dict(zip(COLS, r)) for r in state.values()], COLS)


def _ours(spark, path, **options) -> list[tuple]:
    return spark_rows(spark.read.format("hudi").options(**options).load(path), COLS)


def _batches():
    b1 = [(i, f"n{i}", float(i), 1, f"2024-01-0{1 + i % 3}") for i in range(30)]
    b2 = [(i, f"u{i}", i * 2.0, 2, f"2024-01-0{1 + i % 3}") for i in range(0, 30, 4)] + \
         [(i, "new", 1.0, 1, f"2024-01-0{1 + i % 3}") for i in range(100, 105)]
    b3 = [(i, "x", 0.0, 3, f"2024-01-0{1 + i % 3}") for i in (1, 5, 9, 101)]
    return b1, b2, b3


@pytest.mark.parametrize("table_type", ["COPY_ON_WRITE", "MERGE_ON_READ"])
def test_table_on_s3(s3_spark, s3_server, tmp_path, monkeypatch, table_type):
    monkeypatch.chdir(tmp_path)  # a scheme mistaken for a local path would show up here
    bucket = s3_server.new_bucket()
    path = f"s3a://{bucket}/lake/trips"
    opts = _opts("trips", table_type)
    b1, b2, b3 = _batches()
    state: dict = {}
    history = []
    for batch, op in ((b1, "upsert"), (b2, "upsert"), (b3, "delete")):
        _write(s3_spark, path, batch, opts, op)
        apply_batch(state, batch, delete=op == "delete")
        instant = HoodieTableMetaClient.load_in_session(s3_spark, path).timeline.completed().last().timestamp
        history.append((instant, dict(state)))
    assert _ours(s3_spark, path) == _expected(state)
    hudi_rs = s3_server.hudi_rs_options()
    assert arrow_rows(hudi_rs_read(path, storage_options=hudi_rs), COLS) == _expected(state)
    # time travel to every commit, by us and by hudi-rs
    for instant, then in history:
        assert _ours(s3_spark, path, **{"as.of.instant": instant}) == _expected(then)
        assert arrow_rows(hudi_rs_read(path, instant, storage_options=hudi_rs), COLS) == _expected(then)
    # incremental: what changed after the first commit
    incremental = s3_spark.read.format("hudi").options(**{
        "hoodie.datasource.query.type": "incremental",
        "hoodie.datasource.read.begin.instanttime": history[0][0]}).load(path)
    assert {r.id for r in incremental.collect()} == {r[0] for r in b2 if r[0] not in (1, 5, 9, 101)}
    keys = s3_server.keys(bucket)
    assert any(k.startswith("lake/trips/.hoodie/") and k.endswith(".commit" if table_type == "COPY_ON_WRITE"
                                                                     else ".deltacommit") for k in keys)
    assert any(k.startswith("lake/trips/dt=2024-01-02/") for k in keys)
    if table_type == "MERGE_ON_READ":
        assert any("/." in k and ".log." in k for k in keys)  # updates and deletes went to log files
    assert list(tmp_path.iterdir()) == []  # nothing on the local disk


def test_mor_compaction_on_s3(s3_spark, s3_server):
    bucket = s3_server.new_bucket()
    path = f"s3a://{bucket}/mor"
    opts = _opts("mor", "MERGE_ON_READ")
    b1, b2, b3 = _batches()
    state: dict = {}
    for batch, op in ((b1, "upsert"), (b2, "upsert"), (b3, "delete")):
        _write(s3_spark, path, batch, opts, op)
        apply_batch(state, batch, delete=op == "delete")
    meta = HoodieTableMetaClient.load_in_session(s3_spark, path)
    instant = schedule_compaction(meta)
    assert instant is not None
    before = REQUESTS.snapshot()
    assert run_compaction(s3_spark, path, instant) == [instant]
    used = REQUESTS.snapshot() - before
    assert used["put"] > 0  # the new base files and the commit went to S3 (local[*]: tasks count here too)
    meta = HoodieTableMetaClient.load_in_session(s3_spark, path)
    assert meta.timeline.completed().last().action == "commit"
    ro = s3_spark.read.format("hudi").option("hoodie.datasource.query.type", "read_optimized").load(path)
    assert spark_rows(ro, COLS) == _expected(state)  # after compaction the base files hold everything
    assert _ours(s3_spark, path) == _expected(state)
    assert arrow_rows(hudi_rs_read(path, storage_options=s3_server.hudi_rs_options()), COLS) == _expected(state)


def test_write_without_credentials_fails_before_writing(spark, s3_server, monkeypatch):
    for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN"):
        monkeypatch.delenv(name, raising=False)
    bucket = s3_server.new_bucket()
    df = spark.createDataFrame(_batches()[0], SCHEMA)
    with pytest.raises(HoodieIOError, match="no S3 credentials"):
        df.write.format("hudi").options(**_opts("c")).option("fs.s3a.endpoint", s3_server.url) \
            .mode("append").save(f"s3a://{bucket}/c")
    assert s3_server.keys(bucket) == []


def test_unknown_scheme_write_fails_before_writing(spark, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    df = spark.createDataFrame(_batches()[0], SCHEMA)
    with pytest.raises((HoodieIOError, HoodieWriteError), match="unsupported storage scheme 'nosuch'"):
        df.write.format("hudi").options(**_opts("u")).mode("append").save("nosuch://bucket/u")
    assert list(tmp_path.iterdir()) == []


def test_snapshot_read_lists_no_data_partition_through_the_metadata_table(s3_spark, s3_server, monkeypatch):
    """A version 9 table with the metadata table on S3: planning a snapshot read (and the read) lists only under
    `.hoodie/`; with the metadata table off the reader lists every data partition."""
    from storage.config import HoodieConfig
    from storage.io.storage import HoodieStorage
    from storage.read.reader import file_slices_to_read

    bucket = s3_server.new_bucket()
    path = f"s3a://{bucket}/mdt"
    opts = {**_opts("mdt"), "hoodie.write.table.version": "9", "hoodie.metadata.enable": "true",
            "hoodie.metadata.index.column.stats.enable": "true"}
    b1, b2, _ = _batches()
    for batch in (b1, b2):
        _write(s3_spark, path, batch, opts)
    listed: list[str] = []
    real = HoodieStorage._list
    monkeypatch.setattr(HoodieStorage, "_list", lambda self, p, recursive: listed.append(p) or real(self, p, recursive))
    meta = HoodieTableMetaClient.load_in_session(s3_spark, path)
    slices = file_slices_to_read(meta, HoodieConfig())
    assert len(slices) == 3 and len(_ours(s3_spark, path)) == 35
    data = [p for p in listed if "/.hoodie" not in p]
    assert data == [], f"listed data partitions: {data}"
    listed.clear()
    assert file_slices_to_read(meta, HoodieConfig.of({"hoodie.metadata.enable": "false"})) == slices
    assert any("/.hoodie" not in p for p in listed)  # the storage listing reads the data partitions
