"""HoodieWriteClient: the entry point for writes to one table. It holds only what every write to the table
shares (the Spark session, the base path and the write options as a `HoodieConfig`); each call runs a new
`WriteOperation`, so one client can run any number of writes, one after another or from several threads. It
hands each write the table services to run around it (their option checks before, inline compaction,
clustering, clean and archival after the commit): the write path itself does not know them.
"""
from __future__ import annotations

from pyspark.sql import DataFrame, SparkSession

from storage.config import HoodieConfig
from storage.config import WriteConfigKeys as WK
from storage.exception import HoodieWriteError
from storage.io.storage import HoodieStorage
from storage.io.storage_location import normalize_base_path
from storage.io.storage_options import session_storage_options
from storage.table.meta_client import HoodieTableMetaClient
from storage.table_service.table_services import InlineTableServices
from storage.timeline.commit_metadata import HoodieCommitMetadata
from storage.write.operation import WriteOperationType
from storage.write.write_operation import WriteOperation, WriteResult


class HoodieWriteClient:
    def __init__(self, spark: SparkSession, base_path: str, config: HoodieConfig):
        self.spark = spark
        self.base_path = normalize_base_path(base_path)
        self.config = config
        self.storage = HoodieStorage.for_path(self.base_path, session_storage_options(spark, config))

    def write(self, df: DataFrame, operation: str | None = None, require_unique_keys: bool = False,
              known_locations: bool = False) -> WriteResult:
        """Write `df` with `operation` (default: the config's hoodie.datasource.write.operation). `require_unique_keys`:
        instead of combining records that share a key, reject the batch (`HoodieDuplicateKeyError` before
        anything is written); an upsert through a global index also rejects a key stored in more than one
        partition. SQL MERGE relies on it to run as a plain upsert. `known_locations`: `df` carries each record's
        stored location (`storage.index.hoodie_index.LOCATION_COLUMNS`, null for a new record), read from the
        table's meta columns in the same statement, so the index does not look the keys up again."""
        op = WriteOperationType.parse(operation or self.config.get(WK.OPERATION))
        return WriteOperation(self.spark, self.storage, self.base_path, self.config, op, require_unique_keys,
                              InlineTableServices(), known_locations).run(df)


def write_dataframe(spark: SparkSession, df: DataFrame, base_path: str, config: HoodieConfig,
                    mode: str = "append", require_unique_keys: bool = False,
                    known_locations: bool = False) -> HoodieCommitMetadata | None:
    """`df.write.format("hudi").options(...).mode(mode).save(base_path)`, `config` holding the options;
    `require_unique_keys` and `known_locations` as in `HoodieWriteClient.write`. Returns the commit metadata (None
    when nothing was committed)."""
    mode = (mode or "append").lower()
    client = HoodieWriteClient(spark, base_path, config)
    exists = HoodieTableMetaClient.exists(client.base_path, client.storage)
    if exists and mode in ("error", "errorifexists", "default"):
        raise HoodieWriteError(f"table already exists at {base_path} (save mode {mode})")
    if exists and mode == "ignore":
        return None
    operation = None
    if mode == "overwrite" and exists:
        operation = WriteOperationType.INSERT_OVERWRITE_TABLE.value
    return client.write(df, operation, require_unique_keys, known_locations).metadata
