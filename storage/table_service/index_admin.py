"""A table's metadata-table indexes on request (Hudi's SQL `CREATE INDEX record_index`, `DROP INDEX`,
`SHOW INDEXES`), each change under the table lock so that no writer commits in between.

- `drop_index` resolves the name as Hudi's DropIndexCommand does (the MDT partition name as the table config lists
  it, else an index.json definition whose name without its `secondary_index_` / `expr_index_` prefix is the given
  one), then unlists and deletes the MDT partition and removes the index.json entry (Hudi's `dropIndex`).
- `create_record_index` builds the `record_index` partition from the table as it stands (the metadata writer's
  bootstrap with `hoodie.metadata.record.index.enable` on), which also writes its index.json entry.
- `create_secondary_index` defines a secondary index in index.json and builds its partition (the metadata writer
  keeps every defined secondary index from then on).
- `show_indexes` lists them as Hudi's ShowIndexesCommand does.
"""
from __future__ import annotations

import logging

import pyarrow as pa

from storage.config import HoodieConfig
from storage.config import MetadataConfigKeys as MK
from storage.exception import HoodieIndexError
from storage.metadata.index_definitions import (
    RECORD_INDEX,
    SECONDARY_INDEX_PREFIX,
    IndexDefinition,
    index_definitions,
    put_index_definition,
    remove_index_definition,
)
from storage.metadata.metadata_writer import drop_metadata_partitions, prepare_metadata_table
from storage.metadata.table_metadata import FILES, enabled_partitions
from storage.table.meta_client import HoodieTableMetaClient
from storage.transaction.transaction_manager import TransactionManager

log = logging.getLogger(__name__)

EXPRESSION_INDEX_PREFIX = "expr_index_"
# Hudi's "generic" indexes (MetadataPartitionType.isGenericIndex): named by the user, described by index.json
GENERIC_INDEX_PREFIXES = (SECONDARY_INDEX_PREFIX, EXPRESSION_INDEX_PREFIX)


def user_index_name(partition: str) -> str:
    """Hudi's getIndexNameWithoutPrefix: `merchant_idx` for `secondary_index_merchant_idx` (and `expr_index_`);
    the other indexes (record_index, column_stats, bloom_filters, partition_stats) are named by their partition."""
    for prefix in GENERIC_INDEX_PREFIXES:
        if partition.startswith(prefix):
            return partition[len(prefix):]
    return partition


def resolve_index(meta: HoodieTableMetaClient, name: str) -> list[str]:
    """The MDT partitions / index.json entries DROP INDEX `name` means (Hudi's DropIndexCommand): the partition
    of that name when the table config lists it, else every index definition whose user name is `name` (an SI
    and an expression index of one name are both meant). Case-insensitive, as Spark identifiers are."""
    wanted = name.strip().strip("`").lower()
    listed = [p for p in enabled_partitions(meta) if p.lower() == wanted]
    if listed:
        return listed
    return sorted(d for d in index_definitions(meta)
                  if d.lower() == wanted or user_index_name(d).lower() == wanted)


def drop_index(base_path: str, name: str, config: HoodieConfig = HoodieConfig()) -> str | None:
    """DROP INDEX `name` on the table at `base_path`: unlist and delete its MDT partition and remove its index.json
    entry. Returns the dropped index's partition name (several joined by `,` when one name means several, as in
    Hudi), None when the table has no such index (the caller decides whether that is an error: Hudi's "Index does
    not exist"). `files` is refused: it is the metadata table's file listing, not an index (CALL
    delete_metadata_table removes the metadata table)."""
    meta = HoodieTableMetaClient.load(base_path)
    with TransactionManager.for_table(meta, config).transaction(f"drop index {name}"):
        meta = meta.reload()
        targets = resolve_index(meta, name)
        if FILES in targets:
            raise HoodieIndexError(f"{FILES} is the metadata table's file listing, not an index: CALL "
                                   f"delete_metadata_table removes the metadata table of {base_path}")
        if not targets:
            return None
        dropped = drop_metadata_partitions(meta, targets, f"drop index {name}")
        removed = [t for t in targets if remove_index_definition(meta.reload(), t)]
    found = sorted(set(dropped) | set(removed))
    if not found:
        return None
    log.info("drop index %s on %s: dropped partitions [%s], index definitions [%s]", name, base_path,
             ", ".join(dropped), ", ".join(removed))
    return ",".join(found)


