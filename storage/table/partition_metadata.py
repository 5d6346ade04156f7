"""`.hoodie_partition_metadata` (Hudi's HoodiePartitionMetadata): the file that marks a directory as a partition
of the table, naming the instant that created it and the partition's depth below the base path."""
from __future__ import annotations

from datetime import datetime, timezone

from storage.fs_utils import PARTITION_METAFILE, join_path
from storage.io.storage import HoodieStorage


def write_partition_metadata(storage: HoodieStorage, base: str, partition_path: str, instant_time: str) -> None:
    """Create `.hoodie_partition_metadata` once per partition (first writer wins; later calls are no-ops)."""
    path = join_path(base, partition_path, PARTITION_METAFILE)
    depth = len([p for p in partition_path.split("/") if p]) if partition_path else 0
    now = datetime.now(timezone.utc).strftime("%a %b %d %H:%M:%S UTC %Y")
    text = f"#partition metadata\n#{now}\ncommitTime={instant_time}\npartitionDepth={depth}\n"
    storage.create_if_absent(path, text.encode("utf-8"))
