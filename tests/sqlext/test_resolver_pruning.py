"""Table resolution and partition pruning: pure Python, no Spark."""
import json

import sqlglot

from sqlext.sql.pruning import partition_filter
from sqlext.sql.resolver import HudiTableRef, TableName, WarehouseResolver


def _fake_table(path):
    (path / ".hoodie").mkdir(parents=True)
    (path / ".hoodie" / "hoodie.properties").write_text("hoodie.table.name=x\n")


def test_warehouse_layout_and_registry(tmp_path):
    wh = tmp_path / "wh"
    _fake_table(wh / "t1")
    _fake_table(wh / "db1.db" / "t2")
    _fake_table(tmp_path / "elsewhere" / "t3")
    r = WarehouseResolver(str(wh))
    assert r.resolve(TableName("t1")) == HudiTableRef("t1", "default", str(wh / "t1"))
    assert r.resolve(TableName("t2", "db1")).path == str(wh / "db1.db" / "t2")
    assert r.resolve(TableName("t2")) is None                      # not in the current database
    assert r.resolve(TableName("t3")) is None
    r.register(HudiTableRef("t3", "db1", str(tmp_path / "elsewhere" / "t3")))
    registry = json.loads((wh / ".sqlext" / "tables.json").read_text())
    assert registry["tables"]["db1.t3"]["path"] == str(tmp_path / "elsewhere" / "t3")
    fresh = WarehouseResolver(str(wh), "db1")                       # a new session finds it
    assert fresh.resolve(TableName("t3")).path == str(tmp_path / "elsewhere" / "t3")
    assert fresh.resolve(TableName("t2")).db == "db1"
    path_form = TableName.of(sqlglot.parse_one(f"SELECT * FROM hudi.`{wh / 't1'}`", read="spark").find(
        sqlglot.exp.Table))
    assert fresh.resolve(path_form).path == str(wh / "t1")
    fresh.unregister(HudiTableRef("t3", "db1", ""))
    assert WarehouseResolver(str(wh), "db1").resolve(TableName("t3")) is None


def _filter(where: str, types=None, qualifiers=("t",), single=True):
    tree = sqlglot.parse_one(f"SELECT * FROM t WHERE {where}", read="spark")
    return partition_filter(tree.args["where"].this, types or {"dt": "string", "n": "numeric"}, set(qualifiers),
                            single, "org.apache.hudi.keygen.ComplexKeyGenerator", False)


def test_pruning_keeps_only_partitions_that_can_match():
    keep = _filter("dt = 'a' AND id > 3")
    assert keep({"dt": "a", "n": "1"}) and not keep({"dt": "b", "n": "1"})
    keep = _filter("t.dt IN ('a', 'b') AND n >= 10")
    assert keep({"dt": "b", "n": "10"}) and not keep({"dt": "b", "n": "9"}) and not keep({"dt": "c", "n": "99"})
    keep = _filter("dt > '10'")                 # a string column compares as text, as Spark does
    assert keep({"dt": "9"})
    keep = _filter("n > '10'")                  # a numeric column compares as numbers
    assert not keep({"n": "9"})
    assert not _filter("dt = 'a'")({"dt": "__HIVE_DEFAULT_PARTITION__"})


def test_pruning_is_conservative():
    assert _filter("dt = 'a' OR id = 1") is None                    # disjunctions are not used
    assert _filter("x.dt = 'a'") is None                             # another table's column
    assert _filter("dt = 'a'", single=False) is None                 # unqualified in a join
    assert _filter("dt = 'a'", types={"dt": "other"}) is None        # dates etc.: Spark's casts decide
    assert _filter("upper(dt) = 'A'") is None
