"""RECORD_INDEX: tag records from the metadata table's `record_index` partition (Hudi's
SparkMetadataTableRecordIndex), a global index.

Each incoming key is looked up in the one record-index shard it hashes to (`keys.file_group_indexes`: Java String
hash mod N) instead of scanning every base file of the table:

- a small batch (`broadcast_incoming` and at most `driver_lookup_max_keys` distinct keys): the keys are collected
  to the driver, which reads their shards (`record_locations`) and broadcasts the few matches back;
- a larger one: a Spark job, no collect. The keys get their shard number, are shuffled so that each task holds
  whole shards, and each task opens the table's metadata table itself and reads the keys of its shards.

The matches are joined back on the record key (`attach_locations`, global). A table whose metadata table has no
record index yet (or only Hudi 1.1's partitioned variant, which is not read here) is tagged as GLOBAL_SIMPLE does
(Hudi's fallback); the index's `update_partition_path` (`hoodie.record.index.update.partition.path`) applies
either way, so a table does not change behaviour when its record index gets built.
"""
from __future__ import annotations

import logging
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import StructType

from storage.engine.spark_partitioning import placement_keys
from storage.exception import HoodieCorruptedMetadataError, HoodieMetadataNotAvailableError
from storage.index.hoodie_index import (
    LOC_FILE_ID,
    LOC_PARTITION,
    HoodieIndex,
    KeyColumns,
    attach_locations,
)
from storage.index.simple_index import HoodieSimpleIndex
from storage.io.storage import HoodieStorage
from storage.io.storage_options import StorageOptions
from storage.meta_fields import RECORD_KEY
from storage.metadata.index_definitions import RECORD_INDEX, record_index_is_partitioned
from storage.metadata.keys import file_group_indexes
from storage.metadata.record_index import RecordLocation, record_locations, shards
from storage.metadata.table_metadata import HoodieTableMetadata, enabled_partitions
from storage.table.file_slice import HoodieBaseFile
from storage.table.meta_client import HoodieTableMetaClient

log = logging.getLogger(__name__)

DRIVER_LOOKUP_MAX_KEYS = 100_000  # distinct keys of a broadcast batch looked up on the driver, up to this many
FALLBACK_INDEX = "GLOBAL_SIMPLE"
_TASK = "_hoodie_rli_task"
_MATCHES_SCHEMA = pa.schema([pa.field(RECORD_KEY, pa.string()), pa.field(LOC_PARTITION, pa.string()),
                             pa.field(LOC_FILE_ID, pa.string())])
_MATCHES_DDL = f"{RECORD_KEY} string, {LOC_PARTITION} string, {LOC_FILE_ID} string"
_fallback_logged: set[str] = set()  # tables whose fallback was logged: once per table and process, as Hudi does


