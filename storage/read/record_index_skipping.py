"""Data skipping by Hudi's record-level index (RecordLevelIndexSupport / SecondaryIndexSupport): when the table's
metadata table keeps `record_index` and the filter pins the record key (`=` / `IN`, inside ANDs and ORs; the key
field, or `_hoodie_record_key`) or a column with a secondary index, only the file groups the index places those
keys in are kept. Used by storage/read/data_skipping.py for latest snapshot reads only: the index describes the
latest state, and a read-optimized or incremental view may still see a row in the file group it has since left.
A key is looked up only when its exact spelling is known (Spark's string of the literal for the column's type;
`f1:v1,f2:v2` for composite keys when every key field is pinned); any other filter, or an index that cannot be
read (warned), keeps every slice.
"""
from __future__ import annotations

import datetime as dt
import itertools
import logging
import math
import re
import struct
from typing import Any, Callable, Mapping

import pyarrow as pa

from storage.exception import HoodieError
from storage.keygen.key_generator import EMPTY_RECORDKEY_PLACEHOLDER, resolve_keygen_type
from storage.meta_fields import RECORD_KEY
from storage.metadata.index_definitions import secondary_index_definitions
from storage.metadata.record_index import record_locations, secondary_index_record_keys
from storage.metadata.table_metadata import HoodieTableMetadata
from storage.read.predicates import And, Comparison, In, Or, Predicate, columns_of
from storage.table.file_slice import FileSlice
from storage.table.meta_client import HoodieTableMetaClient

log = logging.getLogger(__name__)

_ISO_DATE = re.compile(r"\d{4}-\d{2}-\d{2}")

_MAX_LOOKUP_KEYS = 10_000  # more keys than this (IN lists multiplied over composite key fields): not looked up
# what reading the record index or a secondary index may raise besides the metadata errors: a failed lookup keeps
# every slice, never fails the read
_INDEX_READ_ERRORS = (HoodieError, OSError, ValueError, LookupError, TypeError, struct.error)
Spelling = Callable[[Any], "str | None"]  # a literal as the index spells it, None when it cannot be spelt


def skip_by_record_index(metadata: HoodieTableMetadata, slices: list[FileSlice],
                          predicate: Predicate) -> list[FileSlice]:
    """The slices whose file group holds a key the predicate pins (through the key or a secondary index); all
    of them when it pins none, or when an index cannot be read."""
    meta = metadata.data_meta
    try:
        keys = _candidate_keys(metadata, predicate)
        if keys is None:
            return slices
        file_ids = {location.file_id for location in record_locations(metadata, keys).values()}
    except _INDEX_READ_ERRORS as exc:
        log.warning("table %s: record-level index skipping is off for this read, its metadata table's "
                    "record_index / secondary indexes cannot be used (%r)", meta.base_path, exc)
        return slices
    # by file id alone, as Hudi matches: the index's partition spelling never decides, so it cannot drop a slice
    return [s for s in slices if s.file_id in file_ids]


def _candidate_keys(metadata: HoodieTableMetadata, predicate: Predicate) -> set[str] | None:
    """Every record key a row the predicate accepts can have (a superset), None when the predicate pins none
    (or too many to look up)."""
    from storage.table.schema_resolver import table_data_schema

    meta = metadata.data_meta
    named = {c.lower() for c in columns_of(predicate)}
    key_fields = {f.lower() for f in meta.table_config.record_key_fields or []} | {RECORD_KEY}
    indexed = {partition: d.source_fields[0] for partition, d in sorted(secondary_index_definitions(meta).items())
               if partition in metadata.enabled_partitions and d.source_fields[0].lower() in named}
    if not named & key_fields and not indexed:
        return None  # nothing to look up: no schema or index read
    schema = table_data_schema(meta, None, None)
    types = {f.name.lower(): f.type for f in schema} if schema is not None else {}
    restrictions = []
    by_key = _record_key_restriction(meta, predicate, types)
    if by_key is not None:
        restrictions.append(by_key)
    for partition, column in indexed.items():
        values = _pinned_values(predicate, column, _secondary_spelling(types.get(column.lower())))
        if values is not None and len(values) <= _MAX_LOOKUP_KEYS:
            restrictions.append(secondary_index_record_keys(metadata, partition, values))
    if not restrictions:
        return None
    keys = set.intersection(*restrictions)
    if len(keys) > _MAX_LOOKUP_KEYS:
        log.info("table %s: %d candidate record keys, too many to look up in the record index", meta.base_path,
                 len(keys))
        return None
    return keys


