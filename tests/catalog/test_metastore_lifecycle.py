"""The embedded metastore's exposure and lifetime, against real JVMs and processes (issue #21).

- it listens on 127.0.0.1 only (read from its listening socket);
- started on demand, it lives while a process holds a lease and stops once its starter is gone and nobody uses it;
- started as a service, it outlives its starter, an open connection keeps it alive, and its idle timeout ends it;
- the CLI leaves no metastore JVM behind, and `sqlext metastore status|stop --all` see exactly this user's
  metastores (here: the ones recorded in this test's own registry).

Metastore processes are counted by the test's own directories only: other test sessions on this machine run
metastores of their own."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

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


@pytest.fixture(autouse=True)
def quick_jvms(monkeypatch):
    """The JVMs these tests start (metastores, the CLI's Spark) run on JIT tier 1 only: each lives seconds and
    its start-up is what the tests wait for (a metastore start: about 13 -> 7 CPU-s; see quick_jvm). Set in this
    process's environment, so the metastores started here and every subprocess inherit it."""
    monkeypatch.setenv("JAVA_TOOL_OPTIONS", quick_jvm_env()["JAVA_TOOL_OPTIONS"])


def stop_reason(metastore: EmbeddedMetastore) -> str:
    lines = metastore.paths.hive_log.read_text(errors="replace").splitlines()
    return next((line for line in reversed(lines) if "Stopping the embedded metastore" in line), "")


# ------------------------------------------------------------------------------------------------
def test_listens_on_loopback_only(embedded_metastore):
    status = embedded_metastore.status()
    sockets = psutil.Process(status["pid"]).net_connections(kind="inet")
    listening = [(c.laddr.ip, c.laddr.port) for c in sockets if c.status == psutil.CONN_LISTEN]
    assert listening == [("127.0.0.1", status["port"])]


def test_on_demand_metastore_lives_while_a_process_uses_it(tmp_path):
    code = ("import sys; from catalog.embedded_metastore import EmbeddedMetastore as E;"
            "print(E(sys.argv[1]).start(), flush=True); sys.stdin.read()")
    owner = subprocess.Popen([PYTHON, "-c", code, str(tmp_path / "wh")], cwd=REPO, stdin=subprocess.PIPE,
                             stdout=subprocess.PIPE, text=True)
    metastore = EmbeddedMetastore(tmp_path / "wh")
    try:
        uri = owner.stdout.readline().strip()
        assert uri.startswith("thrift://127.0.0.1:"), "the starting process failed"
        assert metastore.start() == uri  # reused; this process holds a lease too
        status = metastore.status()
        assert status["mode"] == "on-demand" and status["owner_pid"] == owner.pid
        assert status["leases"] == sorted([owner.pid, os.getpid()])

        owner.stdin.close()
        owner.wait(timeout=60)
        time.sleep(3)  # well past the watchdog's poll and settle time: only our lease keeps it
        assert metastore.is_running() and metastore.status()["leases"] == [os.getpid()]

        metastore.release()
        assert wait_until(lambda: not metastore_pids(metastore.paths.conf_dir), 30)
        assert f"the process that started it (pid {owner.pid}) has left" in stop_reason(metastore)
    finally:
        if owner.poll() is None:
            owner.kill()
        metastore.stop()


def test_service_outlives_its_starter_until_idle(tmp_path):
    metastore = EmbeddedMetastore(tmp_path / "wh")
    try:
        uri = metastore.start(keep_alive=True, idle_timeout_s=3)
        status = metastore.status()
        assert status["mode"] == "service" and status["leases"] == [] and status["idle_timeout_s"] == 3
        with MetastoreClient(uri) as client:
            client.get_all_databases()
            time.sleep(5)  # longer than the idle timeout, but connected: in use
            assert metastore_pids(metastore.paths.conf_dir) == [status["pid"]]
            assert MetastoreActivity.load(metastore.paths.root).connections == 1
        closed = time.monotonic()
        assert wait_until(lambda: MetastoreActivity.load(metastore.paths.root).idle_s() >= 1, 10)
        assert wait_until(lambda: not metastore_pids(metastore.paths.conf_dir), 30)
        assert time.monotonic() - closed >= 2.5, "stopped before its idle timeout"
        assert "idle timeout 3s" in stop_reason(metastore)
    finally:
        metastore.stop()


def test_cli_leaves_no_metastore_and_manages_this_users_metastores(tmp_path):
    env = {k: v for k, v in os.environ.items() if k != "HIVE_METASTORE_URIS"}
    env[REGISTRY_ENV] = str(tmp_path / "registry")  # `stop --all` must only see this test's metastores

    def cli(*args, cwd=REPO):
        return subprocess.run([PYTHON, "-m", "sqlext.cli", *map(str, args)], cwd=cwd, env=env, text=True,
                              capture_output=True, timeout=600)

    bad = cli("metastore", "status", "--all", "--warehouse", tmp_path)
    assert bad.returncode == 2 and "--all goes with" in bad.stderr and "without --warehouse" in bad.stderr

    before = metastore_jvms_under(tmp_path)
    run = cli("sql", "CREATE TABLE t (id INT, v STRING) USING hudi TBLPROPERTIES (primaryKey = 'id');"
                     "INSERT INTO t VALUES (1, 'a'); SELECT id, v FROM t", "--metastore", "embedded", *SPARK_CONF,
              cwd=tmp_path)
    assert run.returncode == 0, run.stderr
    assert "| 1  | a |" in run.stdout
    used = EmbeddedMetastore(tmp_path / "spark-warehouse")  # the CLI's default warehouse: ./spark-warehouse
    assert used.paths.state_file.exists(), "the CLI did not run an embedded metastore"
    ended = time.monotonic()
    assert wait_until(lambda: metastore_jvms_under(tmp_path) == before, 30), "the CLI left its metastore running"
    print(f"the CLI's metastore was gone {time.monotonic() - ended:.1f}s after the CLI exited")
    assert "the process that started it" in stop_reason(used)

    service = tmp_path / "service"
    start = cli("metastore", "start", "--warehouse", service)
    assert start.returncode == 0, start.stderr
    try:
        info = json.loads(cli("metastore", "status", "--warehouse", service).stdout)
        assert info["running"] and info["mode"] == "service" and info["uri"] == start.stdout.strip()
        table = cli("metastore", "status").stdout.splitlines()
        assert table[0].split() == ["warehouse", "pid", "port", "mode", "idle_s", "leases", "connections"]
        assert table[1].split()[:4] == [str(service), str(info["pid"]), str(info["port"]), "service"]
        listed = [json.loads(line) for line in cli("metastore", "status", "--json").stdout.splitlines()]
        assert [(s["warehouse"], s["pid"]) for s in listed] == [(str(service), info["pid"])]
    finally:
        stop = cli("metastore", "stop", "--all")
    assert stop.returncode == 0 and stop.stdout == f"stopped {service}\n"
    assert metastore_jvms_under(tmp_path) == before
    assert cli("metastore", "status").stdout == "no embedded metastore running\n"
