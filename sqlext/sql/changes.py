"""The write side shared by MERGE, UPDATE and DELETE: a frame of row changes becomes ONE write batch.

A planner produces `changes`: one row per inserted source row or affected target row, with
  KIND   'insert' | 'update' | 'delete'
  ROWID  the target row's stored identity (record key [+ partition path]), null for inserts
  CARD   true when the row came from a WHEN MATCHED clause (for the MERGE cardinality rule)
  LOC_FILE, LOC_PART   the target row's file group and partition (`stored_location`; null for inserts)
  <data columns>   the row's new values (deletes: the stored values), cast to the table's types
  old_col(i)       the stored values of data column i (null for inserts)

From it this module checks the statement's rules before anything is written (each rule is one small
Spark job), then writes upserted rows plus `_hoodie_is_deleted` delete markers in a single commit. A row
whose key or partition changes is written as a delete of the old record plus an insert of the new one. Each row
goes with the location its target row was read from, so the write does not look the keys up in the table again:
the statement reads the target once.
"""
from __future__ import annotations

import logging

import pyarrow as pa
import pyarrow.compute as pc
from pyspark import StorageLevel
from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from sqlext.sql.result import DmlCounts
from sqlext.sql.table import HudiTable
from storage.config import HoodieConfig
from storage.config import WriteConfigKeys as WK
from storage.index.hoodie_index import LOC_FILE_ID, LOC_PARTITION, file_id_of_file_name
from storage.meta_fields import FILE_NAME, IS_DELETED, PARTITION_PATH
from storage.client.write_client import write_dataframe
from storage.write.local.choice import holds_in_process

log = logging.getLogger(__name__)

KIND, ROWID, CARD = "__hudi_kind", "__hudi_rowid", "__hudi_card"
LOC_FILE, LOC_PART = "__hudi_loc_file", "__hudi_loc_part"
INSERT, UPDATE, DELETE = "insert", "update", "delete"
_ID, _FRESH = "__hudi_id", "__hudi_fresh"
# SQL DML states each row's final value: the incoming row replaces the stored one whatever its ordering value
SQL_DML_PAYLOAD = "org.apache.hudi.common.model.OverwriteWithLatestAvroPayload"


def old_col(i: int) -> str:
    return f"__hudi_o{i}"


def stored_location(qualifier: str | None = None) -> list[Column]:
    """The change columns `LOC_FILE`, `LOC_PART`: where the target row (of the frame or alias `qualifier`) is
    stored, from its meta columns. Null for a row that has no target row (an insert)."""
    q = f"`{qualifier}`." if qualifier else ""
    return [file_id_of_file_name(F.col(f"{q}`{FILE_NAME}`")).alias(LOC_FILE),
            F.col(f"{q}`{PARTITION_PATH}`").alias(LOC_PART)]


def apply_changes(ctx, table: HudiTable, changes: DataFrame, node, verb: str,
                  inserts_are_new: bool = False) -> DmlCounts:
    """Write the change frame as one batch. `inserts_are_new`: the caller proved that no inserted identity can
    exist in the table (a MERGE whose ON is exactly the key equality and whose INSERTs take the key from it),
    so the check against the stored identities (a scan of the table) is skipped."""
    opts = table.write_options(ctx.spark, {WK.PAYLOAD_CLASS.key: SQL_DML_PAYLOAD})
    is_write = F.col(KIND) != F.lit(DELETE)
    identity = F.when(is_write, table.identity(opts)).otherwise(F.col(ROWID))
    staged = (changes.withColumn(_ID, identity)
              .withColumn(_FRESH, is_write & (F.col(ROWID).isNull() | ~F.col(_ID).eqNullSafe(F.col(ROWID)))))
    held = _held_in_process(staged, opts)
    if held is not None:  # read once by one job; the counts and the write's input need no other
        stats = _kind_stats(held)
        staged = ctx.spark.createDataFrame(held, schema=staged.schema) if held.num_rows else staged
    else:
        staged = staged.persist(StorageLevel.MEMORY_AND_DISK)
        stats = {r[0]: (r[1], r[2] or 0) for r in
                 staged.groupBy(KIND).agg(F.count(F.lit(1)), F.sum(F.col(_FRESH).cast("long"))).collect()}
    try:
        counts = DmlCounts(inserted=stats.get(INSERT, (0, 0))[0], updated=stats.get(UPDATE, (0, 0))[0],
                           deleted=stats.get(DELETE, (0, 0))[0])
        if counts.affected == 0:
            log.info("%s on %s changes no rows: nothing written", verb, table.name)
            return counts
        fresh = sum(f for _, f in stats.values())
        # rows that move to another identity (key or partition change) may land on stored rows: always checked
        check_stored = not (inserts_are_new and fresh == counts.inserted)
        _check_rules(ctx, staged, table, opts, node, verb, fresh, check_stored)
        known = LOC_FILE in staged.columns and table.meta.table_config.populate_meta_fields
        batch, operation = _batch(staged, table, counts, moved=fresh - counts.inserted,
                                  located=_located if known else None, any_on_stored=fresh > 0 and check_stored)
        opts[WK.OPERATION.key] = operation
        log.info("%s on %s: %s (%s)", verb, table.name, counts, operation)
        write_dataframe(ctx.spark, batch, table.ref.path, HoodieConfig.of(opts), known_locations=known)
        return counts
    finally:
        staged.unpersist()


