"""Store assignment: which value types may be written into a column, with Spark's ANSI policy
(numbers between numeric types, anything atomic into strings, dates and timestamps between each other;
no strings into numbers, no numbers into booleans), and which columns an UPDATE may not assign (a record's
key and, per index, partition)."""
from __future__ import annotations

from sqlglot import exp
from pyspark.sql.types import (
    ArrayType,
    AtomicType,
    BinaryType,
    BooleanType,
    DataType,
    DateType,
    MapType,
    NullType,
    NumericType,
    StringType,
    StructType,
    TimestampNTZType,
    TimestampType,
)

from storage.config import HoodieConfig, WriteConfigKeys as WK

_TIMES = (DateType, TimestampType, TimestampNTZType)


def assignable(src: DataType, dst: DataType) -> bool:
    if isinstance(src, NullType) or src == dst:
        return True
    if isinstance(dst, StringType):
        return isinstance(src, (AtomicType, StringType)) and not isinstance(src, BinaryType)
    if isinstance(src, NumericType) and isinstance(dst, NumericType):
        return True
    if isinstance(src, _TIMES) and isinstance(dst, _TIMES):
        return True
    if isinstance(src, BooleanType) or isinstance(dst, BooleanType):
        return False
    if isinstance(src, ArrayType) and isinstance(dst, ArrayType):
        return assignable(src.elementType, dst.elementType)
    if isinstance(src, MapType) and isinstance(dst, MapType):
        return assignable(src.keyType, dst.keyType) and assignable(src.valueType, dst.valueType)
    if isinstance(src, StructType) and isinstance(dst, StructType):
        return len(src.fields) == len(dst.fields) and all(
            assignable(a.dataType, b.dataType) for a, b in zip(src.fields, dst.fields))
    return False


# -- checking expressions against a frame --------------------------------------------------------
def expression_types(ctx, frame, items: list[tuple[str, object]]) -> list[DataType]:
    """Spark's analyzed type of each (sql, node) over `frame`, in one analysis; on failure the offending
    expression is found and reported at its position."""
    from pyspark.sql import functions as F

    if not items:
        return []
    try:
        schema = frame.select(*[F.expr(sql).alias(f"e{i}") for i, (sql, _) in enumerate(items)]).schema
        return [f.dataType for f in schema.fields]
    except Exception:
        for sql, node in items:
            try:
                frame.select(F.expr(sql)).schema
            except Exception as exc:
                raise ctx.error(f"cannot evaluate '{sql}': {spark_message(exc)}", node) from exc
        raise


def quoted(node) -> str:
    """An expression as the user wrote it, in quotes unless it is a string literal (which has its own)."""
    sql = node.sql(dialect="spark")
    return sql if isinstance(node, exp.Literal) and node.is_string else f"'{sql}'"


def check_boolean(ctx, dtype: DataType, node, what: str) -> None:
    if not isinstance(dtype, (BooleanType, NullType)):
        raise ctx.error(f"{what} must be a boolean expression, not {dtype.simpleString()}: {quoted(node)}", node)


def check_assignment(ctx, src: DataType, column: str, dst: DataType, node, table: str, hint: str = "") -> None:
    """`hint`: what the user may have meant, appended to the error."""
    if not assignable(src, dst):
        raise ctx.error(f"cannot write a {src.simpleString()} value into column '{column}' "
                        f"{dst.simpleString()} of {table}: {quoted(node)}{hint}", node,
                        table=table, column=column)


def spark_column(exc: Exception) -> str | None:
    """The column a Spark analysis error names (an unresolved column, say), or None."""
    try:
        params = exc.getMessageParameters() or {}  # pyspark errors
    except Exception:
        return None
    obj = params.get("objectName") or params.get("columnName")
    return obj.strip("`").split("`.`")[-1] if obj else None


def spark_message(exc: Exception) -> str:
    """The gist of a Spark error: its first line, without the plan dump or Spark's position; for a failure
    inside a Python worker, the exception line at the end of the worker's traceback."""
    import re

    text = str(exc)
    if "Traceback (most recent call last)" in text:
        lines = [m.group(0) for m in re.finditer(r"(?m)^[A-Za-z_][\w.]*(?:Error|Exception|Invalid|Exit)\b: .*$", text)]
        if lines:
            return lines[-1].strip()
    text = text.strip()
    if not text:
        return type(exc).__name__
    # Spark's "; line 1 pos 7" is a position in the SQL Spark ran (often rewritten); ours is in the user's text
    return re.sub(r";? line \d+ pos \d+;?$", "", text.splitlines()[0])


def parse_assignments(ctx, pairs, t_alias: str, table) -> dict:
    """`col = value` pairs -> {target column (table spelling): value}; LHS may be qualified by the target alias."""
    out: dict[str, exp.Expression] = {}
    for pair in pairs:
        if not isinstance(pair, exp.EQ) or not isinstance(pair.this, exp.Column):
            raise ctx.error(f"expected column = value, got '{pair.sql(dialect='spark')}'", pair)
        target = pair.this
        if target.table and target.table.lower() != t_alias.lower():
            raise ctx.error(f"'{target.sql(dialect='spark')}': assignments set columns of the target {t_alias}",
                            target, column=target.name)
        f = table.field(target.name)
        if f is None:
            raise ctx.error(f"column '{target.name}' does not exist in {table.name} (columns: "
                            f"{', '.join(table.columns)})", target, table=table.name, column=target.name)
        if f.name in out:
            raise ctx.error(f"column '{f.name}' is assigned twice", target, column=f.name)
        out[f.name] = pair.expression
    return out


# -- record identity ------------------------------------------------------------------------------
def check_identity_assignments(ctx, table, assignments: dict[str, exp.Expression], options: dict, verb: str,
                               unchanged=lambda column, value: False, hint: str = "") -> None:
    """Refuse, as Hudi does, an assignment that would give a stored record another identity: a record key field
    (Hudi identifies the record by it), or a partition field unless the table's index moves records between
    partitions (`HudiTable.moves_partitions`). `unchanged(column, value)`: the assignment leaves the stored value
    as it is (MERGE's `SET id = s.id` under `ON t.id = s.id`), so it is allowed. Runs before anything is read or
    written."""
    keys = {k.lower() for k in table.record_keys}
    parts = set() if table.moves_partitions(options) else {p.lower() for p in table.partition_fields}
    for column, value in assignments.items():
        lower = column.lower()
        if lower not in keys | parts or unchanged(column, value):
            continue
        # the `col = value` pair when there is one: the error then points at the assigned column
        where = value.parent if isinstance(value.parent, exp.EQ) else value
        if lower in keys:
            raise ctx.error(f"{verb} cannot change the record key field '{column}' of {table.name} (primary key "
                            f"{', '.join(table.record_keys)}): Hudi identifies a record by its key. Delete the row "
                            f"and insert it with the new key instead{hint}", where, table=table.name, column=column)
        index = HoodieConfig.of(options).get(WK.INDEX_TYPE)
        raise ctx.error(f"{verb} cannot change the partition field '{column}' of {table.name}: its index ({index}) "
                        "does not move records between partitions. Use a global index "
                        f"({WK.INDEX_TYPE.key} GLOBAL_BLOOM or GLOBAL_SIMPLE, with "
                        "hoodie.bloom|simple.index.update.partition.path true), or delete the "
                        f"row and insert it into the new partition{hint}", where, table=table.name, column=column)
