"""Small Arrow building blocks shared by the write, read and compaction paths."""
from __future__ import annotations

import numpy as np
import pyarrow as pa


def constant_array(value, n: int, type_: pa.DataType) -> pa.Array:
    """`n` copies of `value` without building a Python list (the hot paths stamp every row of a file)."""
    if pa.types.is_integer(type_) or pa.types.is_floating(type_):
        return pa.array(np.full(n, value, dtype=type_.to_pandas_dtype()), type_)
    return pa.nulls(n, type_).fill_null(pa.scalar(value, type_))


def row_numbers(n: int) -> pa.Array:
    return pa.array(np.arange(n, dtype=np.int64))
