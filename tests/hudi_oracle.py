"""hudi-rs (the `hudi` package) as an independent reader, and helpers to compare row sets."""
from __future__ import annotations

import datetime as dt
import decimal

import pyarrow as pa
from hudi import HudiReadOptions, HudiTableBuilder

META = ("_hoodie_commit_time", "_hoodie_commit_seqno", "_hoodie_record_key", "_hoodie_partition_path",
        "_hoodie_file_name")


def hudi_rs_read(base_path: str, as_of: str | None = None, storage_options: dict[str, str] | None = None) -> pa.Table:
    """`storage_options`: hudi-rs's object-store options (e.g. `S3Endpoint.hudi_rs_options()`)."""
    opts = HudiReadOptions()
    if as_of:
        opts = opts.with_as_of_timestamp(as_of)
    builder = HudiTableBuilder.from_base_uri(str(base_path))
    if storage_options:
        builder = builder.with_storage_options(storage_options)
    table = builder.build()
    batches = table.read(opts)
    if not batches:
        return pa.table({})
    return pa.Table.from_batches(batches)


def _norm(value):
    if isinstance(value, float):
        return round(value, 9)
    if isinstance(value, decimal.Decimal):
        return str(value.normalize())
    if isinstance(value, dt.datetime):
        return value.replace(tzinfo=None).isoformat()
    if isinstance(value, (bytes, bytearray)):
        return bytes(value)
    if isinstance(value, dict):
        return tuple(sorted((k, _norm(v)) for k, v in value.items()))
    if isinstance(value, list):
        if value and isinstance(value[0], tuple) and len(value[0]) == 2:  # arrow map as list of pairs
            return tuple(sorted((k, _norm(v)) for k, v in value))
        return tuple(_norm(v) for v in value)
    return value


def rows(records: list[dict], columns: list[str] | None = None, drop_meta: bool = True) -> list[tuple]:
    out = []
    for rec in records:
        keys = columns or sorted(k for k in rec if not (drop_meta and k in META))
        out.append(tuple((k, _norm(rec.get(k))) for k in keys))
    return sorted(out, key=repr)


def spark_rows(df, columns: list[str] | None = None, drop_meta: bool = True) -> list[tuple]:
    return rows([r.asDict(recursive=True) for r in df.collect()], columns, drop_meta)


def arrow_rows(table: pa.Table, columns: list[str] | None = None, drop_meta: bool = True) -> list[tuple]:
    return rows(table.to_pylist(), columns, drop_meta)


def apply_batch(state: dict, batch: list[tuple], delete: bool = False, key: int = 0, ordering: int = 3) -> None:
    """The expected table after writing `batch` (tuples) with event-time ordering: `state` maps key -> row; an
    upsert keeps the row with the greater-or-equal ordering value, a delete removes the key."""
    for r in batch:
        if delete:
            state.pop(r[key], None)
        elif r[key] not in state or r[ordering] >= state[r[key]][ordering]:
            state[r[key]] = r


def scanned_locations(spark, base_path) -> dict[str, tuple[str, str]]:
    """record key -> (partition path, file id) from a snapshot read's meta columns: the oracle a record index is
    compared with (rebuild and compare)."""
    from storage.index.hoodie_index import file_id_of_file_name

    df = spark.read.format("hudi").load(str(base_path))
    rows = df.select("_hoodie_record_key", "_hoodie_partition_path",
                     file_id_of_file_name(df["_hoodie_file_name"]).alias("fid")).collect()
    return {r[0]: (r[1], r[2]) for r in rows}


def check_record_index(spark, base_path) -> dict:
    """The table's record index (MDT record_index) holds exactly the scan's keys at the scan's locations."""
    from storage.metadata.record_index import all_record_locations
    from storage.metadata.table_metadata import HoodieTableMetadata
    from storage.table.meta_client import HoodieTableMetaClient

    meta = HoodieTableMetaClient.load(str(base_path))
    assert "record_index" in meta.table_config.props.get("hoodie.table.metadata.partitions", "").split(",")
    indexed = all_record_locations(HoodieTableMetadata(meta))
    assert {k: (v.partition_path, v.file_id) for k, v in indexed.items()} == scanned_locations(spark, base_path)
    return indexed


def check_secondary_indexes(spark, base_path) -> dict[str, set[str]]:
    """Each secondary index the table defines holds exactly the entries (escaped value $ escaped key) of a snapshot
    scan's (record key, column) pairs."""
    from storage.metadata import secondary_index_writer as si
    from storage.metadata.index_definitions import secondary_index_definitions
    from storage.metadata.record_index import shards
    from storage.metadata.table_metadata import HoodieTableMetadata
    from storage.table.meta_client import HoodieTableMetaClient

    meta = HoodieTableMetaClient.load(str(base_path))
    metadata = HoodieTableMetadata(meta)
    df = spark.read.format("hudi").load(str(base_path))
    out = {}
    for partition, definition in secondary_index_definitions(meta).items():
        assert partition in metadata.enabled_partitions, partition
        column = definition.source_fields[0]
        scan = df.select("_hoodie_record_key", column).toArrow()
        want = set(si.entry_keys(si.secondary_values(scan[column]), scan["_hoodie_record_key"]).to_pylist())
        got = {k for s in shards(metadata, partition) for k, r in metadata.slice_records(s).items()
               if not r.payload.is_deleted}
        assert got == want, (partition, sorted(got ^ want)[:10])
        out[partition] = got
    return out
