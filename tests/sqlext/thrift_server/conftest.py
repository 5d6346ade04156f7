"""Servers for the `sqlext serve` tests, started once per test session:

- `hive_server`: `sqlext serve` as its own process (auth none: NOSASL and SASL PLAIN with any password, HTTP on
  /cliservice, a 1 MiB maximum message size), on the test session's metastore;
- `auth_server`: a password-checking server (auth plain, a users file written by `sqlext serve --add-user`)
  inside the test process, over the test session's SparkSession;
- `spark_thrift_server`: Spark's own Thrift server (HiveThriftServer2 from pyspark's jars) on the same
  metastore, the reference for the catalog RPCs; it starts with `hive_server` and is waited for when needed.

Clients always run as separate processes (clients.py, beeline)."""
from __future__ import annotations

import re
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from thrift_server.support import (
    MAX_MESSAGE_SIZE,
    PASSWORD,
    USER,
    ServerProcess,
    client_env,
    read_lines,
    start_spark_thrift_server,
)


@pytest.fixture(scope="session")
def metastore_uri(spark) -> str:
    catalog = getattr(spark, "_sqlext_catalog", None)
    if catalog is None or not catalog.uri:
        pytest.skip("the test session has no metastore")
    return catalog.uri


@pytest.fixture(scope="session")
def hive_server(metastore_uri, tmp_path_factory):
    root = tmp_path_factory.mktemp("serve")
    sts = start_spark_thrift_server(metastore_uri, root)
    cmd = [sys.executable, "-m", "sqlext.cli", "-v", "serve", "--port", "0", "--http-port", "0", "--auth", "none",
           "--max-message-size", str(MAX_MESSAGE_SIZE), "--metastore", metastore_uri,
           "--warehouse", str(root / "warehouse"), "--master", "local[2]",
           "--conf", "spark.ui.enabled=false", "--conf", "spark.sql.shuffle.partitions=2",
           "--conf", "spark.driver.memory=1g"]
    log = open(root / "server.log", "w")
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=log, text=True, env=client_env(), cwd=root)
    lines: list[str] = []
    ready = threading.Event()
    threading.Thread(target=read_lines, args=(proc, lines, ready), daemon=True).start()
    ready.wait(240)
    found = next((re.search(r":(\d+) \(binary.*http://[^:]+:(\d+)/", line) for line in lines if "listening" in line),
                 None)
    if found is None:
        proc.kill()
        log.close()
        pytest.fail(f"sqlext serve did not start: {lines}\n{(root / 'server.log').read_text()[-5000:]}")
    server = ServerProcess(int(found.group(1)), int(found.group(2)), proc, lines)
    server.sts = sts
    server.log_path = root / "server.log"
    yield server
    proc.terminate()
    try:
        proc.wait(60)
    except subprocess.TimeoutExpired:
        proc.kill()
    log.close()
    sts.stop()


@pytest.fixture(scope="session")
def users_file(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("serve-users") / "users"
    done = subprocess.run([sys.executable, "-m", "sqlext.cli", "serve", "--add-user", USER, "--users", str(path)],
                          input=PASSWORD + "\n", capture_output=True, text=True, timeout=60, env=client_env())
    assert done.returncode == 0, done.stderr
    assert f"added user {USER}" in done.stdout
    return path


@pytest.fixture(scope="session")
def auth_server(spark, users_file):
    from sqlext.server.config import ServerConfig
    from sqlext.server.server import HiveService

    config = ServerConfig(port=0, http_port=0, auth="plain", users_file=str(users_file),
                          max_message_size=MAX_MESSAGE_SIZE)
    service = HiveService(spark, config).start()
    server = ServerProcess(*service.ports)
    server.service = service
    yield server
    service.stop()


@pytest.fixture(scope="session")
def spark_thrift_server(hive_server) -> int:
    return hive_server.sts.wait_ready()