def _record_key_restriction(meta: HoodieTableMetaClient, predicate: Predicate,
                            types: Mapping[str, pa.DataType]) -> set[str] | None:
    """The record keys the predicate pins: through `_hoodie_record_key`, or through the key fields when the key's
    exact spelling follows from their values."""
    pinned = _pinned_values(predicate, RECORD_KEY, lambda v: v if isinstance(v, str) else None)
    by_fields = _keys_from_fields(meta, predicate, types)
    if pinned is None:
        return by_fields
    return set(pinned) if by_fields is None else set(pinned) & by_fields


def _keys_from_fields(meta: HoodieTableMetaClient, predicate: Predicate,
                      types: Mapping[str, pa.DataType]) -> set[str] | None:
    config = meta.table_config
    fields = config.record_key_fields or []
    if not fields:
        return None
    try:
        keygen = resolve_keygen_type(config.keygen_class, fields, config.partition_fields or [])
    except ValueError:  # a key generator this engine does not know: its key spelling is unknown
        return None
    values = [_pinned_values(predicate, f, _key_spelling(types.get(f.lower()))) for f in fields]
    if any(v is None for v in values) or math.prod(len(v) for v in values) > _MAX_LOOKUP_KEYS:
        return None
    if len(fields) == 1 and keygen != "COMPLEX":
        return set(values[0])
    keys = {",".join(f"{f}:{v or EMPTY_RECORDKEY_PLACEHOLDER}" for f, v in zip(fields, combo))
            for combo in itertools.product(*(sorted(v) for v in values))}
    if len(fields) == 1:
        keys |= set(values[0])  # newer Java writers spell a one-field complex key as the bare value: look up both
    return keys


def _pinned_values(predicate: Predicate, column: str, spell: Spelling) -> frozenset[str] | None:
    """The spelt values `column` can hold in a row the predicate accepts (a superset), None when unrestricted.
    Only `=` and `IN` pin; AND intersects what its children pin, OR unites when every child pins."""
    if isinstance(predicate, And):
        pinned = [p for p in (_pinned_values(c, column, spell) for c in predicate.children) if p is not None]
        return frozenset.intersection(*pinned) if pinned else None
    if isinstance(predicate, Or):
        parts = [_pinned_values(c, column, spell) for c in predicate.children]
        return None if not parts or any(p is None for p in parts) else frozenset().union(*parts)
    if not isinstance(predicate, (Comparison, In)) or predicate.column.lower() != column.lower():
        return None
    if isinstance(predicate, Comparison) and predicate.op != "=":
        return None
    literals = predicate.values if isinstance(predicate, In) else (predicate.value,)
    spelt = [spell(v) for v in literals if v is not None]  # `= NULL` is never true: pins nothing in
    return None if any(s is None for s in spelt) else frozenset(spelt)


def _key_spelling(kind: pa.DataType | None) -> Spelling:
    """A literal as a record key spells it (Spark's string of the key field's value), for string and integer
    fields; any other type or literal is not spelt (Spark would cast it in ways not reproduced here)."""
    if kind is not None and (pa.types.is_string(kind) or pa.types.is_large_string(kind)):
        return lambda v: v if isinstance(v, str) else None
    if kind is not None and pa.types.is_integer(kind):
        return lambda v: str(v) if isinstance(v, int) and not isinstance(v, bool) else None
    return lambda v: None


def _secondary_spelling(kind: pa.DataType | None) -> Spelling:
    """A literal as Hudi's secondary index spells the column's value: strings and integers as text, DATE as days
    since the epoch (notes §3.7)."""
    if kind is not None and pa.types.is_date32(kind):
        return _epoch_days
    return _key_spelling(kind)


def _epoch_days(value: Any) -> str | None:
    if isinstance(value, str) and _ISO_DATE.fullmatch(value.strip()):
        try:
            value = dt.date.fromisoformat(value.strip())
        except ValueError:
            return None
    if isinstance(value, dt.date) and not isinstance(value, dt.datetime):
        return str((value - dt.date(1970, 1, 1)).days)
    return None
