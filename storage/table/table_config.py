"""`.hoodie/hoodie.properties`: the table's configuration, read and updated atomically.

Updates follow Hudi's protocol: copy the current file to `hoodie.properties.backup`, write the new file,
then delete the backup. A reader that finds the main file missing or empty recovers from the backup.
"""
from __future__ import annotations

import functools
import logging
import zlib
from dataclasses import dataclass, field
from typing import Mapping

from storage.config import KEY_PREFIX, ConfigProperty, HoodieConfig, TableConfigKeys as K
from storage.io.storage import HoodieStorage
from storage.table.properties_file import format_properties, parse_properties
from storage.exception import HoodieCorruptedMetadataError, HoodieTableNotFoundError

log = logging.getLogger(__name__)

PROPERTIES_FILE = "hoodie.properties"
BACKUP_FILE = "hoodie.properties.backup"

COPY_ON_WRITE = "COPY_ON_WRITE"
MERGE_ON_READ = "MERGE_ON_READ"

KEYGEN_CLASS_BY_TYPE = {
    "SIMPLE": "org.apache.hudi.keygen.SimpleKeyGenerator",
    "COMPLEX": "org.apache.hudi.keygen.ComplexKeyGenerator",
    "NON_PARTITION": "org.apache.hudi.keygen.NonpartitionedKeyGenerator",
    "TIMESTAMP": "org.apache.hudi.keygen.TimestampBasedKeyGenerator",
    "CUSTOM": "org.apache.hudi.keygen.CustomKeyGenerator",
}


def table_checksum(props: Mapping[str, str]) -> int:
    """CRC32 of `<database>.<table>` as Java formats it: with an empty database when none is recorded
    (`.<table>`, e.g. every metadata table and a table created by path)."""
    return zlib.crc32(f"{props.get(K.DATABASE_NAME.key) or ''}.{props[K.NAME.key]}".encode("utf-8")) & 0xFFFFFFFF


def legacy_table_checksum(props: Mapping[str, str]) -> int:
    """CRC32 of the bare `<table>`: what this engine wrote before for tables without a database (Java rejects it;
    accepted on load, replaced on the next rewrite of the properties)."""
    return zlib.crc32(props[K.NAME.key].encode("utf-8")) & 0xFFFFFFFF


@dataclass
class HoodieTableConfig:
    """The parsed properties of one table."""

    props: dict[str, str] = field(default_factory=dict)

    def get(self, prop: ConfigProperty):
        return HoodieConfig(self.props).get(prop)

    def with_options(self, config: HoodieConfig = HoodieConfig()) -> HoodieConfig:
        """The configuration an action on this table runs with: the table's `hoodie.*` properties, overlaid by
        `config` (the options a write, read, table service or procedure was given). The one precedence rule
        wherever a table's properties and options meet: an option wins over the table property of the same key
        (as spelt: a key given under one spelling by each side keeps both, and `HoodieConfig.get` tries a
        property's primary key before its alternatives); a key only one side gives comes from that side. Other
        keys of hoodie.properties (ALTER TABLE SET TBLPROPERTIES may store any) are no options and stay out."""
        return HoodieConfig({**{k: v for k, v in self.props.items() if k.startswith(KEY_PREFIX)}, **config.props})

    @property
    def name(self) -> str:
        return self.props[K.NAME.key]

    @property
    def table_type(self) -> str:
        return self.get(K.TYPE)

    @property
    def is_mor(self) -> bool:
        return self.table_type == MERGE_ON_READ

    @property
    def version(self) -> int:
        return self.get(K.VERSION)

    @property
    def timeline_layout_version(self) -> int:
        return self.get(K.TIMELINE_LAYOUT_VERSION)

    @property
    def record_key_fields(self) -> list[str]:
        return self.get(K.RECORDKEY_FIELDS) or []

    @property
    def partition_fields(self) -> list[str]:
        return self.get(K.PARTITION_FIELDS) or []

    @property
    def precombine_field(self) -> str | None:
        value = self.get(K.PRECOMBINE_FIELD)
        return value.split(",")[0] if value else None

    @property
    def hive_style_partitioning(self) -> bool:
        return self.get(K.HIVE_STYLE_PARTITIONING)

    @property
    def url_encode_partitioning(self) -> bool:
        return self.get(K.URL_ENCODE_PARTITIONING)

    @property
    def populate_meta_fields(self) -> bool:
        return self.get(K.POPULATE_META_FIELDS)

    @property
    def keygen_class(self) -> str | None:
        cls = self.props.get(K.KEYGEN_CLASS.key)
        if cls:
            return cls
        keygen_type = self.props.get(K.KEYGEN_TYPE.key)
        return KEYGEN_CLASS_BY_TYPE.get(keygen_type.upper()) if keygen_type else None

    @property
    def create_schema(self) -> str | None:
        return self.props.get(K.CREATE_SCHEMA.key)

    @property
    def database_name(self) -> str | None:
        return self.props.get(K.DATABASE_NAME.key)

    def with_updates(self, updates: Mapping[str, str], removals: tuple[str, ...] = ()) -> "HoodieTableConfig":
        props = {k: v for k, v in self.props.items() if k not in removals and k != K.CHECKSUM.key}
        props.update({k: str(v) for k, v in updates.items()})
        return HoodieTableConfig(props)


