"""HoodieCommitMetadata and HoodieWriteStat: JSON in table v6 (as Jackson writes it), Avro in v8+."""
from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field, fields
from typing import Any

NULL_COMMIT = "null"  # prevCommit of a new file group, a string as Java writes it


@dataclass
class RuntimeStats:
    totalScanTime: int = 0
    totalUpsertTime: int = 0
    totalCreateTime: int = 0


@dataclass
class HoodieWriteStat:
    """Statistics of one file written by one commit (field names and order as Java Hudi writes them)."""

    fileId: str = ""
    path: str | None = None
    cdcStats: dict | None = None
    prevCommit: str | None = NULL_COMMIT
    numWrites: int = 0
    numDeletes: int = 0
    numUpdateWrites: int = 0
    numInserts: int = 0
    totalWriteBytes: int = 0
    totalWriteErrors: int = 0
    tempPath: str | None = None
    partitionPath: str = ""
    totalLogRecords: int = 0
    totalLogFilesCompacted: int = 0
    totalLogSizeCompacted: int = 0
    totalUpdatedRecordsCompacted: int = 0
    totalLogBlocks: int = 0
    totalCorruptLogBlock: int = 0
    totalRollbackBlocks: int = 0
    fileSizeInBytes: int = 0
    minEventTime: int | None = None
    maxEventTime: int | None = None
    runtimeStats: RuntimeStats | None = None
    # merge-on-read log writes
    logVersion: int | None = None
    logOffset: int | None = None
    baseFile: str | None = None
    logFiles: list[str] | None = None
    prevBaseFile: str | None = None

    _OPTIONAL_MOR = ("logVersion", "logOffset", "baseFile", "logFiles", "prevBaseFile")

    def to_json_dict(self) -> dict[str, Any]:
        out = {}
        for f in fields(self):
            value = getattr(self, f.name)
            if f.name in self._OPTIONAL_MOR and value is None:
                continue
            out[f.name] = asdict(value) if isinstance(value, RuntimeStats) else value
        return out

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "HoodieWriteStat":
        known = {f.name for f in fields(cls)}
        kwargs = {k: v for k, v in data.items() if k in known}
        rt = kwargs.get("runtimeStats")
        if isinstance(rt, dict):
            kwargs["runtimeStats"] = RuntimeStats(**{k: rt.get(k) or 0 for k in ("totalScanTime", "totalUpsertTime", "totalCreateTime")})
        for name in ("numWrites", "numDeletes", "numUpdateWrites", "numInserts", "totalWriteBytes", "fileSizeInBytes"):
            if kwargs.get(name) is None:
                kwargs[name] = 0
        return cls(**kwargs)

    @property
    def file_name(self) -> str | None:
        return self.path.rsplit("/", 1)[-1] if self.path else None


