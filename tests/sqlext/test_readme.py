"""The code blocks of README.md marked runnable (an HTML comment `<!-- runnable ... -->` on the line before the
fence) run as they are written, each in a fresh Python process in a directory of its own (its own
./spark-warehouse and embedded metastore, stopped afterwards), as a new user would paste them.

The blocks run at the same time (new_user_runs, with the demo of test_demo): each in a process and directory of its
own, so only the paths they name outside it (/tmp/lake) could collide, and only one block may write there."""
from __future__ import annotations

import shutil

import pytest
from new_user_runs import BLOCKS, LAKE, new_user_run, runnable_blocks


def test_the_marker_finds_blocks():
    text = "x\n<!-- runnable -->\n```python\nprint(1)\n```\n```python\nprint(2)\n```\n"
    assert runnable_blocks(text) == [("python", "print(1)\n")]


def test_readme_has_runnable_blocks():
    assert len(BLOCKS) >= 2 and all(lang == "python" for lang, _ in BLOCKS)
    # they run at the same time: two blocks writing the same table under /tmp/lake would interfere
    assert sum(LAKE in code for _, code in BLOCKS) <= 1, f"only one runnable block may write under {LAKE}"


@pytest.mark.parametrize("index", range(len(BLOCKS)))
def test_readme_block_runs_as_written(request, tmp_path_factory, index):
    _, code = BLOCKS[index]
    try:
        done = new_user_run(request, tmp_path_factory, f"readme{index}").result()
        assert done.returncode == 0, f"README block {index} failed:\n{code}\n{done.stderr[-3000:]}"
    finally:
        if LAKE in code:
            shutil.rmtree(LAKE, ignore_errors=True)
