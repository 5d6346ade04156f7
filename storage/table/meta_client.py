"""HoodieTableMetaClient: the entry point to a table's metadata (config, timeline, paths)."""
from __future__ import annotations

import logging
from dataclasses import dataclass

from storage.config import WRITABLE_TABLE_VERSIONS, HoodieConfig
from storage.config import TableConfigKeys as K
from storage.exception import HoodieConfigError, HoodieTableStateError
from storage.fs_utils import META_FOLDER, TEMP_FOLDER
from storage.io.storage import HoodieStorage
from storage.io.storage_location import normalize_base_path
from storage.io.storage_options import StorageOptions, session_storage_options
from storage.table.table_config import (
    BACKUP_FILE,
    PROPERTIES_FILE,
    HoodieTableConfig,
    HoodieTableNotFoundError,
    create_table_config,
    load_table_config,
    update_table_config,
)
from storage.timeline.timeline import ActiveTimeline, HoodieTimeline

log = logging.getLogger(__name__)

SUPPORTED_READ_VERSIONS = (5, 6, 8, 9)
SUPPORTED_WRITE_VERSIONS = WRITABLE_TABLE_VERSIONS


@dataclass
class HoodieTableMetaClient:
    base_path: str
    storage: HoodieStorage
    table_config: HoodieTableConfig
    active_timeline: ActiveTimeline

    @property
    def meta_path(self) -> str:
        return f"{self.base_path}/{META_FOLDER}"

    @property
    def temp_path(self) -> str:
        return f"{self.meta_path}/{TEMP_FOLDER}"

    @property
    def timeline(self) -> HoodieTimeline:
        return self.active_timeline.timeline

    @property
    def storage_options(self) -> StorageOptions:
        """How executors reach this table (shipped in task contexts)."""
        return self.storage.options

    @classmethod
    def load(cls, base_path: str, storage: HoodieStorage | None = None) -> "HoodieTableMetaClient":
        base = normalize_base_path(base_path)
        storage = storage or HoodieStorage.for_path(base)
        meta = f"{base}/{META_FOLDER}"
        if not storage.is_dir(meta):
            raise HoodieTableNotFoundError(f"not a Hudi table: {base} has no {META_FOLDER} directory")
        config = load_table_config(storage, meta)
        if config.version not in SUPPORTED_READ_VERSIONS:
            raise HoodieConfigError(f"table {base} has table version {config.version} ({meta}/hoodie.properties); "
                                    f"supported: {SUPPORTED_READ_VERSIONS}")
        timeline = ActiveTimeline(storage, timeline_path(meta, config), config.timeline_layout_version)
        return cls(base, storage, config, timeline)

    @classmethod
    def load_in_session(cls, spark, base_path: str, config: HoodieConfig = HoodieConfig()) -> "HoodieTableMetaClient":
        """Load with the storage options of a Spark session (its `spark.hadoop.fs.*` conf) and `config`'s."""
        base = normalize_base_path(base_path)
        return cls.load(base, HoodieStorage.for_path(base, session_storage_options(spark, config)))

    @classmethod
    def exists(cls, base_path: str, storage: HoodieStorage | None = None) -> bool:
        base = normalize_base_path(base_path)
        storage = storage or HoodieStorage.for_path(base)
        meta = f"{base}/{META_FOLDER}"
        return storage.exists(f"{meta}/{PROPERTIES_FILE}") or storage.exists(f"{meta}/{BACKUP_FILE}")

    @classmethod
    def init_table(cls, base_path: str, config: HoodieTableConfig, storage: HoodieStorage | None = None) -> "HoodieTableMetaClient":
        """Create `.hoodie/` with its properties and auxiliary folders: the archive folder in table version 6
        (timeline layout 1), the timeline and its history folder in versions 8 and 9 (layout 2)."""
        base = normalize_base_path(base_path)
        storage = storage or HoodieStorage.for_path(base)
        meta = f"{base}/{META_FOLDER}"
        if config.timeline_layout_version >= 2:
            timeline = config.get(K.TIMELINE_PATH)
            layout = (timeline, f"{timeline}/{config.get(K.TIMELINE_HISTORY_PATH)}")
        else:
            layout = (config.get(K.ARCHIVELOG_FOLDER),)
        for sub in ("", TEMP_FOLDER, ".aux", ".schema", *layout):
            storage.mkdirs(f"{meta}/{sub}".rstrip("/"))
        create_table_config(storage, meta, config)
        log.info("initialised Hudi table %s at %s", config.name, base)
        return cls.load(base, storage)

    def reload(self) -> "HoodieTableMetaClient":
        self.table_config = load_table_config(self.storage, self.meta_path)
        self.active_timeline.reload()
        return self

    def check_version_unchanged(self) -> None:
        """Refuse to go on when hoodie.properties now names another table version than when this client loaded it
        (an upgrade or downgrade ran in between: the timeline moved to another layout)."""
        now = load_table_config(self.storage, self.meta_path).version
        if now != self.table_config.version:
            raise HoodieTableStateError(f"table {self.base_path} changed from table version {self.table_config.version} "
                                        f"to {now} while this action ran (upgrade_table / downgrade_table); retry it")

    def update_table_config(self, updates: dict[str, str], removals: tuple[str, ...] = ()) -> None:
        new = self.table_config.with_updates(updates, removals)
        update_table_config(self.storage, self.meta_path, new)
        self.table_config = load_table_config(self.storage, self.meta_path)

    def marker_dir(self, instant_time: str) -> str:
        return f"{self.temp_path}/{instant_time}"


def timeline_path(meta: str, config: HoodieTableConfig) -> str:
    """Where the active timeline of a table with `config` lives under its `.hoodie` folder `meta`."""
    if config.timeline_layout_version >= 2 or config.version >= 8:
        return f"{meta}/{config.get(K.TIMELINE_PATH)}"
    return meta
