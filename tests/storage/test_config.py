"""The registry of `hoodie.*` keys: every default parses; a typo'd or not honoured option on a DataFrame write
or read warns every time naming the key (and the key meant); a near miss of a key option (record key, ordering
field, partition path, key generator, table type, and their SQL names) is an error naming the key meant;
`hoodie.strict.config=true` and unparsable values fail before anything is written."""
from __future__ import annotations

import logging
from pathlib import Path

import pytest

from sqlext.config_doc import config_text
from storage.config import (
    REGISTRY,
    HiveSyncConfigKeys as HK,
    WriteConfigKeys as WK,
    _to_text,
    is_known_key,
    misspelt_key_option,
    validate_options,
)
from storage.exception import HoodieConfigError

TYPO = "hoodie.parquet.compresion.codec"  # not a key option: warns
KEY_TYPO = "hoodie.datasource.write.precombine.feild"  # a key option: fails
OPTS = {
    "hoodie.table.name": "cfg",
    "hoodie.datasource.write.recordkey.field": "id",
    "hoodie.datasource.write.precombine.field": "ts",
    "hoodie.datasource.write.partitionpath.field": "dt",
}


def _write(spark, path, rows, **extra):
    df = spark.createDataFrame(rows, "id int, v string, ts long, dt string")
    df.write.format("hudi").options(**OPTS, **extra).mode("append").save(str(path))


def _meta_files(path) -> list[str]:
    return sorted(p.name for p in (Path(path) / ".hoodie").iterdir() if p.is_file())


def _warnings(caplog) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.name == "storage.config" and r.levelno == logging.WARNING]


@pytest.mark.parametrize("prop", REGISTRY.properties(), ids=lambda p: p.key)
def test_every_default_parses_with_its_parser(prop):
    if prop.default is not None:
        assert prop.parse(_to_text(prop.default)) == prop.default


def test_alternatives_resolve_and_typos_suggest():
    assert REGISTRY.lookup("hoodie.table.payload.class").key == "hoodie.compaction.payload.class"
    assert REGISTRY.suggest(TYPO) == "hoodie.parquet.compression.codec"
    assert REGISTRY.suggest(KEY_TYPO) == "hoodie.datasource.write.precombine.field"
    assert REGISTRY.suggest("hoodie.completely.different.thing") is None
    assert not REGISTRY.honoured("hoodie.rollback.using.markers") and REGISTRY.honoured("hoodie.index.type")


def test_only_hoodie_keys_are_checked_and_each_warns_every_time(caplog):
    caplog.set_level(logging.WARNING, logger="storage.config")
    options = {"path": "/x", "spark.foo": "1", "as.of.instant": "1", TYPO: "snappy",
               "hoodie.rollback.using.markers": "true", "hoodie.index.type": "SIMPLE"}
    problems = validate_options(options, "write to /t")
    assert len(problems) == 2 and len(_warnings(caplog)) == 2
    assert TYPO in problems[0] and "hoodie.rollback.using.markers" in problems[1]
    # the same options again: warned again (no warn-once cache), and a second typo beside the first too
    again = validate_options({**options, "hoodie.cleaner.commits.retaind": "3"}, "write to /t")
    assert len(again) == 3 and len(_warnings(caplog)) == 5
    assert "did you mean hoodie.cleaner.commits.retained?" in again[0] and TYPO in again[1]
    # a key the table stores with the same value is the table's, not the user's
    assert validate_options({TYPO: "snappy"}, "write to /t", stored={TYPO: "snappy"}) == []


@pytest.mark.parametrize("key, meant", [
    (KEY_TYPO, "hoodie.datasource.write.precombine.field"),
    ("hoodie.datasource.write.partitionpath.feild", "hoodie.datasource.write.partitionpath.field"),
    ("hoodie.datasource.write.recordKey.field", "hoodie.datasource.write.recordkey.field"),  # case
    ("hoodie.datasource.write.record.key.field", "hoodie.datasource.write.recordkey.field"),
    ("hoodie.datasource.write.partitionpath", "hoodie.datasource.write.partitionpath.field"),  # no .field
    ("hoodie.datasource.write.keygen.class", "hoodie.datasource.write.keygenerator.class"),
    ("hoodie.datasource.write.table.typ", "hoodie.datasource.write.table.type"),
    ("hoodie.table.ordering.field", "hoodie.table.ordering.fields"),
    ("Hoodie.Table.Type", "hoodie.table.type"),
])
def test_near_misses_of_key_options_name_the_key_meant(key, meant):
    assert misspelt_key_option(key) == meant
    with pytest.raises(HoodieConfigError, match=rf"write to /t: unknown option {key}: did you mean {meant}\?"):
        validate_options({key: "x"}, "write to /t")


