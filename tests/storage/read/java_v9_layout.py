"""Turn a table written here (table version 6, timeline layout 1) into the table version 9 form Java Hudi 1.1
writes: its `hoodie.properties` keys (as in hudi-rs's `v9_timebasedkeygen_*` samples written by Hudi 1.1.1) and
timeline layout 2 — instant files under `.hoodie/timeline/`, completed instants named
`<requested>_<completed>.<action>`, commit metadata as Avro container files. The data files stay as they are.

Log files get the version 8+ name too: `.<fileId>_<deltacommit that wrote it>.log.1_<token>` (version 6 names
them after the slice's base instant; each of our writes creates its own log file, so every file has one writer).

The metadata table is dropped (`hoodie.table.metadata.partitions` too): its `files` partition lists the
version 6 log names and its own timeline is version 6's.

A test helper: the shared Java fixtures have no timestamp-key-generator table of version 9.
"""
from __future__ import annotations

import json
import os
import shutil
from datetime import timedelta
from pathlib import Path

from storage.avro.container import write_avro_container
from storage.avro.models import HOODIE_COMMIT_METADATA, HOODIE_REPLACE_COMMIT_METADATA
from storage.table.properties_file import format_properties, parse_properties
from storage.table.table_config import table_checksum
from storage.fs_utils import make_log_file_name, parse_log_file_name
from storage.timeline.instant import Action, State, parse_instant_file_name
from storage.timeline.instant_time import format_instant, parse_instant

# keys Java 1.1 no longer writes at version 9 (replaced by the v9 keys set below)
_DROPPED = ("hoodie.table.keygenerator.class", "hoodie.table.precombine.field", "hoodie.compaction.payload.class",
            "hoodie.compaction.record.merger.strategy", "hoodie.table.checksum")
_KEYGEN_TYPES = {"TimestampBasedKeyGenerator": "TIMESTAMP", "SimpleKeyGenerator": "SIMPLE",
                 "ComplexKeyGenerator": "COMPLEX", "NonpartitionedKeyGenerator": "NON_PARTITION",
                 "CustomKeyGenerator": "CUSTOM"}


def to_java_v9(base: str | Path) -> Path:
    """Rewrite the table at `base` in place into its version 9 form; returns `base`."""
    meta = Path(base) / ".hoodie"
    timeline = meta / "timeline"
    shutil.rmtree(meta / "metadata", ignore_errors=True)
    (timeline / "history").mkdir(parents=True, exist_ok=True)
    renamed = _rename_log_files(Path(base), meta)
    for entry in sorted(meta.iterdir()):
        instant = parse_instant_file_name(entry.name) if entry.is_file() else None
        if instant is not None:
            _move_instant(entry, instant, timeline, renamed)
    props_path = meta / "hoodie.properties"
    props = v9_properties(parse_properties(props_path.read_text()))
    props_path.write_text(format_properties(props))
    return Path(base)


def v9_properties(v6: dict[str, str]) -> dict[str, str]:
    props = {k: v for k, v in v6.items() if k not in _DROPPED and not k.startswith("hoodie.table.metadata.partitions")}
    keygen = v6.get("hoodie.table.keygenerator.class", "").rsplit(".", 1)[-1]
    if keygen:
        props["hoodie.table.keygenerator.type"] = _KEYGEN_TYPES[keygen]
    ordering = v6.get("hoodie.table.precombine.field")
    if ordering:
        props["hoodie.table.ordering.fields"] = ordering
    props.update({
        "hoodie.table.version": "9", "hoodie.table.initial.version": "9", "hoodie.table.format": "native",
        "hoodie.timeline.layout.version": "2", "hoodie.timeline.path": "timeline",
        "hoodie.timeline.history.path": "history",
        "hoodie.record.merge.mode": _merge_mode(v6, ordering),
    })
    props["hoodie.table.checksum"] = str(table_checksum(props))
    return props


def _rename_log_files(base: Path, meta: Path) -> dict[str, str]:
    """Give every log file its version 8+ name; returns old -> new paths relative to `base`."""
    renamed = {}
    for commit in sorted(meta.glob("*.deltacommit")):
        instant = commit.name.split(".")[0]
        for stats in json.loads(commit.read_text()).get("partitionToWriteStats", {}).values():
            for stat in stats:
                old = stat.get("path") or ""
                parsed = parse_log_file_name(old.rsplit("/", 1)[-1])
                if parsed is None:
                    continue
                directory = old.rsplit("/", 1)[0] if "/" in old else ""
                new = f"{directory}/{make_log_file_name(parsed.file_id, instant, 1, parsed.write_token)}".lstrip("/")
                (base / old).rename(base / new)
                renamed[old] = new
    return renamed


