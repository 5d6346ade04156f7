"""Data skipping: file slices whose column statistics prove a filter false for every row are not read.

Hudi's data skipping over the metadata table's indexes (`hoodie.enable.data.skipping`): partition_stats drop whole
partitions (latest snapshots only: a partition's stats describe its latest slices, and an older view may still see
rows a later write removed), then column_stats drop file slices. A slice with log files is judged by the stats of
all its files together; a file without stats for a column, a literal that cannot be compared with the column's
values the way Spark compares them, or an unreadable metadata table (warned) keeps the slice. So pruning never
drops a row: it only decides which slices Spark opens, and Spark still applies the whole filter. The stats come
from the metadata table the file-system view listed the slices through (the reader's `hoodie.metadata.enable`):
a read that lists storage skips nothing, as in Hudi.

Float and double columns are not pruned by `>` / `>=` (Spark orders NaN above every number, and a file's min/max
leave NaN out); every other comparison follows Spark's coercions for the literals predicates carry
(storage/read/predicates.py).

Before the stats, the record-level index and secondary indexes prune by record key
(storage/read/record_index_skipping.py).
"""
from __future__ import annotations

import bisect
import datetime as dt
import logging
import math
import re
from dataclasses import dataclass
from decimal import Decimal
from typing import Any, Iterable, Mapping, Sequence

from storage.config import HoodieConfig, ReadConfigKeys as RK
from storage.exception import HoodieCorruptedMetadataError, HoodieMetadataNotAvailableError
from storage.metadata.index_definitions import RECORD_INDEX
from storage.metadata.records import ColumnStats
from storage.metadata.table_metadata import COLUMN_STATS, PARTITION_STATS, HoodieTableMetadata
from storage.read.predicates import And, Comparison, In, IsNotNull, IsNull, Or, Predicate, columns_of
from storage.read.record_index_skipping import skip_by_record_index
from storage.table.file_slice import FileSlice
from storage.table.meta_client import HoodieTableMetaClient

log = logging.getLogger(__name__)

_ISO_DATE = re.compile(r"\d{4}-\d{2}-\d{2}")


# ----------------------------------------------------------------------------------------------- value ranges


@dataclass(frozen=True)
class ValueRange:
    """What the stats of one or more files say about a column: bounds of its non-null values (None: unknown),
    its null count and value count (nulls included; None: unknown)."""

    low: Any = None
    high: Any = None
    nulls: int | None = None
    values: int | None = None

    @property
    def all_null(self) -> bool:
        return self.values is not None and self.nulls is not None and self.values == self.nulls

    @property
    def bounded(self) -> bool:
        return self.low is not None and self.high is not None

    @classmethod
    def of(cls, stats: ColumnStats) -> "ValueRange":
        return cls(stats.min, stats.max, stats.null_count, stats.value_count)


def merge_ranges(ranges: Sequence[ValueRange]) -> ValueRange | None:
    """The range of several files' values together (a file slice's base and logs); None when any is unknown
    beyond use (bounds missing although it holds non-null values, or bounds that do not compare)."""
    lows, highs = [], []
    for r in ranges:
        if r.all_null:
            continue
        if not r.bounded:
            return ValueRange(None, None, _sum(r.nulls for r in ranges), _sum(r.values for r in ranges))
        lows.append(r.low)
        highs.append(r.high)
    try:
        low, high = (min(lows), max(highs)) if lows else (None, None)
    except TypeError:  # values of different types (the column's type changed between files)
        return None
    return ValueRange(low, high, _sum(r.nulls for r in ranges), _sum(r.values for r in ranges))


def _sum(counts: Iterable[int | None]) -> int | None:
    total = 0
    for c in counts:
        if c is None:
            return None
        total += c
    return total


# ----------------------------------------------------------------------------------------------- evaluation


def may_match(predicate: Predicate, ranges: Mapping[str, ValueRange]) -> bool:
    """False only when the ranges (keyed by lower-case column name) prove `predicate` false for every row."""
    if isinstance(predicate, And):
        return all(may_match(c, ranges) for c in predicate.children)
    if isinstance(predicate, Or):
        return any(may_match(c, ranges) for c in predicate.children)
    r = ranges.get(predicate.column.lower())
    if r is None:
        return True
    if isinstance(predicate, IsNull):
        return r.nulls is None or r.nulls > 0
    if isinstance(predicate, IsNotNull):
        return r.nulls is None or r.values is None or r.values > r.nulls
    if isinstance(predicate, In):
        return _in_may_match(r, predicate.values)
    if isinstance(predicate, Comparison):
        return _compare(r, predicate.op, predicate.value)
    return True