def create_record_index(base_path: str, config: HoodieConfig = HoodieConfig()) -> bool:
    """Build the table's `record_index` MDT partition (and the metadata table, when it has none) from the data
    table as it stands, and keep it in step from now on in this process - Hudi's CREATE INDEX record_index.
    `config`: the table's write options (which other MDT partitions the writer keeps follow them, as for any
    write). Returns whether the table lists `record_index` afterwards."""
    if not config.get(MK.ENABLE):
        log.warning("create index record_index on %s: %s is off in the table's options; its next write removes "
                    "the metadata table, record_index with it", base_path, MK.ENABLE.key)
    enabled = config.with_values({MK.ENABLE.key: True, MK.RECORD_INDEX_ENABLE.key: True})
    meta = HoodieTableMetaClient.load(base_path)
    with TransactionManager.for_table(meta, enabled).transaction("create index record_index"):
        prepare_metadata_table(meta.reload(), enabled, "create index record_index")
    built = RECORD_INDEX in enabled_partitions(meta.reload())
    if not built:
        log.warning("create index record_index on %s: the metadata writer did not build record_index (table "
                    "version %s)", base_path, meta.table_config.version)
    return built


def create_secondary_index(base_path: str, name: str, column: str, config: HoodieConfig = HoodieConfig()) -> str:
    """Define secondary index `name` on `column` (index.json: V2 on table version 9, V1 on 8) and build it from
    the table as it stands - Hudi's CREATE INDEX name ON t (column). As Hudi: the column must be of a type the
    index can spell (string, integer, float, double, date, timestamp), the record index must exist or be enabled
    in the options (it is then built first), and version 6 tables have no index definitions. A build that fails
    leaves no definition behind. Returns the MDT partition."""
    from storage.metadata import secondary_index_writer as si
    from storage.table.schema_resolver import table_data_schema

    meta = HoodieTableMetaClient.load(base_path)
    if meta.table_config.version < 8:
        raise HoodieIndexError(f"Cannot create secondary index '{name}' on {base_path}: table version "
                               f"{meta.table_config.version} has no index definitions (secondary indexes need "
                               f"table version 8 or 9)")
    schema = table_data_schema(meta)
    field = schema.field(column) if schema is not None and column in schema.names else None
    if field is None:
        raise HoodieIndexError(f"Cannot create secondary index '{name}': Column '{column}' does not exist")
    si.secondary_values(pa.array([], field.type))  # raises for a type the index cannot hold
    if RECORD_INDEX not in enabled_partitions(meta) and not config.get(MK.RECORD_INDEX_ENABLE):
        raise HoodieIndexError(f"Record index is required for secondary index '{name}': CREATE INDEX record_index "
                               f"first, or enable {MK.RECORD_INDEX_ENABLE.key}")
    partition = SECONDARY_INDEX_PREFIX + name
    definition = IndexDefinition(partition, "secondary_index", "identity", (column,), (),
                                 "V2" if meta.table_config.version >= 9 else "V1")
    enabled = config.with_values({MK.ENABLE.key: True})
    with TransactionManager.for_table(meta, enabled).transaction(f"create index {name}"):
        meta = meta.reload()
        put_index_definition(meta, definition)
        try:
            prepare_metadata_table(meta, enabled, f"create index {name}")
        except BaseException:
            remove_index_definition(meta.reload(), partition)
            raise
    log.info("create index %s on %s: secondary index on %s built", name, base_path, column)
    return partition


def show_indexes(base_path: str) -> list[tuple[str, str, str]]:
    """SHOW INDEXES: one row per MDT partition the table config lists, `files` excepted, in name order.

    Hudi's ShowIndexesCommand names its output columns (index_name, col_name, index_type) but fills them with
    (partition, index type, source columns): a secondary / expression index gives (`secondary_index_<name>`,
    its lower-case index type from index.json, its source fields joined by ","), so col_name holds the *type* and
    index_type the *columns*; every other partition gives (partition, partition, ""). Rows here are exactly
    Hudi's, values in Hudi's positions, so scripts and tools written against Java Hudi read the same thing.
    (A generic index the table lists without an index.json entry - Java fails on it - gives its type from its
    prefix and no columns.) Java's row order is that of a set; here it is sorted."""
    meta = HoodieTableMetaClient.load(base_path)
    definitions = index_definitions(meta)
    rows = []
    for partition in enabled_partitions(meta):
        if partition == FILES:
            continue
        if partition.startswith(GENERIC_INDEX_PREFIXES):
            definition = definitions.get(partition) or IndexDefinition(partition, _prefix_type(partition))
            rows.append((partition, definition.index_type.lower(), ",".join(definition.source_fields)))
        else:
            rows.append((partition, partition, ""))
    return rows


def _prefix_type(partition: str) -> str:
    return "secondary_index" if partition.startswith(SECONDARY_INDEX_PREFIX) else "expression_index"
