"""create_metadata_table, init_metadata_table, delete_metadata_table, show_metadata_table_partitions,
show_metadata_table_files, show_metadata_table_column_stats, show_metadata_table_stats,
validate_metadata_table_files: what a table's metadata table (`.hoodie/metadata`) records, with Hudi's parameters
and outputs, and how its `files` partition compares with a listing of the directories."""
from __future__ import annotations

from typing import Any

from sqlext.sql.procedures.registry import optional, procedure, required
from storage.exception import HoodieCorruptedMetadataError, HoodieMetadataNotAvailableError
from storage.fs_utils import relative_partition_path
from storage.metadata.table_metadata import HoodieTableMetadata
from storage.table.file_groups import FileListing, list_table_files

_VALIDATE_OUTPUT = ("partition string, file_name string, is_present_in_fs boolean, is_present_in_metadata boolean, "
                    "fs_size long, metadata_size long")


def _reader(call, args) -> HoodieTableMetadata:
    """The table's metadata table reader; a CALL error when it has none (Hudi: not enabled/initialized)."""
    meta = call.meta_client(args)
    try:
        return HoodieTableMetadata(meta)
    except HoodieMetadataNotAvailableError as exc:
        raise call.error(f"metadata table not enabled/initialized: {exc}") from exc


def _read(call, what):
    """`what()`, a damaged metadata table turned into a CALL error naming the file."""
    try:
        return what()
    except (HoodieMetadataNotAvailableError, HoodieCorruptedMetadataError) as exc:
        raise call.error(str(exc)) from exc


@procedure("show_metadata_table_partitions", [required("table", "string")], "partition string",
           "the data table's partitions as the metadata table's files partition lists them")
def show_metadata_table_partitions(call, args):
    reader = _reader(call, args)
    return [(p,) for p in _read(call, reader.all_partition_paths)]


@procedure("show_metadata_table_files", [required("table", "string"), optional("partition", "string", "")],
           "file_path string", "the files of one partition (\"\": a non-partitioned table) the metadata table lists")
def show_metadata_table_files(call, args):
    reader = _reader(call, args)
    partition = (args["partition"] or "").strip("/")
    return [(name,) for name in sorted(_read(call, lambda: reader.files_in_partition(partition)))]


@procedure("show_metadata_table_column_stats",
           [required("table", "string"), optional("partition", "string", ""), optional("targetColumns", "string", "")],
           "file_name string, column_name string, min_value string, max_value string, null_num long",
           "the column_stats records (of one partition and of the named comma-separated columns when given)")
def show_metadata_table_column_stats(call, args):
    reader = _reader(call, args)
    columns = [c.strip() for c in (args["targetColumns"] or "").split(",") if c.strip()] or None
    partition = (args["partition"] or "").strip("/") or None
    stats = _read(call, lambda: reader.column_stats(partition, columns))
    return [(s.file_name, s.column_name, _text(s.min), _text(s.max), s.null_count) for s in stats]


@procedure("show_metadata_table_stats", [required("table", "string"), optional("filter", "string", "")],
           "stat_key string, stat_value string",
           "sizes and counts of the base and log files of each metadata-table partition's latest slices")
def show_metadata_table_stats(call, args):
    reader = _reader(call, args)
    rows = [(key, str(value)) for key, value in sorted(_read(call, reader.file_stats).items())]
    return call.filtered(call.to_frame(rows), args["filter"])


def _text(value: Any) -> str | None:
    return None if value is None else str(value)


@procedure("validate_metadata_table_files", [required("table", "string"), optional("verbose", "boolean", False)],
           _VALIDATE_OUTPUT,
           "the metadata table's files partition against a listing of the partition directories: the files that "
           "differ (every file when verbose)")
def validate_metadata_table_files(call, args):
    reader = _reader(call, args)
    meta = reader.data_meta
    listed = _by_partition(list_table_files(meta.storage, meta.base_path), meta.base_path)
    recorded = _read(call, lambda: reader.files_in_partitions(sorted(set(reader.all_partition_paths()) | set(listed))))
    rows = []
    for partition in sorted(recorded):
        on_disk, in_mdt = listed.get(partition, {}), recorded[partition]
        for name in sorted(set(on_disk) | set(in_mdt)):
            fs_size, mdt_size = on_disk.get(name, 0), in_mdt.get(name, 0)
            same = name in on_disk and name in in_mdt and fs_size == mdt_size
            if args["verbose"] or not same:
                rows.append((partition, name, name in on_disk, name in in_mdt, fs_size, mdt_size))
    return rows


def _by_partition(listing: FileListing, base_path: str) -> dict[str, dict[str, int]]:
    """Partition -> {file name: size} of a directory listing's data files."""
    out: dict[str, dict[str, int]] = {p: {} for p in listing.partitions}
    for bf in listing.base_files:
        out.setdefault(relative_partition_path(base_path, bf.path.rsplit("/", 1)[0]), {})[bf.name] = bf.size
    for partition, lf in listing.log_files:
        out.setdefault(partition, {})[lf.name] = lf.size
    return out


# ----------------------------------------------------------------------------------------------- lifecycle


def _timed(call, action: str, fn) -> list[tuple]:
    """`fn()` as a CALL (`call.run`), with Hudi's result line."""
    import time

    started = time.monotonic()
    path = call.run(fn)
    return [(f"{action} Metadata Table in {path} (duration={time.monotonic() - started:.3f}secs)",)]


@procedure("create_metadata_table", [required("table", "string")], "result string",
           "create and initialise the table's metadata table (files, and the indexes the session's options "
           "enable); refused when one exists")
def create_metadata_table(call, args):
    from storage.table_service.metadata_table_admin import create_metadata_table as create

    meta = call.meta_client(args)
    return _timed(call, "Created", lambda: create(meta.base_path, call.writer_config(meta)))


@procedure("init_metadata_table", [required("table", "string"), optional("read_only", "boolean", False)],
           "result string", "initialise the partitions the session's options enable and the metadata table lacks "
           "(read_only: only open it)")
def init_metadata_table(call, args):
    from storage.table_service.metadata_table_admin import init_metadata_table as init

    meta = call.meta_client(args)
    action = "Opened" if args["read_only"] else "Initialized"
    return _timed(call, action, lambda: init(meta.base_path, call.writer_config(meta), args["read_only"]))


@procedure("delete_metadata_table", [required("table", "string")], "result string",
           "remove the metadata table of each comma-separated table (writers with the metadata table enabled "
           "build it again)")
def delete_metadata_table(call, args):
    from storage.table_service.metadata_table_admin import delete_metadata_table as delete

    removed = []
    for table in [t.strip() for t in str(args["table"]).split(",") if t.strip()]:
        meta = call.meta_client({**args, "table": table})
        path = call.run(delete, meta.base_path, call.writer_config(meta))
        if path is not None:
            removed.append(path)
    return [(f"Deleted Metadata Table at '{','.join(removed)}'",)]
