"""Peer formats in the same process: delta-rs (`deltalake`) and pyiceberg (SQLite catalog)."""
from __future__ import annotations

import logging
import os

import pyarrow as pa
import pyarrow.compute as pc

from bench.engines.base import Engine, ScanResult
from bench.workloads import KEY, PARTITION, SUM_COLUMN

log = logging.getLogger(__name__)


class DeltaLake(Engine):
    """write_deltalake (load), DeltaTable.merge on id (upsert: update all / insert all; delete: matched delete)."""

    name = "deltalake"
    family = "peer"

    def prepare(self, data: pa.Table, tag: str) -> pa.Table:
        return data

    def load(self, path, data) -> None:
        from deltalake import write_deltalake

        write_deltalake(path, data, partition_by=[PARTITION], mode="overwrite")

    def _merge(self, path, source: pa.Table):
        from deltalake import DeltaTable

        return DeltaTable(path).merge(source=source, predicate=f"t.{KEY} = s.{KEY}", source_alias="s",
                                      target_alias="t")

    def upsert(self, path, batch) -> None:
        self._merge(path, batch).when_matched_update_all().when_not_matched_insert_all().execute()

    def delete(self, path, rows) -> None:
        self._merge(path, rows.select([KEY])).when_matched_delete().execute()

    def _dataset(self, path):
        from deltalake import DeltaTable

        return DeltaTable(path).to_pyarrow_dataset()

    def scan(self, path) -> ScanResult:
        t = self._dataset(path).to_table(columns=[SUM_COLUMN])
        return ScanResult(t.num_rows, pc.sum(t[SUM_COLUMN]).as_py())

    def lookup(self, path, keys) -> ScanResult:
        return ScanResult(self._dataset(path).to_table(filter=pc.field(KEY).isin(keys), columns=[KEY]).num_rows)


class PyIceberg(Engine):
    """pyiceberg with a SQLite catalog: append (load), Table.upsert(join_cols=[id]), Table.delete(In(id, ...))."""

    name = "pyiceberg"
    family = "peer"

    def __init__(self):
        self.catalog = None
        self.workdir = None

    def start(self, workdir: str) -> None:
        from pyiceberg.catalog.sql import SqlCatalog

        self.workdir = os.path.join(workdir, "iceberg")
        os.makedirs(self.workdir, exist_ok=True)
        self.catalog = SqlCatalog("bench", uri=f"sqlite:///{self.workdir}/catalog.db",
                                  warehouse=f"file://{self.workdir}")
        self.catalog.create_namespace_if_not_exists("bench")

    def prepare(self, data: pa.Table, tag: str) -> pa.Table:
        return data

    def _ident(self, path: str) -> str:
        return "bench." + os.path.basename(path.rstrip("/")).replace("-", "_")

    def _table(self, path):
        return self.catalog.load_table(self._ident(path))

    def watch_dir(self, path: str) -> str:
        return path  # data and metadata live under the table location (the SQLite catalog row is not counted)

    def load(self, path, data) -> None:
        ident = self._ident(path)
        if self.catalog.table_exists(ident):
            self.catalog.purge_table(ident)
        table = self.catalog.create_table(ident, schema=data.schema, location=f"file://{path}")
        with table.update_spec() as spec:
            spec.add_identity(PARTITION)
        table.append(data)

    def upsert(self, path, batch) -> None:
        self._table(path).upsert(batch, join_cols=[KEY])

    def delete(self, path, rows) -> None:
        from pyiceberg.expressions import In

        self._table(path).delete(In(KEY, rows[KEY].to_pylist()))

    def scan(self, path) -> ScanResult:
        t = self._table(path).scan(selected_fields=(SUM_COLUMN,)).to_arrow()
        return ScanResult(t.num_rows, pc.sum(t[SUM_COLUMN]).as_py())

    def lookup(self, path, keys) -> ScanResult:
        from pyiceberg.expressions import In

        return ScanResult(self._table(path).scan(row_filter=In(KEY, keys), selected_fields=(KEY,)).to_arrow().num_rows)
