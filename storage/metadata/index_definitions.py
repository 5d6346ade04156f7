"""The index definitions of a table (Hudi 1.x's HoodieIndexMetadata: `.hoodie/.index_defs/index.json`, named by
`hoodie.table.index.defs.path`): per metadata-table index its type, function and source columns. Java writes one
for every index it builds - column_stats with the columns it indexes, record_index, secondary indexes - so a
writer keeping Java's column_stats in step indexes the same columns.

Format (checked against Java 1.1's v9 fixtures): a JSON object `{"indexDefinitions": {name: {"indexName",
"indexType", "indexFunction", "sourceFields": [...], "indexOptions": {...}, "version"}}}`.
"""
from __future__ import annotations

import json
import logging
from dataclasses import dataclass

from storage.config import TableConfigKeys as TK
from storage.table.meta_client import HoodieTableMetaClient

log = logging.getLogger(__name__)

COLUMN_STATS_INDEX = "column_stats"


@dataclass(frozen=True)
class IndexDefinition:
    """One entry of index.json (Hudi's HoodieIndexDefinition)."""

    index_name: str
    index_type: str
    index_function: str = ""
    source_fields: tuple[str, ...] = ()
    index_options: tuple[tuple[str, str], ...] = ()  # as written, in order
    version: str = "V1"

    @classmethod
    def from_json(cls, data: dict) -> "IndexDefinition":
        return cls(str(data.get("indexName") or ""), str(data.get("indexType") or ""),
                   str(data.get("indexFunction") or ""), tuple(data.get("sourceFields") or ()),
                   tuple((str(k), str(v)) for k, v in (data.get("indexOptions") or {}).items()),
                   str(data.get("version") or "V1"))


def index_definitions(meta: HoodieTableMetaClient) -> dict[str, IndexDefinition]:
    """The table's index definitions by name ({} when it has none; a file that does not parse is warned about
    and treated as none: it only names columns, and the writer's own options still decide)."""
    relative = meta.table_config.props.get(TK.INDEX_DEFS_PATH.key)
    if not relative:
        return {}
    path = f"{meta.base_path}/{relative.lstrip('/')}"
    if not meta.storage.exists(path):
        return {}
    try:
        data = json.loads(meta.storage.read_bytes(path))
        return {name: IndexDefinition.from_json(entry)
                for name, entry in (data.get("indexDefinitions") or {}).items()}
    except (ValueError, AttributeError, TypeError) as exc:
        log.warning("index definitions %s of %s do not parse (%s); ignored", path, meta.base_path, exc)
        return {}


DEFAULT_INDEX_DEFS_PATH = ".hoodie/.index_defs/index.json"


def to_json(definition: IndexDefinition) -> dict:
    return {"indexName": definition.index_name, "indexType": definition.index_type,
            "indexFunction": definition.index_function, "sourceFields": list(definition.source_fields),
            "indexOptions": dict(definition.index_options), "version": definition.version}


def _write_definitions(meta: HoodieTableMetaClient, definitions: dict[str, IndexDefinition]) -> None:
    """Replace index.json with `definitions` (Java's layout: two-space JSON), naming its path in the table config
    when it is not named yet."""
    relative = meta.table_config.props.get(TK.INDEX_DEFS_PATH.key)
    if not relative:
        relative = DEFAULT_INDEX_DEFS_PATH
        meta.update_table_config({TK.INDEX_DEFS_PATH.key: relative})
    body = {"indexDefinitions": {name: to_json(d) for name, d in definitions.items()}}
    path = f"{meta.base_path}/{relative.lstrip('/')}"
    meta.storage.mkdirs(path.rsplit("/", 1)[0])
    meta.storage.write_atomic(path, json.dumps(body, indent=2).encode("utf-8"))


def put_index_definition(meta: HoodieTableMetaClient, definition: IndexDefinition) -> None:
    """Add (or replace) `definition` in the table's index.json (table versions 8/9 only: version 6 has none)."""
    definitions = index_definitions(meta)
    definitions[definition.index_name] = definition
    _write_definitions(meta, definitions)


def remove_index_definition(meta: HoodieTableMetaClient, index_name: str) -> bool:
    """Remove `index_name` from index.json; False when it was not there."""
    definitions = index_definitions(meta)
    if definitions.pop(index_name, None) is None:
        return False
    _write_definitions(meta, definitions)
    return True


def column_stats_columns(meta: HoodieTableMetaClient) -> tuple[str, ...] | None:
    """The columns the table's column_stats definition names, or None (no definition)."""
    definition = index_definitions(meta).get(COLUMN_STATS_INDEX)
    return definition.source_fields or None if definition is not None else None


RECORD_INDEX = "record_index"
SECONDARY_INDEX_TYPE = "secondary_index"
SECONDARY_INDEX_PREFIX = "secondary_index_"
_IDENTITY = ("", "identity")


def secondary_index_definitions(meta: HoodieTableMetaClient) -> dict[str, IndexDefinition]:
    """The table's secondary indexes by MDT partition name (`secondary_index_<name>`): those over one column as
    it is stored (function identity) - an expression index's keys are a function's values, not the column's."""
    return {name: d for name, d in index_definitions(meta).items()
            if d.index_type == SECONDARY_INDEX_TYPE and d.index_function in _IDENTITY and len(d.source_fields) == 1}


def record_index_is_partitioned(meta: HoodieTableMetaClient) -> bool:
    """Is the record index Hudi 1.1's partitioned one (`isPartitioned` option: keys unique per partition only,
    file groups per data partition)? Readers here only know the global layout."""
    definition = index_definitions(meta).get(RECORD_INDEX)
    options = dict(definition.index_options) if definition is not None else {}
    return options.get("isPartitioned", "false").strip().lower() == "true"