@dataclass
class HoodieRecordIndex(HoodieIndex):
    is_global: bool = True
    update_partition_path: bool = False
    driver_lookup_max_keys: int = DRIVER_LOOKUP_MAX_KEYS
    parallelism: int = 0  # lookup tasks of the Spark path; 0: one per shard up to the cluster's cores

    def tag_location_in_view(self, spark: SparkSession, records: DataFrame, fs_view, partitions: list[str],
                             key_columns: KeyColumns, broadcast_incoming: bool = False,
                             read_schema: StructType | None = None) -> DataFrame:
        metadata = self.record_index_metadata(fs_view.meta_client, fs_view.metadata)
        if metadata is None:
            return self._fallback().tag_location_in_view(spark, records, fs_view, partitions, key_columns,
                                                         broadcast_incoming, read_schema)
        return self.tag_from_record_index(spark, records, metadata, broadcast_incoming)

    def tag_location(self, spark: SparkSession, records: DataFrame, base_files: list[HoodieBaseFile],
                     key_columns: KeyColumns, broadcast_incoming: bool = False,
                     read_schema: StructType | None = None) -> DataFrame:
        """Without a file-system view the table is loaded from `base_path`; `base_files` serve the fallback only."""
        metadata = None
        storage = HoodieStorage.for_path(self.base_path, self.storage_options) if self.base_path else None
        if storage is not None and HoodieTableMetaClient.exists(self.base_path, storage):
            metadata = self.record_index_metadata(HoodieTableMetaClient.load(self.base_path, storage))
        if metadata is None:
            return self._fallback().tag_location(spark, records, base_files, key_columns, broadcast_incoming,
                                                 read_schema)
        return self.tag_from_record_index(spark, records, metadata, broadcast_incoming)

    def sees_log_changes(self, fs_view) -> bool:
        """The record index takes every log delete and partition move in step; when it is usable."""
        return self.record_index_metadata(fs_view.meta_client, fs_view.metadata) is not None

    def record_index_metadata(self, meta: HoodieTableMetaClient,
                              metadata: HoodieTableMetadata | None = None) -> HoodieTableMetadata | None:
        """The metadata table to look keys up in (`metadata`, when given, is the one the write listed files
        through), or None when the table has no usable global record index: the caller falls back."""
        reason = None
        if RECORD_INDEX not in enabled_partitions(meta):
            reason = f"the metadata table has no {RECORD_INDEX} partition"
        elif record_index_is_partitioned(meta):
            reason = f"its {RECORD_INDEX} is partitioned (keys unique per partition), which is not read here"
        else:
            try:
                metadata = metadata if metadata is not None else HoodieTableMetadata(meta)
                if not shards(metadata, RECORD_INDEX):
                    reason = f"its {RECORD_INDEX} partition has no file groups"
            except HoodieMetadataNotAvailableError as exc:
                reason = str(exc)
            except HoodieCorruptedMetadataError as exc:
                # GLOBAL_SIMPLE reads the data files themselves: slower, never wrong
                log.warning("table %s: record index unusable (%s); tagging as %s", meta.base_path, exc,
                            FALLBACK_INDEX)
                return None
        if reason is None:
            return metadata
        if meta.base_path not in _fallback_logged:
            _fallback_logged.add(meta.base_path)
            log.info("table %s: record index not available (%s); falling back to %s for tagging records",
                     meta.base_path, reason, FALLBACK_INDEX)
        return None

    def _fallback(self) -> HoodieSimpleIndex:
        return HoodieSimpleIndex(is_global=True, update_partition_path=self.update_partition_path,
                                 base_path=self.base_path, storage_options=self.storage_options, cache=self.cache,
                                 counting=self.counting)

    def tag_from_record_index(self, spark: SparkSession, records: DataFrame, metadata: HoodieTableMetadata,
                              broadcast_incoming: bool = False) -> DataFrame:
        """`records` tagged with the locations the record index holds for their keys (nulls for keys it lacks)."""
        matches = None
        if broadcast_incoming:
            # one job: at most one key more than the driver takes tells whether the batch is small enough
            keys = [r[0] for r in records.select(RECORD_KEY).where(F.col(RECORD_KEY).isNotNull()).distinct()
                    .limit(self.driver_lookup_max_keys + 1).collect()]
            if len(keys) <= self.driver_lookup_max_keys:
                matches = self.driver_matches(spark, metadata, keys)
        if matches is None:
            matches = self.spark_matches(spark, records, metadata)
        # broadcast matches number at most the batch's records; cached, the lookup runs once however often read
        return attach_locations(records, matches, True, broadcast_incoming, self.cache)

    def driver_matches(self, spark: SparkSession, metadata: HoodieTableMetadata, keys: list[str]) -> DataFrame:
        """The matches of `keys`, read on the driver, as a local relation (broadcasting it runs no job)."""
        table = matches_table(record_locations(metadata, keys))
        log.debug("record index of %s: %d of %d keys found on the driver", metadata.data_meta.base_path,
                  table.num_rows, len(keys))
        return spark.createDataFrame(table, schema=_MATCHES_DDL)

    def spark_matches(self, spark: SparkSession, records: DataFrame, metadata: HoodieTableMetadata) -> DataFrame:
        """The matches of the keys of `records`, read by Spark tasks: keys shuffled by shard, whole shards per task
        (each task opens the metadata table once and reads only its shards' keys)."""
        num_shards = len(shards(metadata, RECORD_INDEX))
        tasks = self.parallelism if self.parallelism > 0 else \
            max(1, min(num_shards, spark.sparkContext.defaultParallelism))
        task_of_shard = np.array(placement_keys(tasks), dtype=np.int32)[np.arange(num_shards) % tasks]
        keyed = records.select(RECORD_KEY).mapInArrow(_with_task(num_shards, task_of_shard),
                                                      f"{_TASK} int, {RECORD_KEY} string")
        base_path = metadata.data_meta.base_path
        return keyed.repartition(tasks, _TASK).mapInArrow(
            _lookup_keys(base_path, metadata.data_meta.storage_options), _MATCHES_DDL)


def matches_table(found: dict[str, RecordLocation]) -> pa.Table:
    """(`RECORD_KEY`, `LOC_PARTITION`, `LOC_FILE_ID`) of each key the record index holds."""
    keys = list(found)
    return pa.table([pa.array(keys, pa.string()), pa.array([found[k].partition_path for k in keys], pa.string()),
                     pa.array([found[k].file_id for k in keys], pa.string())], schema=_MATCHES_SCHEMA)


def _with_task(num_shards: int, task_of_shard: np.ndarray):
    """mapInArrow: record keys -> (lookup task of their shard, key); null keys (none are stored) dropped."""
    def shard(batches):
        for batch in batches:
            keys = pc.drop_null(batch.column(0))
            if len(keys):
                tasks = task_of_shard[file_group_indexes(keys, num_shards)]
                yield pa.RecordBatch.from_arrays([pa.array(tasks, pa.int32()), keys], names=[_TASK, RECORD_KEY])
    return shard


def _lookup_keys(base_path: str, options: StorageOptions):
    """mapInArrow in a lookup task: its keys -> the matches the record index holds for them. The task opens the
    table's metadata table itself (its latest state, as the driver's lookup reads it)."""
    def lookup(batches):
        keys = [batch.column(1) for batch in batches if batch.num_rows]
        if not keys:
            return
        wanted = pc.unique(pa.chunked_array(keys, pa.string())).to_pylist()
        meta = HoodieTableMetaClient.load(base_path, HoodieStorage.for_path(base_path, options))
        found = record_locations(HoodieTableMetadata(meta), wanted)
        for batch in matches_table(found).to_batches():
            yield batch
    return lookup


__all__ = ["DRIVER_LOOKUP_MAX_KEYS", "FALLBACK_INDEX", "HoodieRecordIndex", "matches_table"]
