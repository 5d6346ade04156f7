"""Embedded metastores whose warehouse was deleted (issue #44), against real JVMs and processes.

- a script's session in a temporary warehouse, deleted while the script still runs (what
  `tempfile.TemporaryDirectory` does): the deletion succeeds, the script's next metastore call fails naming the
  warehouse, and the metastore stops by itself within its check interval;
- a script that exits, or is killed with SIGKILL, then its warehouse deleted: the metastore stops within the check
  interval even while another client keeps a connection open (so only the deletion can be what ends it);
- `sqlext metastore status --all` lists an orphan made on purpose (its `.metastore` replaced, then its warehouse
  deleted) and `stop --all` stops it.

The three children start together when the first test of this module runs, so their start-ups overlap. The first
runs a `sqlext.session()`; the two others only start the warehouse's metastore as a session does (a lease, on
demand) and query it: there another client's connection keeps the metastore in use, so Spark's JVM would add
nothing but start-up time. Every JVM of this module (the children's Spark, the metastores) runs on JIT tier 1
only (tests/quick_jvm.py): each lives seconds, and its start-up is what the tests wait for.
Metastore processes are counted by this test's own directories only: other test sessions run metastores too."""
from __future__ import annotations

import contextlib
import io
import json
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import IO

import pytest
from quick_jvm import quick_jvm_env

from metastore_processes import metastore_jvms_under, wait_until
from catalog import EmbeddedMetastore, MetastoreClient
from catalog.metastore_lifecycle import CHECK_INTERVAL_ENV
from catalog.metastore_registry import REGISTRY_ENV, REGISTRY_PROPERTY, tagged_for_this_registry
from sqlext.cli import CliError, build_parser
from sqlext.cli import metastore as metastore_command

REPO = Path(__file__).resolve().parents[2]
PYTHON = sys.executable
CHECK_INTERVAL_S = 2.0
SETTLE_S = 1.0  # the watchdog looks once more this long after a stop rule first holds
# interval + settle + the JVM's own exit, with room for a loaded 2-core machine
STOP_BOUND_S = 2 * CHECK_INTERVAL_S + SETTLE_S + 5
READY_TIMEOUT_S = 240

CHILD = r"""
import json, sys, tempfile
from catalog import EmbeddedMetastore, MetastoreClient, MetastoreWarehouseGoneError

mode, where = sys.argv[1], sys.argv[2]
conf = {"spark.ui.enabled": "false", "spark.driver.memory": "1g", "spark.ui.showConsoleProgress": "false",
        "spark.sql.shuffle.partitions": "1"}

def say(**fields):
    print(json.dumps(fields), flush=True)

def session(warehouse):
    import sqlext

    spark = sqlext.session(master="local[1]", warehouse=warehouse, conf=conf)
    spark.sql("CREATE DATABASE IF NOT EXISTS orphan_db")  # a query that reaches the metastore
    status = spark._sqlext_catalog.embedded.status()
    say(event="ready", warehouse=warehouse, uri=status["uri"], pid=status["pid"],
        check_interval_s=status.get("check_interval_s"))
    return spark

if mode == "temporary":  # as scripts do: the warehouse is deleted when the block ends, the script goes on
    with tempfile.TemporaryDirectory(dir=where) as warehouse:
        spark = session(warehouse)
        sys.stdin.readline()
    say(event="deleted")
    try:
        spark.sql("SELECT * FROM orphan_db.t").collect()
        say(event="call", error=None)
    except Exception as exc:
        cause = exc
        while cause.__cause__ is not None and not isinstance(cause, MetastoreWarehouseGoneError):
            cause = cause.__cause__
        say(event="call", error=type(exc).__name__, cause=type(cause).__name__, message=str(exc))
else:  # the warehouse's metastore as a session starts it (without Spark's JVM); "exit" leaves on a line of stdin
    metastore = EmbeddedMetastore(where)
    with MetastoreClient(metastore.start()) as client:
        client.create_database("orphan_db")
    status = metastore.status()
    say(event="ready", warehouse=where, uri=status["uri"], pid=status["pid"],
        check_interval_s=status.get("check_interval_s"))
    sys.stdin.readline()
"""


# ------------------------------------------------------------------------------------------------
# helpers
# ------------------------------------------------------------------------------------------------
def seconds_until_gone(directory: Path, timeout_s: float) -> float | None:
    """Seconds until no metastore JVM of `directory` remains; None if one still runs after `timeout_s`."""
    started = time.monotonic()
    gone = wait_until(lambda: not metastore_jvms_under(directory), timeout_s, 0.05)
    return round(time.monotonic() - started, 2) if gone else None


