"""Column statistics of data files for the metadata table (Hudi's HoodieTableMetadataUtil column-stats part):
per (file, column) the min, max, null count, value count and sizes - of a base file from its parquet footer (no
data read), of a log file from its records - and per partition their aggregate over the partition's latest
slices (`partition_stats`, tight bounds).

Values are stored in the 1.1 form (`valueType` + primitive wrapper, notes §3.3); the 1.0.x schema (table version
8) has no `valueType`, and its records then carry the same primitive wrappers. Columns: the configured list, or
every top-level primitive column but `_hoodie_commit_seqno` and `_hoodie_file_name` (as Java indexes them).
"""
from __future__ import annotations

import functools
import logging
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace

import pyarrow as pa
import pyarrow.compute as pc

from storage.config import MetadataConfigKeys as MK
from storage.avro.schema_converter import avro_to_arrow_schema
from storage.file_group.log_block import AvroDataBlock, ParquetDataBlock
from storage.file_group.log_format import HoodieLogFileReader
from storage.io.parquet import open_parquet
from storage.io.storage import HoodieStorage
from storage.metadata.records import ColumnStats, ValueType, ValueTypeInfo, wrap_value

log = logging.getLogger(__name__)

UNINDEXED_META_COLUMNS = ("_hoodie_commit_seqno", "_hoodie_file_name")


# what a 1.0.x schema (no valueType) can carry in its primitive wrappers without a logical wrapper
_PRIMITIVE_VALUE_TYPES = frozenset({ValueType.BOOLEAN, ValueType.INT, ValueType.LONG, ValueType.FLOAT,
                                    ValueType.DOUBLE, ValueType.STRING, ValueType.BYTES})


@dataclass(frozen=True)
class ColumnStatsSettings:
    """Which columns are indexed: `columns` (None: every eligible top-level column, at most `max_columns`).
    `primitive_only` (table version 8, whose 1.0.x records have no valueType): dates, timestamps and decimals
    would need Java 1.0's logical wrappers, not written here - those columns are not indexed (no stats: never
    skipped)."""

    columns: tuple[str, ...] | None = None
    max_columns: int = 32
    primitive_only: bool = False

    def indexes(self, arrow_type: pa.DataType) -> bool:
        value_type = value_type_of(arrow_type)
        if value_type is None:
            return False
        return not self.primitive_only or value_type.value_type in _PRIMITIVE_VALUE_TYPES

    def select(self, schema: pa.Schema) -> list[str]:
        eligible = [f.name for f in schema if self.indexes(f.type) and f.name not in UNINDEXED_META_COLUMNS]
        if self.columns is not None:
            _warn_unindexed(tuple(c for c in self.columns if c not in eligible), tuple(schema.names))
            return [c for c in self.columns if c in eligible]
        return eligible[: self.max_columns]


@functools.lru_cache(maxsize=64)
def _warn_unindexed(missing: tuple[str, ...], names: tuple[str, ...]) -> None:
    """A column list naming what a file does not hold (a typo, a nested or unsupported type): said once per
    schema, since its filters then skip nothing (a file without stats is always read)."""
    if missing:
        log.warning("%s names %s, not an indexable top-level column of a data file with columns %s: no column "
                    "stats are kept for %s, so filters on it skip no file", MK.COLUMN_STATS_COLUMNS.key,
                    ", ".join(missing), ", ".join(names), "it" if len(missing) == 1 else "them")


_SIMPLE_TYPES = {
    pa.bool_(): ValueType.BOOLEAN, pa.int8(): ValueType.INT, pa.int16(): ValueType.INT, pa.int32(): ValueType.INT,
    pa.int64(): ValueType.LONG, pa.float32(): ValueType.FLOAT, pa.float64(): ValueType.DOUBLE,
    pa.string(): ValueType.STRING, pa.large_string(): ValueType.STRING, pa.binary(): ValueType.BYTES,
    pa.large_binary(): ValueType.BYTES, pa.date32(): ValueType.DATE,
}


def value_type_of(arrow_type: pa.DataType) -> ValueTypeInfo | None:
    """The 1.1 value type of a column (None: not indexed - nested types and those without a wrapper)."""
    if arrow_type in _SIMPLE_TYPES:
        return ValueTypeInfo(int(_SIMPLE_TYPES[arrow_type]))
    if pa.types.is_decimal(arrow_type):
        return ValueTypeInfo(int(ValueType.DECIMAL), f"{arrow_type.precision},{arrow_type.scale}")
    if pa.types.is_timestamp(arrow_type):
        unit = {"ms": "MILLIS", "us": "MICROS", "ns": "NANOS"}.get(arrow_type.unit)
        if unit is None:
            return None
        prefix = "TIMESTAMP" if arrow_type.tz is not None else "LOCAL_TIMESTAMP"
        return ValueTypeInfo(int(ValueType[f"{prefix}_{unit}"]))
    return None


# ----------------------------------------------------------------------------------------------- base files


