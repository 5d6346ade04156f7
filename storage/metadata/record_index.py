"""Lookups in a table's record-level index and secondary indexes (MDT partitions `record_index` and
`secondary_index_<name>`, notes §3.6 / §3.7) as Java Hudi writes them: which file group holds a record key, and
which record keys hold a secondary-column value. The read side; storage.metadata.record_index_writer and
secondary_index_writer write them.

Both partitions are sharded over N file groups (`record-index-0007-0`, N = how many there are). A lookup opens only
the shards its keys map to (`keys.file_group_index`: Java String hash mod N) and, inside them, only the keys
asked for (exact keys through the HFiles' block index, secondary values as key-prefix scans), merged with the
shard's log files exactly as `HoodieTableMetadata` merges every MDT partition (valid instants, DELETE entries).

- record_index: key = the record key; a location per key. A key deleted by a DELETE entry is absent.
- secondary index: key = escape(value) + "$" + escape(record key). Index definition version V2 (Hudi 1.1) shards
  by `escape(value) + "$"`, so one shard per value; V1 (1.0.x) by the whole key, so every shard is scanned.
"""
from __future__ import annotations

import functools
import logging
import re
from collections.abc import Iterable
from dataclasses import dataclass

import pyarrow as pa

from storage.exception import HoodieCorruptedMetadataError, HoodieMetadataNotAvailableError
from storage.metadata.index_definitions import (
    RECORD_INDEX,
    SECONDARY_INDEX_PREFIX,
    index_definitions,
    record_index_is_partitioned,
)
from storage.metadata.keys import (
    SECONDARY_KEY_SEPARATOR,
    file_group_indexes,
    secondary_index_prefix,
)
from storage.metadata.records import MetadataRecord, RecordIndexInfo, SecondaryIndexInfo
from storage.metadata.table_metadata import HoodieTableMetadata, KeyQuery
from storage.table.file_slice import FileSlice

log = logging.getLogger(__name__)

_SHARD_ID = re.compile(r"^.*-(\d{4})-0$")  # <prefix><index as 4 digits>-0 (notes §2.2)
_NEEDS_ESCAPE = ("\\", SECONDARY_KEY_SEPARATOR, "\x00")


@dataclass(frozen=True)
class RecordLocation:
    """Where the record index places a record key: its data partition, file group and the instant that put it
    there (epoch milliseconds, as Hudi stores it: the 17-digit instant parsed in the writer's timeline zone)."""

    partition_path: str
    file_id: str
    instant_time: int | None


# ----------------------------------------------------------------------------------------------- decoding


def decode_file_id(info: RecordIndexInfo, where: str = "") -> str:
    """The file id of a record-index entry by its fileIdEncoding: 0 = UUID from the high/low bits plus "-<fileIndex>"
    (no suffix when fileIndex is -1), 1 = the stored fileId string."""
    encoding = info.file_id_encoding
    if encoding == 0:
        if info.file_id_high_bits is None or info.file_id_low_bits is None:
            raise HoodieCorruptedMetadataError(f"record index entry {where} has encoding 0 but no file id bits")
        return info.file_group_id
    if encoding == 1 and info.file_id:
        return info.file_id
    raise HoodieCorruptedMetadataError(f"record index entry {where} has file id encoding {encoding} "
                                       f"(file id {info.file_id!r}): not one Hudi writes")


def location_of(record: MetadataRecord) -> RecordLocation:
    info = record.payload
    if not isinstance(info, RecordIndexInfo):
        raise HoodieCorruptedMetadataError(f"metadata record {record.key!r} in {RECORD_INDEX} is a "
                                           f"{record.type.name}, not a record index entry")
    return _location(info, record.key)


@functools.lru_cache(maxsize=16384)
def _location_of_info(info: RecordIndexInfo) -> RecordLocation:
    # many keys share one location (a file group and instant): decoded once
    return RecordLocation(info.partition_name or "", decode_file_id(info), info.instant_time)


def _location(info: RecordIndexInfo, key: str) -> RecordLocation:
    try:
        return _location_of_info(info)
    except HoodieCorruptedMetadataError:
        decode_file_id(info, repr(key))  # raises again, naming the key
        raise


def unescape_secondary(text: str) -> str:
    """Inverse of `keys.escape_secondary`: a backslash takes the next character literally."""
    out, escaped = [], False
    for c in text:
        if escaped or c != "\\":
            out.append(c)
            escaped = False
        else:
            escaped = True
    return "".join(out)


# ----------------------------------------------------------------------------------------------- shards


def shards(metadata: HoodieTableMetadata, partition: str) -> list[FileSlice]:
    """The latest slice of each file group of MDT `partition`, in shard order. Their ids must be shards 0..N-1:
    a missing or extra one would send keys to the wrong shard, so it is damage, never a guess."""
    if partition not in metadata.enabled_partitions:
        raise HoodieMetadataNotAvailableError(f"{metadata.data_meta.base_path}: metadata table partition "
                                              f"{partition} is not enabled")
    by_index: dict[int, FileSlice] = {}
    for file_slice in metadata.file_slices(partition):
        m = _SHARD_ID.match(file_slice.file_id)
        if m is None or int(m[1]) in by_index:
            raise HoodieCorruptedMetadataError(f"{metadata.base_path}/{partition}: file group "
                                               f"{file_slice.file_id!r} is not a shard id")
        by_index[int(m[1])] = file_slice
    if sorted(by_index) != list(range(len(by_index))):
        raise HoodieCorruptedMetadataError(f"{metadata.base_path}/{partition}: file groups {sorted(by_index)} "
                                           f"are not shards 0..{len(by_index) - 1}")
    return [by_index[i] for i in range(len(by_index))]


