"""The write side shared by MERGE, UPDATE and DELETE: a frame of row changes becomes ONE write batch.

A planner produces `changes`: one row per inserted source row or affected target row, with
  KIND   'insert' | 'update' | 'delete'
  ROWID  the target row's stored identity (record key [+ partition path]), null for inserts
  CARD   true when the row came from a WHEN MATCHED clause (for the MERGE cardinality rule)
  <data columns>   the row's new values (deletes: the stored values), cast to the table's types
  old_col(i)       the stored values of data column i (null for inserts)

From it this module checks the statement's rules before anything is written (each rule is one small
Spark job), then writes upserted rows plus `_hoodie_is_deleted` delete markers in a single commit. A row
whose key or partition changes is written as a delete of the old record plus an insert of the new one.
"""
from __future__ import annotations

import logging

from pyspark import StorageLevel
from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from sqlext.sql.result import DmlCounts
from sqlext.sql.table import HudiTable
from storage.config import WriteConfigKeys as WK
from storage.meta_fields import IS_DELETED
from storage.client.write_client import write_dataframe

log = logging.getLogger(__name__)

KIND, ROWID, CARD = "__hudi_kind", "__hudi_rowid", "__hudi_card"
INSERT, UPDATE, DELETE = "insert", "update", "delete"
_ID, _FRESH = "__hudi_id", "__hudi_fresh"
# SQL DML states each row's final value: the incoming row replaces the stored one whatever its ordering value
SQL_DML_PAYLOAD = "org.apache.hudi.common.model.OverwriteWithLatestAvroPayload"


def old_col(i: int) -> str:
    return f"__hudi_o{i}"


def apply_changes(ctx, table: HudiTable, changes: DataFrame, node, verb: str,
                  inserts_are_new: bool = False) -> DmlCounts:
    """Write the change frame as one batch. `inserts_are_new`: the caller proved that no inserted identity can
    exist in the table (a MERGE whose ON is exactly the key equality and whose INSERTs take the key from it),
    so the check against the stored identities (a scan of the table) is skipped."""
    opts = table.write_options(ctx.spark, {WK.PAYLOAD_CLASS.key: SQL_DML_PAYLOAD})
    is_write = F.col(KIND) != F.lit(DELETE)
    identity = F.when(is_write, table.identity(opts)).otherwise(F.col(ROWID))
    staged = (changes.withColumn(_ID, identity)
              .withColumn(_FRESH, is_write & (F.col(ROWID).isNull() | ~F.col(_ID).eqNullSafe(F.col(ROWID))))
              .persist(StorageLevel.MEMORY_AND_DISK))
    try:
        stats = {r[0]: (r[1], r[2] or 0) for r in
                 staged.groupBy(KIND).agg(F.count(F.lit(1)), F.sum(F.col(_FRESH).cast("long"))).collect()}
        counts = DmlCounts(inserted=stats.get(INSERT, (0, 0))[0], updated=stats.get(UPDATE, (0, 0))[0],
                           deleted=stats.get(DELETE, (0, 0))[0])
        if counts.affected == 0:
            log.info("%s on %s changes no rows: nothing written", verb, table.name)
            return counts
        fresh = sum(f for _, f in stats.values())
        # rows that move to another identity (key or partition change) may land on stored rows: always checked
        check_stored = not (inserts_are_new and fresh == counts.inserted)
        _check_rules(ctx, staged, table, opts, node, verb, fresh, check_stored)
        batch, operation = _batch(staged, table, counts, moved=fresh - counts.inserted)
        opts[WK.OPERATION.key] = operation
        log.info("%s on %s: %s (%s)", verb, table.name, counts, operation)
        write_dataframe(ctx.spark, batch, table.ref.path, opts)
        return counts
    finally:
        staged.unpersist()


