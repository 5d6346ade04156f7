"""Hudi's `HMSDDLExecutor`: the thrift objects a Hudi table becomes in the Hive Metastore.

Storage descriptors follow Java Hudi exactly: ParquetHiveSerDe, MapredParquetOutputFormat, and
`HoodieParquetInputFormat` (COW tables and `_ro` views) or `HoodieParquetRealtimeInputFormat` (`_rt` views and
MOR tables registered by CREATE TABLE). Tables are EXTERNAL: the metastore never deletes Hudi data.
"""
from __future__ import annotations

import copy
import getpass
import time
from pathlib import Path

from hmsclient.genthrift.hive_metastore.ttypes import (
    FieldSchema,
    Partition,
    SerDeInfo,
    StorageDescriptor,
    Table,
)

from catalog.hive_schema_util import HiveColumn
from storage.config import SparkSqlConfigKeys as SK

PARQUET_SERDE = "org.apache.hadoop.hive.ql.io.parquet.serde.ParquetHiveSerDe"
HOODIE_INPUT_FORMAT = "org.apache.hudi.hadoop.HoodieParquetInputFormat"
HOODIE_REALTIME_INPUT_FORMAT = "org.apache.hudi.hadoop.realtime.HoodieParquetRealtimeInputFormat"
PARQUET_OUTPUT_FORMAT = "org.apache.hadoop.hive.ql.io.parquet.MapredParquetOutputFormat"
HUDI_INPUT_FORMATS = (HOODIE_INPUT_FORMAT, HOODIE_REALTIME_INPUT_FORMAT,
                      "com.uber.hoodie.hadoop.HoodieInputFormat", "com.uber.hoodie.hadoop.realtime.HoodieRealtimeInputFormat")
LAST_COMMIT_TIME_SYNC = "last_commit_time_sync"
QUERY_AS_RO_TABLE = SK.QUERY_AS_RO_TABLE.key
EXTERNAL_TABLE = "EXTERNAL_TABLE"
MANAGED_TABLE = "MANAGED_TABLE"


def location_uri(path: str) -> str:
    """How a local base path is written in the metastore (a file: URI, as Hadoop qualifies it)."""
    if "://" in path or path.startswith("file:"):
        return path
    # Hadoop's qualified form (file:/abs/path): what the metastore itself stores for a local location
    return "file:" + str(Path(path).absolute())


def local_path(location: str | None) -> str | None:
    """The local path of a metastore location (file:/x, file:///x or /x)."""
    if not location:
        return None
    from storage.io.storage_location import normalize_base_path

    if location.startswith("file:") or location.startswith("/"):
        return normalize_base_path(location)
    return location


def field_schemas(columns: list[HiveColumn]) -> list[FieldSchema]:
    return [FieldSchema(name=c.name, type=c.type, comment="") for c in columns]


def storage_descriptor(columns: list[HiveColumn], location: str, input_format: str,
                       serde_properties: dict[str, str]) -> StorageDescriptor:
    return StorageDescriptor(
        cols=field_schemas(columns), location=location, inputFormat=input_format,
        outputFormat=PARQUET_OUTPUT_FORMAT, compressed=False, numBuckets=-1, bucketCols=[], sortCols=[],
        parameters={}, serdeInfo=SerDeInfo(name=None, serializationLib=PARQUET_SERDE,
                                           parameters={"serialization.format": "1", **serde_properties}))


def new_table(db: str, name: str, columns: list[HiveColumn], partition_columns: list[HiveColumn], location: str,
              input_format: str, serde_properties: dict[str, str], table_properties: dict[str, str],
              managed: bool = False) -> Table:
    params = dict(table_properties)
    if not managed:
        params["EXTERNAL"] = "TRUE"
    return Table(tableName=name, dbName=db, owner=_owner(), createTime=int(time.time()), lastAccessTime=0,
                 retention=0, sd=storage_descriptor(columns, location, input_format, serde_properties),
                 partitionKeys=field_schemas(partition_columns), parameters=params,
                 tableType=MANAGED_TABLE if managed else EXTERNAL_TABLE)


def new_partition(table: Table, values: list[str], location: str) -> Partition:
    sd = copy.deepcopy(table.sd)
    sd.location = location
    now = int(time.time())
    return Partition(values=values, dbName=table.dbName, tableName=table.tableName, createTime=now,
                     lastAccessTime=0, sd=sd, parameters={})


def partition_location(base_location: str, partition_path: str) -> str:
    return f"{base_location.rstrip('/')}/{partition_path}" if partition_path else base_location


def is_hudi_table(table: Table) -> bool:
    params = table.parameters or {}
    if params.get("spark.sql.sources.provider", "").lower() == "hudi":
        return True
    return table.sd is not None and table.sd.inputFormat in HUDI_INPUT_FORMATS


def parse_properties(text: str | None) -> dict[str, str]:
    """Hudi's `ConfigUtils.toMap`: `k=v` pairs separated by new lines (or commas)."""
    out: dict[str, str] = {}
    for line in (text or "").replace(",", "\n").splitlines():
        if "=" in line:
            k, v = line.split("=", 1)
            if k.strip():
                out[k.strip()] = v.strip()
    return out


def _owner() -> str:
    try:
        return getpass.getuser()
    except Exception:  # no user name in a container: Hive does not need one
        return "hudi"