@pytest.mark.parametrize("key", [
    "hoodie.datasource.write.partitionpath.field", "hoodie.table.name", "hoodie.datasource.write.table.name",
    "hoodie.datasource.write.partitionpath.urlencode", "hoodie.index.type",  # known keys, however close
    "hoodie.datasource.write.partitions.to.delete", "hoodie.datasource.write.payload.type",  # Hudi's, unknown here
    "hoodie.table.cdc.enabled", "hoodie.datasource.write.keygenerator.consistent.logical.timestamp.enabled",
])
def test_known_keys_and_other_hudi_keys_are_no_near_misses(key):
    assert misspelt_key_option(key) is None


@pytest.mark.parametrize("key, meant", [
    ("preCombineFeild", "preCombineField"), ("precombine_field", "preCombineField"), ("primary_key", "primaryKey"),
    ("primaryKeys", "primaryKey"), ("orderingField", "orderingFields"), ("tpye", "type"), ("typ", "type"),
    ("hoodie.datasource.write.partitionpath.feild", "hoodie.datasource.write.partitionpath.field"),
])
def test_table_property_near_misses_include_the_sql_names(key, meant):
    assert misspelt_key_option(key, table_properties=True) == meant
    assert misspelt_key_option(key) == (meant if key.startswith("hoodie.") else None)  # SQL names: TBLPROPERTIES
    with pytest.raises(HoodieConfigError, match=f"did you mean {meant}\\?"):
        validate_options({"primaryKey": "id", key: "x"}, "properties of t", table_properties=True)


def test_sql_names_are_known_in_any_case_and_other_properties_warn(caplog):
    caplog.set_level(logging.WARNING, logger="storage.config")
    assert all(is_known_key(k, table_properties=True) for k in ("primaryKey", "PRIMARYKEY", "type", "Type",
                                                                  "preCombineField", "orderingfields"))
    assert not is_known_key("primaryKey")  # a DataFrame option is no SQL name
    props = {"primaryKey": "id", "TYPE": "mor", "payloadClas": "x", "owner": "me", TYPO: "snappy"}
    problems = validate_options(props, "properties of t", table_properties=True)
    assert problems == [f"unknown option {TYPO} (did you mean hoodie.parquet.compression.codec?)",
                        "unknown table property owner",
                        "unknown table property payloadClas (did you mean payloadClass?)"]
    assert _warnings(caplog) == [f"properties of t: {p}" for p in problems]


def test_relocate_option_is_in_the_registry_and_documented():
    prop = REGISTRY.lookup("sqlext.catalog.relocate.table")
    assert prop is HK.RELOCATE_TABLE and prop.default is False and REGISTRY.honoured(prop.key)
    assert "re-register" in prop.doc and "sqlext.catalog.relocate.table" in config_text(prop.key)
    assert validate_options({prop.key: "true"}, "write to /t") == []  # not a hoodie.* key: never warned about


def test_typo_on_dataframe_write_warns_and_writes(spark, tmp_path, caplog):
    caplog.set_level(logging.WARNING, logger="storage.config")
    path = tmp_path / "typo"
    _write(spark, path, [(1, "a", 1, "p1"), (2, "b", 1, "p1")], **{TYPO: "snappy"})
    warned = [m for m in _warnings(caplog) if TYPO in m]
    assert len(warned) == 1 and "did you mean hoodie.parquet.compression.codec?" in warned[0]
    assert spark.read.format("hudi").load(str(path)).count() == 2
    caplog.clear()
    spark.read.format("hudi").option("hoodie.datasource.query.tpye", "snapshot").load(str(path)).count()
    assert any("hoodie.datasource.query.type?" in m for m in _warnings(caplog))


def test_strict_config_fails_before_writing(spark, tmp_path):
    path = tmp_path / "strict"
    _write(spark, path, [(1, "a", 1, "p1")])
    before = _meta_files(path)
    with pytest.raises(HoodieConfigError, match=f"unknown option {TYPO}.*hoodie.strict.config=true"):
        _write(spark, path, [(1, "b", 2, "p1")], **{TYPO: "snappy", WK.STRICT_CONFIG.key: "true"})
    assert _meta_files(path) == before
    assert [r.v for r in spark.read.format("hudi").load(str(path)).collect()] == ["a"]
    fresh = tmp_path / "strict-new"
    with pytest.raises(HoodieConfigError, match="hoodie.rollback.using.markers has no effect"):
        _write(spark, fresh, [(1, "a", 1, "p1")],
               **{"hoodie.rollback.using.markers": "true", WK.STRICT_CONFIG.key: "true"})
    assert not fresh.exists()


def test_unparsable_value_fails_naming_the_key(spark, tmp_path):
    path = tmp_path / "bad"
    with pytest.raises(HoodieConfigError, match="'abc' for option hoodie.parquet.max.file.size"):
        _write(spark, path, [(1, "a", 1, "p1")], **{"hoodie.parquet.max.file.size": "abc"})
    assert not path.exists()
