"""Servers for the `sqlext serve` tests, started once per test session:

- `hive_server`: `sqlext serve` as its own process (auth none: NOSASL and SASL PLAIN with any password, HTTP on
  /cliservice, a 1 MiB maximum message size), on the test session's metastore, and `spark_thrift_server`
  (Spark's own Thrift server on the same metastore, the reference for the catalog RPCs): defined in
  tests/sqlext/conftest.py, as test_newcomer_server uses `hive_server` too;
- `auth_server`: a password-checking server (auth plain, a users file written by `sqlext serve --add-user`)
  inside the test process, over the test session's SparkSession.

Clients always run as separate processes (clients.py, beeline)."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from thrift_server.support import MAX_MESSAGE_SIZE, PASSWORD, USER, ServerProcess, client_env


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
