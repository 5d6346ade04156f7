"""The table's current schema: the writer schema of the latest completed write, else the create schema,
else the footer of a base file."""
from __future__ import annotations

import json
import logging

import pyarrow as pa

from storage.io.parquet import read_parquet_schema
from storage.exception import HoodieCorruptedMetadataError, HoodieKeyError
from storage.meta_fields import IS_DELETED, META_COLUMNS
from storage.table.meta_client import HoodieTableMetaClient

log = logging.getLogger(__name__)


def data_schema(schema: pa.Schema) -> pa.Schema:
    """`schema` without Hudi meta columns; byte and short become int as in Hudi's Avro schemas."""
    fields = []
    for f in schema:
        if f.name in META_COLUMNS or f.name in ("_hoodie_operation", IS_DELETED):
            continue
        fields.append(f.with_type(_hudi_type(f.type)))
    return pa.schema(fields)


def _hudi_type(t: pa.DataType) -> pa.DataType:
    if t in (pa.int8(), pa.int16()):
        return pa.int32()
    if pa.types.is_timestamp(t):
        return pa.timestamp("us", tz="UTC")
    if pa.types.is_large_string(t):
        return pa.string()
    if pa.types.is_large_binary(t):
        return pa.binary()
    if pa.types.is_struct(t):
        return pa.struct([f.with_type(_hudi_type(f.type)) for f in t])
    if pa.types.is_list(t) or pa.types.is_large_list(t):
        return pa.list_(t.value_field.with_type(_hudi_type(t.value_type)))
    if pa.types.is_map(t):
        return pa.map_(_hudi_type(t.key_type), t.item_field.with_type(_hudi_type(t.item_type)))
    return t


def latest_avro_schema(meta_client: HoodieTableMetaClient, as_of: str | None = None) -> str | None:
    timeline = meta_client.timeline.completed().write_timeline()
    if as_of is not None:
        timeline = timeline.until(as_of)
    for instant in reversed(timeline.instants):
        schema = meta_client.active_timeline.commit_schema(instant)
        if schema:
            return schema
    return meta_client.table_config.create_schema


def table_data_schema(meta_client: HoodieTableMetaClient, as_of: str | None = None,
                      sample_file: str | None = None) -> pa.Schema | None:
    """Data columns (no meta columns) as an Arrow schema."""
    avro = latest_avro_schema(meta_client, as_of)
    if avro:
        try:
            schema = _arrow(avro)
        except (ValueError, KeyError, TypeError) as exc:  # a damaged schema in an instant file must name itself
            raise HoodieCorruptedMetadataError(f"the table schema recorded in the timeline of "
                                               f"{meta_client.base_path} is damaged: {exc!r}") from None
        return _declared_timestamp_partition_types(meta_client, schema)
    if sample_file:
        return data_schema(read_parquet_schema(meta_client.storage, sample_file))
    return None


def _arrow(avro: str) -> pa.Schema:
    from storage.avro.schema_converter import avro_to_arrow_schema

    return avro_to_arrow_schema(json.loads(avro))


def _declared_timestamp_partition_types(meta_client: HoodieTableMetaClient, schema: pa.Schema) -> pa.Schema:
    """Java Hudi 1.x's Spark reader shows a timestamp key generator's partition column as a string, and its SQL
    UPDATE / DELETE write that string type back into later commits' schemas (and files). Such a column keeps
    the type the table declared (create schema, else the first commit's schema): never a string forced on a
    non-string column."""
    from storage.keygen.key_generator import resolve_keygen_type, timestamp_partition_fields

    config = meta_client.table_config
    try:
        keygen = resolve_keygen_type(config.keygen_class, config.record_key_fields, config.partition_fields)
    except HoodieKeyError:
        return schema  # a key generator we do not know: nothing to restore
    forced = [n for n in timestamp_partition_fields(keygen, config.partition_fields)
              if n in schema.names and pa.types.is_string(schema.field(n).type)]
    declared = _declared_schema(meta_client) if forced else None
    for name in forced:
        if declared is not None and name in declared.names and not pa.types.is_string(declared.field(name).type):
            log.info("partition column %r of %s: the table declares %s, later commits recorded string",
                     name, meta_client.base_path, declared.field(name).type)
            schema = schema.set(schema.get_field_index(name), declared.field(name))
    return schema


def _declared_schema(meta_client: HoodieTableMetaClient) -> pa.Schema | None:
    create = meta_client.table_config.create_schema
    if create:
        return _arrow(create)
    for instant in meta_client.timeline.completed().write_timeline():
        schema = meta_client.active_timeline.commit_schema(instant)
        if schema:
            return _arrow(schema)
    return None
