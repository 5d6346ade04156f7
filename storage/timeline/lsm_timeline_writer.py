"""Writing the LSM archived timeline (Hudi 1.x's LSMTimelineWriter): a batch of archived actions becomes one
layer-0 data file, layers are merged downwards, and files no recent snapshot lists are cleaned.

Every change publishes a new snapshot the same way: the data file is written whole first (invisible while no
manifest lists it), then `manifest_<N+1>`, then `_version_` = N+1. A writer that dies before `_version_` leaves
readers on snapshot N; the next writer numbers from `_version_` again and overwrites the unpublished manifest.

Layer compaction: once a layer holds `hoodie.timeline.compaction.batch.size` files (default 10), its oldest
consecutive files (by name; at most the batch size, at least 2, stopping once their total size passes the size cap)
are merged into `<min>_<max>_<layer+1>.parquet`, published as a snapshot that lists the merged file instead of
them; then the next layer is looked at. Clean, after every archival: when more manifests than the retained
versions plus the merges just done exist, older manifests are deleted, then every data file none of the kept
manifests lists (merged-away files, and files of writes that died before their manifest).
"""
from __future__ import annotations

import logging
from dataclasses import dataclass

from storage.io.storage import HoodieStorage
from storage.timeline.lsm_timeline import (
    VERSION_FILE,
    LSMFileEntry,
    LSMFileName,
    LSMManifest,
    LSMTimeline,
    LSMTimelineInstant,
    manifest_file_name,
    manifest_version,
    rows_to_parquet,
)

log = logging.getLogger(__name__)

LAYER_ZERO = 0
# LSMTimelineWriter of Hudi 1.0/1.1: merges stop at 1000 MiB of source files, clean keeps 3 snapshots (later
# releases make both configurable)
COMPACTION_MAX_BYTES = 1000 * 1024 * 1024
RETAINED_MANIFESTS = 3
DEFAULT_COMPACTION_BATCH_SIZE = 10


@dataclass
class LSMTimelineWriter:
    timeline: LSMTimeline
    compaction_batch_size: int = DEFAULT_COMPACTION_BATCH_SIZE
    compaction_max_bytes: int = COMPACTION_MAX_BYTES
    retained_manifests: int = RETAINED_MANIFESTS

    @property
    def storage(self) -> HoodieStorage:
        return self.timeline.storage

    # -- archiving ---------------------------------------------------------------------------------
    def write(self, rows: list[LSMTimelineInstant]) -> str:
        """Archive `rows` as one layer-0 file and publish it; the file's name. A file of the same name the latest
        snapshot already lists is kept as it is (an archival that died after publishing it, before deleting the
        active instants, is being redone)."""
        if not rows:
            raise ValueError("no archived actions to write")
        rows = sorted(rows, key=lambda r: r.instant_time)
        name = LSMFileName(rows[0].instant_time, rows[-1].instant_time, LAYER_ZERO).name
        self.storage.mkdirs(self.timeline.path)
        if name in self.timeline.manifest().file_names():
            log.info("%s is already in the archived timeline of %s", name, self.timeline.path)
            return name
        self.write_data_file(name, rows)
        self.publish([], name)
        return name

    def write_data_file(self, name: str, rows: list[LSMTimelineInstant]) -> None:
        """Written whole (it replaces an unpublished file of that name a dead writer left)."""
        self.storage.write_atomic(self.timeline.file_path(name), rows_to_parquet(rows))

    def publish(self, removed: list[str], added: str) -> int:
        """A new snapshot: the latest manifest without `removed`, with `added`; its version."""
        current = self.timeline.latest_version()
        entry = LSMFileEntry(added, self.storage.size(self.timeline.file_path(added)))
        manifest = self.timeline.manifest(current).without(removed).with_file(entry)
        version = current + 1 if current >= 0 else 1
        self.write_manifest(version, manifest)
        self.write_version(version)
        return version

    def write_manifest(self, version: int, manifest: LSMManifest) -> None:
        # replaces a manifest of this number a writer left unpublished (it died before `_version_`)
        self.storage.write_atomic(self.timeline.file_path(manifest_file_name(version)), manifest.to_json().encode())

    def write_version(self, version: int) -> None:
        self.storage.write_atomic(self.timeline.file_path(VERSION_FILE), str(version).encode())

    # -- layer compaction --------------------------------------------------------------------------
    def compact_and_clean(self) -> list[str]:
        """Merge full layers from layer 0 down, then clean; the merged files written."""
        merged: list[str] = []
        layer = LAYER_ZERO
        while (name := self.compact_layer(layer)) is not None:
            merged.append(name)
            layer += 1
        self.clean(len(merged))
        return merged

    def compact_layer(self, layer: int) -> str | None:
        """Merge the oldest files of `layer` into one file of the next layer, if the layer is full; its name."""
        files = self.timeline.manifest().in_layer(layer)
        if len(files) < self.compaction_batch_size:
            return None
        sources = self._merge_candidates(files)
        if len(sources) < 2:
            return None  # every file is too large to merge
        target = LSMFileName.covering(sources, layer + 1).name
        self.write_data_file(target, [row for name in sources for row in self.timeline.read_file(name)])
        self.publish(sources, target)
        log.info("merged %d layer-%d files of %s into %s", len(sources), layer, self.timeline.path, target)
        return target

    def _merge_candidates(self, files: list[LSMFileEntry]) -> list[str]:
        """At most a batch of consecutive files, at least 2, stopping once their size passes the cap; a single
        file over the cap is passed over."""
        chosen: list[str] = []
        total = 0
        for entry in files:
            chosen.append(entry.file_name)
            total += entry.file_len
            if len(chosen) >= self.compaction_batch_size:
                break
            if total > self.compaction_max_bytes:
                if len(chosen) >= 2:
                    break
                chosen, total = [], 0
        return chosen

    # -- cleaning ----------------------------------------------------------------------------------
    def clean(self, merges: int = 0) -> list[str]:
        """Keep the newest `retained_manifests + merges` manifests and the data files they list; the files
        deleted (manifests first, so no kept snapshot ever lists a deleted file)."""
        versions = sorted(self.timeline.all_versions(), reverse=True)
        keep = versions[: self.retained_manifests + merges]
        if len(versions) <= len(keep):
            return []
        listed = {name for v in keep for name in self.timeline.manifest(v).file_names()}
        infos = self.timeline.list_files()
        manifests = sorted((i for i in infos if manifest_version(i.name) is not None and manifest_version(i.name) not in keep),
                           key=lambda i: manifest_version(i.name))
        data = sorted((i for i in infos if i.name.endswith(".parquet") and i.name not in listed), key=lambda i: i.name)
        for info in manifests + data:
            self.storage.delete(info.path)
        deleted = [i.name for i in manifests + data]
        log.info("cleaned %d files of the archived timeline %s", len(deleted), self.timeline.path)
        return deleted
