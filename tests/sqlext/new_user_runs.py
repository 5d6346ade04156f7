"""The runs of a new user's process that test_demo and test_readme check: `python -m sqlext.demo` and each runnable
README block, every one a fresh Python process in a directory of its own with no metastore configured (the test
session's is in HIVE_METASTORE_URIS), so on the embedded metastore of its own ./spark-warehouse, stopped once the
run is done.

They are started together, the first time a test asks for one, all the runs the selected tests will ask for: each
spends most of its time starting its JVMs (its Spark driver, its metastore), which keeps about one core busy, so on
two cores they overlap. Each run is awaited by its own test and checked there, exactly as if it had run alone."""
from __future__ import annotations

import atexit
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from quick_jvm import quick_jvm_env

README = Path(__file__).resolve().parents[2] / "README.md"
_BLOCK = re.compile(r"^<!-- runnable[^>]*-->\n```(\w+)\n(.*?)^```", re.M | re.S)
LAKE = "/tmp/lake"  # the paths the README examples write to
HANG_GUARD_S = 600


def runnable_blocks(text: str) -> list[tuple[str, str]]:
    """(language, code) of every block marked runnable."""
    return [(m.group(1), m.group(2)) for m in _BLOCK.finditer(text)]


BLOCKS = runnable_blocks(README.read_text())


def new_user_env() -> dict[str, str]:
    """A new user's environment: no metastore configured; its JVMs on JIT tier 1 only (see quick_jvm): what the
    process runs is the same."""
    env = {k: v for k, v in os.environ.items() if k != "HIVE_METASTORE_URIS"} | {"PYSPARK_PYTHON": sys.executable}
    return quick_jvm_env(env)


def command(key: str) -> list[str]:
    if key == "demo":
        return [sys.executable, "-m", "sqlext.demo"]
    return [sys.executable, "-c", BLOCKS[int(key.removeprefix("readme"))][1]]


def run_key(item) -> str | None:
    """The run a collected test checks (None: none)."""
    name = getattr(item, "originalname", item.name)
    if name == "test_demo_runs_on_embedded_defaults":
        return "demo"
    if name == "test_readme_block_runs_as_written":
        return f"readme{item.callspec.params['index']}"
    return None


class NewUserRun:
    def __init__(self, key: str, root: Path):
        self.key, self.cwd = key, root / key
        self.cwd.mkdir()
        self.proc = subprocess.Popen(command(key), cwd=self.cwd, env=new_user_env(), stdout=subprocess.PIPE,
                                     stderr=subprocess.PIPE, text=True)
        self._done: subprocess.CompletedProcess | None = None

    def result(self) -> subprocess.CompletedProcess:
        """The finished run; its embedded metastore stopped (it stops by itself once unused, but not at once)."""
        if self._done is None:
            try:
                out, err = self.proc.communicate(timeout=HANG_GUARD_S)
            finally:
                self.close()
            self._done = subprocess.CompletedProcess(self.proc.args, self.proc.returncode, out, err)
        return self._done

    def close(self) -> None:
        from catalog import stop_metastore

        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.communicate()
        stop_metastore(self.cwd / "spark-warehouse")   # what `sqlext metastore stop --warehouse ...` runs


_runs: dict[str, NewUserRun] = {}


def new_user_run(request, tmp_path_factory, key: str) -> NewUserRun:
    """The run `key`; the first call starts every run of the session's selected tests."""
    if key not in _runs:
        keys = [k for k in dict.fromkeys(run_key(item) for item in request.session.items) if k]
        if key not in keys:
            keys.append(key)
        if any(k.startswith("readme") for k in keys):
            shutil.rmtree(LAKE, ignore_errors=True)
        root = Path(tempfile.mkdtemp(prefix="new-user-runs-", dir=tmp_path_factory.getbasetemp()))
        for k in keys:
            if k not in _runs:
                _runs[k] = NewUserRun(k, root)
    return _runs[key]


@atexit.register
def _stop_unawaited() -> None:
    """Runs the session never awaited (it stopped early) end with it."""
    for run in _runs.values():
        if run._done is None:
            run.close()
