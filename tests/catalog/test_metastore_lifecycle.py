"""The embedded metastore's exposure and lifetime, against real JVMs and processes (issue #21).

- it listens on 127.0.0.1 only (read from its listening socket);
- started on demand, it lives while a process holds a lease and stops once its starter is gone and nobody uses it;
- started as a service, it outlives its starter, an open connection keeps it alive, and its idle timeout ends it;
- the CLI leaves no metastore JVM behind, and `sqlext metastore status|stop --all` see exactly this user's
  metastores (here: the ones recorded in this test's own registry).

The metastores and CLI runs these tests look at start together when the module's first test runs (`started`), so
their start-ups overlap (a metastore start alone leaves much of a 2-core machine idle); each test then checks its
own. Metastore processes are counted by the test's own directories only: other test sessions on this machine run
metastores of their own."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO

import psutil
import pytest
from quick_jvm import quick_jvm_env

from metastore_processes import metastore_jvms_under, wait_until
from catalog import EmbeddedMetastore, MetastoreClient
from catalog.metastore_launcher import metastore_pids
from catalog.metastore_lifecycle import MetastoreActivity
from catalog.metastore_registry import REGISTRY_ENV

REPO = Path(__file__).resolve().parents[2]
PYTHON = sys.executable
SPARK_CONF = ["--master", "local[1]", "--conf", "spark.ui.enabled=false", "--conf", "spark.driver.memory=1g"]
IDLE_TIMEOUT_S = 3
SQL = ("CREATE TABLE t (id INT, v STRING) USING hudi TBLPROPERTIES (primaryKey = 'id');"
       "INSERT INTO t VALUES (1, 'a'); SELECT id, v FROM t")
OWNER = ("import sys; from catalog.embedded_metastore import EmbeddedMetastore as E;"
         "print(E(sys.argv[1]).start(), flush=True); sys.stdin.read()")


@pytest.fixture(scope="module", autouse=True)
def quick_jvms():
    """The JVMs these tests start (metastores, the CLI's Spark) run on JIT tier 1 only: each lives seconds and
    its start-up is what the tests wait for (a metastore start: about 13 -> 7 CPU-s; see quick_jvm). Set in this
    process's environment, so the metastores started here and every subprocess inherit it."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("JAVA_TOOL_OPTIONS", quick_jvm_env()["JAVA_TOOL_OPTIONS"])
        yield


def stop_reason(metastore: EmbeddedMetastore) -> str:
    lines = metastore.paths.hive_log.read_text(errors="replace").splitlines()
    return next((line for line in reversed(lines) if "Stopping the embedded metastore" in line), "")


@dataclass
class Service:
    """A service metastore with an idle timeout, started (and connected to at once) in a thread of this process."""

    metastore: EmbeddedMetastore
    uri: str = ""
    client: MetastoreClient | None = None
    connected_at: float = 0.0
    error: BaseException | None = None
    thread: threading.Thread = field(init=False)

    def __post_init__(self):
        self.thread = threading.Thread(target=self._start, daemon=True)
        self.thread.start()

    def _start(self):
        try:
            self.uri = self.metastore.start(keep_alive=True, idle_timeout_s=IDLE_TIMEOUT_S)
            # connected at once: this connection is what keeps it in use until its test looks at it
            self.client = MetastoreClient(self.uri)
            self.client.get_all_databases()
            self.connected_at = time.monotonic()
        except BaseException as exc:  # noqa: BLE001 - reported by the test
            self.error = exc

    def wait(self) -> None:
        self.thread.join(300)
        assert not self.thread.is_alive(), "the service metastore did not start within 300s"
        if self.error is not None:
            raise self.error


@dataclass
class CliRun:
    """`sqlext ...` running in a process of its own; its output goes to files, so a run nobody reads yet never
    blocks on a full pipe."""

    proc: subprocess.Popen
    stdout: IO[str]
    stderr: IO[str]

    def result(self, timeout_s: float = 600) -> subprocess.CompletedProcess:
        self.proc.wait(timeout_s)
        out, err = (self._read(f) for f in (self.stdout, self.stderr))
        return subprocess.CompletedProcess(self.proc.args, self.proc.returncode, out, err)

    def end(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait(60)
        self.stdout.close()
        self.stderr.close()

    @staticmethod
    def _read(file: IO[str]) -> str:
        file.seek(0)
        return file.read()


def cli(env: dict[str, str], *args, cwd=REPO) -> CliRun:
    stdout, stderr = tempfile.TemporaryFile("w+"), tempfile.TemporaryFile("w+")
    return CliRun(subprocess.Popen([PYTHON, "-m", "sqlext.cli", *map(str, args)], cwd=cwd, env=env, text=True,
                                   stdout=stdout, stderr=stderr), stdout, stderr)


def finished(run: CliRun) -> subprocess.CompletedProcess:
    return run.result()


@dataclass
class Started:
    owner: subprocess.Popen          # started the on-demand metastore of on_demand_warehouse; leaves on EOF
    on_demand_warehouse: Path
    service: Service                 # a service with an idle timeout, connected to
    cli_env: dict[str, str]          # the CLI runs' environment: a registry of their own
    cli_dir: Path                    # what the CLI runs' metastores are counted under
    cli_before: list[int]
    cli_sql: CliRun                  # `sqlext sql ... --metastore embedded` in cli_dir/run
    cli_start: CliRun                # `sqlext metastore start --warehouse cli_dir/service`

    def cli(self, *args) -> CliRun:
        return cli(self.cli_env, *args)


@pytest.fixture(scope="module", autouse=True)
def started(quick_jvms, tmp_path_factory):
    """Everything this module's tests look at, started at once: the on-demand metastore's owner process, a service
    metastore, and the two CLI runs (a SQL script with an embedded metastore; `metastore start`)."""
    root = tmp_path_factory.mktemp("lifecycle")
    cli_dir = root / "cli"
    (cli_dir / "run").mkdir(parents=True)
    env = {k: v for k, v in os.environ.items() if k != "HIVE_METASTORE_URIS"}
    env[REGISTRY_ENV] = str(cli_dir / "registry")  # `stop --all` must only see these CLI runs' metastores
    before = metastore_jvms_under(cli_dir)
    # the longest first: the SQL run starts Spark's JVM and a metastore
    sql = cli(env, "sql", SQL, "--metastore", "embedded", *SPARK_CONF, cwd=cli_dir / "run")
    on_demand = root / "on-demand" / "wh"
    owner = subprocess.Popen([PYTHON, "-c", OWNER, str(on_demand)], cwd=REPO, stdin=subprocess.PIPE,
                             stdout=subprocess.PIPE, text=True)
    service = Service(EmbeddedMetastore(root / "service" / "wh"))
    start = cli(env, "metastore", "start", "--warehouse", cli_dir / "service")
    yield Started(owner, on_demand, service, env, cli_dir, before, sql, start)
    sql.end()
    start.end()
    if owner.poll() is None:
        owner.kill()
    owner.wait(60)
    owner.stdin.close()
    owner.stdout.close()
    service.thread.join(300)
    if service.client is not None:
        service.client.close()
    for metastore_dir in root.glob("**/.metastore"):
        EmbeddedMetastore(metastore_dir.parent).stop()


# ------------------------------------------------------------------------------------------------
def test_listens_on_loopback_only(embedded_metastore):
    status = embedded_metastore.status()
    sockets = psutil.Process(status["pid"]).net_connections(kind="inet")
    listening = [(c.laddr.ip, c.laddr.port) for c in sockets if c.status == psutil.CONN_LISTEN]
    assert listening == [("127.0.0.1", status["port"])]


def test_on_demand_metastore_lives_while_a_process_uses_it(started):
    owner = started.owner
    metastore = EmbeddedMetastore(started.on_demand_warehouse)
    uri = owner.stdout.readline().strip()
    assert uri.startswith("thrift://127.0.0.1:"), "the starting process failed"
    assert metastore.start() == uri  # reused; this process holds a lease too
    status = metastore.status()
    assert status["mode"] == "on-demand" and status["owner_pid"] == owner.pid
    assert status["leases"] == sorted([owner.pid, os.getpid()])

    owner.stdin.close()
    owner.wait(timeout=60)
    # the watchdog has seen the owner gone (one live lease: ours) ...
    assert wait_until(lambda: getattr(MetastoreActivity.load(metastore.paths.root), "leases", None) == 1, 10)
    time.sleep(2)  # ... and 2s more, well past its poll and settle time: only our lease keeps it
    assert metastore.is_running() and metastore.status()["leases"] == [os.getpid()]

    metastore.release()
    assert wait_until(lambda: not metastore_pids(metastore.paths.conf_dir), 30)
    assert f"the process that started it (pid {owner.pid}) has left" in stop_reason(metastore)


def test_service_outlives_its_starter_until_idle(started):
    service = started.service
    service.wait()
    metastore, client = service.metastore, service.client
    status = metastore.status()
    assert status["mode"] == "service" and status["leases"] == [] and status["idle_timeout_s"] == IDLE_TIMEOUT_S
    # connected since it started; at least 5s, longer than the idle timeout: in use
    time.sleep(max(0.0, service.connected_at + 5 - time.monotonic()))
    assert metastore_pids(metastore.paths.conf_dir) == [status["pid"]]
    assert MetastoreActivity.load(metastore.paths.root).connections == 1
    client.close()
    closed = time.monotonic()
    assert wait_until(lambda: MetastoreActivity.load(metastore.paths.root).idle_s() >= 1, 10)
    assert wait_until(lambda: not metastore_pids(metastore.paths.conf_dir), 30)
    assert time.monotonic() - closed >= 2.5, "stopped before its idle timeout"
    assert f"idle timeout {IDLE_TIMEOUT_S}s" in stop_reason(metastore)


def test_cli_leaves_no_metastore_and_manages_this_users_metastores(started):
    cli_dir, before = started.cli_dir, started.cli_before
    bad = started.cli("metastore", "status", "--all", "--warehouse", cli_dir)

    run = finished(started.cli_sql)
    assert run.returncode == 0, run.stderr
    assert "| 1  | a |" in run.stdout
    used = EmbeddedMetastore(cli_dir / "run" / "spark-warehouse")  # the CLI's default warehouse: ./spark-warehouse
    assert used.paths.state_file.exists(), "the CLI did not run an embedded metastore"
    ended = time.monotonic()
    assert wait_until(lambda: metastore_jvms_under(cli_dir / "run") == [], 30), "the CLI left its metastore running"
    print(f"the CLI's metastore was gone {time.monotonic() - ended:.1f}s after the CLI exit was collected")
    assert "the process that started it" in stop_reason(used)

    bad = finished(bad)
    assert bad.returncode == 2 and "--all goes with" in bad.stderr and "without --warehouse" in bad.stderr

    service = cli_dir / "service"
    start = finished(started.cli_start)
    assert start.returncode == 0, start.stderr
    try:
        # the three looks are independent: run at once
        one, table, listed = (started.cli("metastore", "status", "--warehouse", service),
                              started.cli("metastore", "status"), started.cli("metastore", "status", "--json"))
        info = json.loads(finished(one).stdout)
        assert info["running"] and info["mode"] == "service" and info["uri"] == start.stdout.strip()
        table = finished(table).stdout.splitlines()
        assert table[0].split() == ["warehouse", "pid", "port", "mode", "idle_s", "leases", "connections"]
        assert table[1].split()[:4] == [str(service), str(info["pid"]), str(info["port"]), "service"]
        listed = [json.loads(line) for line in finished(listed).stdout.splitlines()]
        assert [(s["warehouse"], s["pid"]) for s in listed] == [(str(service), info["pid"])]
    finally:
        stop = finished(started.cli("metastore", "stop", "--all"))
    assert stop.returncode == 0 and stop.stdout == f"stopped {service}\n"
    assert metastore_jvms_under(cli_dir) == before
    assert finished(started.cli("metastore", "status")).stdout == "no embedded metastore running\n"
