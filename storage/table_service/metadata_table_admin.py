"""Creating, initialising and deleting a table's metadata table on request (Hudi's CALL create_metadata_table,
init_metadata_table, delete_metadata_table), under the table lock so that no writer commits in between.

Creation and initialisation build the partitions the options ask for (`files` always; column_stats /
partition_stats when enabled) from the data table as it stands - the bootstrap of the metadata writer, also for
tables written by Java without one (table versions 6, 8 and 9) - and register the table with the metadata writer,
as a writer with `hoodie.metadata.enable=true` does; deletion clears the table config's metadata partitions, then
removes `.hoodie/metadata`.
"""
from __future__ import annotations

import logging

from storage.config import HoodieConfig
from storage.config import MetadataConfigKeys as MK
from storage.config import TableConfigKeys as TK
from storage.exception import HoodieMetadataNotAvailableError, HoodieTableStateError
from storage.metadata.metadata_writer import prepare_metadata_table
from storage.table.meta_client import HoodieTableMetaClient
from storage.table.metadata_table import drop_metadata_table, metadata_table_path
from storage.transaction.transaction_manager import TransactionManager

log = logging.getLogger(__name__)


def create_metadata_table(base_path: str, config: HoodieConfig = HoodieConfig()) -> str:
    """Create and initialise the metadata table of the table at `base_path`; refused when its folder holds
    anything already. Returns the metadata table's path."""
    meta = HoodieTableMetaClient.load(base_path)
    path = metadata_table_path(meta)
    if meta.storage.is_dir(path) and meta.storage.list_dir(path):
        raise HoodieTableStateError(f"Metadata directory ({path}) not empty: the table has a metadata table "
                                    "(CALL init_metadata_table initialises missing partitions, delete_metadata_table "
                                    "removes it)")
    _initialise(meta, config, "create_metadata_table")
    return path


def init_metadata_table(base_path: str, config: HoodieConfig = HoodieConfig(), read_only: bool = False) -> str:
    """Initialise the metadata table's partitions the options ask for and it lacks (`read_only`: only check
    that it exists). Returns its path."""
    meta = HoodieTableMetaClient.load(base_path)
    path = metadata_table_path(meta)
    if not meta.storage.is_dir(path):
        raise HoodieMetadataNotAvailableError(f"Metadata directory ({path}) does not exist: CALL "
                                              "create_metadata_table creates it")
    if not read_only:
        _initialise(meta, config, "init_metadata_table")
    return path


def delete_metadata_table(base_path: str, config: HoodieConfig = HoodieConfig()) -> str | None:
    """Remove the metadata table of the table at `base_path`; its path, or None when it had none. Writers with
    `hoodie.metadata.enable=true` build it again on their next write, as in Hudi."""
    meta = HoodieTableMetaClient.load(base_path)
    with TransactionManager.for_table(meta, config).transaction("delete metadata table"):
        removed = drop_metadata_table(meta.reload(), "delete_metadata_table", requested=True)
    return metadata_table_path(meta) if removed else None


def _initialise(meta: HoodieTableMetaClient, config: HoodieConfig, action: str) -> None:
    enabled = config.with_values({MK.ENABLE.key: True})
    with TransactionManager.for_table(meta, enabled).transaction(action):
        prepare_metadata_table(meta.reload(), enabled, action)
    log.info("%s: the metadata table of %s holds %s", action, meta.base_path,
             meta.reload().table_config.props.get(TK.METADATA_PARTITIONS.key, ""))
