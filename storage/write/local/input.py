"""A write's input in this process: its size, known before any Spark job, and its rows as an Arrow table.

A DataFrame whose plan is rows held by the driver (VALUES, a literal SELECT: Spark's LocalRelation) is collected
without a job; one that is a plain scan of local parquet files (the common staged or cached input) is read with
pyarrow directly; any other is collected with `toArrow` (one Spark job, which also evaluates what only Spark
computes)."""
from __future__ import annotations

import logging
from urllib.parse import unquote, urlparse

import pyarrow as pa

from storage.io.parquet import read_parquet
from storage.io.storage import HoodieStorage

log = logging.getLogger(__name__)


def estimated_bytes(data) -> int:
    """The input's bytes: an Arrow table's own, or Spark's estimate from the DataFrame's optimized plan."""
    if isinstance(data, pa.Table):
        return data.nbytes
    try:
        return int(str(data._jdf.queryExecution().optimizedPlan().stats().sizeInBytes()))
    except Exception:  # noqa: BLE001 - no estimate: treat as large, Spark runs it
        return 1 << 62


def arrow_schema(data) -> pa.Schema:
    """The input's schema as Arrow spells it (no job)."""
    if isinstance(data, pa.Table):
        return data.schema
    from pyspark.sql.pandas.types import to_arrow_schema

    return to_arrow_schema(data.schema, timezone="UTC")


def to_arrow(data) -> pa.Table:
    """The input's rows in this process."""
    if isinstance(data, pa.Table):
        return data
    if _is_local_relation(data):
        local = _collected(data)
        if local is not None:
            return local
    files = _plain_parquet_files(data)
    if files:
        try:
            storage = HoodieStorage.for_path(files[0])
            table = pa.concat_tables([read_parquet(storage, f, data.columns) for f in files])
            return table.select(data.columns).cast(arrow_schema(data))
        except (pa.ArrowException, ValueError, OSError) as exc:  # types pyarrow spells otherwise: Spark reads
            log.debug("reading the input's parquet files with pyarrow failed (%s): collecting it with Spark", exc)
    return data.toArrow()


def _plain_parquet_files(df) -> list[str] | None:
    """The local files of a DataFrame that is nothing but a scan of parquet files (no filter, projection nor
    partition columns from the directory layout), or None."""
    try:
        plan = df._jdf.queryExecution().analyzed()
        if not plan.getClass().getSimpleName() == "LogicalRelation":
            return None
        relation = plan.relation()
        if relation.getClass().getSimpleName() != "HadoopFsRelation" or \
                "Parquet" not in relation.fileFormat().getClass().getSimpleName() or \
                relation.partitionSchema().length() > 0:
            return None
        files = list(relation.inputFiles())  # the relation's: a cached frame's inputFiles() lists none
    except Exception:  # noqa: BLE001 - not a plan this recognizes
        return None
    paths = []
    for f in files:
        url = urlparse(f)
        if url.scheme not in ("", "file"):
            return None
        paths.append(unquote(url.path))
    return paths or None


def _is_local_relation(df) -> bool:
    try:
        return df._jdf.queryExecution().optimizedPlan().getClass().getSimpleName() == "LocalRelation"
    except Exception:  # noqa: BLE001 - not a plan this recognizes
        return False


def _collected(df) -> pa.Table | None:
    """The rows of a LocalRelation (Spark collects them without a job), for flat columns whose Python values Arrow
    takes as they are; None for others (timestamps come back in the session's time zone, nested values as Rows)."""
    schema = arrow_schema(df)
    if any(pa.types.is_nested(f.type) or pa.types.is_timestamp(f.type) for f in schema):
        return None
    rows = df.collect()
    columns = list(zip(*rows)) if rows else [[] for _ in schema]
    return pa.Table.from_arrays([pa.array(list(c), f.type) for c, f in zip(columns, schema)], schema=schema)
