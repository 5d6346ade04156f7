"""Helpers the SQL front end needs from storage that storage does not expose publicly yet.

Nothing here re-implements storage logic: it composes storage's own functions. Each helper says where it
belongs, so the storage owner can move it and this module shrinks to imports.
"""
from __future__ import annotations

import json

import pyarrow as pa

from storage.avro.schema_converter import arrow_to_create_schema
from storage.config import HoodieConfig
from storage.meta_fields import IS_DELETED
from storage.table.meta_client import HoodieTableMetaClient
from storage.table.table_config import HoodieTableConfig
from storage.write.schema import reconcile


def new_table_config(options: dict[str, str], data_schema: pa.Schema) -> HoodieTableConfig:
    """The hoodie.properties a first write with `options` and `data_schema` would create.

    MOVE TO storage.write.write_client (public, e.g. `new_table_config(options, schema)`): it is
    `HoodieWriteClient._init_table` without the write, built from the same private helpers.
    """
    from storage.write.write_client import _new_table_config, _resolve_settings

    config = HoodieConfig.of(options)
    settings = _resolve_settings(config, None)
    schema = reconcile(None, data_schema)  # the schema a write would record (byte/short -> int, UTC timestamps)
    avro = json.dumps(arrow_to_create_schema(schema, settings.name), separators=(",", ":"))
    return _new_table_config(settings, config, avro)


def init_table(base_path: str, options: dict[str, str], data_schema: pa.Schema,
               extra_props: dict[str, str] | None = None) -> HoodieTableMetaClient:
    """Create an empty table (`.hoodie/` with hoodie.properties, no commit) from write options and a schema.

    MOVE TO storage (e.g. `HoodieTableMetaClient.init_table_from_options`).
    """
    config = new_table_config(options, data_schema)
    if extra_props:
        config = config.with_updates({k: v for k, v in extra_props.items() if k not in config.props})
    return HoodieTableMetaClient.init_table(base_path, config)


def hidden_columns(meta: HoodieTableMetaClient, data_columns: list[str]) -> list[str]:
    """Columns the engine added to the data schema that the user never declared.

    `_hoodie_is_deleted` enters a table's schema the first time a batch carries delete markers
    (storage.write.schema.data_schema keeps it); SQL shows it only when the create schema has it.
    MOVE TO storage: better, storage should not persist `_hoodie_is_deleted` unless the table declares it.
    """
    if IS_DELETED not in data_columns:
        return []
    create = meta.table_config.create_schema
    declared = set()
    if create:
        try:
            declared = {f.get("name") for f in json.loads(create).get("fields", [])}
        except (ValueError, AttributeError):
            return []
    return [] if IS_DELETED in declared else [IS_DELETED]