def _group_by_shard(hash_inputs: dict[str, str], count: int) -> dict[int, list[str]]:
    """Item -> shard by the Java hash of its hash input, grouped (hashed in one vectorized pass)."""
    items = list(hash_inputs)
    out: dict[int, list[str]] = {}
    for item, shard in zip(items, file_group_indexes(pa.array([hash_inputs[i] for i in items], pa.string()),
                                                     count).tolist()):
        out.setdefault(shard, []).append(item)
    return out


# ----------------------------------------------------------------------------------------------- record index


def record_locations(metadata: HoodieTableMetadata, keys: Iterable[str]) -> dict[str, RecordLocation]:
    """Record key -> location, for the `keys` the record index holds (absent keys, and keys it deleted, are left
    out). Reads only the shards the keys hash to, and only those keys in them."""
    wanted = set(keys)
    if not wanted:
        return {}
    if record_index_is_partitioned(metadata.data_meta):
        raise HoodieMetadataNotAvailableError(f"{metadata.data_meta.base_path}: the record index is partitioned "
                                              f"(per-partition keys), which is not read here")
    slices = shards(metadata, RECORD_INDEX)
    out: dict[str, RecordLocation] = {}
    for shard, shard_keys in sorted(_group_by_shard({k: k for k in wanted}, len(slices)).items()):
        records = metadata.slice_records(slices[shard], KeyQuery(keys=frozenset(shard_keys)))
        out.update((key, location_of(record)) for key, record in records.items())
    log.debug("record index of %s: %d of %d keys found in %d shards", metadata.data_meta.base_path, len(out),
              len(wanted), len(slices))
    return out


def all_record_locations(metadata: HoodieTableMetadata) -> dict[str, RecordLocation]:
    """Every key the record index holds, with its location (validation: compare with a scan of the table)."""
    if record_index_is_partitioned(metadata.data_meta):
        raise HoodieMetadataNotAvailableError(f"{metadata.data_meta.base_path}: the record index is partitioned "
                                              f"(per-partition keys), which is not read here")
    out: dict[str, RecordLocation] = {}
    for file_slice in shards(metadata, RECORD_INDEX):
        out.update((key, location_of(record)) for key, record in metadata.slice_records(file_slice).items())
    return out


# ----------------------------------------------------------------------------------------------- secondary index


def secondary_index_partition(index_name: str) -> str:
    """The MDT partition of a secondary index named with or without its `secondary_index_` prefix."""
    return index_name if index_name.startswith(SECONDARY_INDEX_PREFIX) else SECONDARY_INDEX_PREFIX + index_name


def secondary_index_version(metadata: HoodieTableMetadata, partition: str) -> str | None:
    """The index definition's version (V1: 1.0.x, V2: 1.1), None without a definition."""
    definition = index_definitions(metadata.data_meta).get(partition)
    return definition.version.upper() if definition is not None else None


def _prefixes(value: str | None, version: str | None) -> set[str]:
    """The key prefixes holding `value`. Escaping of `\\`, `$`, NUL is seen in Hudi 1.1 only; for an older
    index the unescaped spelling is scanned too (a superset of keys at worst, never a miss)."""
    prefixes = {secondary_index_prefix(value)}
    if version != "V2" and value is not None and any(c in value for c in _NEEDS_ESCAPE):
        prefixes.add(value + SECONDARY_KEY_SEPARATOR)
    return prefixes


def _record_keys_of(stored_key: str, prefix: str, version: str | None) -> set[str]:
    """The record key after `prefix`: unescaped (V2), or both spellings when the writer may not have escaped."""
    rest = stored_key[len(prefix):]
    return {unescape_secondary(rest)} if version == "V2" else {unescape_secondary(rest), rest}


def secondary_index_record_keys(metadata: HoodieTableMetadata, index_name: str,
                                values: Iterable[str | None]) -> set[str]:
    """The record keys whose secondary-index column holds one of `values` (as Hudi spells them: the column's
    stored value as a string, DATE as days since epoch; None = SQL NULL). Deleted entries are left out. A V2
    index is read in the one shard per value; V1 (or an index without definition) in every shard."""
    partition = secondary_index_partition(index_name)
    slices = shards(metadata, partition)
    version = secondary_index_version(metadata, partition)
    prefixes = set().union(*(_prefixes(v, version) for v in set(values)))
    if not prefixes:
        return set()
    if version == "V2":
        groups = _group_by_shard({p: p for p in prefixes}, len(slices))
    else:
        groups = {i: sorted(prefixes) for i in range(len(slices))}
    out: set[str] = set()
    for shard, shard_prefixes in sorted(groups.items()):
        records = metadata.slice_records(slices[shard], KeyQuery(prefixes=tuple(sorted(shard_prefixes))))
        for key, record in records.items():
            if not isinstance(record.payload, SecondaryIndexInfo):
                raise HoodieCorruptedMetadataError(f"metadata record {key!r} in {partition} is a "
                                                   f"{record.type.name}, not a secondary index entry")
            if record.payload.is_deleted:
                continue
            for prefix in shard_prefixes:
                if key.startswith(prefix):
                    out |= _record_keys_of(key, prefix, version)
    return out


__all__ = ["RecordLocation", "all_record_locations", "decode_file_id", "location_of", "record_locations", "secondary_index_partition",
           "secondary_index_record_keys", "secondary_index_version", "shards", "unescape_secondary"]
