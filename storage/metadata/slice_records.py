"""The records of one file slice as a snapshot read sees them, read in this process for the metadata table's
index writers (record_index, secondary indexes): only the record key, an indexed column and what merging needs
(the ordering field, `_hoodie_is_deleted`); log records merged with the table's merge mode
(`storage.merge.record_merger.merge_records`, the one merge of the engine), log deletes applied."""
from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from storage.config import HoodieConfig
from storage.exception import HoodieIndexError
from storage.file_group.log_scanner import HoodieMergedLogRecordScanner
from storage.io.parquet import read_parquet
from storage.merge.merge_resolver import resolve_merge_spec
from storage.merge.record_merger import BASE_WRITE_SEQ, WRITE_SEQ, merge_records
from storage.merge.schema_conform import conform_table
from storage.meta_fields import IS_DELETED, RECORD_KEY
from storage.table.file_slice import FileSlice
from storage.table.meta_client import HoodieTableMetaClient
from storage.table.schema_resolver import table_data_schema


class SliceRecords:
    """Merged (record key[, `column`]) rows of the data table's file slices. `schema`: the table's data schema
    when known (else read from a base file); `purpose` names the index in errors."""

    def __init__(self, meta: HoodieTableMetaClient, column: str | None, schema: pa.Schema | None, purpose: str):
        if not meta.table_config.populate_meta_fields:
            raise HoodieIndexError(f"{meta.base_path}: {purpose} needs the meta fields (the record keys are read "
                                   f"from {RECORD_KEY}); this table does not store them")
        self.meta, self.storage, self.column, self.purpose = meta, meta.storage, column, purpose
        self.spec = resolve_merge_spec(meta.table_config, meta.table_config.precombine_field or None, HoodieConfig())
        self.data_schema = schema
        self._schema: pa.Schema | None = None

    def schema(self, sample_file: str | None) -> pa.Schema:
        """The columns read: the record key, the column, the ordering field and the delete marker when the table
        has them (types from the table's schema, else from a base file)."""
        if self._schema is None:
            data = self.data_schema
            if data is None or (self.column is not None and self.column not in data.names):
                data = table_data_schema(self.meta, None, sample_file)
            if self.column is not None and (data is None or self.column not in data.names):
                raise HoodieIndexError(f"{self.meta.base_path}: column {self.column!r} of {self.purpose} is not in "
                                       f"the table's schema")
            fields = [pa.field(RECORD_KEY, pa.string())] + ([data.field(self.column)] if self.column else [])
            ordering = self.spec.ordering_field
            if data is not None and self.spec.by_event_time and ordering and ordering in data.names \
                    and ordering != self.column:
                fields.append(data.field(ordering))
            if data is not None and IS_DELETED in data.names:
                fields.append(data.field(IS_DELETED))
            self._schema = pa.schema(fields)
        return self._schema

    def rows(self, file_slice: FileSlice, visible: Callable[[str], bool]) -> pa.Table:
        """The live records of `file_slice` (record key[, column]), one row a key, null keys left out."""
        base = file_slice.base_file
        schema = self.schema(base.path if base else None)
        kept = [RECORD_KEY] + ([self.column] if self.column else [])
        if not file_slice.log_files:  # nothing to merge: the key and the column only
            schema = pa.schema([schema.field(n) for n in kept])
        if base is not None:
            rows = conform_table(read_parquet(self.storage, base.path, schema.names), schema, base.path)
        else:
            rows = schema.empty_table()
        if file_slice.log_files:
            scan = HoodieMergedLogRecordScanner([lf.path for lf in file_slice.sorted_log_files()], schema, visible,
                                                ordering_field=self.spec.ordering_field, storage=self.storage).scan()
            if scan.records.num_rows or scan.deletes.num_rows:
                rows = rows.append_column(WRITE_SEQ, pa.array(np.full(rows.num_rows, BASE_WRITE_SEQ, np.int64)))
                merge = self.spec.for_ordering_field(self.spec.ordering_field
                                                     if self.spec.ordering_field in schema.names else None)
                rows = merge_records(pa.concat_tables([rows, scan.records.select(rows.column_names)]),
                                     scan.deletes, merge.mode, merge.ordering_field)
        return rows.select(kept).filter(pc.is_valid(rows[RECORD_KEY]))
