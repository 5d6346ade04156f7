"""Heartbeats: Java's empty heartbeat files read by their modification time, a failing beat does not end the
heartbeat, only the owner deletes it, and a second process cannot start a live instant's heartbeat."""
from __future__ import annotations

import os
import time

import pytest

from storage.exception import HoodieHeartbeatError
from storage.io.storage import HoodieStorage
from storage.write.heartbeat import Heartbeat, HeartbeatSettings, heartbeat_path, is_writer_alive

FAST = HeartbeatSettings(interval_s=0.05, tolerable_misses=2)


def _storage():
    return HoodieStorage.for_path("/")


def test_empty_java_heartbeat_reads_by_modification_time(tmp_path):
    path = heartbeat_path(str(tmp_path), "001")
    os.makedirs(os.path.dirname(path))
    open(path, "wb").close()  # Java Hudi's heartbeat: an empty file touched every interval
    assert is_writer_alive(_storage(), str(tmp_path), "001")
    old = time.time() - 3 * 60 * 5
    os.utime(path, (old, old))
    assert not is_writer_alive(_storage(), str(tmp_path), "001")
    assert not is_writer_alive(_storage(), str(tmp_path), "002")  # none at all: dead


def test_heartbeat_survives_failed_beats(tmp_path, monkeypatch):
    storage = _storage()
    hb = Heartbeat(storage, str(tmp_path), "001", FAST).start()
    failures = {"n": 0}
    real = storage.write_atomic

    def flaky(path, data):
        if failures["n"] < 3:
            failures["n"] += 1
            raise OSError("disk hiccup")
        real(path, data)

    monkeypatch.setattr(storage, "write_atomic", flaky)
    time.sleep(0.5)
    assert failures["n"] == 3 and hb._thread.is_alive()
    before = os.path.getmtime(hb.path)
    time.sleep(0.2)
    assert os.path.getmtime(hb.path) > before  # beating again
    hb.stop()
    assert not os.path.exists(hb.path)


def test_only_the_owner_deletes_and_a_live_heartbeat_is_not_taken(tmp_path):
    storage = _storage()
    owner = Heartbeat(storage, str(tmp_path), "001", FAST).start()
    with pytest.raises(HoodieHeartbeatError, match="001 .* is being run by another live process"):
        Heartbeat(storage, str(tmp_path), "001", FAST).start()
    intruder = Heartbeat(storage, str(tmp_path), "001", FAST)
    intruder.stop()  # e.g. a failed attempt's cleanup: never removes the owner's heartbeat
    assert os.path.exists(owner.path)
    assert is_writer_alive(storage, str(tmp_path), "001", FAST)
    owner.stop()
    assert not os.path.exists(owner.path)


def test_dead_local_process_heartbeat_is_taken_over(tmp_path):
    storage = _storage()
    path = heartbeat_path(str(tmp_path), "001")
    storage.write_atomic(path, b'{"host": "%s", "pid": 999999999, "time": %f}' % (os.uname().nodename.encode(), time.time()))
    assert not is_writer_alive(storage, str(tmp_path), "001")
    hb = Heartbeat(storage, str(tmp_path), "001", FAST).start()
    assert is_writer_alive(storage, str(tmp_path), "001", FAST)
    hb.stop()
