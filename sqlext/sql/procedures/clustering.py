"""run_clustering and show_clustering: the clustering table service (storage.table_service.clustering), with
Hudi's parameters. `predicate` is a SQL condition over the partition columns: it selects the partitions to
cluster (Hudi's partition pruning), evaluated by Spark over the table's partition values."""
from __future__ import annotations

import logging

from sqlext.sql.procedures.compaction import procedure_options
from sqlext.sql.procedures.registry import optional, procedure
from storage.config import ClusteringConfigKeys as CK
from storage.config import HoodieConfig

log = logging.getLogger(__name__)

_OPS = {"schedule": (True, False), "execute": (False, True), "scheduleandexecute": (True, True)}
_OUTPUT = "timestamp string, input_group_size int, state string, involved_partitions string"


def selected_partitions(call, meta, predicate: str) -> list[str]:
    """The partitions whose partition-column values satisfy `predicate`."""
    from pyspark.sql import functions as F

    from sqlext.sql.assign import spark_message
    from storage.keygen.key_generator import partition_values_from_path
    from storage.table.fs_view import table_listing
    from storage.table.schema_resolver import table_data_schema

    config = meta.table_config
    fields = list(config.partition_fields or [])
    if not fields:
        raise call.error(f"predicate '{predicate}': table {meta.base_path} is not partitioned")
    names = [f.partition(":")[0] for f in fields]
    partitions = sorted(table_listing(meta).partitions)
    rows = [(p, *[partition_values_from_path(p, fields, config.hive_style_partitioning).get(n) for n in names])
            for p in partitions]
    frame = call.spark.createDataFrame(rows, ", ".join(["`_partition` string", *[f"`{n}` string" for n in names]]))
    schema = table_data_schema(meta)
    from pyspark.sql.pandas.types import from_arrow_type

    for n in names:
        if schema is not None and n in schema.names:
            frame = frame.withColumn(n, F.col(f"`{n}`").cast(from_arrow_type(schema.field(n).type)))
    try:
        chosen = frame.where(F.expr(predicate)).select("_partition").collect()
    except Exception as exc:
        raise call.error(f"invalid predicate '{predicate}' (a condition over the partition columns "
                         f"{', '.join(names)}): {spark_message(exc)}") from exc
    return [r[0] for r in chosen]


def _rows(meta, instants: set[str], show_partitions: bool) -> list[tuple]:
    from storage.table_service.clustering import show_clustering

    return [(r["timestamp"], r["input_group_size"], r["state"],
             r["involved_partitions"] if show_partitions else "*")
            for r in show_clustering(meta) if r["timestamp"] in instants]


@procedure("run_clustering",
           [optional("table", "string"), optional("path", "string"), optional("predicate", "string"),
            optional("order", "string"), optional("show_involved_partition", "boolean", False),
            optional("op", "string"), optional("order_strategy", "string"), optional("options", "string"),
            optional("instants", "string"), optional("selected_partitions", "string"), optional("limit", "int")],
           _OUTPUT,
           "schedule and/or execute clustering (op: schedule, execute, scheduleAndExecute; order: sort columns; "
           "order_strategy: linear, z-order, hilbert; predicate: partitions to cluster)")
def run_clustering(call, args):
    from storage.exception import HoodieError
    from storage.table.meta_client import HoodieTableMetaClient
    from storage.table_service import clustering

    op = (args.get("op") or "scheduleAndExecute").strip().lower()
    if op not in _OPS:
        raise call.error(f"op '{args['op']}': expected schedule, execute or scheduleAndExecute")
    ref = call.table_ref(args.get("table"), args.get("path"))
    meta = HoodieTableMetaClient.load(ref.path)
    options = procedure_options(call, args.get("options"))
    if args.get("order"):
        options[CK.SORT_COLUMNS.key] = args["order"]
    if args.get("order_strategy"):
        options[CK.LAYOUT_OPTIMIZE_STRATEGY.key] = args["order_strategy"]
    selected = [p.strip() for p in (args.get("selected_partitions") or "").split(",") if p.strip()]
    if args.get("predicate"):
        selected = sorted(set(selected) | set(selected_partitions(call, meta, args["predicate"]))) \
            if selected else selected_partitions(call, meta, args["predicate"])
        if not selected:
            log.info("run_clustering: predicate %r selects no partition of %s", args["predicate"], ref.path)
            return []
    if selected:
        options[CK.PARTITION_SELECTED.key] = ",".join(selected)
    config = meta.table_config.with_options(HoodieConfig.of(options))
    schedule, execute = _OPS[op]
    instants = [t.strip() for t in (args.get("instants") or "").split(",") if t.strip()]
    try:
        scheduled = clustering.schedule_clustering(meta, config, call.spark) if schedule else None
        if not execute:
            targets = [scheduled] if scheduled else []
        else:  # as Hudi: every pending plan (the new one included), or those named by `instants`
            pending = sorted(clustering.pending_clustering_plans_of(meta))
            targets = [t for t in pending if t in set(instants)] if instants else pending
            if instants and not schedule and len(targets) < len(set(instants)):
                missing = sorted(set(instants) - set(targets))
                raise call.error(f"no pending clustering {', '.join(missing)} (pending: {', '.join(pending) or 'none'})")
            if args.get("limit") is not None:
                targets = targets[: max(args["limit"], 0)]
        if execute and targets:
            clustering.run_clustering(call.spark, ref.path, targets, config)
            call.resolver.refresh(ref)
    except HoodieError as exc:
        raise call.error(str(exc)) from exc
    return _rows(HoodieTableMetaClient.load(ref.path), set(targets), bool(args["show_involved_partition"]))


@procedure("show_clustering",
           [optional("table", "string"), optional("path", "string"), optional("limit", "int", 20),
            optional("show_involved_partition", "boolean", False)],
           _OUTPUT, "clustering instants of a table, newest first (pending ones from their plan)")
def show_clustering(call, args):
    from storage.table_service.clustering import show_clustering as rows_of

    meta = call.meta_client(args)
    show = bool(args["show_involved_partition"])
    return [(r["timestamp"], r["input_group_size"], r["state"], r["involved_partitions"] if show else "*")
            for r in rows_of(meta, max(args["limit"], 0))]
