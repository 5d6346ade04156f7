"""Small Arrow building blocks shared by the write, read and compaction paths."""
from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc


def constant_array(value, n: int, type_: pa.DataType) -> pa.Array:
    """`n` copies of `value` without building a Python list (the hot paths stamp every row of a file)."""
    if pa.types.is_integer(type_) or pa.types.is_floating(type_):
        return pa.array(np.full(n, value, dtype=type_.to_pandas_dtype()), type_)
    return pa.nulls(n, type_).fill_null(pa.scalar(value, type_))


def flat_array(values: pa.Array | pa.ChunkedArray) -> pa.Array:
    """`values` as one contiguous array (a chunked column combined)."""
    return values.combine_chunks() if isinstance(values, pa.ChunkedArray) else values


def large_binary_offsets(values: pa.Array) -> np.ndarray:
    """A large binary array's value offsets (len + 1 of them, into its data buffer)."""
    return np.frombuffer(values.buffers()[1], dtype=np.int64)[values.offset:values.offset + len(values) + 1]


def large_binary_data(values: pa.Array) -> bytes:
    """The concatenated bytes of a large binary array's values."""
    offsets = large_binary_offsets(values)
    return values.buffers()[2].to_pybytes()[offsets[0]:offsets[-1]] if len(values) else b""


def row_numbers(n: int) -> pa.Array:
    return pa.array(np.arange(n, dtype=np.int64))


def local_frame(spark, rows: list[tuple], schema: str):
    """A small driver-side table (`rows` of the DDL `schema`) as a Spark DataFrame. Built from Arrow it is a
    local relation: broadcasting it runs no Spark job, where a DataFrame made from a list of rows runs one."""
    from pyspark.sql.pandas.types import to_arrow_schema
    from pyspark.sql.types import _parse_datatype_string

    struct = _parse_datatype_string(schema)
    arrow_schema = to_arrow_schema(struct, timezone="UTC")
    columns = list(zip(*rows)) if rows else [()] * len(arrow_schema)
    table = pa.Table.from_arrays([pa.array(list(c), f.type) for c, f in zip(columns, arrow_schema)],
                                 schema=arrow_schema)
    return spark.createDataFrame(table, schema=struct)


_MASK32 = np.uint64(0xFFFFFFFF)


def java_string_hashes(strings: pa.Array) -> np.ndarray:
    """Java's `String.hashCode` of each string (null -> 0), as int32: sum of UTF-16 code units times 31 to the
    power of their distance from the string's end, modulo 2^32. One UTF-8 -> UTF-16 transcoding of the whole
    buffer, then numpy over all code units at once."""
    strings = strings.cast(pa.large_string()) if not pa.types.is_large_string(strings.type) else strings
    n = len(strings)
    if n == 0:
        return np.zeros(0, dtype=np.int32)
    filled = pc.fill_null(strings, "")
    offsets = np.frombuffer(filled.buffers()[1], dtype=np.int64)[filled.offset:filled.offset + n + 1]
    data = np.frombuffer(filled.buffers()[2], dtype=np.uint8)[offsets[0]:offsets[-1]] \
        if filled.buffers()[2] is not None else np.zeros(0, np.uint8)
    starts = offsets - offsets[0]
    # UTF-16 units per string: one per UTF-8 lead byte, two for a 4-byte sequence (a surrogate pair)
    weights = ((data & 0xC0) != 0x80).astype(np.int64) + (data >= 0xF0)
    cum = np.concatenate([[0], np.cumsum(weights)])
    units_per = cum[starts[1:]] - cum[starts[:-1]]
    units = np.frombuffer(data.tobytes().decode("utf-8").encode("utf-16-le"), dtype="<u2").astype(np.uint64)
    unit_end = np.cumsum(units_per)
    exponent = np.repeat(unit_end, units_per) - 1 - np.arange(units.size)
    powers = _powers_of_31(int(units_per.max(initial=0)))
    terms = (units * powers[exponent]) & _MASK32
    sums = np.concatenate([np.zeros(1, np.uint64), np.cumsum(terms, dtype=np.uint64)])
    hashes = (sums[unit_end] - sums[unit_end - units_per]) & _MASK32
    return hashes.astype(np.uint32).view(np.int32)


def _powers_of_31(count: int) -> np.ndarray:
    out = np.ones(max(count, 1), dtype=np.uint64)
    for i in range(1, count):  # one entry per character position of the longest key, not per row
        out[i] = (out[i - 1] * np.uint64(31)) & _MASK32
    return out
