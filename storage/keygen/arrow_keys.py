"""Record keys and partition paths computed in Arrow, inside a write task, for the key generators whose Spark
expressions (storage.keygen.key_generator) Arrow reproduces exactly: SIMPLE, COMPLEX and NON_PARTITION over
string and integer fields, without URL encoding.

Why a second spelling of the same rules: a bulk insert ships its records from the JVM to the Python write tasks,
and two string columns computed by Spark (`_hoodie_record_key`, `_hoodie_partition_path`) cost a third of that
transfer, where Arrow computes them from the fields the task receives anyway in a few milliseconds. Anything
outside the supported subset keeps the Spark expressions (`supports` says which); the tests hold both spellings
to the same output.
"""
from __future__ import annotations

import pyarrow as pa
import pyarrow.compute as pc

from storage.arrow_util import constant_array
from storage.exception import HoodieKeyError
from storage.keygen.key_generator import (
    EMPTY_RECORDKEY_PLACEHOLDER,
    HIVE_DEFAULT_PARTITION,
    NULL_RECORDKEY_PLACEHOLDER,
    KeyGenerator,
)

_TYPES = ("SIMPLE", "COMPLEX", "NON_PARTITION")
# Java's `$` also matches before a final line terminator: the '..' check of the Spark expression, in RE2
_DOT_DOT_SEGMENT = r"(^|/)\.\.(/|(\r\n|[\n\r\x{85}\x{2028}\x{2029}])?$)"


def supports(keygen: KeyGenerator, schema: pa.Schema) -> bool:
    """Whether Arrow computes this key generator's keys as Spark does for data of `schema`: a supported type,
    no URL encoding, and every key and partition field a top-level string or integer column (Spark's and Arrow's
    casts of those to string agree; floats, decimals and times are spelled differently)."""
    if keygen.keygen_type not in _TYPES or keygen.url_encode or not keygen.record_key_fields:
        return False
    fields = {f.name.lower(): f.type for f in schema}
    for name in keygen.required_fields():
        kind = fields.get(name.lower())
        if kind is None or not (pa.types.is_integer(kind) or pa.types.is_string(kind)
                                or pa.types.is_large_string(kind)):
            return False
    return True


def _field(table: pa.Table, name: str) -> pa.ChunkedArray:
    """A key field as strings, found case-insensitively as Spark resolves column names."""
    return pc.cast(_column(table, name), pa.string())


def _column(table: pa.Table, name: str) -> pa.ChunkedArray:
    lower = name.lower()
    for column_name in table.column_names:
        if column_name.lower() == lower:
            return table.column(column_name)
    raise HoodieKeyError(f"key field '{name}' is not a column of the data ({', '.join(table.column_names)})")


def _null_or_empty(values: pa.ChunkedArray) -> pa.ChunkedArray:
    return pc.or_kleene(pc.is_null(values), pc.equal(values, ""))


def record_keys(keygen: KeyGenerator, table: pa.Table) -> pa.ChunkedArray:
    """`_hoodie_record_key` of every row (`KeyGenerator.record_key`); a null or empty key fails naming its field."""
    fields = keygen.record_key_fields
    if len(fields) == 1 and keygen.keygen_type != "COMPLEX":
        values = _field(table, fields[0])
        if pc.any(_null_or_empty(values)).as_py():
            raise HoodieKeyError(f"record key field '{fields[0]}' cannot be null or empty")
        return values
    parts, all_missing = [], None
    for name in fields:
        values = _field(table, name)
        missing = _null_or_empty(values)
        encoded = pc.if_else(pc.is_null(values), NULL_RECORDKEY_PLACEHOLDER,
                             pc.if_else(pc.equal(values, ""), EMPTY_RECORDKEY_PLACEHOLDER, values))
        parts.append(pc.binary_join_element_wise(f"{name}:", encoded, ""))
        all_missing = missing if all_missing is None else pc.and_(all_missing, missing)
    if pc.any(all_missing).as_py():
        raise HoodieKeyError(f"all record key fields {fields} are null or empty")
    return pc.binary_join_element_wise(*parts, ",")


def partition_paths(keygen: KeyGenerator, table: pa.Table) -> pa.Array:
    """`_hoodie_partition_path` of every row (`KeyGenerator.partition_path`)."""
    if keygen.keygen_type == "NON_PARTITION" or not keygen.partition_fields:
        return constant_array("", table.num_rows, pa.string())
    segments = [_segment(keygen, name, _column(table, name)) for name in keygen.partition_fields]
    return segments[0] if len(segments) == 1 else pc.binary_join_element_wise(*segments, "/")


def _segment(keygen: KeyGenerator, name: str, values: pa.ChunkedArray) -> pa.Array:
    """The field's path segment of every row, spelled once per distinct value and spread to the rows by index: a
    partition field has few values, and the spelling (string cast, default partition, '..' check, hive prefix) per
    row cost a bulk insert task more than its parquet write."""
    encoded = pc.dictionary_encode(values.combine_chunks(), null_encoding="encode")
    distinct = pc.cast(encoded.dictionary, pa.string())
    distinct = pc.if_else(_null_or_empty(distinct), HIVE_DEFAULT_PARTITION, distinct)
    escaping = pc.match_substring_regex(distinct, _DOT_DOT_SEGMENT)
    if pc.any(escaping).as_py():
        value = distinct.filter(escaping)[0].as_py()
        raise HoodieKeyError(f"partition field '{name}' value '{value}' contains a '..' path segment")
    if keygen.hive_style:
        distinct = pc.binary_join_element_wise(f"{name}=", distinct, "")
    return distinct.take(encoded.indices)
