"""Result sets the server hands out in bounded batches.

`SparkResultSet` streams a DataFrame the way Spark's Thrift server does with incremental collect: one Spark
job per partition (`toLocalIterator`), here as Arrow record batches (`toArrowBatchRdd`, at most
`spark.sql.execution.arrow.maxRecordsPerBatch` rows each) of the wire form of the columns, which Spark
computes itself (schema.wire_columns). The server holds at most one partition in the driver JVM and one
Arrow batch in Python, whatever the size of the result. FETCH_FIRST starts the stream again (the query runs
again) unless nothing has been handed out yet. `LocalResultSet` is a small in-memory table (catalog RPCs).
"""
from __future__ import annotations

import logging
import threading
from typing import Iterator, Protocol

import pyarrow as pa
from pyspark.sql import DataFrame
from pyspark.sql import types as T

from sqlext.server.config import LIMIT_SETTINGS
from sqlext.server.errors import HoodieResultLimitError
from sqlext.server.schema import wire_columns, wire_of

log = logging.getLogger(__name__)


class ResultSet(Protocol):
    schema: T.StructType        # the columns as the client sees them (real Spark types)

    @property
    def wires(self) -> list[str]: ...

    @property
    def offset(self) -> int: ...   # rows handed out so far

    def fetch(self, max_rows: int) -> pa.Table: ...

    def has_more(self) -> bool: ...

    def rewind(self) -> None: ...

    def close(self) -> None: ...


class _Buffered:
    """The part shared by both result sets: slicing up to `max_rows` off pending batches."""

    def __init__(self, schema: T.StructType):
        self.schema = schema
        self._wires = [wire_of(f.dataType) for f in schema.fields]
        self._pending: list[pa.RecordBatch] = []
        self._pending_rows = 0
        self._offset = 0

    @property
    def wires(self) -> list[str]:
        return self._wires

    @property
    def offset(self) -> int:
        return self._offset

    def _next_batch(self) -> pa.RecordBatch | None:
        raise NotImplementedError

    def _arrow_schema(self) -> pa.Schema:
        raise NotImplementedError

    def fetch(self, max_rows: int) -> pa.Table:
        while self._pending_rows < max_rows:
            batch = self._next_batch()
            if batch is None:
                break
            if batch.num_rows:
                self._pending.append(batch)
                self._pending_rows += batch.num_rows
        table = pa.Table.from_batches(self._pending, schema=self._arrow_schema()) if self._pending else \
            self._arrow_schema().empty_table()
        out, rest = table.slice(0, max_rows), table.slice(max_rows)
        self._pending = rest.to_batches()
        self._pending_rows = rest.num_rows
        self._offset += out.num_rows
        return out

    def has_more(self) -> bool:
        """Whether rows remain (reads ahead one batch when none is pending)."""
        while self._pending_rows == 0:
            batch = self._next_batch()
            if batch is None:
                return False
            if batch.num_rows:
                self._pending, self._pending_rows = [batch], batch.num_rows
        return True


class LocalResultSet(_Buffered):
    def __init__(self, schema: T.StructType, table: pa.Table):
        super().__init__(schema)
        self._table = table
        self._done = False

    def _arrow_schema(self) -> pa.Schema:
        return self._table.schema

    def _next_batch(self) -> pa.RecordBatch | None:
        if self._done:
            return None
        self._done = True
        return self._table.combine_chunks().to_batches()[0] if self._table.num_rows else None

    def rewind(self) -> None:
        self._pending, self._pending_rows, self._offset, self._done = [], 0, 0, False

    def close(self) -> None:
        self._pending = []


class SparkResultSet(_Buffered):
    """`max_rows` (0: none): the stream fails with HoodieResultLimitError as soon as it has produced more rows,
    counted batch by batch as they arrive, so a too large result is never computed, let alone held, in full."""

    def __init__(self, df: DataFrame, max_rows: int = 0):
        super().__init__(df.schema)
        self._max_rows = max_rows
        self._streamed = 0  # rows read off the stream since it (re)started
        self._wire_df = df.select(*wire_columns(df.schema))
        from pyspark.sql.pandas.types import to_arrow_schema

        self._schema = to_arrow_schema(self._wire_df.schema)
        self._batches: Iterator[bytes] | None = None
        self._lock = threading.Lock()
        self._closed = False

    def _arrow_schema(self) -> pa.Schema:
        return self._schema

    def start(self) -> None:
        """Submit the first partition's job and read its first batch (so that a failing query fails here)."""
        from pyspark.core.rdd import _local_iterator_from_socket
        from pyspark.serializers import NoOpSerializer

        sc = self._wire_df.sparkSession.sparkContext
        jrdd = self._wire_df._jdf.toArrowBatchRdd()
        sock_info = sc._jvm.PythonRDD.toLocalIteratorAndServe(jrdd, False)
        self._batches = _local_iterator_from_socket(sock_info, NoOpSerializer())
        first = self._next_batch()
        if first is not None:
            self._pending, self._pending_rows = [first], first.num_rows

    def _next_batch(self) -> pa.RecordBatch | None:
        if self._batches is None or self._closed:
            return None
        payload = next(self._batches, None)
        if payload is None:
            self._batches = None
            return None
        batch = pa.ipc.read_record_batch(pa.ipc.read_message(pa.py_buffer(payload)), self._schema)
        self._count(batch.num_rows)
        return batch

    def _count(self, rows: int) -> None:
        self._streamed += rows
        if self._max_rows and self._streamed > self._max_rows:
            self._stop_stream()  # no further partitions are computed
            self._pending, self._pending_rows = [], 0
            raise HoodieResultLimitError(
                f"the result has more than {self._max_rows} rows, the most this server returns (a partial result "
                f"would be a wrong answer): add a LIMIT or a filter, or raise {LIMIT_SETTINGS['max_result_rows']}")

    def rewind(self) -> None:
        if self._offset == 0:
            return
        self._stop_stream()
        self._pending, self._pending_rows, self._offset, self._streamed = [], 0, 0, 0
        self.start()

    def _stop_stream(self) -> None:
        batches, self._batches = self._batches, None
        if batches is not None:
            try:
                batches.close()  # tells the JVM to stop serving partitions
            except Exception as exc:  # the JVM side may be gone already (cancelled job)
                log.debug("closing a result stream: %s", exc)

    def close(self) -> None:
        self._closed = True
        self._stop_stream()
        self._pending = []