def _merge_mode(v6: dict[str, str], ordering: str | None) -> str:
    """The merge mode Hudi's upgrade gives the table's payload class (commit time for the default
    OverwriteWithLatestAvroPayload), so the copy merges as the original did."""
    payload = v6.get("hoodie.compaction.payload.class", "OverwriteWithLatestAvroPayload")
    return "EVENT_TIME_ORDERING" if ordering and payload.endswith("DefaultHoodieRecordPayload") else "COMMIT_TIME_ORDERING"


def _move_instant(path: Path, instant, timeline: Path, renamed: dict[str, str]) -> None:
    data = path.read_bytes()
    if instant.action in Action.WRITE_ACTIONS and instant.state is not State.REQUESTED and data.strip():
        data = _avro_commit_metadata(data, instant.action, renamed)
    if instant.is_completed:
        instant = instant.with_state(State.COMPLETED, _completion_time(path, instant.timestamp))
    (timeline / instant.file_name(2)).write_bytes(data)
    path.unlink()


def _completion_time(path: Path, requested: str) -> str:
    """When the instant completed: the completed file's modification time (UTC, as the instant times here),
    at least 1 ms after the request."""
    from datetime import datetime, timezone

    written = datetime.fromtimestamp(os.stat(path).st_mtime, timezone.utc).replace(tzinfo=None)
    return format_instant(max(written, parse_instant(requested) + timedelta(milliseconds=1)))


def _avro_commit_metadata(data: bytes, action: str, renamed: dict[str, str]) -> bytes:
    if data[:4] == b"Obj\x01":
        return data
    doc = json.loads(data)
    for stats in (doc.get("partitionToWriteStats") or {}).values():
        for stat in stats:
            stat["path"] = renamed.get(stat.get("path"), stat.get("path"))
            if stat.get("logFiles"):
                stat["logFiles"] = [renamed.get(f"{stat['partitionPath']}/{n}".lstrip("/"), n).rsplit("/", 1)[-1]
                                    for n in stat["logFiles"]]
    replace = action == Action.REPLACE_COMMIT
    schema = HOODIE_REPLACE_COMMIT_METADATA if replace else HOODIE_COMMIT_METADATA
    stat_fields = _write_stat_fields(schema)
    record = {
        "partitionToWriteStats": {p: [{k: v for k, v in s.items() if k in stat_fields} for s in stats]
                                  for p, stats in (doc.get("partitionToWriteStats") or {}).items()},
        "extraMetadata": doc.get("extraMetadata") or {},
        "version": 1,
        "operationType": doc.get("operationType"),
    }
    if replace:
        record["partitionToReplaceFileIds"] = doc.get("partitionToReplaceFileIds") or {}
    else:
        record["compacted"] = bool(doc.get("compacted"))
    return write_avro_container(schema, record)


def _write_stat_fields(schema: dict) -> set[str]:
    stats = next(f for f in schema["fields"] if f["name"] == "partitionToWriteStats")
    stat_record = [t for t in stats["type"] if isinstance(t, dict)][0]["values"]["items"]
    return {f["name"] for f in stat_record["fields"]}


def store_as_string(base: str | Path, instant: str, column: str) -> list[Path]:
    """Do to a table version 6 table what Java Hudi 1.1's SQL UPDATE / DELETE do to a timestamp key generator's
    partition column (its reader shows the column as a string and the rewrite keeps that type): the base
    files `instant` wrote store `column` as a string, and the instant's commit metadata records a string.
    Returns the rewritten files."""
    import pyarrow as pa
    import pyarrow.compute as pc
    import pyarrow.parquet as pq

    rewritten = []
    for path in sorted(Path(base).rglob(f"*_{instant}.parquet")):
        if ".hoodie" in path.parts:
            continue
        footer = pq.read_metadata(path).metadata
        table = pq.read_table(path)
        index = table.schema.get_field_index(column)
        table = table.set_column(index, pa.field(column, pa.string()), pc.cast(table[column], pa.string()))
        pq.write_table(table.replace_schema_metadata({k: v for k, v in footer.items() if k != b"ARROW:schema"}), path)
        rewritten.append(path)
    commit = Path(base) / ".hoodie" / f"{instant}.commit"
    doc = json.loads(commit.read_text())
    schema = json.loads(doc["extraMetadata"]["schema"])
    for field in schema["fields"]:
        if field["name"] == column:
            field["type"] = ["null", "string"]
    doc["extraMetadata"]["schema"] = json.dumps(schema)
    commit.write_text(json.dumps(doc))
    return rewritten
