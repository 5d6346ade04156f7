"""Bringing Arrow tables read from base files and log blocks (each with its writer's schema) to one reader schema."""
from __future__ import annotations

import pyarrow as pa
import pyarrow.compute as pc
from storage.exception import HoodieSchemaConformError


def conform_table(table: pa.Table, schema: pa.Schema, source: str = "") -> pa.Table:
    """`table` with exactly the columns of `schema`, in its order and types: missing columns become nulls,
    extra columns are dropped, nested structs are matched by field name (pyarrow's cast does that)."""
    columns = []
    names = set(table.column_names)
    for field in schema:
        if field.name not in names:
            columns.append(pa.nulls(table.num_rows, field.type))
            continue
        column = table[field.name]
        columns.append(column if column.type == field.type else _cast(column, field, source))
    return pa.Table.from_arrays(columns, schema=schema.remove_metadata() if schema.metadata else schema)


def _cast(column: pa.ChunkedArray, field: pa.Field, source: str) -> pa.ChunkedArray:
    try:
        return pc.cast(column, field.type)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError) as exc:
        if _is_temporal(field.type):
            try:  # nanosecond INT96 timestamps and the like: truncating to the reader's unit is intended
                return pc.cast(column, field.type, safe=False)
            except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError):
                pass
        where = f" of {source}" if source else ""
        raise HoodieSchemaConformError(f"column {field.name!r}{where} has type {column.type}, which does not convert to "
                                 f"the table schema's {field.type}: {exc}") from exc


def _is_temporal(t: pa.DataType) -> bool:
    return pa.types.is_timestamp(t) or pa.types.is_time(t) or pa.types.is_date(t)
