"""Clustering plans (Hudi's SparkSizeBasedClusteringPlanStrategy with ClusteringPlanPartitionFilter): which file
slices are rewritten together, saved as `<t>.replacecommit.requested` holding an
Avro HoodieRequestedReplaceMetadata (operationType CLUSTER) whose HoodieClusteringPlan lists the groups.

- Partitions: `hoodie.clustering.plan.strategy.partition.selected` when given (the procedure's predicate ends up
  here), else every partition matching `...partition.regex.pattern`, then `hoodie.clustering.plan.partition.filter.mode`:
  NONE; RECENT_DAYS (newest partitions by name, skipping `...skip.partitions.from.latest`, keeping
  `...daybased.lookback.partitions`); SELECTED_PARTITIONS (`...cluster.begin.partition` <= p <= `...end.partition`);
  DAY_ROLLING (the partitions whose position modulo 24 is the current hour: each partition once a day).
- Candidates: the latest file slices whose base file is below `...small.file.limit` (a slice without a base file
  counts as 0), outside pending compactions and other pending clusterings.
- Groups per partition: slices by size, largest first, filled up to `...max.bytes.per.group` (a log-only slice
  weighs `hoodie.parquet.max.file.size`, as Hudi); each group writes ceil(bytes / `...target.file.max.bytes`)
  files; at most `...max.num.groups` groups; a lone slice forms a group only with
  `...single.group.clustering.enabled`.
"""
from __future__ import annotations

import datetime
import math
import re
from dataclasses import dataclass
from typing import Any

from storage.avro.container import write_avro_container
from storage.avro.models import field_names, models_for
from storage.config import ClusteringConfigKeys as CK
from storage.config import HoodieConfig
from storage.config import WriteConfigKeys as WK
from storage.exception import HoodieClusteringError
from storage.table.file_slice import FileSlice
from storage.table.pending_plans import (  # noqa: F401 - the plans' readers, named here for the services
    clustering_plan_of,
    is_pending_clustering,
    pending_clustering_file_groups,
    pending_clustering_plans,
    plan_file_groups,
    requested_replace_metadata,
)

CLUSTER_OPERATION = "CLUSTER"  # WriteOperationType.CLUSTER
PLAN_VERSION = 1
SORT_COLUMNS_PARAM = CK.SORT_COLUMNS.key
LAYOUT_PARAM = CK.LAYOUT_OPTIMIZE_STRATEGY.key


@dataclass(frozen=True)
class ClusteringPlanConfig:
    small_file_limit: int
    max_bytes_per_group: int
    max_num_groups: int
    target_file_max_bytes: int
    parquet_max_file_size: int
    single_group: bool
    filter_mode: str
    skip_from_latest: int
    lookback: int
    begin: str | None
    end: str | None
    regex: str | None
    selected: tuple[str, ...] | None
    sort_columns: tuple[str, ...]
    layout: str
    execution_strategy: str

    @classmethod
    def of(cls, config: HoodieConfig) -> "ClusteringPlanConfig":
        selected = config.get(CK.PARTITION_SELECTED)
        return cls(config.get(CK.SMALL_FILE_LIMIT), config.get(CK.MAX_BYTES_PER_GROUP), config.get(CK.MAX_NUM_GROUPS),
                   config.get(CK.TARGET_FILE_MAX_BYTES), config.get(WK.PARQUET_MAX_FILE_SIZE),
                   config.get(CK.SINGLE_GROUP_CLUSTERING), config.get(CK.PARTITION_FILTER_MODE),
                   config.get(CK.SKIP_PARTITIONS_FROM_LATEST), config.get(CK.DAYBASED_LOOKBACK_PARTITIONS),
                   config.get(CK.BEGIN_PARTITION), config.get(CK.END_PARTITION), config.get(CK.PARTITION_REGEX_PATTERN),
                   tuple(selected) if selected is not None else None, tuple(config.get(CK.SORT_COLUMNS) or ()),
                   str(config.get(CK.LAYOUT_OPTIMIZE_STRATEGY)), config.get(CK.EXECUTION_STRATEGY_CLASS))


# -- partitions -----------------------------------------------------------------------------------------------
def filter_partitions(partitions: list[str], cfg: ClusteringPlanConfig,
                      now: datetime.datetime | None = None) -> list[str]:
    """The partitions a plan considers (see the module doc), in table order."""
    if cfg.selected is not None:
        wanted = set(cfg.selected)
        return [p for p in partitions if p in wanted]
    if cfg.regex:
        try:
            pattern = re.compile(cfg.regex)
        except re.error as exc:
            raise HoodieClusteringError(f"invalid {CK.PARTITION_REGEX_PATTERN.key} {cfg.regex!r}: {exc}") from None
        partitions = [p for p in partitions if pattern.fullmatch(p)]
    mode = cfg.filter_mode
    if mode == "NONE":
        return list(partitions)
    if mode == "RECENT_DAYS":
        newest = sorted(partitions, reverse=True)[max(cfg.skip_from_latest, 0):]
        keep = set(newest[:cfg.lookback] if cfg.lookback > 0 else newest)
        return [p for p in partitions if p in keep]
    if mode == "SELECTED_PARTITIONS":
        if cfg.begin is None or cfg.end is None:
            raise HoodieClusteringError(f"{CK.PARTITION_FILTER_MODE.key}=SELECTED_PARTITIONS needs "
                                        f"{CK.BEGIN_PARTITION.key} and {CK.END_PARTITION.key}")
        return [p for p in partitions if cfg.begin <= p <= cfg.end]
    hour = (now or datetime.datetime.now()).hour  # DAY_ROLLING
    return [p for i, p in enumerate(partitions) if i % 24 == hour]