def _compare(r: ValueRange, op: str, literal: Any) -> bool:
    if literal is None:
        return False  # a comparison with NULL is never true
    if r.all_null:
        return False
    if not r.bounded:
        return True
    low, high = _comparable(r.low, literal), _comparable(r.high, literal)
    if low is None or high is None:
        return True
    (lo, lit), (hi, _) = low, high
    if isinstance(lo, float) and op in (">", ">="):
        return True  # NaN (above every number in Spark) is not in a file's bounds
    if op == "=":
        return lo <= lit <= hi
    if op == "<":
        return lo < lit
    if op == "<=":
        return lo <= lit
    if op == ">":
        return hi > lit
    return hi >= lit


def _in_may_match(r: ValueRange, values: tuple) -> bool:
    """`_compare(r, "=", v)` for any v of an IN list, by bisecting its literals (converted and sorted once per
    list and column type): a 100-key lookup over 100 files is 100 bisections, not 10,000 comparisons."""
    literals = tuple(v for v in values if v is not None)
    if not literals or r.all_null:
        return False
    if not r.bounded:
        return True
    low, high = _comparable(r.low, literals[0]), _comparable(r.high, literals[0])
    converted = _converted_literals(type(r.low), getattr(r.low, "tzinfo", None) is None, literals, r.low)
    if low is None or high is None or converted is None:
        return True
    i = bisect.bisect_left(converted, low[0])
    return i < len(converted) and converted[i] <= high[0]


def _converted_sorted(literals: tuple, sample: Any) -> tuple | None:
    pairs = [_comparable(sample, v) for v in literals]
    if any(p is None for p in pairs):
        return None  # some literal compares in a way not reproduced here: keep the slice
    try:
        return tuple(sorted(p[1] for p in pairs))
    except TypeError:
        return None


def _converted_literals(value_type: type, naive: bool, literals: tuple, sample: Any) -> tuple | None:
    """The literals as `_comparable` converts them against a column value of `value_type` (the conversion
    depends on the type, not the value: `sample` stands for every value of it), sorted; None when one cannot be
    compared. Cached by type, so the sample does not take part in the key."""
    key = (value_type, naive, literals)
    hit = _CONVERTED.get(key)
    if hit is None and key not in _CONVERTED:
        if len(_CONVERTED) >= 64:
            _CONVERTED.clear()
        hit = _CONVERTED[key] = _converted_sorted(literals, sample)
    return hit


_CONVERTED: dict[tuple, tuple | None] = {}


def _comparable(value: Any, literal: Any) -> tuple[Any, Any] | None:
    """(value, literal) converted as Spark compares a column of `value`'s type with `literal`, or None when this
    module does not know how Spark would (the slice is then kept)."""
    if isinstance(value, bool) or isinstance(literal, bool):
        return (value, literal) if isinstance(value, bool) and isinstance(literal, bool) else None
    if _number(value) and _number(literal):
        if isinstance(value, float) or isinstance(literal, float):
            a, b = float(value), float(literal)
            return None if math.isnan(a) or math.isnan(b) else (a, b)
        return Decimal(value), Decimal(literal)  # ints and decimals compare exactly
    if isinstance(value, str) and isinstance(literal, str):
        return value, literal  # binary (code point) order, Spark's default collation
    if isinstance(value, dt.datetime) or isinstance(literal, dt.datetime):
        if isinstance(value, dt.datetime) and isinstance(literal, dt.datetime) and \
                (value.tzinfo is None) == (literal.tzinfo is None):
            return value, literal
        return None
    if isinstance(value, dt.date):
        if isinstance(literal, dt.date):
            return value, literal
        if isinstance(literal, str) and _ISO_DATE.fullmatch(literal.strip()):
            try:
                return value, dt.date.fromisoformat(literal.strip())
            except ValueError:
                return None
    return None


def _number(value: Any) -> bool:
    return isinstance(value, (int, float, Decimal)) and not isinstance(value, bool)


