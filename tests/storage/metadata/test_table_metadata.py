"""Reading Java's metadata tables (`storage.metadata.table_metadata`): the partition list and file listings of
the `files` partition against the data table's own directories and timeline, column stats against the parquet
footers, partition stats against the column stats, time travel, the valid-instant rule, and damaged files.

The oracles here are derived from the files on disk and the instant file names, not from the engine's timeline or
file-system code (except where a test says it uses the engine's file-system view for slicing)."""
from __future__ import annotations

import os
import random
import re
import shutil
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest

from fixture_tables import copy_fixture
from storage.exception import HoodieCorruptedMetadataError, HoodieMetadataNotAvailableError
from storage.metadata.records import ColumnStats, FileInfo, FileListing, WrappedValue
from storage.metadata.table_metadata import (
    COLUMN_STATS,
    FILES,
    HoodieTableMetadata,
    KeyQuery,
    combine_column_stats,
    combine_file_listings,
    enabled_partitions,
    is_metadata_table_available,
)
from storage.table.fs_view import FileSystemView
from storage.table.meta_client import HoodieTableMetaClient

FIXTURES = ("sample_cow_v9_txns_simple_meta", "sample_mor_avro_v9_txns_simple_meta", "trips_mor_avro_v8_trips_8i3u1d")
MOR_V9 = "sample_mor_avro_v9_txns_simple_meta"
_COMPLETED = re.compile(r"^(\d{17})_(\d{17})\.([a-z]+)$")
_BASE = re.compile(r"^.+_\d+-\d+-\d+_(\d+)\.parquet$")
_LOG = re.compile(r"^\..+_(\d+)\.log\.\d+_\d+-\d+-\d+$")


# ----------------------------------------------------------------------------------------------- oracles


def completed_data_instants(base: Path) -> dict[str, str]:
    """Request time -> completion time of the data table's completed instants (from the instant file names)."""
    out = {}
    for name in os.listdir(base / ".hoodie" / "timeline"):
        m = _COMPLETED.match(name)
        if m:
            out[m[1]] = m[2]
    return out


def disk_listing(base: Path, as_of: str | None = None) -> dict[str, dict[str, int]]:
    """Partition -> {file name: size} of the data files on disk whose writing instant completed (at or before
    `as_of`, a completion time)."""
    done = {t for t, c in completed_data_instants(base).items() if as_of is None or c <= as_of}
    out: dict[str, dict[str, int]] = {}
    for directory, dirs, files in os.walk(base):
        dirs[:] = [d for d in dirs if not d.startswith(".")]
        if ".hoodie_partition_metadata" not in files:
            continue
        partition = os.path.relpath(directory, base)
        for name in files:
            m = _BASE.match(name) or _LOG.match(name)
            if m and m[1] in done:
                out.setdefault("" if partition == "." else partition, {})[name] = os.path.getsize(Path(directory, name))
    return out


def data_stats(path: Path) -> dict[str, tuple]:
    """Column -> (min, max, null count, value count) of a parquet file, computed from its data (what the code under
    test takes from the footer's statistics must agree with the values themselves)."""
    table = pq.read_table(path)
    out = {}
    for name in table.column_names:
        column = table.column(name)
        if pa.types.is_nested(column.type):
            continue
        bounds = pc.min_max(column)
        out[name] = (bounds["min"].as_py(), bounds["max"].as_py(), column.null_count, len(column))
    return out


def _metadata(base: Path, as_of: str | None = None) -> HoodieTableMetadata:
    return HoodieTableMetadata(HoodieTableMetaClient.load(str(base)), as_of)


# ----------------------------------------------------------------------------------------------- listing


@pytest.mark.parametrize("fixture", FIXTURES)
def test_listing_equals_the_committed_files_on_disk(fixture_table, fixture):
    base = fixture_table(fixture)
    expected = disk_listing(base)
    metadata = _metadata(base)
    assert metadata.all_partition_paths() == sorted(expected)
    for partition, files in expected.items():
        assert metadata.files_in_partition(partition) == files, partition
    assert metadata.files_in_partitions(list(expected)) == expected
    assert metadata.files_in_partition("no=such") == {}
    assert sum(len(f) for f in expected.values()) >= 10  # the oracle is not trivially empty


@pytest.mark.parametrize("fixture", FIXTURES)
def test_enabled_partitions_come_from_the_data_table_properties(fixture_table, fixture):
    meta = HoodieTableMetaClient.load(str(fixture_table(fixture)))
    listed = meta.table_config.props["hoodie.table.metadata.partitions"].split(",")
    assert enabled_partitions(meta) == tuple(sorted(listed))
    assert {FILES, COLUMN_STATS, "partition_stats"} <= set(enabled_partitions(meta))


