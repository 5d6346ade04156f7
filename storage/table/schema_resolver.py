"""The table's current schema: the writer schema of the latest completed write, else the create schema,
else the footer of a base file."""
from __future__ import annotations

import json

import pyarrow as pa

from storage.io.parquet import read_parquet_schema
from storage.table.meta_client import HoodieTableMetaClient


def latest_avro_schema(meta_client: HoodieTableMetaClient, as_of: str | None = None) -> str | None:
    timeline = meta_client.timeline.completed().write_timeline()
    if as_of is not None:
        timeline = timeline.until(as_of)
    for instant in reversed(timeline.instants):
        schema = meta_client.active_timeline.commit_metadata(instant).schema
        if schema:
            return schema
    return meta_client.table_config.create_schema


def table_data_schema(meta_client: HoodieTableMetaClient, as_of: str | None = None,
                      sample_file: str | None = None) -> pa.Schema | None:
    """Data columns (no meta columns) as an Arrow schema."""
    avro = latest_avro_schema(meta_client, as_of)
    if avro:
        from storage.avro.schema_converter import avro_to_arrow_schema

        return avro_to_arrow_schema(json.loads(avro))
    if sample_file:
        from storage.write.schema import data_schema

        return data_schema(read_parquet_schema(meta_client.storage, sample_file))
    return None