@dataclass
class HoodieCommitMetadata:
    partitionToWriteStats: dict[str, list[HoodieWriteStat]] = field(default_factory=dict)
    compacted: bool = False
    extraMetadata: dict[str, str] = field(default_factory=dict)
    operationType: str | None = None
    partitionToReplaceFileIds: dict[str, list[str]] | None = None  # replacecommit only

    def write_stats(self) -> list[HoodieWriteStat]:
        return [s for stats in self.partitionToWriteStats.values() for s in stats]

    def add_write_stat(self, stat: HoodieWriteStat) -> None:
        self.partitionToWriteStats.setdefault(stat.partitionPath, []).append(stat)

    @property
    def schema(self) -> str | None:
        return self.extraMetadata.get("schema")

    def written_file_names(self) -> set[str]:
        names = set()
        for stat in self.write_stats():
            if stat.path:
                names.add(stat.file_name)
            for log in stat.logFiles or []:
                names.add(log.rsplit("/", 1)[-1])
        return names

    def replaced_file_ids(self) -> set[tuple[str, str]]:
        return {(p, fid) for p, ids in (self.partitionToReplaceFileIds or {}).items() for fid in ids}

    def to_json_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "partitionToWriteStats": {p: [s.to_json_dict() for s in stats] for p, stats in self.partitionToWriteStats.items()},
            "compacted": self.compacted,
            "extraMetadata": dict(self.extraMetadata),
            "operationType": self.operationType,
        }
        if self.partitionToReplaceFileIds is not None:
            out["partitionToReplaceFileIds"] = self.partitionToReplaceFileIds
        return out

    def to_json_bytes(self) -> bytes:
        return jackson_pretty(self.to_json_dict()).encode("utf-8")

    @property
    def is_replace(self) -> bool:
        return self.partitionToReplaceFileIds is not None

    def to_avro_record(self, replace: bool | None = None, table_version: int = 6) -> dict[str, Any]:
        """The Avro HoodieCommitMetadata (or, with `replace`, HoodieReplaceCommitMetadata) record, field by field
        as Hudi converts its Jackson form (`replace` None: a replace record when file groups are replaced), for
        the Hudi release that writes `table_version` (1.1's replace record has `compacted`)."""
        from storage.avro.models import HUDI_1_1_TABLE_VERSION, model_schema

        replace = self.is_replace if replace is None else replace
        stat_fields = [f["name"] for f in model_schema("HoodieWriteStat")["fields"]]
        stats = {p: [_avro_stat(s.to_json_dict(), stat_fields) for s in lst]
                 for p, lst in self.partitionToWriteStats.items()}
        # Hudi 1.x leaves `version` unset in the instant files it writes (every v8/v9 fixture)
        record: dict[str, Any] = {"partitionToWriteStats": stats, "extraMetadata": dict(self.extraMetadata),
                                  "version": None if table_version >= 8 else 1,
                                  "operationType": "COMPACT" if self.compacted else self.operationType}
        if replace:
            record["partitionToReplaceFileIds"] = self.partitionToReplaceFileIds or {}
        if not replace or table_version >= HUDI_1_1_TABLE_VERSION:
            record["compacted"] = self.compacted
        return record

    def to_bytes(self, table_version: int) -> bytes:
        """The instant file content for a table of `table_version`: Jackson JSON in timeline layout 1 (version 6),
        an Avro object container in layout 2 (versions 8 and 9, where every non-empty instant file is Avro)."""
        if table_version < 8:
            return self.to_json_bytes()
        from storage.avro.container import write_avro_container
        from storage.avro.models import models_for

        name = "HoodieReplaceCommitMetadata" if self.is_replace else "HoodieCommitMetadata"
        return write_avro_container(models_for(table_version)[name], self.to_avro_record(table_version=table_version))

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "HoodieCommitMetadata":
        stats = {
            p: [HoodieWriteStat.from_dict(s) for s in (lst or [])]
            for p, lst in (data.get("partitionToWriteStats") or {}).items()
        }
        return cls(
            partitionToWriteStats=stats,
            compacted=bool(data.get("compacted") or False),
            extraMetadata={k: v for k, v in (data.get("extraMetadata") or {}).items() if v is not None},
            operationType=data.get("operationType"),
            partitionToReplaceFileIds=data.get("partitionToReplaceFileIds"),
        )

    @classmethod
    def from_bytes(cls, data: bytes) -> "HoodieCommitMetadata":
        """Parse v6 JSON or v8 Avro container bytes; empty content is empty metadata."""
        if not data.strip():
            return cls()
        if data[:4] == b"Obj\x01":
            from storage.avro.container import read_avro_container

            return cls.from_dict(read_avro_container(data))
        return cls.from_dict(json.loads(data.decode("utf-8")))


def _avro_stat(stat: dict[str, Any], fields: list[str]) -> dict[str, Any]:
    out = {f: stat.get(f) for f in fields}
    rt = stat.get("runtimeStats")
    if isinstance(rt, dict):
        out["runtimeStats"] = {k: rt.get(k) for k in ("totalScanTime", "totalCreateTime", "totalUpsertTime")}
    return out


def jackson_pretty(value: Any, indent: int = 0) -> str:
    """JSON pretty-printed the way Jackson's default pretty printer does (`"key" : value`, 2-space indent)."""
    pad = "  " * indent
    if isinstance(value, dict):
        if not value:
            return "{ }"
        items = [f'{pad}  {json.dumps(str(k))} : {jackson_pretty(v, indent + 1)}' for k, v in value.items()]
        return "{\n" + ",\n".join(items) + f"\n{pad}}}"
    if isinstance(value, list):
        if not value:
            return "[ ]"
        return "[ " + ", ".join(jackson_pretty(v, indent) for v in value) + " ]"
    return json.dumps(value)