# ----------------------------------------------------------------------------------------------- statistics


@pytest.mark.parametrize("fixture", FIXTURES)
def test_column_stats_equal_the_parquet_footers(fixture_table, fixture):
    base = fixture_table(fixture)
    metadata = _metadata(base)
    by_file: dict[str, dict[str, ColumnStats]] = {}
    for stats in metadata.column_stats():
        by_file.setdefault(stats.file_name, {})[stats.column_name] = stats
    checked = 0
    for partition, files in disk_listing(base).items():
        for name in (f for f in files if f.endswith(".parquet")):
            indexed = by_file[name]
            footer = data_stats(base / partition / name)
            assert set(indexed) <= set(footer), name
            assert len(indexed) >= len(footer) - 2  # all but _hoodie_commit_seqno and _hoodie_file_name
            for column, stats in indexed.items():
                assert (stats.min, stats.max, stats.null_count, stats.value_count) == footer[column], (name, column)
                checked += 1
    assert checked > 50


def test_column_stats_lookups_read_only_what_they_ask_for(fixture_table):
    base = fixture_table(MOR_V9)
    metadata = _metadata(base)
    everything = metadata.column_stats()
    partition = "region=eu"
    eu_files = set(metadata.files_in_partition(partition))
    of_eu = metadata.column_stats(partition_path=partition)
    assert of_eu and {s.file_name for s in of_eu} == {s.file_name for s in everything} & eu_files
    amounts = metadata.column_stats(columns=["amount", "txn_ts"])
    assert amounts == [s for s in everything if s.column_name in ("amount", "txn_ts")]
    assert metadata.column_stats(partition_path=partition, columns=["amount"]) == \
        [s for s in of_eu if s.column_name == "amount"]
    assert metadata.column_stats(columns=["no_such_column"]) == []


def _latest_writer(meta: HoodieTableMetaClient) -> dict[str, object]:
    """Partition -> the last completed data instant that wrote to it (by completion time)."""
    last = {}
    for instant in sorted(meta.timeline.completed().write_timeline(), key=lambda i: i.completion_time):
        for stat in meta.active_timeline.commit_metadata(instant).write_stats():
            last[stat.partitionPath] = instant
    return last


def _aggregate(stats: list[ColumnStats]) -> tuple:
    mins = [s.min for s in stats if s.min is not None]
    maxs = [s.max for s in stats if s.max is not None]
    return (min(mins) if mins else None, max(maxs) if maxs else None, sum(s.value_count for s in stats),
            sum(s.null_count for s in stats), sum(s.total_size for s in stats))


@pytest.mark.parametrize("fixture", FIXTURES)
def test_partition_stats_aggregate_the_column_stats_of_the_partition(fixture_table, fixture):
    """Java recomputes a partition's stats at each write to it, over the latest file slices the write saw: the
    slices at the writer's completion, plus - for a clustering - the file groups it replaces (still live while
    the replacecommit was inflight). The slices come from the engine's file-system view."""
    meta = HoodieTableMetaClient.load(str(fixture_table(fixture)))
    metadata = HoodieTableMetadata(meta)
    column_stats = {(s.file_name, s.column_name): s for s in metadata.column_stats()}
    writers = _latest_writer(meta)
    partition_stats = metadata.partition_stats()
    assert {s.file_name for s in partition_stats} == set(metadata.all_partition_paths())
    for stats in partition_stats:
        writer = writers[stats.file_name]
        view = FileSystemView(meta, as_of=writer.completion_time, use_metadata_table=False)
        slices = view.latest_file_slices([stats.file_name]) + [
            g.latest_slice() for g, by in view.replaced_file_groups(stats.file_name) if by == writer.timestamp]
        names = [n for s in slices
                 for n in ([s.base_file.name] if s.base_file else []) + [lf.name for lf in s.log_files]]
        parts = [column_stats[(n, stats.column_name)] for n in names if (n, stats.column_name) in column_stats]
        assert parts, (stats.file_name, stats.column_name)
        assert (stats.min, stats.max, stats.value_count, stats.null_count, stats.total_size) == _aggregate(parts), \
            (stats.file_name, stats.column_name)
        assert stats.is_tight_bound
    first = partition_stats[0].file_name
    assert metadata.partition_stats(columns=["txn_ts", "fare"], partition_paths=[first]) == \
        [s for s in partition_stats if s.column_name in ("txn_ts", "fare") and s.file_name == first]


# ----------------------------------------------------------------------------------------------- time travel


