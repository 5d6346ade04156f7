"""CALL run_clustering / show_clustering through the SQL front end, in scripts written the way Hudi's own table
version 9 scripts are (CREATE with properties we accept with a warning, INSERT, UPDATE, DELETE, INSERT OVERWRITE,
CALL run_clustering, CALL run_compaction schedule / run): the rows equal the expected ones and what hudi-rs reads."""
from __future__ import annotations

import pytest

from hudi_oracle import arrow_rows, hudi_rs_read, rows, spark_rows
from sqlext.sql.errors import HoodieSqlError

COLS = ["ts", "uuid", "rider", "driver", "fare", "city"]

SCRIPT = """
CREATE TABLE {name} (ts BIGINT, uuid STRING, rider STRING, driver STRING, fare DOUBLE, city STRING) USING HUDI
PARTITIONED BY (city)
TBLPROPERTIES (type = '{kind}', primaryKey = 'uuid', preCombineField = 'ts',
  'hoodie.metadata.enable' = 'true', 'hoodie.metadata.record.index.enable' = 'true',
  'hoodie.parquet.small.file.limit' = '0');
INSERT INTO {name} VALUES (1, 'u1', 'rider-A', 'driver-K', 19.10, 'sf'), (2, 'u2', 'rider-B', 'driver-L', 27.70, 'sf'),
  (3, 'u3', 'rider-C', 'driver-M', 33.90, 'chennai');
INSERT INTO {name} VALUES (4, 'u4', 'rider-D', 'driver-N', 93.50, 'sf'), (5, 'u5', 'rider-E', 'driver-O', 34.15, 'sao_paulo');
INSERT INTO {name} VALUES (6, 'u6', 'rider-F', 'driver-P', 43.40, 'sao_paulo'), (7, 'u7', 'rider-G', 'driver-Q', 41.06, 'chennai');
UPDATE {name} SET fare = 0 WHERE rider = 'rider-A';
DELETE FROM {name} WHERE rider = 'rider-E';
INSERT OVERWRITE {name} PARTITION (city = 'chennai') VALUES (8, 'u8', 'rider-H', 'driver-R', 17.85);
CALL run_clustering(table => '{name}', op => 'schedule', order => 'fare,ts');
CALL run_clustering(table => '{name}', op => 'execute');
UPDATE {name} SET fare = 1 WHERE rider = 'rider-B';
"""

EXPECTED = sorted([(1, "u1", "rider-A", "driver-K", 0.0, "sf"), (2, "u2", "rider-B", "driver-L", 1.0, "sf"),
                   (4, "u4", "rider-D", "driver-N", 93.5, "sf"), (6, "u6", "rider-F", "driver-P", 43.4, "sao_paulo"),
                   (8, "u8", "rider-H", "driver-R", 17.85, "chennai")])


@pytest.mark.parametrize("kind", ["cow", "mor"])
def test_v9_style_script_with_clustering(hudi_sql, warehouse, kind):
    name = f"trips_{kind}"
    script = SCRIPT.format(name=name, kind=kind)
    if kind == "mor":
        script += (f"CALL run_compaction(op => 'schedule', table => '{name}');\n"
                   f"CALL run_compaction(op => 'run', table => '{name}');\n")
    hudi_sql.sql(script)
    ours = spark_rows(hudi_sql.sql(f"SELECT * FROM {name}"), COLS)
    assert ours == rows([dict(zip(COLS, r)) for r in EXPECTED], COLS) == arrow_rows(hudi_rs_read(str(warehouse / name)), COLS)
    shown = hudi_sql.sql(f"CALL show_clustering(table => '{name}', show_involved_partition => true)").collect()
    assert [(r.state, r.involved_partitions) for r in shown] == [("COMPLETED", "city=chennai,city=sao_paulo,city=sf")]


