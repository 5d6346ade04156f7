"""What a write needs to know about its table, and the creation of a new table.

An existing table's settings come from its `hoodie.properties` (write options may only repeat them); a new
table's from the write options, which then become its `hoodie.properties` when the first write creates it.
"""
from __future__ import annotations

import json
from dataclasses import dataclass

import pyarrow as pa

from storage.config import HoodieConfig
from storage.config import TableConfigKeys as TK
from storage.config import TimestampKeyGeneratorKeys as TSK
from storage.config import WriteConfigKeys as WK
from storage.exception import HoodieKeyError, HoodieWriteError
from storage.index.bucket_index import bucket_table_properties
from storage.keygen import KeyGenerator, create_key_generator
from storage.table.meta_client import HoodieTableMetaClient
from storage.merge.merge_resolver import resolve_merge_spec
from storage.merge.record_merger import RecordMergeMode
from storage.table.table_config import KEYGEN_CLASS_BY_TYPE, PROPERTIES_FILE, HoodieTableConfig
from storage.table.table_version import HoodieTableVersion
from storage.write.schema import reconcile

COPY_ON_WRITE, MERGE_ON_READ = "COPY_ON_WRITE", "MERGE_ON_READ"


@dataclass(frozen=True)
class TableSettings:
    """The table-level facts of one write."""

    name: str
    table_type: str
    record_keys: list[str]
    partition_fields: list[str]
    precombine: str | None
    keygen: KeyGenerator
    populate_meta_fields: bool
    database: str

    @property
    def is_mor(self) -> bool:
        return self.table_type == MERGE_ON_READ


def resolve_table_settings(config: HoodieConfig, table: HoodieTableConfig | None) -> TableSettings:
    """Settings of an existing table (`table`), or of the table the options describe; a key generator that
    cannot be built from them is a `HoodieWriteError`."""
    try:
        return _existing(config, table) if table is not None else _from_options(config)
    except HoodieKeyError as exc:
        raise HoodieWriteError(str(exc)) from None


def _existing(config: HoodieConfig, table: HoodieTableConfig) -> TableSettings:
    if table.table_type not in (COPY_ON_WRITE, MERGE_ON_READ):
        raise HoodieWriteError(f"unknown table type {table.table_type!r} in {PROPERTIES_FILE} ({TK.TYPE.key}); "
                               f"this engine writes {COPY_ON_WRITE} and {MERGE_ON_READ} tables")
    record_keys = table.record_key_fields or config.get(WK.RECORDKEY_FIELD) or []
    _check_consistent(config, "record key", WK.RECORDKEY_FIELD, record_keys)
    _require_record_keys(record_keys)
    keygen = create_key_generator(config, record_keys, table.partition_fields, table.keygen_class,
                                  table.hive_style_partitioning, table.url_encode_partitioning)
    return TableSettings(table.name, table.table_type, record_keys, table.partition_fields, table.precombine_field,
                         keygen, table.populate_meta_fields, table.database_name or "default")


def _from_options(config: HoodieConfig) -> TableSettings:
    name = config.get(WK.TABLE_NAME)
    if not name:
        raise HoodieWriteError(f"missing table name: set {WK.TABLE_NAME.key}")
    record_keys = config.get(WK.RECORDKEY_FIELD) or []
    _require_record_keys(record_keys)
    partitions = config.get(WK.PARTITIONPATH_FIELD) or []
    keygen = create_key_generator(config, record_keys, partitions,
                                  config.get(WK.KEYGENERATOR_CLASS) or config.get(WK.KEYGENERATOR_TYPE),
                                  config.get(WK.HIVE_STYLE_PARTITIONING), config.get(WK.URL_ENCODE_PARTITIONING))
    return TableSettings(name, parse_table_type(config.get(WK.TABLE_TYPE)), record_keys, partitions,
                         config.get(WK.PRECOMBINE_FIELD), keygen, config.get(WK.POPULATE_META_FIELDS),
                         config.get(WK.DATABASE_NAME))


def _require_record_keys(record_keys: list[str]) -> None:
    if not record_keys:
        raise HoodieWriteError(f"missing record key: set {WK.RECORDKEY_FIELD.key}")


def parse_table_type(value: str) -> str:
    text = str(value).upper()
    if text in (COPY_ON_WRITE, "COW"):
        return COPY_ON_WRITE
    if text in (MERGE_ON_READ, "MOR"):
        return MERGE_ON_READ
    raise HoodieWriteError(f"unknown table type {value!r} ({WK.TABLE_TYPE.key})")