@pytest.mark.parametrize("fixture", FIXTURES)
def test_time_travel_lists_what_each_earlier_instant_saw(fixture_table, fixture):
    """As of the completion of every completed data instant: the files committed by then (before and after the
    metadata table's compaction, so older MDT file slices are read too)."""
    base = fixture_table(fixture)
    points = sorted(completed_data_instants(base).values())
    assert len(points) >= 7
    for as_of in points:
        expected = disk_listing(base, as_of)
        metadata = _metadata(base, as_of)
        assert metadata.all_partition_paths() == sorted(expected), as_of
        assert metadata.files_in_partitions(list(expected)) == expected, as_of
    before_first = str(int(points[0]) - 1)
    assert _metadata(base, before_first).all_partition_paths() == []


def test_time_travel_before_the_mdt_compaction_reads_the_older_slice(fixture_table):
    base = fixture_table(MOR_V9)
    compaction = "20260307162612567"  # the MDT's compaction; the data instant before it completed at ...612005
    latest = _metadata(base)
    assert any(s.base_file and s.base_file.instant_time == compaction for s in latest.file_slices(FILES))
    earlier = _metadata(base, "20260307162612005")
    assert all(s.base_file is None or s.base_file.instant_time < compaction for s in earlier.file_slices(FILES))
    eu = disk_listing(base, "20260307162612005")["region=eu"]
    assert earlier.files_in_partitions(["region=eu"]) == {"region=eu": eu}


# ----------------------------------------------------------------------------------------------- valid instants


def test_an_mdt_deltacommit_whose_data_instant_did_not_complete_is_not_trusted(fixture_table, fixtures_cache,
                                                                                tmp_path):
    """The data writer died after the MDT deltacommit completed: its files are in the MDT's logs but not listed."""
    base = copy_fixture(MOR_V9, fixtures_cache, tmp_path)
    timeline = base / ".hoodie" / "timeline"
    last = max(n for n in os.listdir(timeline) if n.startswith("20260307162620509_"))
    (timeline / last).unlink()  # the data deltacommit is now inflight
    metadata = _metadata(base)
    assert "20260307162620509" not in metadata.valid
    listing = metadata.files_in_partitions(["region=eu", "region=us"])
    assert listing == {p: disk_listing(base)[p] for p in ("region=eu", "region=us")}
    assert not any("20260307162620509" in name for files in listing.values() for name in files)
    full = _metadata(fixture_table(MOR_V9)).files_in_partitions(["region=eu"])["region=eu"]
    assert any("20260307162620509" in name for name in full)  # the instant did add a file there


def test_a_table_without_the_files_partition_has_no_usable_metadata_table(fixtures_cache, tmp_path):
    base = copy_fixture(MOR_V9, fixtures_cache, tmp_path)
    meta = HoodieTableMetaClient.load(str(base))
    assert is_metadata_table_available(meta)
    meta.update_table_config({"hoodie.table.metadata.partitions": "column_stats,partition_stats"})
    assert not is_metadata_table_available(meta)
    with pytest.raises(HoodieMetadataNotAvailableError, match="files partition"):
        HoodieTableMetadata(meta)
    meta.update_table_config({"hoodie.table.metadata.partitions": "files"})
    assert is_metadata_table_available(meta)
    metadata = HoodieTableMetadata(meta)
    assert metadata.all_partition_paths() == ["region=apac", "region=eu", "region=us"]
    with pytest.raises(HoodieMetadataNotAvailableError, match="column_stats"):
        metadata.column_stats()
    shutil.rmtree(base / ".hoodie" / "metadata")
    assert not is_metadata_table_available(meta)
    with pytest.raises(HoodieMetadataNotAvailableError, match="no metadata table"):
        HoodieTableMetadata(meta)


# ----------------------------------------------------------------------------------------------- damage


def _files_logs(base: Path) -> list[Path]:
    folder = base / ".hoodie" / "metadata" / FILES
    return sorted(p for p in folder.iterdir() if ".log." in p.name and p.stat().st_size > 80)


def _flip(path: Path, offset: int) -> None:
    data = bytearray(path.read_bytes())
    data[offset] ^= 0xFF
    path.write_bytes(bytes(data))


def test_a_damaged_hfile_log_block_is_an_error_naming_the_file(fixtures_cache, tmp_path):
    base = copy_fixture(MOR_V9, fixtures_cache, tmp_path)
    log_file = _files_logs(base)[-1]
    content = log_file.read_bytes()
    _flip(log_file, content.index(b"\x1f\x8b\x08") + 40)  # inside the gzip data of the HFile's data block
    with pytest.raises(HoodieCorruptedMetadataError, match=re.escape(log_file.name)):
        _metadata(base).files_in_partitions(["region=eu", "region=us", "region=apac"])