def _check_rules(ctx, staged: DataFrame, table: HudiTable, opts: dict, node, verb: str, fresh: int,
                 check_stored: bool = True) -> None:
    """One aggregation by identity checks both rules of a statement:
    - cardinality: a target row is updated/deleted through one WHEN MATCHED source row at most;
    - keys: written rows get distinct identities, and a new identity (insert, changed key or partition)
      must not land on a stored row that stays (Hudi would silently merge the two into one record)."""
    has_card = CARD in staged.columns
    if not has_card and not fresh:
        return  # UPDATE/DELETE keeping every key: identities stay unique by construction
    zero, one = F.lit(0), F.lit(1)
    card = F.col(CARD).cast("int") if has_card else zero
    parts = [staged.where(F.col(ROWID).isNotNull()).select(F.col(ROWID).alias(_ID), zero.alias("w"), zero.alias("s"),
                                                          one.alias("r"), card.alias("c"))]
    if fresh:
        parts.append(staged.where(F.col(KIND) != F.lit(DELETE)).select(_ID, one.alias("w"), zero.alias("s"),
                                                                      zero.alias("r"), zero.alias("c")))
        if check_stored:
            parts.append(table.snapshot(ctx.spark).select(table.stored_identity(opts).alias(_ID), zero.alias("w"),
                                                          one.alias("s"), zero.alias("r"), zero.alias("c")))
    union = parts[0]
    for part in parts[1:]:
        union = union.unionByName(part)
    sums = union.groupBy(_ID).agg(*[F.sum(c).alias(c) for c in ("w", "s", "r", "c")])
    bad = sums.where((F.col("c") > 1) | (F.col("w") > 1) | ((F.col("w") >= 1) & (F.col("s") > F.col("r"))))
    row = bad.orderBy(F.col("c").desc()).limit(1).collect()
    if not row:
        return
    ident, w, s, r, c = row[0]
    keys = ", ".join(table.record_keys)
    if c > 1:
        raise ctx.error(f"{verb}: the target row {_describe(ident)} of {table.name} matches {c} source rows; a "
                        "target row can be updated or deleted by one source row only (deduplicate the source or "
                        "make the ON condition unique). Nothing was written.", node, table=table.name)
    if w > 1:
        raise ctx.error(f"{verb} would write {w} rows with the same record key {_describe(ident)} into "
                        f"{table.name} (primary key {keys}). Nothing was written.", node, table=table.name)
    raise ctx.error(f"{verb} would insert record key {_describe(ident)} that already exists in {table.name} "
                    f"(primary key {keys}). Nothing was written.", node, table=table.name)


def _batch(staged: DataFrame, table: HudiTable, counts: DmlCounts, moved: int) -> tuple[DataFrame, str]:
    cols = table.columns
    data = [F.col(f"`{c}`") for c in cols]
    old = [F.col(old_col(i)).alias(c) for i, c in enumerate(cols)]
    if counts.inserted == 0 and counts.updated == 0:
        return staged.select(*data), "delete"
    writes = staged.where(F.col(KIND) != F.lit(DELETE))
    if counts.deleted == 0 and moved == 0:
        return writes.select(*data), "upsert"  # no delete markers: keep _hoodie_is_deleted out of the schema
    moved = writes.where(F.col(KIND) == F.lit(UPDATE)).where(~F.col(_ID).eqNullSafe(F.col(ROWID)))
    deletes = (staged.where(F.col(KIND) == F.lit(DELETE)).select(KIND, *old, F.col(ROWID).alias(_ID))
               .unionByName(moved.select(KIND, *old, F.col(ROWID).alias(_ID))))
    # a stored row that is removed and re-written under the same identity is just an update
    deletes = deletes.join(writes.select(_ID), _ID, "left_anti")
    # nullable on purpose (a CASE without ELSE on a non-literal condition; Spark folds `WHEN true`):
    # stored rows written before the column existed hold nulls in it
    marker = lambda value: F.when(F.col(KIND).isNotNull(), F.lit(value)).alias(IS_DELETED)  # noqa: E731
    batch = writes.select(*data, marker(False)).unionByName(
        deletes.select(*[F.col(f"`{c}`") for c in cols], marker(True)))
    return batch, "upsert"


def _describe(rowid: str | None) -> str:
    if rowid is None:
        return "NULL"
    key, _, partition = str(rowid).partition("\u0001")
    return f"'{key}'" + (f" (partition {partition})" if partition else "")
