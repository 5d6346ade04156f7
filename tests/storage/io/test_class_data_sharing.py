"""Class data sharing archives: options, the one-trainer lock, and publication only of archives a real HotSpot
maps cleanly (a truncated one would crash every JVM given it)."""
from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from storage.io import class_data_sharing as cds

JAVA = cds.java_binary()
needs_java = pytest.mark.skipif(JAVA is None, reason="no java binary")  # CI machines have Java 17


@pytest.fixture
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv(cds.CACHE_ENV, str(tmp_path))
    monkeypatch.delenv(cds.TRAINING_ARCHIVE_ENV, raising=False)
    monkeypatch.delenv(cds.ENABLED_ENV, raising=False)
    cds.cache_dir().mkdir(parents=True)
    return cds.cache_dir()


@pytest.fixture
def key(tmp_path):
    jars = tmp_path / "jars"
    jars.mkdir()
    (jars / "a.jar").write_bytes(b"a")
    return cds.ArchiveKey(JAVA or Path(sys.executable), jars)


def _dump_workload(exit_code: int = 0, truncate: bool = False) -> list[str]:
    """A workload as the trainer runs it: a real JVM dumping a dynamic archive where the trainer says."""
    code = ("import os, subprocess, sys\n"
            f"path = os.environ[{cds.TRAINING_ARCHIVE_ENV!r}]\n"
            f"rc = subprocess.call([{str(JAVA)!r}, '-XX:ArchiveClassesAtExit=' + path, '-version'],"
            " stderr=subprocess.DEVNULL)\n"
            f"if {truncate}:\n"
            "    data = open(path, 'rb').read()\n"
            "    os.chmod(path, 0o644)\n"
            "    open(path, 'wb').write(data[: len(data) // 3])\n"
            f"sys.exit(rc or {exit_code})\n")
    return [sys.executable, "-c", code]


def test_options_map_an_existing_archive_and_are_quiet(cache, key):
    key.archive.write_bytes(b"x")
    assert cds.java_options(key, ["false"]) == f"-XX:SharedArchiveFile={key.archive} {cds.QUIET}"


def test_options_off_by_environment(cache, key, monkeypatch):
    key.archive.write_bytes(b"x")
    monkeypatch.setenv(cds.ENABLED_ENV, "off")
    assert cds.java_options(key, ["false"]) is None


def test_training_workload_dumps_where_told(cache, key, monkeypatch):
    monkeypatch.setenv(cds.TRAINING_ARCHIVE_ENV, "/x/y.partial")
    assert cds.java_options(key, ["false"]).startswith("-XX:ArchiveClassesAtExit=/x/y.partial ")


def test_key_changes_with_the_jars(key):
    before = key.digest
    (key.jars_dir / "b.jar").write_bytes(b"b")
    assert key.digest != before
    assert cds.ArchiveKey(key.java, key.jars_dir, "extra.jar").digest != key.digest


def test_one_trainer_at_a_time_and_a_stale_lock_is_taken_over(cache, key):
    assert cds._take_lock(key.lock)
    assert not cds._take_lock(key.lock)  # a trainer runs
    old = time.time() - cds.STALE_LOCK_S - 5
    os.utime(key.lock, (old, old))
    assert cds._take_lock(key.lock)  # its trainer died long ago


def test_missing_archive_starts_one_detached_trainer(cache, key):
    marker = cache / "ran"
    workload = [sys.executable, "-c", f"open({str(marker)!r}, 'w').write('x')"]
    assert cds.java_options(key, workload) is None
    assert key.lock.exists()
    assert cds.java_options(key, workload) is None  # the second session does not start another
    deadline = time.monotonic() + 60
    while key.lock.exists() and time.monotonic() < deadline:
        time.sleep(0.2)
    assert marker.exists() and not key.lock.exists()
    assert not key.archive.exists()  # the workload dumped nothing: nothing published
    assert "training failed" in key.lock.with_suffix(".log").read_text()


@needs_java
def test_a_real_archive_is_published_and_mapped(cache, key):
    assert cds.train(key, _dump_workload()) == key.archive
    assert not key.lock.exists() and not list(cache.glob("*.partial"))
    shared = subprocess.run([str(JAVA), f"-XX:SharedArchiveFile={key.archive}", "-Xshare:on", "-version"],
                            capture_output=True, text=True)
    assert shared.returncode == 0 and "sharing" in shared.stderr


@needs_java
@pytest.mark.parametrize("exit_code, truncate", [(3, False), (0, True)], ids=["workload_failed", "truncated"])
def test_a_failed_or_damaged_training_publishes_nothing(cache, key, exit_code, truncate):
    assert cds.train(key, _dump_workload(exit_code, truncate)) is None
    assert not key.archive.exists() and not list(cache.glob("*.partial")) and not key.lock.exists()


def test_only_the_newest_archives_are_kept(cache):
    for i in range(cds.KEPT_ARCHIVES + 2):
        path = cache / f"k{i}{cds.ARCHIVE_SUFFIX}"
        path.write_bytes(b"x")
        os.utime(path, (1000 + i, 1000 + i))
    cds._keep_newest(cds.KEPT_ARCHIVES)
    assert sorted(p.name for p in cache.glob("*.jsa")) == [f"k{i}.jsa" for i in range(2, cds.KEPT_ARCHIVES + 2)]
