"""Writer schema resolution: the incoming data against the table's schema.

Columns may be added and types widened (int->bigint, float->double, decimal precision increase);
anything else is an incompatible schema, reported with the column and both types before any write.
"""
from __future__ import annotations

import pyarrow as pa

from storage.exception import HoodieSchemaCompatibilityError
from storage.table.schema_resolver import data_schema

_INT_RANK = {pa.int8(): 0, pa.int16(): 1, pa.int32(): 2, pa.int64(): 3}


def widen(column: str, table_type: pa.DataType, incoming: pa.DataType) -> pa.DataType:
    """The type a column gets when `incoming` data is written into a table column of `table_type`."""
    if table_type == incoming:
        return table_type
    if table_type in _INT_RANK and incoming in _INT_RANK:
        return table_type if _INT_RANK[table_type] >= _INT_RANK[incoming] else incoming
    if pa.types.is_floating(table_type) and (pa.types.is_floating(incoming) or incoming in _INT_RANK):
        return pa.float64() if pa.float64() in (table_type, incoming) else table_type
    if pa.types.is_floating(incoming) and table_type in _INT_RANK:
        return pa.float64() if table_type == pa.int64() or incoming == pa.float64() else pa.float32()
    if pa.types.is_decimal(table_type) and pa.types.is_decimal(incoming) and table_type.scale == incoming.scale:
        return table_type if table_type.precision >= incoming.precision else incoming
    if pa.types.is_decimal(table_type) and incoming in _INT_RANK:
        return table_type
    raise HoodieSchemaCompatibilityError(
        f"incompatible schema: column '{column}' has type {table_type} in the table but {incoming} in the data"
    )


def reconcile(table_schema: pa.Schema | None, incoming: pa.Schema) -> pa.Schema:
    """The table schema after this write: table columns (types widened), then new columns."""
    incoming = data_schema(incoming)
    if table_schema is None:
        return incoming
    table_schema = data_schema(table_schema)
    by_name = {f.name.lower(): f for f in incoming}
    fields = []
    for f in table_schema:
        new = by_name.get(f.name.lower())
        fields.append(f if new is None else f.with_type(widen(f.name, f.type, new.type)))
    known = {f.name.lower() for f in table_schema}
    # columns added by a later write are nullable: earlier records have no value for them
    fields += [f.with_nullable(True) for f in incoming if f.name.lower() not in known]
    return pa.schema(fields)
