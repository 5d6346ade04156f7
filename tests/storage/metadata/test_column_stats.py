"""Which columns the column_stats partition indexes (`storage.metadata.column_stats.ColumnStatsSettings`): a column
list naming a column a file does not hold is not an error: it is warned about, once, and left unindexed (its
filters skip nothing, tests/storage/read/test_data_skipping.py)."""
from __future__ import annotations

import pyarrow as pa

from storage.metadata.column_stats import ColumnStatsSettings

SCHEMA = pa.schema([("_hoodie_file_name", pa.string()), ("id", pa.int32()), ("name", pa.string()),
                    ("tags", pa.list_(pa.string())), ("fare", pa.float64())])


def test_every_indexable_top_level_column_up_to_the_maximum():
    assert ColumnStatsSettings().select(SCHEMA) == ["id", "name", "fare"]
    assert ColumnStatsSettings(max_columns=2).select(SCHEMA) == ["id", "name"]


def test_a_column_list_naming_what_the_table_does_not_hold_is_warned_once(caplog):
    settings = ColumnStatsSettings(("fare", "nosuch", "tags"))
    with caplog.at_level("WARNING", logger="storage.metadata.column_stats"):
        assert settings.select(SCHEMA) == ["fare"]
        assert settings.select(SCHEMA) == ["fare"]
    warnings = [r.getMessage() for r in caplog.records]
    assert len(warnings) == 1 and "names nosuch, tags" in warnings[0] and "skip no file" in warnings[0]
    caplog.clear()
    with caplog.at_level("WARNING", logger="storage.metadata.column_stats"):
        assert ColumnStatsSettings(("id", "name")).select(SCHEMA) == ["id", "name"]
    assert caplog.records == []
