"""The metadata table's bloom_filters partition (issue 40): every committed base file's footer filter, byte for byte,
kept by upserts, compaction and clean (tombstones for deleted files), on table versions 6 and 9; and the BLOOM index
with hoodie.bloom.index.use.metadata takes its filters (and key ranges) from the metadata table, giving the same
table as the footer path."""
from __future__ import annotations

import os
import sys
from pathlib import Path

import pyarrow.parquet as pq
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "table_service"))
from service_helpers import expected, options, ours, theirs, write, write_commits  # noqa: E402
from storage.bloom.bloom_filter import BLOOM_FILTER_FOOTER_KEY  # noqa: E402
from storage.index import bloom_index  # noqa: E402
from storage.metadata.bloom_filters import BLOOM_FILTERS  # noqa: E402
from storage.metadata.table_metadata import HoodieTableMetadata, enabled_partitions  # noqa: E402
from storage.table.meta_client import HoodieTableMetaClient  # noqa: E402

BLOOM = {"hoodie.metadata.index.bloom.filter.enable": "true", "hoodie.metadata.index.column.stats.enable": "true",
         "hoodie.cleaner.commits.retained": "1", "hoodie.keep.min.commits": "3", "hoodie.keep.max.commits": "4"}


def _check_bloom_records(path, earlier: dict[str, set[str]] | None = None) -> dict[str, set[str]]:
    """Every committed base file has a live record holding its footer's filter; the files of `earlier` the cleaner
    deleted since have none (tombstoned). The base files listed, per partition."""
    meta = HoodieTableMetaClient.load(str(path))
    assert BLOOM_FILTERS in enabled_partitions(meta)
    metadata = HoodieTableMetadata(meta)
    out = {}
    for partition in metadata.all_partition_paths():
        listed = {n for n in metadata.files_in_partition(partition) if n.endswith(".parquet")}
        on_disk = {n for n in os.listdir(os.path.join(path, partition)) if n.endswith(".parquet")}
        assert listed and listed == on_disk
        records = metadata.bloom_filters(partition, sorted(listed))
        assert set(records) == listed
        for name in listed:
            footer = pq.ParquetFile(os.path.join(path, partition, name)).metadata.metadata
            assert records[name].bloom_filter == footer[BLOOM_FILTER_FOOTER_KEY.encode()]
            assert records[name].type == "DYNAMIC_V0" and not records[name].is_deleted
        if earlier is not None:
            gone = earlier.get(partition, set()) - listed
            assert gone and metadata.bloom_filters(partition, sorted(gone)) == {}
        out[partition] = listed
    return out


@pytest.mark.parametrize("table_type,version", [("COPY_ON_WRITE", "9"), ("MERGE_ON_READ", "6")])
def test_bloom_filters_follow_every_base_file(spark, tmp_path, table_type, version):
    path = tmp_path / f"bf_{version}"
    opts = options(path.name, table_type, **BLOOM, **{"hoodie.write.table.version": version,
                                                     "hoodie.compact.inline": "true",
                                                     "hoodie.compact.inline.max.delta.commits": "2"})
    state = write_commits(spark, path, opts, range(5))
    listed = _check_bloom_records(path)
    meta = HoodieTableMetaClient.load(str(path))
    if table_type == "MERGE_ON_READ":
        assert meta.timeline.completed().of_actions(["commit"])  # compactions wrote base files
    assert meta.timeline.completed().of_actions(["clean"])  # and files were deleted

    # the BLOOM index reading filters from the metadata table: same table as from footers, hudi-rs agrees
    used = bloom_index.METADATA_BLOOMS_USED[0]
    look_up = {**opts, "hoodie.index.type": "BLOOM", "hoodie.bloom.index.use.metadata": "true"}
    state = write_commits(spark, path, look_up, range(5, 7), state)
    assert bloom_index.METADATA_BLOOMS_USED[0] > used
    assert ours(spark, path) == expected(state) == theirs(path)
    _check_bloom_records(path, listed)  # the files cleaned since are tombstoned


def test_metadata_blooms_rule_out_files_unopened(spark, tmp_path):
    """An upsert of keys that only one file holds: the other files' filters (from the metadata table) rule every
    candidate out, and the lookup finds the same locations as the footer path."""
    path = tmp_path / "bf_prune"
    opts = options("bf_prune", **BLOOM)
    for n in range(3):  # three file groups per partition: bulk inserts of disjoint keys
        write(spark, path, [(1000 * (n + 1) + i, f"v{n}", n, f"p{i % 2}") for i in range(20)], opts, "bulk_insert")
    state = {(1000 * (n + 1) + i): (1000 * (n + 1) + i, f"v{n}", n, f"p{i % 2}") for n in range(3) for i in range(20)}
    update = [(2000 + i, "u", 9, f"p{i % 2}") for i in range(4)]
    write(spark, path, update, {**opts, "hoodie.bloom.index.use.metadata": "true"})
    for row in update:
        state[row[0]] = row
    assert ours(spark, path) == expected(state) == theirs(path)
