"""show_table_properties, copy_to_temp_view, stats_file_sizes."""
from __future__ import annotations

import fnmatch
import math

from sqlext.sql.procedures.registry import optional, procedure, required
from storage.config import HoodieConfig, ReadConfigKeys as RK
from storage.fs_utils import parse_base_file_name
from storage.io.storage import HoodieStorage


@procedure("show_table_properties", [optional("table", "string"), optional("path", "string"),
                                     optional("limit", "int", 10)],
           "key string, value string", "the table's hoodie.properties")
def show_table_properties(call, args):
    meta = call.meta_client(args)
    return sorted(meta.table_config.props.items())[: max(args["limit"], 0)]


_QUERY_TYPES = ("snapshot", "incremental", "read_optimized")


@procedure("copy_to_temp_view",
           [required("table", "string"), optional("query_type", "string", "snapshot"), required("view_name", "string"),
            optional("begin_instance_time", "string", ""), optional("end_instance_time", "string", ""),
            optional("as_of_instant", "string", ""), optional("replace", "boolean", False),
            optional("global", "boolean", False)],
           "status int", "register a (snapshot, time-travel, incremental or read-optimized) read of the table as a "
                         "temporary view")
def copy_to_temp_view(call, args):
    from storage.read import read_table

    ref = call.table_ref(args["table"])
    query_type = (args["query_type"] or "snapshot").lower()
    if query_type not in _QUERY_TYPES:
        raise call.error(f"query_type '{args['query_type']}': expected {', '.join(_QUERY_TYPES)}")
    options = {RK.QUERY_TYPE.key: query_type}
    if query_type == "snapshot" and args["as_of_instant"]:
        options[RK.AS_OF_INSTANT.key] = args["as_of_instant"]
    if query_type == "incremental":
        if not args["begin_instance_time"] or not args["end_instance_time"]:
            raise call.error("when the query_type is incremental, begin_instance_time and end_instance_time "
                             "can not be null")
        options[RK.BEGIN_INSTANTTIME.key] = args["begin_instance_time"]
        options[RK.END_INSTANTTIME.key] = args["end_instance_time"]
    frame = read_table(call.spark, ref.path, HoodieConfig.of(options))
    view = args["view_name"]
    try:
        if args["global"]:
            (frame.createOrReplaceGlobalTempView if args["replace"] else frame.createGlobalTempView)(view)
        else:
            (frame.createOrReplaceTempView if args["replace"] else frame.createTempView)(view)
    except Exception as exc:
        from sqlext.sql.assign import spark_message

        raise call.error(f"cannot create view '{view}': {spark_message(exc)} (replace => true replaces it)") from exc
    return [(0,)]


@procedure("stats_file_sizes", [required("table", "string"), optional("partition_path", "string", ""),
                                optional("limit", "int", 10)],
           "commit_time string, min long, `10th` double, `50th` double, avg double, `95th` double, max long, "
           "num_files int, std_dev double",
           "base file size histogram per commit and for all files")
def stats_file_sizes(call, args):
    """`partition_path` is a glob of partition paths (e.g. '*/*'); empty means every partition."""
    ref = call.table_ref(args["table"])
    sizes: dict[str, list[int]] = {}
    for instant, size in _base_files(ref.path, args["partition_path"] or ""):
        sizes.setdefault(instant, []).append(size)
    rows = [_histogram(instant, values) for instant, values in sorted(sizes.items())]
    rows.append(_histogram("ALL", [v for values in sizes.values() for v in values]))
    return rows[: max(args["limit"], 0)]


def _base_files(base: str, pattern: str):
    base = base.rstrip("/")
    for info in HoodieStorage.for_path(base).list_files(base):
        rel, _, name = info.path[len(base) + 1:].rpartition("/")
        if any(part.startswith(".") for part in rel.split("/") if part):
            continue
        if pattern and not fnmatch.fnmatchcase(rel, pattern.strip("/")):
            continue
        parsed = parse_base_file_name(name)
        if parsed is not None:
            yield parsed.instant_time, info.size


def _histogram(label: str, values: list[int]) -> tuple:
    """What a Codahale UniformReservoir snapshot reports (quantiles interpolated, sample std dev)."""
    if not values:
        return (label, 0, 0.0, 0.0, 0.0, 0.0, 0, 0, 0.0)
    v = sorted(values)
    n = len(v)
    mean = sum(v) / n
    std = math.sqrt(sum((x - mean) ** 2 for x in v) / (n - 1)) if n > 1 else 0.0
    return (label, v[0], _quantile(v, 0.1), _quantile(v, 0.5), mean, _quantile(v, 0.95), v[-1], n, std)


def _quantile(v: list[int], q: float) -> float:
    pos = q * (len(v) + 1)
    if pos < 1:
        return float(v[0])
    if pos >= len(v):
        return float(v[-1])
    lower, upper = v[int(pos) - 1], v[int(pos)]
    return lower + (pos - math.floor(pos)) * (upper - lower)
