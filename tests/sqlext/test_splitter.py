from sqlext.sql.errors import HoodieSqlError
from sqlext.sql.splitter import split_statements

import pytest


def test_splits_on_semicolons_outside_quotes_and_comments():
    sql = ("-- leading; comment\n"
           "SELECT 'a;b', \"c;d\", `e;f` FROM t;  /* x; /* nested; */ y; */ SELECT 'it''s;' ;\n"
           "  INSERT INTO t VALUES ('back\\\\slash\\';');;\n")
    got = split_statements(sql)
    assert [s.text for s in got] == [
        "SELECT 'a;b', \"c;d\", `e;f` FROM t",
        "SELECT 'it''s;'",
        "INSERT INTO t VALUES ('back\\\\slash\\';')",
    ]
    assert (got[0].position.line, got[0].position.col) == (2, 1)
    assert got[1].position.line == 2 and sql.splitlines()[1][got[1].position.col - 1:].startswith("SELECT 'it")
    assert (got[2].position.line, got[2].position.col) == (3, 3)


def test_empty_and_comment_only_input():
    assert split_statements("") == []
    assert split_statements(" ; -- nothing\n ; /* still nothing */") == []


def test_script_block_is_kept_whole():
    sql = "BEGIN\n  SELECT 1;\n  SELECT 2;\nEND"
    assert [s.text for s in split_statements(sql)] == [sql]


@pytest.mark.parametrize("sql", ["SELECT 'open", "SELECT 1 /* open", "SELECT `open"])
def test_unterminated_input_is_reported_with_position(sql):
    with pytest.raises(HoodieSqlError) as info:
        split_statements("SELECT 1;\n" + sql)
    assert info.value.line == 2