def test_a_damaged_base_hfile_is_an_error_naming_the_file(fixtures_cache, tmp_path):
    base = copy_fixture(MOR_V9, fixtures_cache, tmp_path)
    hfile = next((base / ".hoodie" / "metadata" / FILES).glob("files-0000-0_*_20260307162612567.hfile"))
    _flip(hfile, 60)
    with pytest.raises(HoodieCorruptedMetadataError, match=re.escape(hfile.name)):
        _metadata(base).all_partition_paths()


def test_a_partial_block_past_the_committed_bytes_is_skipped(fixtures_cache, tmp_path, caplog):
    """A writer that died mid-append leaves a partial block after the bytes its completed commit recorded: it is
    skipped with a warning and the listing is the right one (Hudi does the same)."""
    base = copy_fixture(MOR_V9, fixtures_cache, tmp_path)
    log_file = _files_logs(base)[-1]
    with open(log_file, "ab") as f:
        f.write(b"#HUDI#" + b"\x00\x00\x00\x00\x00\x00\x10\x00" + b"partial")
    assert _metadata(base).files_in_partitions(list(disk_listing(base))) == disk_listing(base)
    assert "corrupt block" in caplog.text


def test_fuzzed_metadata_files_give_an_error_or_the_right_listing(fixtures_cache, tmp_path):
    """Random single-byte damage anywhere in the files partition's base HFile or logs: never a wrong listing."""
    base = copy_fixture(MOR_V9, fixtures_cache, tmp_path)
    expected = disk_listing(base)
    folder = base / ".hoodie" / "metadata" / FILES
    targets = [p for p in sorted(folder.iterdir()) if p.name.endswith(".hfile") or ".log." in p.name]
    rng = random.Random(39)
    errors = 0
    for _ in range(60):
        target = rng.choice(targets)
        original = target.read_bytes()
        offset = rng.randrange(len(original))
        _flip(target, offset)
        try:
            metadata = _metadata(base)
            got = {"partitions": metadata.all_partition_paths(), "files": metadata.files_in_partitions(list(expected))}
        except HoodieCorruptedMetadataError as exc:
            assert target.name in str(exc), (target.name, offset, str(exc))
            errors += 1
        else:
            assert got == {"partitions": sorted(expected), "files": expected}, (target.name, offset)
        finally:
            target.write_bytes(original)
    assert errors >= 10  # damage that matters is detected (flips in padding or unused copies are harmless)


# ----------------------------------------------------------------------------------------------- merge rules


def test_file_listing_merge_follows_hudi():
    older = FileListing({"a": FileInfo(10), "b": FileInfo(5), "c": FileInfo(7)})
    newer = FileListing({"a": FileInfo(12), "b": FileInfo(0, True), "d": FileInfo(0, True), "e": FileInfo(3)})
    merged = combine_file_listings(older, newer)
    assert merged.entries == {"a": FileInfo(12), "c": FileInfo(7), "d": FileInfo(0, True), "e": FileInfo(3)}
    assert combine_file_listings(newer, FileListing({"a": FileInfo(4)})).entries["a"] == FileInfo(12)


def test_column_stats_merge_follows_hudi():
    def stats(lo, hi, count, deleted=False, tight=False):
        return ColumnStats("f", "c", WrappedValue("IntWrapper", lo), WrappedValue("IntWrapper", hi), count, 1, 10, 20,
                           deleted, tight)

    merged = combine_column_stats(stats(5, 9, 3), stats(1, 7, 2))
    assert (merged.min, merged.max, merged.value_count, merged.null_count, merged.total_size) == (1, 9, 5, 2, 20)
    assert combine_column_stats(stats(5, 9, 3), stats(6, 7, 2, tight=True)) == stats(6, 7, 2, tight=True)
    assert combine_column_stats(stats(5, 9, 3), stats(6, 7, 2, deleted=True)) == stats(6, 7, 2, deleted=True)
    assert combine_column_stats(stats(5, 9, 3, deleted=True), stats(6, 7, 2)) == stats(6, 7, 2)


def test_key_queries_select_before_decoding():
    query = KeyQuery(prefixes=("ab",), accept=lambda k: k.endswith("z"))
    assert [query.matches(k) for k in ("abz", "abx", "xbz")] == [True, False, False]
    assert KeyQuery(keys=frozenset({"k"})).matches("k") and not KeyQuery(keys=frozenset({"k"})).matches("kk")
