"""The table a table service (clean, archival, savepoint, restore) works on: loaded with the session's storage
options, and refused with a clear error unless it is a table version we write."""
from __future__ import annotations

from storage.config import HoodieConfig
from storage.exception import HoodieTableServiceError
from storage.table.meta_client import SUPPORTED_WRITE_VERSIONS, HoodieTableMetaClient
from storage.metadata.metadata_writer import prepare_metadata_table


def service_meta_client(table: HoodieTableMetaClient | str, service: str, spark=None,
                        config: HoodieConfig = HoodieConfig()) -> HoodieTableMetaClient:
    """`table` (a path, loaded; or a meta client, used as the caller loaded it) ready for `service`; a path that is not a Hudi table raises
    HoodieTableNotFoundError, a table version we do not write raises HoodieTableServiceError."""
    if isinstance(table, HoodieTableMetaClient):
        meta = table
    elif spark is not None:
        meta = HoodieTableMetaClient.load_in_session(spark, table, config)
    else:
        meta = HoodieTableMetaClient.load(table)
    _refuse_other_versions(meta, service)
    prepare_metadata_table(meta, config, service)  # kept in step when enabled, else removed
    if service != "restore" and len(meta.timeline.pending().of_actions(["restore"])):
        from storage.write.rollback import finish_pending_restores

        finish_pending_restores(meta)  # nothing runs on a table a killed restore left half-way
    return meta


def _refuse_other_versions(meta: HoodieTableMetaClient, service: str) -> None:
    version = meta.table_config.version
    if version not in SUPPORTED_WRITE_VERSIONS:
        raise HoodieTableServiceError(
            f"{service} refused on {meta.base_path}: it has table version {version} and table services write "
            f"table version {', '.join(map(str, SUPPORTED_WRITE_VERSIONS))} only (the table is unchanged)")
