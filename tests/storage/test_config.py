"""The registry of `hoodie.*` keys: every default parses; a typo'd or not honoured option on a DataFrame write
or read warns once naming the key (and the key meant); `hoodie.strict.config=true` and unparsable values fail
before anything is written."""
from __future__ import annotations

import logging
from pathlib import Path

import pytest

from storage.config import REGISTRY, WriteConfigKeys as WK, _to_text, validate_options
from storage.exception import HoodieConfigError

TYPO = "hoodie.datasource.write.precombine.feild"
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
    assert REGISTRY.suggest(TYPO) == "hoodie.datasource.write.precombine.field"
    assert REGISTRY.suggest("hoodie.completely.different.thing") is None
    assert not REGISTRY.honoured("hoodie.rollback.using.markers") and REGISTRY.honoured("hoodie.index.type")


def test_only_hoodie_keys_are_checked_and_each_warns_once(caplog):
    caplog.set_level(logging.WARNING, logger="storage.config")
    problems = validate_options({"path": "/x", "spark.foo": "1", "as.of.instant": "1", TYPO: "ts",
                                 "hoodie.rollback.using.markers": "true", "hoodie.index.type": "SIMPLE"}, "write to /t")
    assert len(problems) == 2 and len(_warnings(caplog)) == 2
    assert TYPO in problems[0] and "hoodie.rollback.using.markers" in problems[1]
    # a key the table stores with the same value is the table's, not the user's
    assert validate_options({TYPO: "ts"}, "write to /t", stored={TYPO: "ts"}) == []


def test_typo_on_dataframe_write_warns_and_writes(spark, tmp_path, caplog):
    caplog.set_level(logging.WARNING, logger="storage.config")
    path = tmp_path / "typo"
    _write(spark, path, [(1, "a", 1, "p1"), (2, "b", 1, "p1")], **{TYPO: "ts"})
    warned = [m for m in _warnings(caplog) if TYPO in m]
    assert len(warned) == 1 and "did you mean hoodie.datasource.write.precombine.field?" in warned[0]
    assert spark.read.format("hudi").load(str(path)).count() == 2
    caplog.clear()
    spark.read.format("hudi").option("hoodie.datasource.query.tpye", "snapshot").load(str(path)).count()
    assert any("hoodie.datasource.query.type?" in m for m in _warnings(caplog))


def test_strict_config_fails_before_writing(spark, tmp_path):
    path = tmp_path / "strict"
    _write(spark, path, [(1, "a", 1, "p1")])
    before = _meta_files(path)
    with pytest.raises(HoodieConfigError, match=f"unknown option {TYPO}.*hoodie.strict.config=true"):
        _write(spark, path, [(1, "b", 2, "p1")], **{TYPO: "ts", WK.STRICT_CONFIG.key: "true"})
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