def base_file_stats(storage: HoodieStorage, path: str, settings: ColumnStatsSettings) -> list[ColumnStats]:
    """Stats of a parquet base file's indexed columns, from its footer only (all row groups)."""
    file, _ = open_parquet(storage, path)
    meta, schema = file.metadata, file.schema_arrow
    name = path.rsplit("/", 1)[-1]
    wanted = set(settings.select(schema))
    out = []
    for ci in range(meta.num_columns):
        column = meta.schema.column(ci).path
        if column not in wanted:
            continue
        value_type = value_type_of(schema.field(column).type)
        mins, maxs, nulls, values, size, raw = [], [], 0, 0, 0, 0
        for rg in range(meta.num_row_groups):
            chunk = meta.row_group(rg).column(ci)
            values += chunk.num_values
            size += chunk.total_compressed_size
            raw += chunk.total_uncompressed_size
            stats = chunk.statistics
            if stats is not None:
                nulls += stats.null_count
                if stats.has_min_max:
                    mins.append(stats.min)
                    maxs.append(stats.max)
        out.append(_stats(name, column, value_type, min(mins) if mins else None, max(maxs) if maxs else None,
                          values, nulls, size, raw))
    return out


def _stats(file_name: str, column: str, value_type: ValueTypeInfo, low, high, values: int, nulls: int,
           size: int, raw: int) -> ColumnStats:
    return ColumnStats(file_name, column, wrap_value(low, value_type), wrap_value(high, value_type), values, nulls,
                       size, raw, False, False, value_type)


# ----------------------------------------------------------------------------------------------- log files


def log_file_stats(storage: HoodieStorage, path: str, settings: ColumnStatsSettings) -> list[ColumnStats]:
    """Stats of a log file's data records (delete blocks add no values; sizes are 0, as Java writes them)."""
    tables, schema_json = [], None
    with HoodieLogFileReader(path, storage=storage) as reader:
        for block in reader:
            if isinstance(block, (AvroDataBlock, ParquetDataBlock)):
                tables.append(block.to_table())
            schema_json = schema_json or block.schema_json
    name = path.rsplit("/", 1)[-1]
    if not tables:  # deletes only: no values (Java writes NULL-typed stats with value count 0)
        columns = settings.select(avro_to_arrow_schema(schema_json)) if schema_json else []
        return [ColumnStats(name, c, None, None, 0, 0, 0, 0, False, False, ValueTypeInfo(int(ValueType.NULL)))
                for c in columns]
    table = pa.concat_tables(tables, promote_options="default")
    out = []
    for column in settings.select(table.schema):
        values = table.column(column)
        value_type = value_type_of(values.type)
        low_high = pc.min_max(values)
        out.append(_stats(name, column, value_type, low_high["min"].as_py(), low_high["max"].as_py(), len(values),
                          values.null_count, 0, 0))
    return out


def file_stats(storage: HoodieStorage, path: str, settings: ColumnStatsSettings) -> list[ColumnStats]:
    """Stats of one data file, base or log."""
    name = path.rsplit("/", 1)[-1]
    return log_file_stats(storage, path, settings) if name.startswith(".") else \
        base_file_stats(storage, path, settings)


# ----------------------------------------------------------------------------------------------- partitions


def aggregate_partition_stats(partition_name: str, stats: Iterable[ColumnStats]) -> list[ColumnStats]:
    """One tight-bound record per column over the given file stats (Java's partition stats: min of mins, max of
    maxes, summed counts and sizes), `file_name` = the partition's name in the MDT."""
    by_column: dict[str, list[ColumnStats]] = {}
    for s in stats:
        if not s.is_deleted:
            by_column.setdefault(s.column_name or "", []).append(s)
    return [_aggregate(partition_name, column, parts) for column, parts in sorted(by_column.items())]


def _aggregate(partition_name: str, column: str, parts: Sequence[ColumnStats]) -> ColumnStats:
    typed = [p.value_type for p in parts if p.value_type is not None and p.value_type.value_type is not ValueType.NULL]
    value_type = typed[-1] if typed else parts[-1].value_type
    lows = [(p.min, p.min_value) for p in parts if p.min_value is not None]
    highs = [(p.max, p.max_value) for p in parts if p.max_value is not None]
    return replace(parts[-1], file_name=partition_name, column_name=column,
                   min_value=min(lows, key=lambda v: v[0])[1] if lows else None,
                   max_value=max(highs, key=lambda v: v[0])[1] if highs else None,
                   value_count=sum(p.value_count or 0 for p in parts),
                   null_count=sum(p.null_count or 0 for p in parts),
                   total_size=sum(p.total_size or 0 for p in parts),
                   total_uncompressed_size=sum(p.total_uncompressed_size or 0 for p in parts),
                   is_deleted=False, is_tight_bound=True, value_type=value_type)


def tombstone(stats: ColumnStats) -> ColumnStats:
    """The deletion record of a file's stats (a cleaned file)."""
    return replace(stats, is_deleted=True)
