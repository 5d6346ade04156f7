"""Which bucket a record key falls in, and the file ids of buckets (Hudi's BucketIdentifier), on Arrow arrays.

Hudi hashes the list of the record's hash-key values with Java's `List.hashCode` (itself built on
`String.hashCode`, a polynomial over UTF-16 code units), masks the sign bit and takes it modulo the number of
buckets. The hash-key values come from the stored record key: a key without `:` (simple key generator) is
hashed whole, as a one-element list; a complex key `f1:v1,f2:v2` gives the values of the hash fields, in the
hash fields' order (a field it lacks hashes as a null element, 0).

A bucket's file id is an 8-digit zero-padded bucket number followed by the rest of a fresh uuid
(`00000012-8f1c-...-0`): the number is read back from the first eight characters.
"""
from __future__ import annotations

import uuid

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from storage.arrow_util import java_string_hashes as java_string_hash  # noqa: F401 (re-exported)
from storage.config import WriteConfigKeys as WK
from storage.exception import HoodieIndexError

_MASK32 = np.uint64(0xFFFFFFFF)
_PAIR = r"^(?P<name>[^:]*):(?P<value>[^:]*)"  # Java's `pair.split(":")`: the name, and the text up to the next ':'
BUCKET_ID_DIGITS = 8


def java_list_hash(elements: list[np.ndarray]) -> np.ndarray:
    """Java's `List.hashCode` of lists whose i-th elements have the hashes `elements[i]` (int32)."""
    h = np.ones(len(elements[0]) if elements else 0, dtype=np.uint64)
    for e in elements:
        h = (h * np.uint64(31) + e.astype(np.uint32).astype(np.uint64)) & _MASK32
    return h.astype(np.uint32).view(np.int32)


def hash_key_values(record_keys: pa.Array, hash_fields: list[str]) -> list[pa.Array]:
    """Per hash field, its value in each complex record key `f1:v1,f2:v2` (null where the key lacks it)."""
    pairs = pc.split_pattern(record_keys, ",")
    flat = pc.list_flatten(pairs)
    parents = pc.list_parent_indices(pairs).to_numpy()
    parsed = pc.extract_regex(flat, _PAIR)
    names, values = pc.struct_field(parsed, [0]), pc.struct_field(parsed, [1])
    out = []
    for field in hash_fields:
        hit = pc.fill_null(pc.equal(names, field), False).to_numpy(zero_copy_only=False)
        position = np.full(len(record_keys), -1, dtype=np.int64)
        position[parents[hit]] = np.flatnonzero(hit)
        out.append(values.take(pa.array(position, mask=position < 0)))
    return out


def bucket_ids(record_keys: pa.Array, hash_fields: list[str], num_buckets: int) -> np.ndarray:
    """Bucket number of each record key (int32), as Hudi's `BucketIdentifier.getBucketId`."""
    record_keys = record_keys.cast(pa.string())
    whole = java_list_hash([java_string_hash(record_keys)])
    complex_ = pc.fill_null(pc.match_substring(record_keys, ":"), False).to_numpy(zero_copy_only=False)
    hashes = whole
    if complex_.any():
        by_field = java_list_hash([java_string_hash(v) for v in hash_key_values(record_keys, hash_fields)])
        hashes = np.where(complex_, by_field, whole)
    return ((hashes.astype(np.int64) & 0x7FFFFFFF) % num_buckets).astype(np.int32)


def bucket_id_str(bucket: int) -> str:
    return f"{bucket:0{BUCKET_ID_DIGITS}d}"


def new_bucket_file_id(bucket: int) -> str:
    """A new file group's id for `bucket`: the bucket number over the first eight characters of a fresh uuid,
    with the writer's `-0` file index (as Hudi's create handle appends to the prefix)."""
    return f"{bucket_id_str(bucket)}{str(uuid.uuid4())[BUCKET_ID_DIGITS:]}-0"


def bucket_id_of_file_id(file_id: str) -> int:
    """The bucket number a file id starts with; a file id without one was not written by a bucket index."""
    head = file_id[:BUCKET_ID_DIGITS]
    if len(head) != BUCKET_ID_DIGITS or not head.isdigit():
        raise HoodieIndexError(f"file group {file_id} does not start with an {BUCKET_ID_DIGITS}-digit bucket number: "
                               f"it was not written by the BUCKET index ({WK.INDEX_TYPE.key})")
    return int(head)