# -- groups ---------------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class ClusteringGroup:
    slices: tuple[FileSlice, ...]
    num_output_file_groups: int

    @property
    def partition_path(self) -> str:
        return self.slices[0].partition_path


def _slice_weight(s: FileSlice, cfg: ClusteringPlanConfig) -> int:
    return s.base_file.size if s.base_file is not None else cfg.parquet_max_file_size


def eligible_slices(slices: list[FileSlice], cfg: ClusteringPlanConfig,
                    excluded: set[tuple[str, str]]) -> list[FileSlice]:
    return [s for s in slices if (s.partition_path, s.file_id) not in excluded and not s.is_empty()
            and (s.base_file.size if s.base_file is not None else 0) < cfg.small_file_limit]


def output_file_groups(total_bytes: int, target_file_max_bytes: int) -> int:
    return max(1, math.ceil(total_bytes / max(1, target_file_max_bytes)))


def build_groups(slices: list[FileSlice], cfg: ClusteringPlanConfig) -> list[ClusteringGroup]:
    """Groups of one partition's eligible slices."""
    groups: list[ClusteringGroup] = []
    current: list[FileSlice] = []
    total = 0

    def close() -> None:
        if current and (cfg.single_group or len(current) > 1):
            groups.append(ClusteringGroup(tuple(current), output_file_groups(total, cfg.target_file_max_bytes)))

    for s in sorted(slices, key=lambda x: (-_slice_weight(x, cfg), x.file_id)):
        weight = _slice_weight(s, cfg)
        if current and total + weight > cfg.max_bytes_per_group:
            close()
            current, total = [], 0
        current.append(s)
        total += weight
    close()
    return groups


def plan_groups(slices: list[FileSlice], cfg: ClusteringPlanConfig) -> list[ClusteringGroup]:
    by_partition: dict[str, list[FileSlice]] = {}
    for s in slices:
        by_partition.setdefault(s.partition_path, []).append(s)
    groups = [g for p in sorted(by_partition) for g in build_groups(by_partition[p], cfg)]
    return groups[:max(cfg.max_num_groups, 0)]


# -- the plan as Hudi stores it -----------------------------------------------------------------------------
def _slice_info(s: FileSlice) -> dict[str, Any]:
    return {"dataFilePath": s.base_file.path if s.base_file else "",
            "deltaFilePaths": [lf.path for lf in s.sorted_log_files()],
            "fileId": s.file_id, "partitionPath": s.partition_path, "bootstrapFilePath": "", "version": 1}


def _group_metrics(group: ClusteringGroup) -> dict[str, float]:
    base = sum(s.base_file.size for s in group.slices if s.base_file)
    logs = [lf for s in group.slices for lf in s.log_files]
    log_bytes = sum(lf.size for lf in logs)
    mb = 1024 * 1024
    return {"TOTAL_IO_READ_MB": (base + log_bytes) / mb, "TOTAL_IO_WRITE_MB": base / mb,
            "TOTAL_IO_MB": (2 * base + log_bytes) / mb, "TOTAL_LOG_FILE_SIZE": float(log_bytes),
            "TOTAL_LOG_FILES": float(len(logs))}


def plan_record(groups: list[ClusteringGroup], cfg: ClusteringPlanConfig) -> dict[str, Any]:
    params = {LAYOUT_PARAM: cfg.layout}
    if cfg.sort_columns:
        params[SORT_COLUMNS_PARAM] = ",".join(cfg.sort_columns)
    return {
        "operationType": CLUSTER_OPERATION,
        "clusteringPlan": {
            "inputGroups": [{"slices": [_slice_info(s) for s in g.slices], "metrics": _group_metrics(g),
                             "numOutputFileGroups": g.num_output_file_groups, "extraMetadata": None, "version": 1}
                            for g in groups],
            "strategy": {"strategyClassName": cfg.execution_strategy, "strategyParams": params, "version": 1},
            "extraMetadata": {}, "version": PLAN_VERSION, "preserveHoodieMetadata": True},
        "extraMetadata": {}, "version": 1,
    }


def encode_plan(record: dict[str, Any], table_version: int) -> bytes:
    """The requested clustering instant's content, in the schema of the Hudi release that writes `table_version`
    (1.1 records the partitions it skipped while scheduling: none here)."""
    models = models_for(table_version)
    if "missingSchedulePartitions" in field_names(models["HoodieClusteringPlan"]):
        record = {**record, "clusteringPlan": {**record["clusteringPlan"], "missingSchedulePartitions": []}}
    return write_avro_container(models["HoodieRequestedReplaceMetadata"], record)
