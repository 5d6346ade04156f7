"""The LSM archived timeline of table versions 8 and 9 (Hudi 1.x's LSMTimeline, timeline layout 2): its file
names, its manifests and reading it. Writing, layer compaction and cleaning are lsm_timeline_writer's job.

Archival moves old instants from `.hoodie/timeline/` into `.hoodie/timeline/history/` (`hoodie.timeline.history.path`,
relative to the timeline path):

- data files `<minInstant>_<maxInstant>_<layer>.parquet`: rows of Avro HoodieLSMTimelineInstant written by
  parquet-avro (one row per archived action: its request and completion time, the completed action, the raw bytes
  of the completed instant file as `metadata`, the requested-state content as `plan`); layer 0 holds freshly
  archived batches, layer N+1 the merge of layer-N files;
- `manifest_<N>` (N from 1, one more per change): the data files of snapshot N, as Jackson pretty-prints
  `{"files":[{"fileName":..., "fileLen":...}]}`;
- `_version_`: the number of the latest manifest (text, no newline).

A reader reads `_version_` (the highest `manifest_N` present when it is missing or unreadable), that manifest,
and the files it lists; a file's name gives its instant range, so a range read skips files outside it. Files no
manifest lists (a write or merge that died before its manifest) are invisible. An instant may be in two listed
files (an archival that died after its manifest, before deleting the active instants, archives them again in a
batch of another range): rows are de-duplicated by instant time, as Hudi's ArchivedTimelineV2 does.
"""
from __future__ import annotations

import json
import logging
import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Iterable

import pyarrow as pa

from storage.avro.container import read_avro_container
from storage.avro.models import HOODIE_LSM_TIMELINE_INSTANT
from storage.avro.schema_converter import avro_schema_to_json
from storage.config import TableConfigKeys as K
from storage.io.storage import FileInfo, HoodieStorage
from storage.timeline.commit_metadata import jackson_pretty
from storage.timeline.instant import Action, HoodieInstant, State
from storage.io.parquet import parquet_from_bytes, parquet_to_bytes

if TYPE_CHECKING:  # the meta client loads timelines itself
    from storage.table.meta_client import HoodieTableMetaClient

log = logging.getLogger(__name__)

VERSION_FILE = "_version_"
MANIFEST_PREFIX = "manifest_"
LSM_TIMELINE_INSTANT_VERSION = 1  # LSMTimeline.LSM_TIMELINE_INSTANT_VERSION_1
_MANIFEST_RE = re.compile(r"^manifest_(\d+)$")
_DATA_FILE_RE = re.compile(r"^(\d+)_(\d+)_(\d)\.parquet$")  # one-digit layer, as LSMTimeline's pattern

# parquet-avro's footer keys: Java readers take the Avro schema of the rows from the first
AVRO_SCHEMA_KEY = "parquet.avro.schema"
WRITER_MODEL_KEY = "writer.model.name"
_AVRO_SCHEMA_JSON = avro_schema_to_json(HOODIE_LSM_TIMELINE_INSTANT)
ARROW_SCHEMA = pa.schema([
    pa.field("instantTime", pa.string()),
    pa.field("completionTime", pa.string()),
    pa.field("action", pa.string()),
    pa.field("metadata", pa.binary()),
    pa.field("plan", pa.binary()),
    pa.field("version", pa.int32(), nullable=False),
])


def history_path(meta: HoodieTableMetaClient) -> str:
    """`.hoodie/timeline/history` (`hoodie.timeline.history.path` under the timeline path)."""
    return f"{meta.active_timeline.path}/{meta.table_config.get(K.TIMELINE_HISTORY_PATH) or 'history'}"


# ----------------------------------------------------------------------------------------------- names


@dataclass(frozen=True)
class LSMFileName:
    """`<minInstant>_<maxInstant>_<layer>.parquet`."""

    min_instant: str
    max_instant: str
    layer: int

    @property
    def name(self) -> str:
        return f"{self.min_instant}_{self.max_instant}_{self.layer}.parquet"

    @classmethod
    def parse(cls, name: str) -> LSMFileName | None:
        m = _DATA_FILE_RE.match(name)
        return cls(m.group(1), m.group(2), int(m.group(3))) if m else None

    @classmethod
    def covering(cls, names: Iterable[str], layer: int) -> LSMFileName:
        """The file merging `names` into `layer` (LSMTimelineWriter.compactedFileName)."""
        parsed = [_parse_data_file(n) for n in names]
        return cls(min(p.min_instant for p in parsed), max(p.max_instant for p in parsed), layer)

    def overlaps(self, start: str | None, end: str | None) -> bool:
        """Whether instants in [start, end] (None: open) can be in this file."""
        return (start is None or self.max_instant >= start) and (end is None or self.min_instant <= end)


