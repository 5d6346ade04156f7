"""The table services that run after a commit (Hudi's autoCleanOnCommit / autoArchiveOnCommit), inline or in a
background thread (`hoodie.clean.async` / `hoodie.archive.async`), and the check of their options before a
write starts (so a bad retention fails the write with nothing changed)."""
from __future__ import annotations

import logging
import threading
from collections.abc import Callable

from pyspark.sql import SparkSession

from storage.config import ArchivalConfigKeys as AK
from storage.config import CleanConfigKeys as CK
from storage.config import HoodieConfig
from storage.table.meta_client import HoodieTableMetaClient

log = logging.getLogger(__name__)

_async_lock = threading.Lock()
_async_services: dict[tuple[str, str], threading.Thread] = {}  # (kind, table base path) -> its background run


def validate_service_options(config: HoodieConfig) -> None:
    """The cleaner policy and retentions, and the archival rules, as Hudi checks them when a write starts."""
    from storage.table_service.archival import check_archival_config
    from storage.table_service.clean_planner import HoodieCleaningPolicy

    HoodieCleaningPolicy.of(config.get(CK.POLICY))
    check_archival_config(config)


def run_post_commit_services(spark: SparkSession, meta: HoodieTableMetaClient, config: HoodieConfig) -> None:
    clean = config.get(CK.AUTO_CLEAN)
    archive = config.get(AK.AUTO_ARCHIVE)
    if not (clean or archive):
        return
    run_async = (clean and config.get(CK.ASYNC_CLEAN)) or (archive and config.get(AK.ASYNC_ARCHIVE))
    if run_async:
        _start_async(spark, meta.base_path, config, clean, archive)
    else:
        _run_services(spark, meta, config, clean, archive)


def _run_services(spark: SparkSession, meta: HoodieTableMetaClient | str, config: HoodieConfig, clean: bool,
                  archive: bool) -> None:
    from storage.table_service.archival import archive as archive_timeline
    from storage.table_service.clean import run_clean

    options = dict(config.items())
    if clean:
        run_clean(spark, meta, options, force=False)
    if archive:
        archive_timeline(meta, options)


def _start_async(spark: SparkSession, base_path: str, config: HoodieConfig, clean: bool, archive: bool) -> None:
    run_in_background("table-services", base_path, lambda: _run_services(spark, base_path, config, clean, archive))


def run_in_background(kind: str, base_path: str, work: Callable[[], None]) -> None:
    """`work` in a daemon thread, one run of each `kind` per table at a time: a commit while one runs waits for
    it first (as Hudi's async services are joined before the next one starts). A failure is logged, never raised:
    it must not fail the commit that triggered it."""
    wait_for_background(kind, base_path)

    def run() -> None:
        try:
            work()
        except Exception:
            log.exception("async %s failed on %s", kind, base_path)

    thread = threading.Thread(target=run, name=f"hoodie-{kind}-{base_path}", daemon=True)
    with _async_lock:
        _async_services[(kind, base_path)] = thread
    thread.start()


def wait_for_background(kind: str, base_path: str | None = None, timeout: float | None = None) -> None:
    """Join the background runs of `kind` on `base_path` (every table when None)."""
    with _async_lock:
        threads = [t for (k, p), t in _async_services.items() if k == kind and (base_path is None or p == base_path)]
    for thread in threads:
        thread.join(timeout)


def wait_for_async_services(base_path: str | None = None, timeout: float | None = None) -> None:
    """Join the async clean / archival of `base_path` (every table when None)."""
    wait_for_background("table-services", base_path, timeout)