def test_run_clustering_predicate_and_bad_input(hudi_sql, warehouse):
    hudi_sql.sql("CREATE TABLE c (id INT, v INT, dt STRING) USING hudi PARTITIONED BY (dt) "
                 "TBLPROPERTIES (primaryKey = 'id', 'hoodie.parquet.small.file.limit' = '0')")
    for n in range(3):
        hudi_sql.sql(f"INSERT INTO c VALUES ({n}, {n}, '2024-01-01'), ({n + 10}, {n}, '2024-01-02'), "
                     f"({n + 20}, {n}, '2024-01-03')")
    timeline = sorted(p.name for p in (warehouse / "c" / ".hoodie").iterdir())
    for bad, message in [
        ("order => 'nope'", "unknown sort column.*nope"),
        ("order => 'v', order_strategy => 'spiral'", "hoodie.layout.optimize.strategy"),
        ("predicate => 'dt >>> 1'", "invalid predicate 'dt >>> 1'"),
        ("predicate => 'missing = 1'", "invalid predicate.*missing"),
        ("op => 'later'", "op 'later'"),
    ]:
        with pytest.raises(HoodieSqlError, match=message):
            hudi_sql.sql(f"CALL run_clustering(table => 'c', {bad})")
    assert sorted(p.name for p in (warehouse / "c" / ".hoodie").iterdir()) == timeline

    out = hudi_sql.sql("CALL run_clustering(table => 'c', predicate => \"dt >= '2024-01-02'\", order => 'v', "
                       "show_involved_partition => true)").collect()
    assert [(r.input_group_size, r.state, r.involved_partitions) for r in out] == \
        [(2, "COMPLETED", "dt=2024-01-02,dt=2024-01-03")]
    assert hudi_sql.sql("SELECT count(*) FROM c").collect()[0][0] == 9
    ids = rows([{"id": x} for n in range(3) for x in (n, n + 10, n + 20)], ["id"])
    assert spark_rows(hudi_sql.sql("SELECT id FROM c"), ["id"]) == ids == \
        arrow_rows(hudi_rs_read(str(warehouse / "c")), ["id"])


def test_pending_plans_then_run_without_op(hudi_sql):
    """As Hudi's own procedure tests: plans scheduled one after another cover disjoint file groups; a CALL
    without op executes every pending plan and schedules nothing new when nothing was written since."""
    hudi_sql.sql("CREATE TABLE h (id INT, name STRING, price DOUBLE, ts BIGINT) USING hudi "
                 "TBLPROPERTIES (primaryKey = 'id', preCombineField = 'ts', 'hoodie.parquet.small.file.limit' = '0')")
    hudi_sql.sql("INSERT INTO h VALUES (1, 'a1', 10.0, 1000)")
    hudi_sql.sql("INSERT INTO h VALUES (2, 'a2', 10.0, 1001)")
    first = hudi_sql.sql("CALL run_clustering(table => 'h', op => 'schedule')").collect()
    hudi_sql.sql("INSERT INTO h VALUES (3, 'a3', 10.0, 1002)")
    second = hudi_sql.sql("CALL run_clustering(table => 'h', op => 'schedule')").collect()
    assert [(r.input_group_size, r.state) for r in first + second] == [(1, "REQUESTED"), (1, "REQUESTED")]
    shown = hudi_sql.sql("CALL show_clustering('h')").collect()
    assert [r.timestamp for r in shown] == [second[0].timestamp, first[0].timestamp]
    done = hudi_sql.sql("CALL run_clustering(table => 'h', order => 'ts')").collect()
    assert sorted((r.timestamp, r.state) for r in done) == sorted(
        [(first[0].timestamp, "COMPLETED"), (second[0].timestamp, "COMPLETED")])
    assert [tuple(r) for r in hudi_sql.sql("SELECT id, name, price, ts FROM h ORDER BY id").collect()] == \
        [(1, "a1", 10.0, 1000), (2, "a2", 10.0, 1001), (3, "a3", 10.0, 1002)]