def _properties_path(meta_path: str) -> str:
    return f"{meta_path}/{PROPERTIES_FILE}"


def _backup_path(meta_path: str) -> str:
    return f"{meta_path}/{BACKUP_FILE}"


_FIRST_CHECKSUM_VERSION = 3  # Hudi records hoodie.table.checksum from table version 3 on


def _read_nonempty(storage: HoodieStorage, path: str) -> dict[str, str] | None:
    """The properties of `path`; None when it is absent or empty; `HoodieCorruptedMetadataError` when damaged."""
    if not storage.exists(path):
        return None
    try:
        text = storage.read_text(path)
    except UnicodeDecodeError as exc:
        raise HoodieCorruptedMetadataError(f"{path} is damaged: {exc}") from None
    return dict(_checked_properties(path, text)) or None


@functools.lru_cache(maxsize=64)
def _checked_properties(path: str, text: str) -> tuple[tuple[str, str], ...]:
    """The parsed, checksum-checked properties of one file content: a write reloads its table's unchanged file a
    dozen times, and parsing costs far more than reading it. Keyed by the content itself (a failure is not kept)."""
    try:
        props = parse_properties(text)
    except ValueError as exc:
        raise HoodieCorruptedMetadataError(f"{path} is damaged: {exc}") from None
    if props:
        _check_checksum(path, props)
    return tuple(props.items())


def _check_checksum(path: str, props: Mapping[str, str]) -> None:
    """As Hudi, the checksum (written last) proves the file whole: a truncated or bit-flipped file fails here."""
    given = props.get(K.CHECKSUM.key)
    if given is None:
        version = props.get(K.VERSION.key, "")
        if K.NAME.key in props and version.isdigit() and int(version) < _FIRST_CHECKSUM_VERSION:
            return
        raise HoodieCorruptedMetadataError(f"{path} is damaged: it has no {K.CHECKSUM.key} (truncated?)")
    if K.NAME.key not in props or not given.strip().isdigit() or \
            int(given) not in (table_checksum(props), legacy_table_checksum(props)):
        raise HoodieCorruptedMetadataError(f"{path} is damaged: {K.CHECKSUM.key}={given!r} does not match its "
                                           f"table name")


def _read_either(storage: HoodieStorage, meta_path: str) -> tuple[dict[str, str] | None, bool]:
    """(properties, from the backup): the main file, else its backup when the main one is missing, empty or
    damaged (a damaged main file without a good backup is an error naming it)."""
    try:
        props = _read_nonempty(storage, _properties_path(meta_path))
        if props is not None:
            return props, False
        damage = None
    except HoodieCorruptedMetadataError as exc:
        damage = exc
    try:
        backup = _read_nonempty(storage, _backup_path(meta_path))
    except HoodieCorruptedMetadataError:
        backup = None
    if backup is None and damage is not None:
        raise damage
    return backup, backup is not None


def load_table_config(storage: HoodieStorage, meta_path: str) -> HoodieTableConfig:
    """Read `hoodie.properties`, recovering from the backup when the main file is missing, empty or damaged."""
    props, from_backup = _read_either(storage, meta_path)
    if props is None:
        raise HoodieTableNotFoundError(f"not a Hudi table: no readable {PROPERTIES_FILE} under {meta_path}")
    if from_backup:
        log.warning("recovering %s from its backup", _properties_path(meta_path))
        storage.write_atomic(_properties_path(meta_path), _serialize(props))
        storage.delete(_backup_path(meta_path))
    return HoodieTableConfig(props)


def _serialize(props: Mapping[str, str]) -> bytes:
    content = {k: v for k, v in props.items() if k != K.CHECKSUM.key}
    if K.NAME.key in content:
        content[K.CHECKSUM.key] = str(table_checksum(content))
    return format_properties(content).encode("utf-8")


def create_table_config(storage: HoodieStorage, meta_path: str, config: HoodieTableConfig) -> None:
    storage.create(_properties_path(meta_path), _serialize(config.props))


def update_table_config(storage: HoodieStorage, meta_path: str, config: HoodieTableConfig) -> None:
    """Replace `hoodie.properties`: backup first, then atomic replace, then drop the backup."""
    main, backup = _properties_path(meta_path), _backup_path(meta_path)
    if storage.exists(main) and storage.size(main) > 0:
        storage.delete(backup)
        storage.copy(main, backup)
    storage.write_atomic(main, _serialize(config.props))
    storage.delete(backup)
