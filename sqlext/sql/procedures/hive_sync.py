"""hive_sync: a full sync of a Hudi table into the Hive Metastore (catalog.hive_sync via the SQL resolver)."""
from __future__ import annotations

from storage.config import HiveSyncConfigKeys as HK
from sqlext.sql.procedures.registry import optional, procedure, required


@procedure("hive_sync",
           [required("table", "string"), optional("metastore_uri", "string", ""),
            optional("partition_fields", "string", ""), optional("partition_extractor_class", "string", "")],
           "result boolean, synced_table string, added_partitions int, dropped_partitions int, "
           "last_commit_time_sync string",
           "sync the table's schema and partitions to the Hive Metastore (lists every partition)")
def hive_sync(call, args):
    from catalog.hive_sync import HiveSyncError
    from sqlext.sql.metastore_resolver import run_hive_sync

    options = {}
    if args["partition_fields"]:
        options[HK.PARTITION_FIELDS.key] = args["partition_fields"]
    if args["partition_extractor_class"]:
        options[HK.PARTITION_EXTRACTOR_CLASS.key] = args["partition_extractor_class"]
    call.table_ref(args["table"])  # names the table in the error when it is not a Hudi table
    try:
        report = run_hive_sync(call.resolver, args["table"], options, args["metastore_uri"] or None)
    except (HiveSyncError, ValueError) as exc:
        raise call.error(str(exc)) from exc
    return [(report.ok, t.table, len(t.added_partitions), len(t.dropped_partitions), t.last_commit_time_sync)
            for t in report.tables] or [(report.ok, None, 0, 0, None)]
