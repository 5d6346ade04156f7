"""The code blocks of README.md marked runnable (an HTML comment `<!-- runnable ... -->` on the line before the
fence) run as they are written, each in a fresh Python process in a directory of its own (its own
./spark-warehouse and embedded metastore, stopped afterwards), as a new user would paste them."""
from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from quick_jvm import quick_jvm_env

README = Path(__file__).resolve().parents[2] / "README.md"
_BLOCK = re.compile(r"^<!-- runnable[^>]*-->\n```(\w+)\n(.*?)^```", re.M | re.S)


def runnable_blocks(text: str) -> list[tuple[str, str]]:
    """(language, code) of every block marked runnable."""
    return [(m.group(1), m.group(2)) for m in _BLOCK.finditer(text)]


def test_the_marker_finds_blocks():
    text = "x\n<!-- runnable -->\n```python\nprint(1)\n```\n```python\nprint(2)\n```\n"
    assert runnable_blocks(text) == [("python", "print(1)\n")]


BLOCKS = runnable_blocks(README.read_text())


def test_readme_has_runnable_blocks():
    assert len(BLOCKS) >= 2 and all(lang == "python" for lang, _ in BLOCKS)


@pytest.mark.parametrize("index", range(len(BLOCKS)))
def test_readme_block_runs_as_written(tmp_path, index):
    _, code = BLOCKS[index]
    shutil.rmtree("/tmp/lake", ignore_errors=True)  # the paths the examples write to
    # a new user's process: no metastore configured (the test session's is in HIVE_METASTORE_URIS), so the embedded
    # one of its own ./spark-warehouse
    env = {k: v for k, v in os.environ.items() if k != "HIVE_METASTORE_URIS"} | {"PYSPARK_PYTHON": sys.executable}
    env = quick_jvm_env(env)  # its JVMs on JIT tier 1 only (see quick_jvm): what the block runs is the same
    try:
        done = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, env=env, capture_output=True, text=True,
                              timeout=600)
        assert done.returncode == 0, f"README block {index} failed:\n{code}\n{done.stderr[-3000:]}"
    finally:
        subprocess.run([sys.executable, "-m", "sqlext.cli", "metastore", "stop", "--warehouse",
                        str(tmp_path / "spark-warehouse")], cwd=tmp_path, env=env,
                       capture_output=True, timeout=120)
        shutil.rmtree("/tmp/lake", ignore_errors=True)