@contextlib.contextmanager
def metastore_output(warehouse: Path) -> Iterator[IO[bytes]]:
    """The metastore's stdout/stderr log from its current end, open before its warehouse is deleted."""
    with open(warehouse / ".metastore" / "logs" / "metastore.out", "rb") as log:
        log.seek(0, os.SEEK_END)
        yield log


def stop_reason(log: IO[bytes]) -> str:
    """The watchdog's last word, read through a descriptor opened before the log file was deleted."""
    text = log.read().decode(errors="replace")
    return next((line for line in reversed(text.splitlines()) if "Stopping the embedded metastore" in line), "")


@dataclass
class Child:
    """A Python process running CHILD; `ready` is its first report."""

    proc: subprocess.Popen
    ready: dict | None = None

    def report(self, event: str, timeout_s: float = READY_TIMEOUT_S) -> dict:
        result: dict = {}

        def read():
            for line in self.proc.stdout:
                if line.startswith("{") and json.loads(line).get("event") == event:
                    result.update(json.loads(line))
                    return

        reader = threading.Thread(target=read, daemon=True)
        reader.start()
        reader.join(timeout_s)
        assert result, f"the child reported no {event!r} within {timeout_s}s (exit code {self.proc.poll()})"
        return result

    def wait_ready(self) -> dict:
        if self.ready is None:
            self.ready = self.report("ready")
            assert self.ready["check_interval_s"] == CHECK_INTERVAL_S, "the check interval was not configured"
        return self.ready

    def send(self, line: str = "") -> None:
        self.proc.stdin.write(line + "\n")
        self.proc.stdin.flush()


@pytest.fixture(scope="module")
def children(tmp_path_factory):
    """The three children of this module, started at once (their start-ups overlap)."""
    root = tmp_path_factory.mktemp("orphans")
    env = {k: v for k, v in os.environ.items() if k != "HIVE_METASTORE_URIS"}  # an embedded metastore each
    env = quick_jvm_env(env, **{CHECK_INTERVAL_ENV: str(CHECK_INTERVAL_S)})
    started = {}
    for mode in ("temporary", "exit", "kill"):
        where = root / mode
        where.mkdir()
        with open(root / f"{mode}.stderr", "w") as stderr:
            proc = subprocess.Popen([PYTHON, "-c", CHILD, mode, str(where)], cwd=REPO, env=env, text=True,
                                    stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=stderr)
        started[mode] = Child(proc)
    yield started
    for child in started.values():
        if child.proc.poll() is None:
            child.proc.kill()
        child.proc.wait(30)
    for metastore_dir in root.glob("**/.metastore"):
        EmbeddedMetastore(metastore_dir.parent).stop()


# ------------------------------------------------------------------------------------------------
# status --all / stop --all
# ------------------------------------------------------------------------------------------------
def test_an_untagged_metastore_belongs_to_the_default_registry_only(monkeypatch, tmp_path):
    tag = f"-D{REGISTRY_PROPERTY}={tmp_path / 'mine'}"
    monkeypatch.setenv(REGISTRY_ENV, str(tmp_path / "mine"))
    assert tagged_for_this_registry(["java", tag])
    assert not tagged_for_this_registry(["java", f"-D{REGISTRY_PROPERTY}={tmp_path / 'theirs'}"])
    assert not tagged_for_this_registry(["java"])
    monkeypatch.delenv(REGISTRY_ENV)
    assert tagged_for_this_registry(["java"])
    assert not tagged_for_this_registry(["java", tag])


def metastore_cli(*args: str) -> str:
    """`sqlext metastore ...` in this process (its output); the last step of the test runs the real CLI."""
    out = io.StringIO()
    assert metastore_command(build_parser().parse_args(["metastore", *args]), out) == 0
    return out.getvalue()


