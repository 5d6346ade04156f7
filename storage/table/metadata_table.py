"""Removing a table's metadata table (`.hoodie/metadata`): what a writer or table service running with
`hoodie.metadata.enable=false` (this engine's default) does before it changes the table - as Hudi does for a writer
with the metadata table disabled - because Java, Trino and hudi-rs list a table through the metadata table's
`files` partition and would miss every file written after it went stale; and CALL delete_metadata_table. Writers
with it enabled keep it in step instead (`storage.metadata.metadata_writer`).

Order, so that no reader ever trusts a stale index: `hoodie.table.metadata.partitions` (and its `.inflight`
list) is cleared first - readers use the metadata table only for the partitions listed there - then the folder
is deleted. A crash in between leaves a folder no reader uses, deleted by the next write.
"""
from __future__ import annotations

import logging

from storage.config import MetadataConfigKeys as MK
from storage.config import TableConfigKeys as TK
from storage.table.meta_client import HoodieTableMetaClient

log = logging.getLogger(__name__)

METADATA_FOLDER = "metadata"
_PARTITION_KEYS = (TK.METADATA_PARTITIONS.key, TK.METADATA_PARTITIONS_INFLIGHT.key)


def metadata_table_path(meta: HoodieTableMetaClient) -> str:
    return f"{meta.meta_path}/{METADATA_FOLDER}"


def drop_metadata_table(meta: HoodieTableMetaClient, action: str, requested: bool = False) -> bool:
    """Disable the table's metadata table before `action` changes the table (`requested`: `action` is the removal
    itself, CALL delete_metadata_table); True when there was one."""
    listed = meta.table_config.props.get(TK.METADATA_PARTITIONS.key, "")
    folder = metadata_table_path(meta)
    present = meta.storage.is_dir(folder)
    if not listed and not present:
        return False
    if any(k in meta.table_config.props for k in _PARTITION_KEYS):
        meta.update_table_config({}, removals=_PARTITION_KEYS)
    if present:
        meta.storage.delete_dir(folder)
    if requested:
        log.info("%s: removed the metadata table of %s (%s)", action, meta.base_path, listed or "no partitions listed")
        return True
    log.warning("%s of %s: the table's metadata table (%s) is removed first - this writer does not keep it in step "
                "(%s=false), and readers that list files through it would miss this change; %s cleared", action,
                meta.base_path, listed or "no partitions listed", MK.ENABLE.key, TK.METADATA_PARTITIONS.key)
    return True