def _parse_data_file(name: str) -> LSMFileName:
    parsed = LSMFileName.parse(name)
    if parsed is None:
        raise ValueError(f"not an LSM timeline data file name: {name!r}")
    return parsed


def manifest_file_name(version: int) -> str:
    return f"{MANIFEST_PREFIX}{version}"


def manifest_version(name: str) -> int | None:
    m = _MANIFEST_RE.match(name)
    return int(m.group(1)) if m else None


# ----------------------------------------------------------------------------------------------- manifest


@dataclass(frozen=True)
class LSMFileEntry:
    file_name: str
    file_len: int


@dataclass(frozen=True)
class LSMManifest:
    """HoodieLSMTimelineManifest: the data files of one snapshot of the timeline, in the order they were added."""

    files: tuple[LSMFileEntry, ...] = ()

    def file_names(self) -> list[str]:
        return [f.file_name for f in self.files]

    def without(self, names: Iterable[str]) -> LSMManifest:
        gone = set(names)
        return LSMManifest(tuple(f for f in self.files if f.file_name not in gone))

    def with_file(self, entry: LSMFileEntry) -> LSMManifest:
        return LSMManifest((*self.files, entry))

    def in_layer(self, layer: int) -> list[LSMFileEntry]:
        """This layer's files, oldest first (by name, as Hudi sorts them)."""
        return sorted((f for f in self.files if _parse_data_file(f.file_name).layer == layer), key=lambda f: f.file_name)

    def to_json(self) -> str:
        """As Hudi's Jackson mapper pretty-prints it (fields only: `files`, each `fileName` then `fileLen`)."""
        return jackson_pretty({"files": [{"fileName": f.file_name, "fileLen": f.file_len} for f in self.files]})

    @classmethod
    def from_json(cls, text: str) -> LSMManifest:
        """Unknown properties are ignored and an empty file is an empty manifest, as Hudi's reader does."""
        if not text.strip():
            return cls()
        data = json.loads(text)
        return cls(tuple(LSMFileEntry(str(f["fileName"]), int(f.get("fileLen") or 0)) for f in data.get("files") or []))


# ----------------------------------------------------------------------------------------------- rows


@dataclass(frozen=True)
class LSMTimelineInstant:
    """One row of a data file: one archived action (HoodieLSMTimelineInstant)."""

    instant_time: str
    completion_time: str | None
    action: str
    metadata: bytes | None = None
    plan: bytes | None = None
    version: int = LSM_TIMELINE_INSTANT_VERSION

    @property
    def instant(self) -> HoodieInstant:
        """The completed instant this row archives."""
        return HoodieInstant(State.COMPLETED, self.action, self.instant_time, self.completion_time)

    def pending_instant(self) -> HoodieInstant | None:
        """The requested instant the row's plan came from, for actions whose plan names their pending action: a
        commit with a plan was a compaction, a deltacommit one a log compaction, a clean its cleaner plan, a
        replacecommit a clustering (its plan asks for one) or an insert overwrite. The row does not store which
        pending state the plan was read from; the requested one is named."""
        if not self.plan:
            return None
        pending = {Action.COMMIT: Action.COMPACTION, Action.DELTA_COMMIT: Action.LOG_COMPACTION,
                   Action.CLEAN: Action.CLEAN}.get(self.action)
        if self.action == Action.REPLACE_COMMIT:
            try:
                plan = self.plan_record() or {}
            except ValueError as exc:  # a damaged plan must not hide the archived instant itself
                log.warning("cannot read the archived plan of %s: %s", self.instant_time, exc)
                plan = {}
            pending = Action.CLUSTERING if plan.get("operationType") == "CLUSTER" else Action.REPLACE_COMMIT
        return HoodieInstant(State.REQUESTED, pending, self.instant_time) if pending else None

    def metadata_record(self) -> dict[str, Any] | None:
        return _decode(self.metadata)

    def plan_record(self) -> dict[str, Any] | None:
        return _decode(self.plan)

    def to_row(self) -> dict[str, Any]:
        return {"instantTime": self.instant_time, "completionTime": self.completion_time, "action": self.action,
                "metadata": self.metadata, "plan": self.plan, "version": self.version}

    @classmethod
    def from_row(cls, row: dict[str, Any]) -> LSMTimelineInstant:
        return cls(row["instantTime"], row.get("completionTime"), row.get("action") or "", row.get("metadata"),
                   row.get("plan"), row.get("version") or LSM_TIMELINE_INSTANT_VERSION)