# ----------------------------------------------------------------------------------------------- pruning


def skip_file_slices(metadata: HoodieTableMetadata | None, slices: list[FileSlice], predicate: Predicate | None,
                     config: HoodieConfig, latest: bool) -> list[FileSlice]:
    """The slices of `slices` that `predicate` may match, by `metadata` (the metadata table the view listed them
    through; None: storage was listed, nothing to prune by): its record_index and secondary indexes (when `latest`
    and a snapshot read), partition_stats (when `latest`: the view is the table's latest snapshot) and
    column_stats."""
    if predicate is None or not slices or metadata is None or not config.get(RK.ENABLE_DATA_SKIPPING):
        return slices
    by_index = latest and _is_snapshot(config) and RECORD_INDEX in metadata.enabled_partitions
    by_stats = COLUMN_STATS in metadata.enabled_partitions
    if not by_index and not by_stats:
        return slices
    meta = metadata.data_meta
    kept = skip_by_record_index(metadata, slices, predicate) if by_index else slices
    if by_stats and kept:
        try:
            columns = _stats_columns(meta, columns_of(predicate))
            if latest and PARTITION_STATS in metadata.enabled_partitions:
                kept = _skip_partitions(metadata, kept, predicate, columns)
            kept = _skip_by_column_stats(metadata, kept, predicate, columns)
        except (HoodieMetadataNotAvailableError, HoodieCorruptedMetadataError) as exc:
            log.warning("table %s: data skipping is off for this read, its metadata table cannot be used (%s)",
                        meta.base_path, exc)
            return kept  # what the record-level index kept (every slice when it was not used)
    log.info("data skipping on %s: %d of %d file slices may match", meta.base_path, len(kept), len(slices))
    return kept


def _is_snapshot(config: HoodieConfig) -> bool:
    return (config.get(RK.QUERY_TYPE) or "snapshot").lower() == "snapshot"


def _stats_columns(meta: HoodieTableMetaClient, names: set[str]) -> list[str]:
    """The predicate's columns as the table spells them (stats are keyed by the exact name)."""
    from storage.table.schema_resolver import table_data_schema

    schema = table_data_schema(meta, None, None)
    spelled = {n.lower(): n for n in (schema.names if schema is not None else [])}
    return sorted({spelled.get(n.lower(), n) for n in names})


def _skip_partitions(metadata: HoodieTableMetadata, slices: list[FileSlice], predicate: Predicate,
                     columns: list[str]) -> list[FileSlice]:
    partitions = sorted({s.partition_path for s in slices})
    by_partition: dict[str, dict[str, ValueRange]] = {}
    for stats in metadata.partition_stats(columns, partitions):
        name = "" if stats.file_name == "." else stats.file_name
        by_partition.setdefault(name, {})[stats.column_name.lower()] = ValueRange.of(stats)
    keep = {p for p in partitions if p not in by_partition or may_match(predicate, by_partition[p])}
    return [s for s in slices if s.partition_path in keep]


def _skip_by_column_stats(metadata: HoodieTableMetadata, slices: list[FileSlice], predicate: Predicate,
                          columns: list[str]) -> list[FileSlice]:
    by_file: dict[str, dict[str, ValueRange]] = {}
    for stats in metadata.column_stats(columns=columns):
        by_file.setdefault(stats.file_name, {})[stats.column_name.lower()] = ValueRange.of(stats)
    return [s for s in slices if may_match(predicate, _slice_ranges(s, by_file))]


def _slice_ranges(file_slice: FileSlice, by_file: Mapping[str, Mapping[str, ValueRange]]) -> dict[str, ValueRange]:
    """Each column's range over all files of the slice; a column some file has no stats for is left out."""
    names = [p.rsplit("/", 1)[-1] for p in _slice_files(file_slice)]
    per_file = [by_file.get(n, {}) for n in names]
    if not per_file:
        return {}
    columns = set(per_file[0]).intersection(*per_file[1:])
    merged = {c: merge_ranges([f[c] for f in per_file]) for c in columns}
    return {c: r for c, r in merged.items() if r is not None}


def _slice_files(file_slice: FileSlice) -> list[str]:
    base = [file_slice.base_file.path] if file_slice.base_file is not None else []
    return base + [lf.path for lf in file_slice.log_files]