def _held_in_process(staged: DataFrame, opts: dict) -> pa.Table | None:
    """The statement's change rows collected into this process (one Spark job) when the write runs here anyway: the
    plan's estimate of them (the target's scan, whatever the filter keeps) is within what the in-process engine
    takes (`hoodie.sqlext.engine`, storage.write.local.choice); else None, and Spark keeps them."""
    return staged.toArrow() if holds_in_process(staged, HoodieConfig.of(opts)) else None


def _kind_stats(held: pa.Table) -> dict[str, tuple[int, int]]:
    """{kind: (rows, rows given a new identity)} of collected change rows (the Spark path's groupBy, in Arrow)."""
    fresh = pc.fill_null(held.column(_FRESH), False).cast(pa.int64())
    grouped = pa.table({KIND: held.column(KIND), _FRESH: fresh}).group_by(KIND).aggregate(
        [([], "count_all"), (_FRESH, "sum")])
    return {kind: (rows, moved or 0) for kind, rows, moved in
            zip(grouped[KIND].to_pylist(), grouped["count_all"].to_pylist(), grouped[f"{_FRESH}_sum"].to_pylist())}


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


def _batch(staged: DataFrame, table: HudiTable, counts: DmlCounts, moved: int, located=None,
           any_on_stored: bool = False) -> tuple[DataFrame, str]:
    """The write batch and its operation. `located` (`_located`): each row also gets the location the write places
    it at; `any_on_stored`: a new identity may land on a stored row the statement removes."""
    cols = table.columns
    data = [F.col(f"`{c}`") for c in cols]
    old = [F.col(old_col(i)).alias(c) for i, c in enumerate(cols)]
    own = [F.col(LOC_FILE).alias(LOC_FILE_ID), F.col(LOC_PART).alias(LOC_PARTITION)] if located else []
    if counts.inserted == 0 and counts.updated == 0:
        return staged.select(*data, *own), "delete"
    writes = staged.where(F.col(KIND) != F.lit(DELETE))
    placed = located(staged, writes, any_on_stored) if located else writes
    where = [LOC_FILE_ID, LOC_PARTITION] if located else []
    if counts.deleted == 0 and moved == 0:
        # no delete markers: keep _hoodie_is_deleted out of the schema
        return placed.select(*data, *where), "upsert"
    moved = writes.where(F.col(KIND) == F.lit(UPDATE)).where(~F.col(_ID).eqNullSafe(F.col(ROWID)))
    deletes = (staged.where(F.col(KIND) == F.lit(DELETE)).select(KIND, *old, F.col(ROWID).alias(_ID), *own)
               .unionByName(moved.select(KIND, *old, F.col(ROWID).alias(_ID), *own)))
    # a stored row that is removed and re-written under the same identity is just an update
    deletes = deletes.join(writes.select(_ID), _ID, "left_anti")
    # nullable on purpose (a CASE without ELSE on a non-literal condition; Spark folds `WHEN true`):
    # stored rows written before the column existed hold nulls in it
    marker = lambda value: F.when(F.col(KIND).isNotNull(), F.lit(value)).alias(IS_DELETED)  # noqa: E731
    batch = placed.select(*data, marker(False), *where).unionByName(
        deletes.select(*[F.col(f"`{c}`") for c in cols], marker(True), *where))
    return batch, "upsert"


def _located(staged: DataFrame, writes: DataFrame, any_on_stored: bool) -> DataFrame:
    """`writes` with the location the write puts each at (`LOC_FILE_ID`, `LOC_PARTITION`): a row keeping its
    identity stays where its target row is; a new identity is new (null), unless it lands on a stored row the
    statement removes (the checks allow only that), which it then replaces in place."""
    same = F.col(_ID).eqNullSafe(F.col(ROWID))
    if not any_on_stored:
        return writes.select("*", F.when(same, F.col(LOC_FILE)).alias(LOC_FILE_ID),
                             F.when(same, F.col(LOC_PART)).alias(LOC_PARTITION))
    removed = staged.where(F.col(ROWID).isNotNull()).select(
        F.col(ROWID).alias("__hudi_removed"), F.col(LOC_FILE).alias("__hudi_rf"), F.col(LOC_PART).alias("__hudi_rp"))
    joined = writes.join(removed, F.col(_ID) == F.col("__hudi_removed"), "left")
    return joined.select(*[F.col(f"`{c}`") for c in writes.columns],
                         F.when(same, F.col(LOC_FILE)).otherwise(F.col("__hudi_rf")).alias(LOC_FILE_ID),
                         F.when(same, F.col(LOC_PART)).otherwise(F.col("__hudi_rp")).alias(LOC_PARTITION))


def _describe(rowid: str | None) -> str:
    if rowid is None:
        return "NULL"
    key, _, partition = str(rowid).partition("\u0001")
    return f"'{key}'" + (f" (partition {partition})" if partition else "")
