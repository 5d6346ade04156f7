"""Table services beside the writers: async compaction in the writer (`hoodie.datasource.compaction.async.enable`)
and the service process (`sqlext services run`, storage.table_service.table_service_job) - plans scheduled and
executed while the table keeps its rows (hudi-rs agrees), refused without a lock other processes see."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from service_helpers import expected, options, ours, theirs, write_commits
from storage.config import HoodieConfig
from storage.exception import HoodieWriteError
from storage.table.meta_client import HoodieTableMetaClient
from storage.table_service.table_service_job import TableServices, check_concurrency_config, run_round
from storage.table_service.table_services import wait_for_async_services
from storage.timeline.instant import Action

REPO = Path(__file__).resolve().parents[3]
FS_LOCK = {"hoodie.write.concurrency.mode": "optimistic_concurrency_control",
           "hoodie.write.lock.provider": "org.apache.hudi.client.transaction.lock.FileSystemBasedLockProvider"}


def _compactions(path) -> tuple[list[str], list[str]]:
    meta = HoodieTableMetaClient.load(str(path))
    done = [i.timestamp for i in meta.timeline.completed().of_actions([Action.COMMIT])]
    pending = [i.timestamp for i in meta.timeline.pending().of_actions([Action.COMPACTION])]
    return done, pending


def test_async_compaction_in_the_writer(spark, tmp_path):
    path = tmp_path / "a"
    opts = options("a", "MERGE_ON_READ", **{"hoodie.compact.inline": "false",
                                            "hoodie.datasource.compaction.async.enable": "true",
                                            "hoodie.compact.inline.max.delta.commits": 2})
    state = write_commits(spark, path, opts, range(5))
    wait_for_async_services(str(path))
    done, pending = _compactions(path)
    assert len(done) >= 2 and pending == [], (done, pending)  # every plan scheduled was executed in the background
    assert ours(spark, path) == expected(state) == theirs(path)


def test_a_service_round_schedules_executes_cleans_and_archives(spark, tmp_path):
    path = tmp_path / "s"
    opts = options("s", "MERGE_ON_READ", **FS_LOCK, **{"hoodie.clean.automatic": "false",
                                                      "hoodie.archive.automatic": "false"})
    state = write_commits(spark, path, opts, range(4))
    services = {**FS_LOCK, "hoodie.compact.inline.max.delta.commits": "2", "hoodie.cleaner.commits.retained": "1",
                "hoodie.keep.min.commits": "2", "hoodie.keep.max.commits": "3", "hoodie.commits.archival.batch": "1"}
    first = run_round(spark, str(path), TableServices(clustering=False), HoodieConfig.of(services))
    assert [s.split()[0] for s in first.scheduled] == ["compaction"] and first.completed == first.scheduled
    assert first.errors == []
    write_commits(spark, path, opts, range(4, 7), state)  # the writer goes on after the compaction
    second = run_round(spark, str(path), TableServices(clustering=False), HoodieConfig.of(services))
    assert second.completed and second.cleaned and second.archived, second
    assert ours(spark, path) == expected(state) == theirs(path)


def test_the_service_process_needs_a_shared_lock(tmp_path):
    with pytest.raises(HoodieWriteError, match="optimistic_concurrency_control"):
        check_concurrency_config(HoodieConfig(), str(tmp_path))
    with pytest.raises(HoodieWriteError, match="locks only inside one process"):
        check_concurrency_config(HoodieConfig.of({**FS_LOCK, "hoodie.write.lock.provider":
                                                  "org.apache.hudi.client.transaction.lock.InProcessLockProvider"}),
                                 str(tmp_path))
    # the CLI refuses before starting Spark, naming the key
    out = subprocess.run([sys.executable, "-m", "sqlext.cli", "services", "run", "--path", str(tmp_path), "--once"],
                         capture_output=True, text=True, cwd=REPO, timeout=120,
                         env={**os.environ, "PYTHONPATH": str(REPO)})
    assert out.returncode == 1 and "hoodie.write.concurrency.mode" in out.stderr, out


def test_sqlext_services_run_once(spark, tmp_path):
    path = tmp_path / "c"
    opts = options("c", "MERGE_ON_READ", **FS_LOCK)
    state = write_commits(spark, path, opts, range(3))
    conf = [f"--conf={k}={v}" for k, v in {**FS_LOCK, "hoodie.compact.inline.max.delta.commits": "2",
                                             "spark.ui.showConsoleProgress": "false"}.items()]
    out = subprocess.run([sys.executable, "-m", "sqlext.cli", "services", "run", "--path", str(path), "--once",
                          "--compaction", "--master", "local[1]", *conf],
                         capture_output=True, text=True, cwd=REPO, timeout=300,
                         env={**os.environ, "PYTHONPATH": str(REPO)})
    assert out.returncode == 0, out.stderr[-2000:]
    assert "round 1: scheduled 1, completed 1" in out.stdout, out.stdout
    done, pending = _compactions(path)
    assert len(done) == 1 and pending == []
    assert ours(spark, path) == expected(state) == theirs(path)
