"""Small Arrow building blocks shared by the write, read and compaction paths."""
from __future__ import annotations

import numpy as np
import pyarrow as pa


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
