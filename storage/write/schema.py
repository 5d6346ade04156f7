"""Writer schema resolution: the incoming data against the table's schema.

Columns may be added and types widened (int->bigint, float->double, decimal precision increase);
anything else is an incompatible schema, reported with the column and both types before any write.
"""
from __future__ import annotations

import pyarrow as pa

from storage.exception import HoodieSchemaCompatibilityError
from storage.meta_fields import IS_DELETED, META_COLUMNS

_INT_RANK = {pa.int8(): 0, pa.int16(): 1, pa.int32(): 2, pa.int64(): 3}


def data_schema(schema: pa.Schema) -> pa.Schema:
    """`schema` without Hudi meta columns; byte and short become int as in Hudi's Avro schemas."""
    fields = []
    for f in schema:
        if f.name in META_COLUMNS or f.name in ("_hoodie_operation", IS_DELETED):
            continue
        fields.append(f.with_type(_hudi_type(f.type)))
    return pa.schema(fields)


def _hudi_type(t: pa.DataType) -> pa.DataType:
    if t in (pa.int8(), pa.int16()):
        return pa.int32()
    if pa.types.is_timestamp(t):
        return pa.timestamp("us", tz="UTC")
    if pa.types.is_large_string(t):
        return pa.string()
    if pa.types.is_large_binary(t):
        return pa.binary()
    if pa.types.is_struct(t):
        return pa.struct([f.with_type(_hudi_type(f.type)) for f in t])
    if pa.types.is_list(t) or pa.types.is_large_list(t):
        return pa.list_(t.value_field.with_type(_hudi_type(t.value_type)))
    if pa.types.is_map(t):
        return pa.map_(_hudi_type(t.key_type), t.item_field.with_type(_hudi_type(t.item_type)))
    return t


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
