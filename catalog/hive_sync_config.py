"""`HiveSyncConfig`: the settings of one Hive sync, as Apache Hudi's `HiveSyncConfig` reads them from the
`hoodie.datasource.hive_sync.*` options, with the table's own name, database and partition fields as defaults."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Mapping

from catalog.hms_ddl import parse_properties
from catalog.metastore_client import MetastoreError
from storage.config import HiveSyncConfigKeys as HK, HoodieConfig, WriteConfigKeys as WK
from storage.table.meta_client import HoodieTableMetaClient


class HiveSyncError(MetastoreError):
    """A sync that did not complete; the message names the table and the metastore."""


class CatalogTableConflictError(HiveSyncError):
    """A sync (or the write it would follow) refused because it would change what a catalog name means: re-point
    a table registered at another location, or replace a table that is not a Hudi table. The message names the
    table and both locations."""


@dataclass(frozen=True)
class HiveSyncConfig:
    base_path: str
    metastore_uri: str
    database: str
    table: str
    partition_fields: list[str]
    partition_extractor_class: str | None = None
    skip_ro_suffix: bool = False
    auto_create_database: bool = True
    sync_as_datasource: bool = True
    schema_string_length_threshold: int = 4000
    support_timestamp: bool = True
    create_managed_table: bool = False
    table_properties: dict[str, str] = field(default_factory=dict)
    serde_properties: dict[str, str] = field(default_factory=dict)
    omit_metadata_fields: bool = False
    conditional_sync: bool = False
    spark_version: str | None = None
    relocate_table: bool = False  # sqlext.catalog.relocate.table: an entry at another location may be re-pointed

    @classmethod
    def of(cls, base_path: str, metastore_uri: str, meta: HoodieTableMetaClient,
           options: Mapping[str, str] | None = None, *, database: str | None = None,
           table: str | None = None) -> "HiveSyncConfig":
        """Options first, then the table's own name/database/partition fields (Hudi's defaults)."""
        cfg = HoodieConfig.of(options)
        mode = (cfg.get(HK.MODE) or "hms").lower()
        if mode != "hms":
            raise HiveSyncError(f"{HK.MODE.key}={mode!r} is not supported: only 'hms' "
                                "(talk to the metastore's Thrift API)")
        tc = meta.table_config
        fields = cfg.get(HK.PARTITION_FIELDS) or [p.partition(":")[0] for p in tc.partition_fields]
        database, table = sync_target(cfg, tc.name, tc.database_name, database=database, table=table)
        return cls(
            base_path=meta.base_path,
            metastore_uri=metastore_uri,
            database=database,
            table=table,
            partition_fields=list(fields),
            partition_extractor_class=cfg.get(HK.PARTITION_EXTRACTOR_CLASS),
            skip_ro_suffix=bool(cfg.get(HK.SKIP_RO_SUFFIX)),
            auto_create_database=bool(cfg.get(HK.AUTO_CREATE_DATABASE)),
            sync_as_datasource=bool(cfg.get(HK.SYNC_AS_DATASOURCE)),
            schema_string_length_threshold=int(cfg.get(HK.SCHEMA_STRING_LENGTH_THRESHOLD)),
            support_timestamp=bool(cfg.get(HK.SUPPORT_TIMESTAMP)),
            create_managed_table=bool(cfg.get(HK.CREATE_MANAGED_TABLE)),
            table_properties=parse_properties(cfg.get(HK.TABLE_PROPERTIES)),
            serde_properties=parse_properties(cfg.get(HK.SERDE_PROPERTIES)),
            omit_metadata_fields=bool(cfg.get(HK.OMIT_METADATA_FIELDS)),
            conditional_sync=bool(cfg.get(HK.CONDITIONAL_SYNC)),
            spark_version=cfg.get(HK.SPARK_VERSION) or spark_version(),
            relocate_table=bool(cfg.get(HK.RELOCATE_TABLE)),
        )


def sync_target(cfg: HoodieConfig, table_name: str, table_database: str | None, *, database: str | None = None,
                table: str | None = None) -> tuple[str, str]:
    """(database, table) a sync of the table named `table_name` (in `table_database`) writes to: the arguments,
    then the hive_sync options, then the table's own name and database (Hudi's defaults), lower-cased as the
    metastore keeps them."""
    db = database or cfg.get(HK.DATABASE) or cfg.props.get(WK.DATABASE_NAME.key) or table_database or "default"
    return db.lower(), (table or cfg.get(HK.TABLE) or table_name).lower()


def spark_version() -> str | None:
    try:
        import pyspark

        return pyspark.__version__
    except Exception:
        return None
