"""HoodieStorage on a local disk and on a real S3 endpoint (moto's server): the same operations, exclusive
creation of instant files, log files without append, and clear errors for locations nothing can serve."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from storage.exception import HoodieFileAlreadyExistsError, HoodieIOError
from storage.file_group.log_block import CommandBlock
from storage.file_group.log_format import HoodieLogFileReader, HoodieLogFormatWriter
from storage.io.storage import REQUESTS, HoodieStorage
from storage.io.storage_location import normalize_base_path, parse_location
from storage.io.storage_options import StorageOptions, s3_settings

ROOT = Path(__file__).resolve().parents[3]


@pytest.fixture(params=["local", "s3"])
def location(request, tmp_path):
    """(storage, base path) on each backend."""
    if request.param == "local":
        return HoodieStorage.for_path(str(tmp_path)), str(tmp_path / "t")
    s3 = request.getfixturevalue("s3_server")
    bucket = s3.new_bucket()
    base = f"s3a://{bucket}/warehouse/t"
    return HoodieStorage.for_path(base, StorageOptions.of(s3.options(), use_env=False)), base


def test_files_round_trip(location):
    storage, base = location
    storage.mkdirs(f"{base}/p=1")
    storage.write_bytes(f"{base}/p=1/a.bin", b"alpha")
    storage.write_atomic(f"{base}/p=2/b.bin", b"beta")
    storage.create(f"{base}/.hoodie/1.commit", b"{}")
    assert storage.read_bytes(f"{base}/p=1/a.bin") == b"alpha"
    assert storage.read_range(f"{base}/p=2/b.bin", 1, 2) == b"et"
    assert storage.size(f"{base}/p=2/b.bin") == 4
    assert storage.exists(f"{base}/p=1/a.bin") and not storage.exists(f"{base}/p=1/zz")
    assert storage.is_dir(f"{base}/p=1") and not storage.is_dir(f"{base}/p=1/a.bin")
    names = sorted(f.path[len(base) + 1:] for f in storage.list_files(base))
    assert names == [".hoodie/1.commit", "p=1/a.bin", "p=2/b.bin"]
    assert sorted(f.name for f in storage.list_dir(f"{base}/p=1") if not f.is_dir) == ["a.bin"]
    assert storage.list_dir(f"{base}/missing") == []
    storage.copy(f"{base}/p=1/a.bin", f"{base}/p=3/c.bin")
    assert storage.read_bytes(f"{base}/p=3/c.bin") == b"alpha"
    assert storage.delete(f"{base}/p=1/a.bin")
    storage.delete_dir(f"{base}/p=2")
    assert sorted(f.path[len(base) + 1:] for f in storage.list_files(base)) == [".hoodie/1.commit", "p=3/c.bin"]


def test_create_never_overwrites(location):
    storage, base = location
    storage.create(f"{base}/.hoodie/2.commit", b"first")
    with pytest.raises(HoodieFileAlreadyExistsError, match="2.commit"):
        storage.create(f"{base}/.hoodie/2.commit", b"second")
    assert storage.read_bytes(f"{base}/.hoodie/2.commit") == b"first"
    storage.create(f"{base}/.hoodie/.temp/2/p/f1.parquet.marker.CREATE")  # empty (a marker): same contract
    with pytest.raises(HoodieFileAlreadyExistsError, match="marker"):
        storage.create(f"{base}/.hoodie/.temp/2/p/f1.parquet.marker.CREATE")
    assert storage.read_bytes(f"{base}/.hoodie/.temp/2/p/f1.parquet.marker.CREATE") == b""


def test_log_files_roll_instead_of_appending_on_object_stores(location):
    storage, base = location
    path = f"{base}/p/.f1_001.log.1_0-1-1"
    with HoodieLogFormatWriter(path, storage=storage) as writer:
        writer.append_block(CommandBlock.rollback("002", "001"))
        size = writer.size()
    assert storage.size(path) == size
    if storage.supports_append:
        with HoodieLogFormatWriter(path, storage=storage) as writer:  # a second writer appends after it
            writer.append_block(CommandBlock.rollback("003", "001"))
        expected = ["002", "003"]
    else:
        with pytest.raises(HoodieIOError, match="has no append"):  # the whole file is created if absent
            with HoodieLogFormatWriter(path, storage=storage) as writer:
                writer.append_block(CommandBlock.rollback("003", "001"))
        expected = ["002"]
    with HoodieLogFileReader(path, storage=storage) as reader:
        assert [b.instant_time for b in reader] == expected


def test_requests_are_counted(location):
    storage, base = location
    before = REQUESTS.snapshot()
    storage.write_bytes(f"{base}/x", b"1")
    storage.list_files(base)
    storage.read_bytes(f"{base}/x")
    used = REQUESTS.snapshot() - before
    assert used["list"] == 1 and used["get"] == 1 and used["put"] >= 1


def test_two_processes_racing_to_publish_one_instant(s3_server):
    """Conditional writes make publishing safe on S3: of two processes creating the same completed instant
    file at the same moment, exactly one succeeds and the other gets the clear error."""
    bucket = s3_server.new_bucket()
    path = f"s3a://{bucket}/t/.hoodie/20240101000000000.commit"
    start_at = time.time() + 3
    script = (
        "import json, sys, time\n"
        "from storage.io.storage import HoodieStorage\n"
        "from storage.io.storage_options import StorageOptions\n"
        "from storage.exception import HoodieFileAlreadyExistsError\n"
        f"storage = HoodieStorage.for_path({path!r}, StorageOptions.of({s3_server.options()!r}, use_env=False))\n"
        f"time.sleep(max(0, {start_at} - time.time()))\n"
        "try:\n"
        f"    storage.create({path!r}, sys.argv[1].encode())\n"
        "    print(json.dumps({'won': True}))\n"
        "except HoodieFileAlreadyExistsError as exc:\n"
        "    print(json.dumps({'won': False, 'error': str(exc)}))\n"
    )
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    procs = [subprocess.Popen([sys.executable, "-c", script, f"writer-{i}"], stdout=subprocess.PIPE, text=True,
                              env=env) for i in range(2)]
    results = [json.loads(p.communicate(timeout=60)[0]) for p in procs]
    assert sorted(r["won"] for r in results) == [False, True]
    loser = next(r for r in results if not r["won"])
    assert "already exists" in loser["error"] and path in loser["error"]
    winner = results.index(next(r for r in results if r["won"]))
    assert s3_server.client().get_object(Bucket=bucket, Key="t/.hoodie/20240101000000000.commit")[
        "Body"].read() == f"writer-{winner}".encode()


def test_unknown_scheme_is_an_error_not_a_local_directory(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(HoodieIOError, match="unsupported storage scheme 'foo'"):
        normalize_base_path("foo://bucket/t")
    assert normalize_base_path("s3://bucket/t/") == "s3://bucket/t"
    assert normalize_base_path("s3a://bucket/t") == "s3a://bucket/t"
    assert normalize_base_path("file:///tmp/x/") == "/tmp/x"
    assert parse_location("s3://bucket/a/b").authority == "bucket"
    assert list(tmp_path.iterdir()) == []  # nothing was created locally


def test_missing_credentials_name_the_settings(monkeypatch):
    for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN"):
        monkeypatch.delenv(name, raising=False)
    with pytest.raises(HoodieIOError, match="no S3 credentials for bucket 'b'.*fs.s3a.access.key"):
        s3_settings(StorageOptions.of({"fs.s3a.endpoint": "http://127.0.0.1:1"}), "b")
    anonymous = s3_settings(StorageOptions.of({
        "spark.hadoop.fs.s3a.aws.credentials.provider": "org.apache.hadoop.fs.s3a.AnonymousAWSCredentialsProvider"}), "b")
    assert anonymous.anonymous


def test_hadoop_keys_map_to_s3_settings(monkeypatch):
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "env-key")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "env-secret")
    options = StorageOptions.of({"spark.hadoop.fs.s3a.endpoint": "minio.local:9000",
                                 "spark.hadoop.fs.s3a.connection.ssl.enabled": "false",
                                 "spark.hadoop.fs.s3a.path.style.access": "false",
                                 "spark.hadoop.fs.s3a.bucket.special.access.key": "bucket-key",
                                 "spark.hadoop.fs.s3a.connection.establish.timeout": "1500"})
    s3 = s3_settings(options, "any")
    assert (s3.endpoint, s3.scheme, s3.path_style, s3.access_key, s3.secret_key, s3.connect_timeout_s) == \
        ("minio.local:9000", "http", False, "env-key", "env-secret", 1.5)
    assert s3_settings(options, "special").access_key == "bucket-key"
    assert "env-secret" not in repr(options) and "***" in repr(StorageOptions.of({"fs.s3a.secret.key": "x"}))


def test_unreachable_endpoint_is_a_clear_error():
    options = StorageOptions.of({"fs.s3a.endpoint": "http://127.0.0.1:9", "fs.s3a.access.key": "k",
                                 "fs.s3a.secret.key": "s", "fs.s3a.connection.establish.timeout": "500",
                                 "fs.s3a.attempts.maximum": "1"}, use_env=False)
    storage = HoodieStorage.for_path("s3a://nowhere/t", options)
    started = time.monotonic()
    with pytest.raises(HoodieIOError, match="s3a request for s3a://nowhere/t/.hoodie.*failed"):
        storage.exists("s3a://nowhere/t/.hoodie")
    assert time.monotonic() - started < 20
