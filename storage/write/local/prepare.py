"""Phase 1 of an in-process write (storage.write.prepare's counterpart on an Arrow table): the input shaped to the
target schema, keyed in Arrow (storage.keygen.arrow_keys), checked, and counted per partition. Records of a key are
combined by the write tasks (`combine_by`), every record of a key reaching the same bucket."""
from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from storage.arrow_util import constant_array
from storage.exception import HoodieKeyError, HoodieWriteError
from storage.keygen import arrow_keys
from storage.meta_fields import IS_DELETED, PARTITION_PATH, RECORD_KEY
from storage.write.operation import WriteOperationType
from storage.write.prepare import INPUT_ORDER, verify_batch
from storage.write.table_settings import TableSettings
from storage.write.task_context import OP_COLUMN, OP_DELETE, OP_WRITE


def key_records(table: pa.Table, settings: TableSettings, op: WriteOperationType, schema: pa.Schema,
                carried: tuple[str, ...] = ()) -> pa.Table:
    """`table` in the target schema's columns and types (missing ones null), with record key, partition path and
    operation columns, the soft-delete marker and the `carried` columns alongside (storage.write.prepare.key_records)."""
    by_lower = {name.lower(): name for name in table.column_names}
    columns, names = [], []
    for field in schema:
        source = by_lower.get(field.name.lower())
        if source is None:
            columns.append(pa.nulls(table.num_rows, field.type))
        else:
            column = table.column(source)
            columns.append(column if column.type == field.type else column.cast(field.type))
        names.append(field.name)
    if IS_DELETED.lower() in by_lower:
        columns.append(table.column(by_lower[IS_DELETED.lower()]).cast(pa.bool_()))
        names.append(IS_DELETED)
    try:
        keys, paths = arrow_keys.record_keys(settings.keygen, table), arrow_keys.partition_paths(settings.keygen, table)
    except HoodieKeyError as exc:  # spelled as the Spark path reports it
        raise HoodieWriteError(f"HoodieKeyError: {exc}") from None
    op_code = OP_DELETE if op is WriteOperationType.DELETE else OP_WRITE
    columns += [keys, paths, constant_array(op_code, table.num_rows, pa.int8())]
    names += [RECORD_KEY, PARTITION_PATH, OP_COLUMN]
    for name in carried:
        columns.append(table.column(name))
        names.append(name)
    return pa.Table.from_arrays(columns, names=names)


def with_input_order(records: pa.Table) -> pa.Table:
    """`records` with each one's position in the batch, the tie-break of the records of a key."""
    return records.append_column(INPUT_ORDER, pa.array(np.arange(records.num_rows, dtype=np.int64)))


def most_repeated_key(records: pa.Table, by_partition: bool) -> tuple[str, int] | None:
    """The key (with its partition when keys are unique per partition) repeated most in the batch, and its count;
    None when no key repeats."""
    group = [RECORD_KEY, PARTITION_PATH] if by_partition else [RECORD_KEY]
    counts = records.select(group).group_by(group).aggregate([([], "count_all")])
    if counts.num_rows == records.num_rows:
        return None
    most = pc.max(counts["count_all"])
    return counts[RECORD_KEY][pc.index(counts["count_all"], most).as_py()].as_py(), most.as_py()


def partition_counts(records: pa.Table, precombine: str | None, unique: bool,
                     by_partition: bool) -> dict[str, int]:
    """Records per partition path, after the batch's checks (storage.write.prepare.verify_batch): no null ordering
    value (`precombine`), no repeated key when `unique`, no hidden partition path."""
    counted = pc.value_counts(records.column(PARTITION_PATH).combine_chunks())
    counts = dict(zip(counted.field("values").to_pylist(), counted.field("counts").to_pylist()))
    checks: list[tuple] = []
    if precombine:
        checks.append((records.column(_named(records, precombine)).null_count,))
    if unique:
        repeated = most_repeated_key(records, by_partition)
        checks = [c + ((repeated[1], repeated[0]) if repeated else (1, None)) for c in (checks or [()])]
    verify_batch(sorted(counts), checks, precombine, unique)
    return counts


def _named(records: pa.Table, name: str) -> str:
    lower = name.lower()
    return next((c for c in records.column_names if c.lower() == lower), name)

