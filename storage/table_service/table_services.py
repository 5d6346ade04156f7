"""The table services that run after a commit (Hudi's autoCleanOnCommit / autoArchiveOnCommit), inline or in a
background thread (`hoodie.clean.async` / `hoodie.archive.async`), and the check of their options before a
write starts (so a bad retention fails the write with nothing changed)."""
from __future__ import annotations

import logging
import threading

from pyspark.sql import SparkSession

from storage.config import ArchivalConfigKeys as AK
from storage.config import CleanConfigKeys as CK
from storage.config import HoodieConfig
from storage.table.meta_client import HoodieTableMetaClient

log = logging.getLogger(__name__)

_async_lock = threading.Lock()
_async_services: dict[str, threading.Thread] = {}  # table base path -> the running async clean / archival


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
    """One background run per table at a time; a commit while one runs waits for it first (as Hudi's async
    cleaner is joined before the next one starts)."""
    wait_for_async_services(base_path)

    def work() -> None:
        try:
            _run_services(spark, base_path, config, clean, archive)
        except Exception:  # a failed service never fails the commit that triggered it
            log.exception("async table services failed on %s", base_path)

    thread = threading.Thread(target=work, name=f"hoodie-table-services-{base_path}", daemon=True)
    with _async_lock:
        _async_services[base_path] = thread
    thread.start()


def wait_for_async_services(base_path: str | None = None, timeout: float | None = None) -> None:
    """Join the async clean / archival of `base_path` (every table when None)."""
    with _async_lock:
        threads = [t for p, t in _async_services.items() if base_path is None or p == base_path]
    for thread in threads:
        thread.join(timeout)
