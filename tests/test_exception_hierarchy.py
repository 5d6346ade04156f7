"""One root for every error of the project, and the CI rule for the Java fixtures."""
from __future__ import annotations

import inspect
import os
import subprocess
import sys
from pathlib import Path

import pytest

import importlib
import pkgutil

from storage.exception import HoodieError

PACKAGES = ("storage", "catalog", "sqlext")


def _modules():
    for package in PACKAGES:
        root = importlib.import_module(package)
        yield root
        for info in pkgutil.walk_packages(root.__path__, f"{package}."):
            if not info.name.endswith("__main__"):
                yield importlib.import_module(info.name)


def _error_classes():
    """Public exception classes defined in the project's packages (private ones are internal signals)."""
    for module in _modules():
        for name, obj in vars(module).items():
            if (inspect.isclass(obj) and issubclass(obj, BaseException) and obj.__module__ == module.__name__
                    and not name.startswith("_")):
                yield obj


def test_every_project_error_is_a_hoodie_error():
    classes = list(_error_classes())
    assert len(classes) >= 20
    for cls in classes:
        assert issubclass(cls, HoodieError), cls
        assert cls.__name__.endswith("Error"), cls


def test_errors_keep_their_builtin_bases():
    from storage.exception import HoodieFileAlreadyExistsError, HoodieTableNotFoundError, HoodieWriteError

    assert issubclass(HoodieFileAlreadyExistsError, FileExistsError)
    assert issubclass(HoodieTableNotFoundError, FileNotFoundError)
    assert issubclass(HoodieWriteError, ValueError)
    with pytest.raises(HoodieError):
        raise HoodieWriteError("rejected")


def test_ci_fails_when_fixture_directory_is_missing(tmp_path):
    env = dict(os.environ, CI="true", HUDI_FIXTURES=str(tmp_path / "nowhere"))
    root = Path(__file__).resolve().parents[1]
    probe = root / "tests" / "test_exception_hierarchy.py"
    out = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", f"{probe}::test_errors_keep_their_builtin_bases"],
                         cwd=root, env=env, capture_output=True, text=True, timeout=120)
    assert out.returncode != 0
    assert "fixture tables not found" in out.stdout + out.stderr
    env["CI"] = "false"
    out = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", f"{probe}::test_errors_keep_their_builtin_bases"],
                         cwd=root, env=env, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stdout + out.stderr