def _decode(data: bytes | None) -> dict[str, Any] | None:
    """An instant file's content: Avro in table versions 8+, JSON in files a v6 table wrote before its upgrade."""
    if not data:
        return None
    if data[:4] == b"Obj\x01":
        return read_avro_container(data)
    return json.loads(data.decode("utf-8"))


def rows_to_parquet(rows: Iterable[LSMTimelineInstant]) -> bytes:
    """A data file as parquet-avro writes it: the Avro schema in the footer, where Java's reader looks for it."""
    table = pa.Table.from_pylist([r.to_row() for r in rows], schema=ARROW_SCHEMA)
    # gzip: Hudi's default parquet codec (hoodie.parquet.compression.codec)
    return parquet_to_bytes(table, "gzip", {AVRO_SCHEMA_KEY: _AVRO_SCHEMA_JSON, WRITER_MODEL_KEY: "avro"})


def rows_from_parquet(data: bytes) -> list[LSMTimelineInstant]:
    return [LSMTimelineInstant.from_row(r) for r in parquet_from_bytes(data).read().to_pylist()]


# ----------------------------------------------------------------------------------------------- reading


@dataclass
class LSMTimeline:
    """The history folder of one table: its snapshots and their instants."""

    storage: HoodieStorage
    path: str

    @classmethod
    def for_table(cls, meta: HoodieTableMetaClient) -> LSMTimeline:
        return cls(meta.storage, history_path(meta))

    def file_path(self, name: str) -> str:
        return f"{self.path}/{name}"

    def exists(self) -> bool:
        return self.storage.is_dir(self.path)

    def list_files(self) -> list[FileInfo]:
        return [i for i in self.storage.list_dir(self.path) if not i.is_dir] if self.exists() else []

    def all_versions(self) -> list[int]:
        """Every manifest number present, ascending."""
        return sorted(v for v in (manifest_version(i.name) for i in self.list_files()) if v is not None)

    def latest_version(self) -> int:
        """`_version_`'s number; the highest manifest present when it is missing or unreadable; -1: no snapshot."""
        try:
            return int(self.storage.read_text(self.file_path(VERSION_FILE)).strip())
        except FileNotFoundError:
            pass
        except (ValueError, OSError) as exc:
            log.warning("cannot read %s (%s): using the highest manifest present", self.file_path(VERSION_FILE), exc)
        return max(self.all_versions(), default=-1)

    def manifest(self, version: int | None = None) -> LSMManifest:
        """Snapshot `version` (the latest when None); the empty manifest when there is none."""
        version = self.latest_version() if version is None else version
        if version < 0:
            return LSMManifest()
        return LSMManifest.from_json(self.storage.read_text(self.file_path(manifest_file_name(version))))

    def read_file(self, name: str) -> list[LSMTimelineInstant]:
        return rows_from_parquet(self.storage.read_bytes(self.file_path(name)))

    def instants(self, start: str | None = None, end: str | None = None) -> list[LSMTimelineInstant]:
        """The archived actions with instant time in [start, end] (None: open) of the latest snapshot, one per
        instant time, in time order."""
        rows: dict[str, LSMTimelineInstant] = {}
        for name in sorted(self.manifest().file_names()):
            parsed = LSMFileName.parse(name)
            if parsed is not None and not parsed.overlaps(start, end):
                continue
            for row in self.read_file(name):
                ts = row.instant_time
                if (start and ts < start) or (end and ts > end):
                    continue
                rows.setdefault(ts, row)
        return [rows[ts] for ts in sorted(rows)]