def _check_consistent(config: HoodieConfig, what: str, prop, table_value: list[str]) -> None:
    given = config.get(prop)
    if given and [g.lower() for g in given] != [t.lower() for t in table_value]:
        raise HoodieWriteError(f"{what} fields {given} do not match the table's {table_value} ({prop.key})")


# -- table creation ------------------------------------------------------------------------------------------


def table_config_for(settings: TableSettings, config: HoodieConfig, schema: pa.Schema) -> HoodieTableConfig:
    """The hoodie.properties of a new table with `schema` (data columns), at the table version
    `hoodie.write.table.version` names (`HoodieTableVersion` says what each version records)."""
    from storage.avro.schema_converter import arrow_to_create_schema

    version = HoodieTableVersion(config.get(WK.WRITE_TABLE_VERSION))
    props = {
        TK.NAME.key: settings.name,
        TK.TYPE.key: settings.table_type,
        **version.layout_properties(),
        TK.RECORDKEY_FIELDS.key: ",".join(settings.record_keys),
        TK.HIVE_STYLE_PARTITIONING.key: str(settings.keygen.hive_style).lower(),
        TK.URL_ENCODE_PARTITIONING.key: str(settings.keygen.url_encode).lower(),
        TK.DROP_PARTITION_COLUMNS.key: "false",
        TK.DATABASE_NAME.key: settings.database,
        TK.CREATE_SCHEMA.key: json.dumps(arrow_to_create_schema(schema, settings.name), separators=(",", ":")),
    }
    keygen = settings.keygen.keygen_type
    # version 8+ records the key generator's type; a class only where no type names it (Hudi's rule)
    if version >= HoodieTableVersion.EIGHT:
        props[TK.KEYGEN_TYPE.key] = keygen
    else:
        props[TK.KEYGEN_CLASS.key] = KEYGEN_CLASS_BY_TYPE[keygen]
    props.update(version.merge_properties(settings.precombine, *_merge_of_new_table(config, settings, version)))
    if version == HoodieTableVersion.SIX and config.get(TK.RECORD_MERGE_MODE):
        # kept, so every later write, read and compaction merges the same way
        props[TK.RECORD_MERGE_MODE.key] = config.get(TK.RECORD_MERGE_MODE)
    if settings.partition_fields:
        props[TK.PARTITION_FIELDS.key] = ",".join(settings.partition_fields)
    if not settings.populate_meta_fields:
        props[TK.POPULATE_META_FIELDS.key] = "false"
    props.update(bucket_table_properties(config, settings.record_keys))  # a bucket table keeps its layout
    props.update(config.subset(TSK.PREFIX).props)
    return HoodieTableConfig(props)


# Hudi 1.x's defaults for a new table: event time with an ordering field, commit time without
_EVENT_TIME_PAYLOAD = "org.apache.hudi.common.model.DefaultHoodieRecordPayload"


def _merge_of_new_table(config: HoodieConfig, settings: TableSettings,
                        version: HoodieTableVersion) -> tuple[str, RecordMergeMode]:
    """(payload class, merge mode) a new table records: what the options name, else the version's default (0.x:
    OverwriteWithLatestAvroPayload; 1.x: DefaultHoodieRecordPayload, event time when there is an ordering field)."""
    given = config.get(WK.PAYLOAD_CLASS)
    if version == HoodieTableVersion.SIX:
        payload = given or TK.PAYLOAD_CLASS.default
    else:
        payload = given or (_EVENT_TIME_PAYLOAD if settings.precombine else TK.PAYLOAD_CLASS.default)
    probe = HoodieTableConfig({TK.PAYLOAD_CLASS.key: payload})
    return payload, resolve_merge_spec(probe, settings.precombine, config).mode


def new_table_config(config: HoodieConfig, data_schema: pa.Schema) -> HoodieTableConfig:
    """The hoodie.properties a first write with the options of `config` and `data_schema` would create."""
    # the schema a write would record (byte/short -> int, UTC timestamps)
    return table_config_for(resolve_table_settings(config, None), config, reconcile(None, data_schema))


def init_table(base_path: str, config: HoodieConfig, data_schema: pa.Schema,
               kept: HoodieConfig = HoodieConfig()) -> HoodieTableMetaClient:
    """Create an empty table (`.hoodie/` with hoodie.properties, no commit) from write options (`config`) and a
    schema (what CREATE TABLE does before any row is written); `kept`: further options the table keeps as
    properties (the ones derived from `config` win)."""
    table = new_table_config(config, data_schema)
    if kept.props:
        table = table.with_updates({k: v for k, v in kept.items() if k not in table.props})
    return HoodieTableMetaClient.init_table(base_path, table)
