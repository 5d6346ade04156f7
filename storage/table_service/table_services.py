"""The table services that run after a commit, in Hudi's postCommit order: inline compaction (merge-on-read, after a
deltacommit) and clustering (`runTableServicesInline`), then clean and archival (autoCleanOnCommit /
autoArchiveOnCommit, inline or in a background thread: `hoodie.clean.async` / `hoodie.archive.async`); and the
check of their options before a write starts (so a bad retention fails the write with nothing changed).
`InlineTableServices` hands them to the write path (storage.write.commit.TableServices), which does not import
them."""
from __future__ import annotations

import logging

from pyspark.sql import SparkSession

from storage.config import ArchivalConfigKeys as AK
from storage.config import CleanConfigKeys as CK
from storage.config import CompactionConfigKeys as CCK
from storage.config import HoodieConfig
from storage.table.meta_client import HoodieTableMetaClient
from storage.table_service.async_service import request_background, run_in_background, wait_for_background
from storage.timeline.instant import Action
from storage.write.commit_callback import CommitEvent

log = logging.getLogger(__name__)



class InlineTableServices:
    """The services a write client runs around each write (storage.write.commit.TableServices)."""

    def check_options(self, config: HoodieConfig) -> None:
        validate_service_options(config)

    def after_commit(self, spark: SparkSession, meta: HoodieTableMetaClient, config: HoodieConfig,
                     event: CommitEvent) -> None:
        from storage.table_service.clustering import maybe_cluster_after_commit

        if event.action == Action.DELTA_COMMIT:
            _maybe_compact_inline(spark, meta, config)
        maybe_cluster_after_commit(spark, meta, config)
        run_post_commit_services(spark, meta, config)


def _maybe_compact_inline(spark: SparkSession, meta: HoodieTableMetaClient, config: HoodieConfig) -> None:
    """When the trigger fires: `hoodie.compact.inline` schedules and executes a compaction right after the
    deltacommit; `hoodie.datasource.compaction.async.enable` schedules it and executes it in a background thread
    (later writes go to the slices it starts); `hoodie.compact.schedule.inline` only schedules it (a service
    process or `run_compaction` executes it)."""
    from storage.table_service.compaction import (
        run_compaction,
        schedule_compaction,
        should_schedule_inline,
    )

    inline = config.get(CCK.INLINE_COMPACT)
    run_async = not inline and config.get(CCK.ASYNC_COMPACT)
    if not (inline or run_async or config.get(CCK.SCHEDULE_INLINE_COMPACT)):
        return
    if not should_schedule_inline(meta, config):
        return
    instant = schedule_compaction(meta, config)
    if instant is None:
        return
    if inline:
        run_compaction(spark, meta.base_path, instant, config)
        meta.reload()
    elif run_async:
        base_path = meta.base_path  # the thread executes every pending plan: one started earlier may still wait
        request_background("compaction", base_path, lambda: run_compaction(spark, base_path, None, config))


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

    if clean:
        run_clean(spark, meta, config, force=False)
    if archive:
        archive_timeline(meta, config)


def _start_async(spark: SparkSession, base_path: str, config: HoodieConfig, clean: bool, archive: bool) -> None:
    run_in_background("table-services", base_path, lambda: _run_services(spark, base_path, config, clean, archive))


def wait_for_async_services(base_path: str | None = None, timeout: float | None = None) -> None:
    """Join the async compaction, clean and archival of `base_path` (every table when None)."""
    wait_for_background("compaction", base_path, timeout)
    wait_for_background("table-services", base_path, timeout)
