"""Hudi's `PartitionValueExtractor`s: a storage partition path -> the metastore partition values.

Selected by `hoodie.datasource.hive_sync.partition_extractor_class` (Java class names accepted, short names
too); the default is `MultiPartKeysValueExtractor` for partitioned tables and `NonPartitionedExtractor` else.
"""
from __future__ import annotations

from typing import Callable
from urllib.parse import unquote

from storage.config import HiveSyncConfigKeys as HK

PartitionValueExtractor = Callable[[str], list[str]]


def multi_part_keys(partition_path: str) -> list[str]:
    """`MultiPartKeysValueExtractor`: one value per path segment, `k=v` segments give `v`."""
    if not partition_path:
        return []
    return [seg.split("=", 1)[1] if "=" in seg else seg for seg in partition_path.strip("/").split("/")]


def hive_style(partition_path: str) -> list[str]:
    """`HiveStylePartitionValueExtractor`: a single `k=v` segment."""
    seg = partition_path.strip("/")
    if "=" not in seg or "/" in seg:
        raise ValueError(f"partition path {partition_path!r} is not a single hive-style k=v segment")
    return [seg.split("=", 1)[1]]


def single_part(partition_path: str) -> list[str]:
    """`SinglePartPartitionValueExtractor`: the whole path is one value (after a k= prefix, if any)."""
    seg = partition_path.strip("/")
    return [seg.split("=", 1)[1] if "=" in seg.split("/")[0] else seg]


def non_partitioned(partition_path: str) -> list[str]:
    """`NonPartitionedExtractor`."""
    return []


def slash_encoded_day(partition_path: str) -> list[str]:
    """`SlashEncodedDayPartitionValueExtractor`: yyyy/mm/dd -> yyyy-mm-dd."""
    parts = partition_path.strip("/").split("/")
    if len(parts) != 3:
        raise ValueError(f"partition path {partition_path!r} is not yyyy/mm/dd")
    y, m, d = (p.split("=", 1)[-1] for p in parts)
    return [f"{int(y):04d}-{int(m):02d}-{int(d):02d}"]


EXTRACTORS: dict[str, PartitionValueExtractor] = {
    "MultiPartKeysValueExtractor": multi_part_keys,
    "HiveStylePartitionValueExtractor": hive_style,
    "SinglePartPartitionValueExtractor": single_part,
    "NonPartitionedExtractor": non_partitioned,
    "SlashEncodedDayPartitionValueExtractor": slash_encoded_day,
}


def extractor_for(class_name: str | None, partitioned: bool, url_encoded: bool = False) -> PartitionValueExtractor:
    if not class_name:
        base = multi_part_keys if partitioned else non_partitioned
    else:
        short = class_name.rsplit(".", 1)[-1]
        if short not in EXTRACTORS:
            raise ValueError(f"unknown partition value extractor {class_name!r} "
                             f"({HK.PARTITION_EXTRACTOR_CLASS.key}); known: {', '.join(EXTRACTORS)}")
        base = EXTRACTORS[short]
    if not url_encoded:
        return base
    # URL-encoded partition paths store escaped values; the metastore keeps the real ones.
    return lambda path: [unquote(v) for v in base(path)]
