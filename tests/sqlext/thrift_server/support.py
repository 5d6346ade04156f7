"""Helpers of the `sqlext serve` tests: the environment of client processes, running a client of
clients.py, Spark's own Thrift server and beeline from pyspark's jars (the fixtures are in conftest.py)."""
from __future__ import annotations

import json
import os
import re
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



# -- beeline running a script of many statements in one JVM ---------------------------------------------------
MARKER = "sqlext_statement"


def beeline_script(statements: list[str]) -> str:
    """`statements` as one `beeline -f` script, each preceded by a marker query answering `stmt-<i>`: in
    --silent mode beeline prints results and errors without the statement text, so the markers (one row each,
    needing no privilege) tell where each statement's output starts."""
    lines = []
    for i, sql in enumerate(statements):
        if ";" in sql or "\n" in sql:
            raise ValueError(f"a beeline script statement must be one line without ';': {sql!r}")
        lines += [f"SELECT 'stmt-{i}' AS {MARKER};", f"{sql};"]
    lines.append(f"SELECT 'stmt-end' AS {MARKER};")
    return "\n".join(lines) + "\n"


def start_beeline_script(url: str, user: str, script: Path) -> subprocess.Popen:
    """beeline running `script` as `user` (any password: the server checks none), going on after a failed
    statement (--force), stdout and stderr merged in one stream so errors stay between their markers; its JVM on
    JIT tier 1 only (tests/quick_jvm.py: a short client)."""
    from quick_jvm import quick_jvm_env

    env = quick_jvm_env({**client_env(), "SPARK_HOME": str(spark_home())})
    return subprocess.Popen([str(beeline_path()), "-u", url, "-n", user, "-p", "pw", "--silent=true",
                             "--outputformat=csv2", "--force=true", "-f", str(script)],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env)


def beeline_outcomes(output: str, count: int) -> list[dict]:
    """Per statement of a beeline_script run: {"error": beeline's `Error:` line} or {"rows": its csv lines}.
    Every marker must be there (a beeline that died part-way fails here, naming what it printed)."""
    parts = re.split(r"^stmt-(\d+|end)$", output, flags=re.MULTILINE)
    segments = dict(zip(parts[1::2], parts[2::2]))
    wanted = [str(i) for i in range(count)] + ["end"]
    missing = [i for i in wanted if i not in segments]
    assert not missing, f"beeline output lacks the markers of statements {missing}:\n{output[-4000:]}"
    out = []
    for i in range(count):
        lines = [ln.strip() for ln in segments[str(i)].splitlines()]
        # beeline prints a bare `null` after some statements (with no newline of its own): not a row
        lines = [ln for ln in lines if ln.removeprefix("null") not in ("", MARKER)
                 and not ln.startswith("Picked up JAVA_TOOL_OPTIONS")]
        # stdout and stderr share the pipe: an `Error:` may follow a fragment of stdout on its line
        error = next((ln[ln.index("Error:"):] for ln in lines if "Error:" in ln), None)
        out.append({"error": error} if error else {"rows": lines})
    return out
