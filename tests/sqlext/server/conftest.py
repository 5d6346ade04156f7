"""Servers for the `sqlext serve` tests, started once per test session:

- `hive_server`: `sqlext serve` as its own process (auth none: NOSASL and SASL PLAIN with any password, HTTP on
  /cliservice, a 1 MiB maximum message size), on the test session's metastore;
- `auth_server`: a password-checking server (auth plain, a users file written by `sqlext serve --add-user`)
  inside the test process, over the test session's SparkSession;
- `spark_thrift_server`: Spark's own Thrift server (HiveThriftServer2 from pyspark's jars) on the same
  metastore, the reference for the catalog RPCs; it starts with `hive_server` and is waited for when needed.

Clients always run as separate processes (clients.py, beeline)."""
from __future__ import annotations

import json
import os
import re
import shutil
import socket
import subprocess
import sys
import threading
import time
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[3]
CLIENTS = Path(__file__).resolve().parent / "clients.py"
MAX_MESSAGE_SIZE = 1 << 20
USER, PASSWORD = "tester", "s3cret-pw"


def _env() -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(REPO), env.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    return env


@dataclass
class ServerProcess:
    port: int
    http_port: int | None
    process: subprocess.Popen | None = None
    lines: list[str] = field(default_factory=list)

    def health(self) -> dict:
        with urllib.request.urlopen(f"http://127.0.0.1:{self.http_port}/health", timeout=10) as resp:
            return json.loads(resp.read())


def run_client(client: str, timeout: float = 300, **args) -> dict:
    done = subprocess.run([sys.executable, str(CLIENTS), client, json.dumps(args)], capture_output=True, text=True,
                          timeout=timeout, env=_env())
    assert done.returncode == 0, f"{client} failed:\n{done.stdout[-3000:]}\n{done.stderr[-6000:]}"
    return json.loads(done.stdout.strip().splitlines()[-1])


def spark_home() -> Path:
    import pyspark

    return Path(pyspark.__file__).resolve().parent


def _read_lines(proc: subprocess.Popen, sink: list[str], ready: threading.Event) -> None:
    for line in proc.stdout:
        sink.append(line.rstrip("\n"))
        if "listening on" in line:
            ready.set()
    ready.set()


@pytest.fixture(scope="session")
def metastore_uri(spark) -> str:
    catalog = getattr(spark, "_sqlext_catalog", None)
    if catalog is None or not catalog.uri:
        pytest.skip("the test session has no metastore")
    return catalog.uri


@pytest.fixture(scope="session")
def hive_server(metastore_uri, tmp_path_factory):
    root = tmp_path_factory.mktemp("serve")
    sts = _start_spark_thrift_server(metastore_uri, root)
    cmd = [sys.executable, "-m", "sqlext.cli", "-v", "serve", "--port", "0", "--http-port", "0", "--auth", "none",
           "--max-message-size", str(MAX_MESSAGE_SIZE), "--metastore", metastore_uri,
           "--warehouse", str(root / "warehouse"), "--master", "local[2]",
           "--conf", "spark.ui.enabled=false", "--conf", "spark.sql.shuffle.partitions=2",
           "--conf", "spark.driver.memory=1g"]
    log = open(root / "server.log", "w")
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=log, text=True, env=_env(), cwd=root)
    lines: list[str] = []
    ready = threading.Event()
    threading.Thread(target=_read_lines, args=(proc, lines, ready), daemon=True).start()
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
                          input=PASSWORD + "\n", capture_output=True, text=True, timeout=60, env=_env())
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


# -- Spark's own Thrift server -------------------------------------------------------------------------
class SparkThriftServer:
    def __init__(self, proc: subprocess.Popen, port: int, log_path: Path):
        self.proc, self.port, self.log_path = proc, port, log_path

    def wait_ready(self, timeout: float = 300) -> int:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"Spark's Thrift server exited: {self.log_path.read_text()[-4000:]}")
            if "HiveThriftServer2 started" in self.log_path.read_text(errors="replace"):
                return self.port
            time.sleep(1)
        raise TimeoutError(f"Spark's Thrift server not ready after {timeout} s")

    def stop(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(30)
        except subprocess.TimeoutExpired:
            self.proc.kill()


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _start_spark_thrift_server(metastore_uri: str, root: Path) -> SparkThriftServer:
    home = spark_home()
    port = _free_port()
    log_path = root / "spark-thrift-server.log"
    env = {**_env(), "SPARK_HOME": str(home)}
    cmd = [str(home / "bin" / "spark-submit"), "--master", "local[1]", "--driver-memory", "768m",
           "--conf", "spark.ui.enabled=false", "--conf", "spark.sql.catalogImplementation=hive",
           "--conf", f"spark.hadoop.hive.metastore.uris={metastore_uri}",
           "--conf", f"spark.sql.warehouse.dir={root / 'sts-warehouse'}",
           "--class", "org.apache.spark.sql.hive.thriftserver.HiveThriftServer2", "spark-internal",
           "--hiveconf", f"hive.server2.thrift.port={port}", "--hiveconf", "hive.server2.thrift.bind.host=127.0.0.1",
           "--hiveconf", "hive.server2.authentication=NOSASL"]
    proc = subprocess.Popen(cmd, stdout=open(log_path, "w"), stderr=subprocess.STDOUT, env=env, cwd=root)
    return SparkThriftServer(proc, port, log_path)


@pytest.fixture(scope="session")
def spark_thrift_server(hive_server) -> int:
    return hive_server.sts.wait_ready()


def beeline_path() -> Path:
    return spark_home() / "bin" / "beeline"


def run_beeline(url: str, script: str, user: str = "beeline", password: str = "pw", timeout: float = 300,
                extra: tuple[str, ...] = ()) -> subprocess.CompletedProcess:
    env = {**_env(), "SPARK_HOME": str(spark_home())}
    return subprocess.run([str(beeline_path()), "-u", url, "-n", user, "-p", password, "--silent=true",
                           "--outputformat=csv2", "-e", script, *extra],
                          capture_output=True, text=True, timeout=timeout, env=env)


def have(tool: str) -> bool:
    return shutil.which(tool) is not None
