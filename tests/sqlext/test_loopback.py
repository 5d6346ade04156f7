"""A default local session (`sqlext.session()`, its Spark UI on) and a default `sqlext serve` service listen on the
loopback interface only: every listening socket of the process and of its Spark JVM, checked with psutil in a
process of its own (its JVM launched with the session's defaults)."""
from __future__ import annotations

import json
import subprocess
import sys
import textwrap

from quick_jvm import quick_jvm_env

_PROBE = textwrap.dedent("""
    import json, os, psutil
    import sqlext
    from sqlext.server.config import ServerConfig
    from sqlext.server.server import HiveService

    spark = sqlext.session(master="local[1]", metastore=False, conf={"spark.ui.enabled": "true", "spark.ui.port": "0"})
    spark.range(3).count()  # executors, block manager and UI up
    service = HiveService(spark, ServerConfig(port=0, http_port=0)).start()
    me = psutil.Process()
    listening = [(p.pid, c.laddr.ip, c.laddr.port) for p in [me, *me.children(recursive=True)]
                 for c in p.net_connections(kind="inet") if c.status == psutil.CONN_LISTEN]
    print(json.dumps({"listening": listening, "ui": spark.sparkContext.uiWebUrl,
                      "ports": list(service.ports), "jvm": [p.pid for p in me.children(recursive=True)]}))
    service.stop()
    spark.stop()
""")


def test_default_local_session_and_server_listen_on_loopback_only(tmp_path):
    env = {**quick_jvm_env(), "PYTHONPATH": ":".join(sys.path)}
    env.pop("SPARK_LOCAL_IP", None)
    done = subprocess.run([sys.executable, "-c", _PROBE], capture_output=True, text=True, timeout=300, env=env,
                          cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-4000:]
    found = json.loads(done.stdout.strip().splitlines()[-1])
    ports = {port for _, _, port in found["listening"]}
    assert set(found["ports"]) <= ports, found  # the server's binary and HTTP ports are among them
    assert found["ui"] and found["ui"].startswith("http://127.0.0.1:"), found
    assert any(pid in found["jvm"] for pid, _, _ in found["listening"]), found  # the JVM's sockets were seen
    outside = [entry for entry in found["listening"] if entry[1] not in ("127.0.0.1", "::1", "::ffff:127.0.0.1")]
    assert not outside, f"listening beyond loopback: {outside}"
