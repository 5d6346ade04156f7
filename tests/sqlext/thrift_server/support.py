"""Helpers of the `sqlext serve` tests: the environment of client processes, running a client of
clients.py, Spark's own Thrift server and beeline from pyspark's jars (the fixtures are in conftest.py)."""
from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import threading
import time
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path


REPO = Path(__file__).resolve().parents[3]  # the repository root
CLIENTS = Path(__file__).resolve().parent / "clients.py"
MAX_MESSAGE_SIZE = 1 << 20
USER, PASSWORD = "tester", "s3cret-pw"


def client_env() -> dict[str, str]:
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
                          timeout=timeout, env=client_env())
    assert done.returncode == 0, f"{client} failed:\n{done.stdout[-3000:]}\n{done.stderr[-6000:]}"
    return json.loads(done.stdout.strip().splitlines()[-1])


def spark_home() -> Path:
    import pyspark

    return Path(pyspark.__file__).resolve().parent


def read_lines(proc: subprocess.Popen, sink: list[str], ready: threading.Event) -> None:
    for line in proc.stdout:
        sink.append(line.rstrip("\n"))
        if "listening on" in line:
            ready.set()
    ready.set()


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


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_spark_thrift_server(metastore_uri: str, root: Path) -> SparkThriftServer:
    home = spark_home()
    port = free_port()
    log_path = root / "spark-thrift-server.log"
    from quick_jvm import quick_jvm_env

    # its JVM on JIT tier 1 only (tests/quick_jvm.py): it answers a few catalog calls and queries
    env = quick_jvm_env({**client_env(), "SPARK_HOME": str(home)})
    cmd = [str(home / "bin" / "spark-submit"), "--master", "local[1]", "--driver-memory", "768m",
           "--conf", "spark.ui.enabled=false", "--conf", "spark.sql.catalogImplementation=hive",
           "--conf", f"spark.hadoop.hive.metastore.uris={metastore_uri}",
           "--conf", f"spark.sql.warehouse.dir={root / 'sts-warehouse'}",
           "--class", "org.apache.spark.sql.hive.thriftserver.HiveThriftServer2", "spark-internal",
           "--hiveconf", f"hive.server2.thrift.port={port}", "--hiveconf", "hive.server2.thrift.bind.host=127.0.0.1",
           "--hiveconf", "hive.server2.authentication=NOSASL"]
    proc = subprocess.Popen(cmd, stdout=open(log_path, "w"), stderr=subprocess.STDOUT, env=env, cwd=root)
    return SparkThriftServer(proc, port, log_path)


def beeline_path() -> Path:
    return spark_home() / "bin" / "beeline"


def run_beeline(url: str, script: str, user: str = "beeline", password: str = "pw", timeout: float = 300,
                extra: tuple[str, ...] = ()) -> subprocess.CompletedProcess:
    env = {**client_env(), "SPARK_HOME": str(spark_home())}
    return subprocess.run([str(beeline_path()), "-u", url, "-n", user, "-p", password, "--silent=true",
                           "--outputformat=csv2", "-e", script, *extra],
                          capture_output=True, text=True, timeout=timeout, env=env)

