"""Listing a table through its metadata table's `files` partition (`storage.table.fs_view`): the same slices as a
directory listing on Java's v9 tables, a file no commit recorded there is not part of the table (as in hudi-rs),
no directory of a data partition is listed, and a damaged metadata table falls back to listing with a warning."""
from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from fixture_tables import copy_fixture
from storage.config import MetadataConfigKeys as MK
from storage.io.storage import HoodieStorage
from storage.metadata.table_metadata import FILES
from storage.table.fs_view import FileSystemView
from storage.table.meta_client import HoodieTableMetaClient

FIXTURES = ("sample_cow_v9_txns_simple_meta", "sample_mor_avro_v9_txns_simple_meta")
COW_V9 = FIXTURES[0]
MDT_OFF = {MK.READER_ENABLE.key: "false"}


def _slices(view: FileSystemView) -> list[tuple]:
    """Every slice of every file group (not only the latest), by what a reader uses: file paths and sizes."""
    out = []
    for group in view.file_groups():
        for s in group.slices.values():
            base = (s.base_file.path, s.base_file.size) if s.base_file else None
            out.append((s.partition_path, s.file_id, s.base_instant, base,
                        tuple((lf.path, lf.size) for lf in s.log_files)))
    return sorted(out, key=repr)


def _view(base: Path, use_metadata_table: bool, **kwargs) -> FileSystemView:
    return FileSystemView(HoodieTableMetaClient.load(str(base)), use_metadata_table=use_metadata_table, **kwargs)


def _stray_copy(base: Path) -> Path:
    """A committed-looking base file no commit wrote: an existing one copied under a new file id."""
    original = next(p for p in sorted(base.rglob("*.parquet")) if ".hoodie" not in p.parts)
    file_id, rest = original.name.split("_", 1)
    stray = original.with_name(f"{'0' * 8}{file_id[8:]}_{rest}")
    shutil.copy(original, stray)
    return stray


def _listed_paths(monkeypatch) -> list[str]:
    """Every path storage is asked to list from now on."""
    paths: list[str] = []
    real = HoodieStorage._list

    def spy(self, path, recursive):
        paths.append(path)
        return real(self, path, recursive)

    monkeypatch.setattr(HoodieStorage, "_list", spy)
    return paths


@pytest.mark.parametrize("name", FIXTURES)
def test_the_view_lists_the_same_slices_with_and_without_the_metadata_table(fixture_table, name):
    base = fixture_table(name)
    with_mdt, without = _view(base, True), _view(base, False)
    assert with_mdt.partitions() == without.partitions()
    assert _slices(with_mdt) == _slices(without)
    partition = with_mdt.partitions()[0]
    assert _slices(_view(base, True, partitions=[partition])) == _slices(_view(base, False, partitions=[partition]))


@pytest.mark.parametrize("name", FIXTURES)
def test_time_travel_lists_the_same_latest_slices_with_and_without_it(fixture_table, name):
    base = fixture_table(name)
    meta = HoodieTableMetaClient.load(str(base))
    for instant in meta.timeline.completed().write_timeline():
        point = instant.completion_time or instant.timestamp
        with_mdt = FileSystemView(meta, as_of=point).latest_file_slices()
        without = FileSystemView(meta, as_of=point, use_metadata_table=False).latest_file_slices()
        assert with_mdt == without, point


def test_a_file_the_metadata_table_does_not_record_is_not_read(spark, fixtures_cache, tmp_path):
    base = copy_fixture(COW_V9, fixtures_cache, tmp_path)
    expected = spark.read.format("hudi").load(str(base)).count()
    _stray_copy(base)
    assert spark.read.format("hudi").load(str(base)).count() == expected
    assert spark.read.format("hudi").options(**MDT_OFF).load(str(base)).count() > expected


def test_no_data_partition_is_listed_when_the_metadata_table_is_on(fixture_table, monkeypatch):
    base = str(fixture_table(COW_V9))
    meta = HoodieTableMetaClient.load(base)
    listed = _listed_paths(monkeypatch)
    view = FileSystemView(meta)
    assert view.latest_file_slices()
    data = [p for p in listed if not p.startswith(f"{base}/.hoodie")]
    assert data == [], f"listed data directories: {data}"
    FileSystemView(meta, use_metadata_table=False)
    assert any(not p.startswith(f"{base}/.hoodie") for p in listed)  # the spy sees directory listings


def test_a_damaged_metadata_table_falls_back_to_listing_with_a_warning(spark, fixtures_cache, tmp_path, caplog):
    base = copy_fixture(COW_V9, fixtures_cache, tmp_path)
    expected = sorted(map(tuple, spark.read.format("hudi").load(str(base)).collect()))
    for hfile in (base / ".hoodie" / "metadata" / FILES).glob("*.hfile"):
        data = bytearray(hfile.read_bytes())
        data[60] ^= 0xFF
        hfile.write_bytes(bytes(data))
    caplog.set_level("WARNING", logger="storage.table.fs_view")
    rows = sorted(map(tuple, spark.read.format("hudi").load(str(base)).collect()))
    assert rows == expected
    warnings = [r.getMessage() for r in caplog.records if r.name == "storage.table.fs_view"]
    assert warnings and str(base) in warnings[0] and "listing storage instead" in warnings[0]


def test_a_missing_metadata_table_falls_back_to_listing_with_a_warning(fixtures_cache, tmp_path, caplog):
    base = copy_fixture(COW_V9, fixtures_cache, tmp_path)
    expected = _slices(_view(base, False))
    shutil.rmtree(base / ".hoodie" / "metadata")
    caplog.set_level("WARNING", logger="storage.table.fs_view")
    assert _slices(_view(base, True)) == expected
    assert "no metadata table" in caplog.text and str(base) in caplog.text
