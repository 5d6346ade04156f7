"""Hudi's meta columns, written first in every record (spec §7)."""
from __future__ import annotations

import pyarrow as pa

COMMIT_TIME = "_hoodie_commit_time"
COMMIT_SEQNO = "_hoodie_commit_seqno"
RECORD_KEY = "_hoodie_record_key"
PARTITION_PATH = "_hoodie_partition_path"
FILE_NAME = "_hoodie_file_name"
META_COLUMNS = (COMMIT_TIME, COMMIT_SEQNO, RECORD_KEY, PARTITION_PATH, FILE_NAME)
OPERATION_COLUMN = "_hoodie_operation"
IS_DELETED = "_hoodie_is_deleted"


def meta_schema() -> list[pa.Field]:
    return [pa.field(name, pa.string()) for name in META_COLUMNS]


def with_meta_columns(data_schema: pa.Schema) -> pa.Schema:
    fields = [f for f in data_schema if f.name not in META_COLUMNS]
    return pa.schema(meta_schema() + fields)
