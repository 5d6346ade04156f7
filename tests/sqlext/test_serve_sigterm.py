"""`SIGTERM` (what systemd, Docker and Kubernetes send) to a `sqlext serve` process while a client's MERGE runs:
the server exits within 30 s, leaves no JVM or metastore process behind, and the table reads its last committed
state (the MERGE either committed whole or not at all)."""
from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time

import psutil
import pytest
from quick_jvm import quick_jvm_env

from storage.table.meta_client import HoodieTableMetaClient

pytestmark = pytest.mark.multiprocess

MERGE_ROWS = 3_000_000


def _start_server(root) -> tuple[subprocess.Popen, int]:
    env = quick_jvm_env(PYTHONPATH=":".join(sys.path))
    env.pop("HIVE_METASTORE_URIS", None)  # an embedded metastore of its own: it must go too
    proc = subprocess.Popen([sys.executable, "-m", "sqlext.cli", "serve", "--port", "0", "--http-port", "none",
                             "--warehouse", str(root / "warehouse"), "--master", "local[2]",
                             "--conf", "spark.ui.enabled=false", "--conf", "spark.sql.shuffle.partitions=2"],
                            stdout=subprocess.PIPE, stderr=open(root / "server.log", "w"), text=True, env=env,
                            cwd=root)
    for line in proc.stdout:
        found = re.search(r"listening on [^:]+:(\d+)", line)
        if found:
            return proc, int(found.group(1))
    proc.kill()
    pytest.fail(f"sqlext serve did not start: {(root / 'server.log').read_text()[-3000:]}")


def test_sigterm_during_a_merge_stops_the_server_and_everything_it_started(spark, tmp_path):
    from pyhive import hive

    proc, port = _start_server(tmp_path)
    try:
        cursor = hive.connect(host="127.0.0.1", port=port, auth="NONE", username="ops").cursor()
        cursor.execute("CREATE TABLE t (id BIGINT, name STRING, ts BIGINT) USING hudi "
                       "TBLPROPERTIES (primaryKey = 'id', preCombineField = 'ts')")
        cursor.execute("INSERT INTO t VALUES (1, 'a', 1), (2, 'b', 1)")
        started = psutil.Process(proc.pid).children(recursive=True)
        assert any(p.name() == "java" for p in started)
        cursor.execute(f"MERGE INTO t USING (SELECT id, 'm' AS name, 2L AS ts FROM range({MERGE_ROWS})) s "
                       "ON t.id = s.id WHEN MATCHED THEN UPDATE SET * WHEN NOT MATCHED THEN INSERT *", async_=True)
        time.sleep(2)  # the MERGE's jobs are running
        assert proc.poll() is None
        signalled = time.monotonic()
        proc.send_signal(signal.SIGTERM)
        proc.wait(30)
        assert time.monotonic() - signalled < 30
    finally:
        if proc.poll() is None:
            proc.kill()
    # the JVM and the embedded metastore (its watchdog sees its last user gone) follow within seconds
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and any(p.is_running() and p.status() != psutil.STATUS_ZOMBIE for p in started):
        time.sleep(0.2)
    left = [(p.pid, p.name()) for p in started if p.is_running() and p.status() != psutil.STATUS_ZOMBIE]
    assert not left, f"left behind: {left}"
    # the table reads its last committed state
    path = str(tmp_path / "warehouse" / "t")
    committed = list(HoodieTableMetaClient.load(path).timeline.completed().write_timeline())
    rows = spark.read.format("hudi").load(path).select("id", "name").orderBy("id")
    if len(committed) == 1:  # the MERGE did not commit: the insert's rows
        assert [tuple(r) for r in rows.collect()] == [(1, "a"), (2, "b")]
    else:  # it committed whole before the signal
        assert len(committed) == 2 and rows.count() == MERGE_ROWS and rows.where("name <> 'm'").count() == 0
    assert os.path.exists(tmp_path / "server.log")
