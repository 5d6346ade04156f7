"""Repair procedures (Hudi's `repair_*` family): `repair_bloom_filters` rewrites the bloom filter footers this
engine wrote in Hadoop's hash order, so that Java Hudi's bloom index finds every key of the table
(storage.table_service.bloom_repair, imported when called)."""
from __future__ import annotations

from sqlext.sql.procedures.registry import optional, procedure


@procedure("repair_bloom_filters",
           [optional("table", "string"), optional("path", "string"), optional("dry_run", "boolean", False)],
           "partition_path string, file_name string, keys int, action string",
           "rewrite the legacy (Hadoop hash order) bloom filter footers of a table's base files")
def repair_bloom_filters(call, args):
    from storage.table_service.bloom_repair import repair_bloom_filters as repair

    ref = call.table_ref(args.get("table"), args.get("path"))
    meta = call.meta_client(args)
    repaired = call.run(repair, meta, dry_run=args["dry_run"])
    call.resolver.refresh(ref)
    action = "would rewrite" if args["dry_run"] else "rewritten"
    return [(r.partition_path, r.file_name, r.keys, action) for r in repaired]
