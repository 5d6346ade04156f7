"""A real ZooKeeper for tests: Debian's `zookeeper` package run standalone (ZooKeeperServerMain) on a free
loopback port with its own data directory, the admin server off and a short tick so that sessions can expire
within a test. Started once per test session by the `zookeeper_server` fixture; `kill()` / `restart()` serve the
"server dies mid-run" tests. Without the package the fixture skips with the reason, except under CI=true, where
it fails (.ci/run installs it)."""
from __future__ import annotations

import glob
import logging
import os
import shutil
import signal
import socket
import subprocess
import time
from dataclasses import dataclass, field

import pytest

log = logging.getLogger(__name__)

JAR_CANDIDATES = ("/usr/share/java/zookeeper.jar", "/usr/share/zookeeper/zookeeper.jar")
TICK_MS = 200  # sessions may time out from 2 ticks (0.4 s) up: tests choose short session timeouts


def zookeeper_classpath() -> str | None:
    """The server's classpath: Debian's jar names its dependencies in its manifest."""
    for jar in JAR_CANDIDATES:
        if os.path.exists(jar):
            return jar
    found = sorted(glob.glob("/usr/share/zookeeper/lib/*.jar") + glob.glob("/usr/share/zookeeper/*.jar"))
    return ":".join(found) or None


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@dataclass
class ZookeeperServer:
    directory: str
    port: int = field(default_factory=_free_port)
    proc: subprocess.Popen | None = None

    @property
    def url(self) -> str:
        return f"127.0.0.1:{self.port}"

    def _config(self) -> str:
        data = os.path.join(self.directory, "data")
        os.makedirs(data, exist_ok=True)
        path = os.path.join(self.directory, "zoo.cfg")
        with open(path, "w") as f:
            f.write(f"tickTime={TICK_MS}\ndataDir={data}\nclientPort={self.port}\nclientPortAddress=127.0.0.1\n"
                    "admin.enableServer=false\nminSessionTimeout=400\nmaxSessionTimeout=120000\n"
                    "maxClientCnxns=0\n4lw.commands.whitelist=ruok\n")
        return path

    def start(self, timeout_s: float = 30) -> None:
        classpath = zookeeper_classpath()
        if not classpath:
            raise RuntimeError("ZooKeeper jars not found (apt-get install zookeeper)")
        java = shutil.which("java") or "/usr/bin/java"
        os.makedirs(self.directory, exist_ok=True)
        log_path = os.path.join(self.directory, "zookeeper.log")
        with open(log_path, "ab") as out:
            self.proc = subprocess.Popen(
                [java, "-Xmx128m", "-XX:TieredStopAtLevel=1", "-cp", classpath,
                 f"-Dzookeeper.log.dir={self.directory}", "org.apache.zookeeper.server.ZooKeeperServerMain",
                 self._config()], stdout=out, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"ZooKeeper exited with {self.proc.returncode}; see {log_path}")
            if self._answers() and self._opens_sessions():
                return
            time.sleep(0.1)
        self.kill()
        raise RuntimeError(f"ZooKeeper did not answer on {self.url} within {timeout_s}s; see {log_path}")

    def _answers(self) -> bool:
        try:
            with socket.create_connection(("127.0.0.1", self.port), timeout=0.5) as s:
                s.sendall(b"ruok")
                return s.recv(4) == b"imok"
        except OSError:
            return False

    def _opens_sessions(self) -> bool:
        """A first session through a real client: a server that answers `ruok` may still drop it while warming up."""
        from kazoo.client import KazooClient

        client = KazooClient(self.url, timeout=10)
        try:
            client.start(timeout=5)
            return True
        except Exception:  # noqa: BLE001 - not ready yet, whatever the reason
            return False
        finally:
            client.stop()
            client.close()

    def kill(self) -> None:
        """Kill the server at once (SIGKILL), as a crashed ensemble: clients lose their connection."""
        if self.proc and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
            self.proc.wait(10)
        self.proc = None

    def restart(self) -> None:
        """Start again on the same port and data: sessions of before may be expired by then."""
        self.kill()
        self.start()

    def stop(self) -> None:
        if self.proc and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
        self.proc = None


def _missing(reason: str):
    if os.environ.get("CI", "").lower() == "true":
        pytest.fail(f"{reason}; CI must install Debian's zookeeper package (.ci/run does)")
    pytest.skip(reason)


# named apart from their functions, so that test modules import them without shadowing the fixture arguments
@pytest.fixture(scope="session", name="zookeeper_server")
def zookeeper_server_fixture(tmp_path_factory):
    """One ZooKeeper server for the test session (per importing module)."""
    if not zookeeper_classpath():
        _missing("ZooKeeper is not installed (apt-get install zookeeper)")
    if not shutil.which("java"):
        _missing("java is not installed: the ZooKeeper server needs it")
    server = ZookeeperServer(str(tmp_path_factory.mktemp("zookeeper")))
    server.start()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture(name="own_zookeeper_server")
def own_zookeeper_server_fixture(tmp_path):
    """A server of this test's own, for tests that kill it."""
    if not zookeeper_classpath():
        _missing("ZooKeeper is not installed (apt-get install zookeeper)")
    server = ZookeeperServer(str(tmp_path / "zookeeper"))
    server.start()
    try:
        yield server
    finally:
        server.stop()