@pytest.mark.multiprocess
def test_status_all_lists_an_orphan_and_stop_all_stops_it(children, monkeypatch, tmp_path):
    # (`children`: the children start up while this test runs)
    monkeypatch.setenv(REGISTRY_ENV, str(tmp_path / "registry"))  # `stop --all` sees only this test's metastores
    monkeypatch.setenv(CHECK_INTERVAL_ENV, "60")  # an orphan that stays long enough to be looked at
    monkeypatch.setenv("JAVA_TOOL_OPTIONS", quick_jvm_env()["JAVA_TOOL_OPTIONS"])  # its JVM too: tier 1 only
    metastore = EmbeddedMetastore(tmp_path / "wh")
    warehouse, root = metastore.paths.warehouse, metastore.paths.root
    try:
        metastore.start(keep_alive=True)
        pid, port = metastore.status()["pid"], metastore.status()["port"]
        shutil.rmtree(warehouse)
        root.mkdir(parents=True)  # a new warehouse at the same path, its metastore not started

        listed = [json.loads(line) for line in metastore_cli("status", "--all", "--json").splitlines()]
        assert [(s["warehouse"], s["mode"], s["pid"], s["port"]) for s in listed] == [
            (str(warehouse), "orphan", pid, port)]
        assert listed[0]["problem"] == f"its directory {root} was replaced by another one"

        shutil.rmtree(warehouse)
        table = metastore_cli("status", "--all")
        assert table.splitlines()[0].split() == ["warehouse", "pid", "port", "mode", "idle_s", "leases",
                                                 "connections"]
        assert table.splitlines()[1].split() == [str(warehouse), str(pid), str(port), "orphan", "0"]
        assert f"orphan pid {pid}: its warehouse directory {warehouse} was deleted" in table
        with pytest.raises(CliError, match="--all goes with"):
            metastore_cli("status", "--all", "--warehouse", str(tmp_path))

        env = {k: v for k, v in os.environ.items() if k != "HIVE_METASTORE_URIS"}
        stopped = subprocess.run([PYTHON, "-m", "sqlext.cli", "metastore", "stop", "--all"], cwd=REPO, env=env,
                                 text=True, capture_output=True, timeout=120)
        assert stopped.returncode == 0, stopped.stderr
        assert stopped.stdout == f"stopped {warehouse} (orphan: its warehouse directory {warehouse} was deleted)\n"
        assert metastore_jvms_under(tmp_path) == []
        assert metastore_cli("status", "--all") == "no embedded metastore running\n"
        assert not warehouse.exists(), "stopping the orphan recreated its warehouse"
    finally:
        metastore.stop()


# ------------------------------------------------------------------------------------------------
# children
# ------------------------------------------------------------------------------------------------
@pytest.mark.multiprocess
def test_warehouse_deleted_while_its_script_runs(children):
    child = children["temporary"]
    ready = child.wait_ready()
    warehouse = Path(ready["warehouse"])
    assert metastore_jvms_under(warehouse) == [ready["pid"]]
    with metastore_output(warehouse) as log:
        child.send()  # leave the `with TemporaryDirectory()` block: the script deletes its warehouse
        child.report("deleted")
        deleted = time.monotonic()
        assert not warehouse.exists(), "TemporaryDirectory could not delete the warehouse"
        call = child.report("call", 60)
        gone = seconds_until_gone(warehouse, STOP_BOUND_S)
        print(f"metastore gone {time.monotonic() - deleted:.1f}s after the deletion (check interval "
              f"{CHECK_INTERVAL_S}s; the call ended it)")
        reason = stop_reason(log)

    assert call["cause"] == "MetastoreWarehouseGoneError", call
    assert f"warehouse directory {warehouse} was deleted" in call["message"], call["message"]
    assert gone is not None, f"a metastore of {warehouse} still runs {STOP_BOUND_S}s after its warehouse was deleted"
    assert f"its warehouse directory {warehouse} was deleted" in reason
    assert not warehouse.exists(), "the failed call recreated the deleted warehouse"
    child.proc.stdin.close()
    assert child.proc.wait(60) == 0


@pytest.mark.multiprocess
@pytest.mark.parametrize("ending", ["exit", "kill"])
def test_warehouse_deleted_after_its_script_ended(children, ending):
    child = children[ending]
    ready = child.wait_ready()
    warehouse = Path(ready["warehouse"])
    # Another client stays connected: the starter leaving cannot end the metastore, only the deletion can.
    with metastore_output(warehouse) as log, MetastoreClient(ready["uri"]) as bystander:
        assert "orphan_db" in bystander.get_all_databases()
        if ending == "exit":
            child.send()
            assert child.proc.wait(60) == 0
        else:
            child.proc.send_signal(signal.SIGKILL)
            assert child.proc.wait(60) == -signal.SIGKILL
        assert metastore_jvms_under(warehouse) == [ready["pid"]], "the metastore stopped before the deletion"

        shutil.rmtree(warehouse)
        took = seconds_until_gone(warehouse, STOP_BOUND_S)
        print(f"{ending}: metastore gone {took}s after its warehouse was deleted")
        assert took is not None, f"a metastore of {warehouse} still runs {STOP_BOUND_S}s after the deletion"
        assert f"its warehouse directory {warehouse} was deleted" in stop_reason(log)
