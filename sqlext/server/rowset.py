"""Arrow record batches to columnar TRowSets (protocol V6 and later): one typed TColumn per column, values
as Python lists built by Arrow/numpy (no per-row Python), NULLs as a bitmap (bit i of byte i//8, least
significant bit first) with a placeholder value in their slot."""
from __future__ import annotations

import numpy as np
import pyarrow as pa

from sqlext.server.schema import Wire
from sqlext.server.third_party.tcliservice.ttypes import (
    TBinaryColumn,
    TBoolColumn,
    TByteColumn,
    TColumn,
    TDoubleColumn,
    TI16Column,
    TI32Column,
    TI64Column,
    TRowSet,
    TStringColumn,
)

_COLUMN_CLASSES = {
    Wire.BOOL: (TBoolColumn, False, None), Wire.BYTE: (TByteColumn, 0, pa.int8()),
    Wire.I16: (TI16Column, 0, pa.int16()), Wire.I32: (TI32Column, 0, pa.int32()),
    Wire.I64: (TI64Column, 0, pa.int64()), Wire.DOUBLE: (TDoubleColumn, 0.0, pa.float64()),
    Wire.STRING: (TStringColumn, "", None), Wire.BINARY: (TBinaryColumn, b"", None),
}


def null_bitmap(array: pa.Array) -> bytes:
    if array.null_count == 0:
        return b""
    return np.packbits(array.is_null().to_numpy(zero_copy_only=False), bitorder="little").tobytes()


def to_tcolumn(array: pa.Array | pa.ChunkedArray, wire: str) -> TColumn:
    if isinstance(array, pa.ChunkedArray):
        array = array.combine_chunks()
    cls, placeholder, numeric = _COLUMN_CLASSES[wire]
    nulls = null_bitmap(array)
    filled = array.fill_null(placeholder) if array.null_count else array
    if numeric is not None or wire == Wire.BOOL:
        if numeric is not None and filled.type != numeric:
            filled = filled.cast(numeric)
        values = filled.to_numpy(zero_copy_only=False).tolist()
    else:
        values = filled.to_pylist()
    return TColumn(**{wire: cls(values=values, nulls=nulls)})


def to_trowset(table: pa.Table, wires: list[str], start_offset: int) -> TRowSet:
    return TRowSet(startRowOffset=start_offset, rows=[],
                   columns=[to_tcolumn(table.column(i), wire) for i, wire in enumerate(wires)])


def string_rowset(lines: list[str], start_offset: int = 0) -> TRowSet:
    """A one-column string row set (operation logs)."""
    return TRowSet(startRowOffset=start_offset, rows=[],
                   columns=[TColumn(stringVal=TStringColumn(values=list(lines), nulls=b""))])
