import zlib

import pytest

from storage.io.storage import HoodieStorage
from storage.table.properties_file import format_properties, parse_properties
from storage.table.table_config import (
    HoodieTableConfig,
    HoodieTableNotFoundError,
    create_table_config,
    load_table_config,
    table_checksum,
    update_table_config,
)

FIXTURES = ["sample_cow_v6_complexkeygen_hivestyle", "sample_cow_v8_nonpartitioned", "trips_mor_avro_v8_trips_8i3u1d",
            "sample_mor_parquet_v6_nonpartitioned_rollback"]


@pytest.mark.parametrize("name", FIXTURES)
def test_fixture_properties_parse_and_checksum(fixture_table, name):
    base = fixture_table(name)
    cfg = load_table_config(HoodieStorage(), f"{base}/.hoodie")
    assert cfg.props["hoodie.table.checksum"] == str(table_checksum(cfg.props))
    schema = cfg.create_schema
    assert schema and schema.startswith('{"type":"record"')  # `\:` unescaped
    assert cfg.version in (6, 8)


def test_properties_round_trip_escapes():
    props = {"a.b": 'x:y=z#!', "k": " leading space", "json": '{"type":"record","n":"a\\\\b"}', "u": "é"}
    assert parse_properties(format_properties(props)) == props


def test_java_style_escaping_of_colon():
    text = format_properties({"hoodie.table.create.schema": '{"type":"record"}'})
    assert '{"type"\\:"record"}' in text


def _config():
    return HoodieTableConfig({"hoodie.table.name": "t1", "hoodie.database.name": "db", "hoodie.table.type": "COPY_ON_WRITE"})


def test_create_then_update_is_atomic_and_checksummed(tmp_path):
    storage, meta = HoodieStorage(), str(tmp_path)
    create_table_config(storage, meta, _config())
    loaded = load_table_config(storage, meta)
    assert loaded.props["hoodie.table.checksum"] == str(zlib.crc32(b"db.t1"))
    update_table_config(storage, meta, loaded.with_updates({"hoodie.x": "1"}))
    assert load_table_config(storage, meta).props["hoodie.x"] == "1"
    assert not (tmp_path / "hoodie.properties.backup").exists()


@pytest.mark.parametrize("damage", ["missing", "empty"])
def test_recovers_from_backup(tmp_path, damage):
    storage, meta = HoodieStorage(), str(tmp_path)
    create_table_config(storage, meta, _config())
    (tmp_path / "hoodie.properties.backup").write_bytes((tmp_path / "hoodie.properties").read_bytes())
    if damage == "missing":
        (tmp_path / "hoodie.properties").unlink()
    else:
        (tmp_path / "hoodie.properties").write_bytes(b"")
    assert load_table_config(storage, meta).name == "t1"
    assert (tmp_path / "hoodie.properties").stat().st_size > 0


def test_not_a_table(tmp_path):
    with pytest.raises(HoodieTableNotFoundError, match="not a Hudi table"):
        load_table_config(HoodieStorage(), str(tmp_path))


@pytest.mark.parametrize("name", ["sample_cow_v9_txns_simple_meta", "trips_mor_avro_v8_trips_8i3u1d"])
def test_java_metadata_table_properties_load(fixture_table, name):
    """Java's metadata tables name no database: their checksum is the CRC32 of `.<table>` (Java formats
    `<database>.<table>` with an empty database), which the loader accepts too."""
    meta = f"{fixture_table(name)}/.hoodie/metadata/.hoodie"
    cfg = load_table_config(HoodieStorage(), meta)
    assert "hoodie.database.name" not in cfg.props
    assert cfg.props["hoodie.table.checksum"] == str(zlib.crc32(f".{cfg.props['hoodie.table.name']}".encode()))
    assert cfg.props["hoodie.table.base.file.format"] == "HFILE"


def test_table_without_database_gets_javas_checksum_and_old_form_still_loads(tmp_path):
    """Java formats `<database>.<table>` with an empty database: `.<table>`. This engine once wrote CRC32 of the bare
    name for such tables; those still load, and the next rewrite of the properties stores Java's form."""
    storage = HoodieStorage()
    create_table_config(storage, str(tmp_path),
                        HoodieTableConfig({"hoodie.table.name": "t", "hoodie.table.version": "6"}))
    assert load_table_config(storage, str(tmp_path)).props["hoodie.table.checksum"] == str(zlib.crc32(b".t"))
    old = (tmp_path / "hoodie.properties").read_text().replace(str(zlib.crc32(b".t")), str(zlib.crc32(b"t")))
    (tmp_path / "hoodie.properties").write_text(old)
    cfg = load_table_config(storage, str(tmp_path))
    update_table_config(storage, str(tmp_path), cfg)
    assert load_table_config(storage, str(tmp_path)).props["hoodie.table.checksum"] == str(zlib.crc32(b".t"))
