"""The fixture scripts through the CLI, as a user would run them: `.sql` scripts Java Hudi ran, concatenated into one
file (each in a database of its own, with the session time zone Java ran it in) and run by `sqlext sql -f` into a
new warehouse. Each table equals the one Java Hudi wrote (hudi-rs reads both). Every script (every table version,
the metadata table) runs in-process in test_fixture_scripts; here what the CLI path adds: a file of many scripts
split into statements, `SET` of the session time zone and of the table version a new table is written at (a v6 COW
table in a UTC-5 session, a v8 MOR table), databases made and switched to by `USE`, and the script that fails by
design, last: the run stops there with exit code 1 and the error on stderr. That keeps the CLI run short."""
from __future__ import annotations

import shutil

import pytest

from fixture_tables import FIXTURE_DIR
from hudi_oracle import arrow_rows, hudi_rs_read
from storage.table.meta_client import HoodieTableMetaClient
from test_cli import SPARK_CONF, sqlext
from test_fixture_scripts import (_JAVA_INSTANT_BOUND, _LOCATION, _SESSION_TIME_ZONE, _data_columns, _table_name,
                                  _table_version)

# v6 COW (UTC-5 session), v8 MOR (a `SET hoodie.write.table.version` other than the default), and the v6 script
# that fails by design; the v9 MOR script with a metadata table (the costliest: about 40% of the statement time of
# a run with it) runs in-process only
CLI_SCRIPTS = ("sample_cow_v6_complexkeygen_hivestyle", "trips_mor_avro_v8_trips_8i3u1d",
               "sample_mor_parquet_v6_nonpartitioned_rollback")
SCRIPTS = sorted(p.stem for p in FIXTURE_DIR.glob("*.sql") if p.stem in CLI_SCRIPTS)


@pytest.mark.skipif(not SCRIPTS, reason=f"no fixture scripts under {FIXTURE_DIR}")
def test_all_fixture_scripts_through_sqlext_sql_file(tmp_path, fixture_table):
    assert set(SCRIPTS) == set(CLI_SCRIPTS), "a chosen fixture script is missing"
    # the script whose CALL names an instant of Java's own run fails by design: it goes last
    ordered = sorted(SCRIPTS, key=lambda n: n in _JAVA_INSTANT_BOUND)
    parts, tables = [], {}
    for i, name in enumerate(ordered):
        script = (FIXTURE_DIR / f"{name}.sql").read_text()
        location = _LOCATION.search(script)
        if location:
            shutil.rmtree(location.group(1), ignore_errors=True)
        db = f"fx{i}"
        tables[name] = (db, _table_name(script), location.group(1) if location else None)
        parts.append(f"SET spark.sql.session.timeZone={_SESSION_TIME_ZONE.get(name, 'UTC')};\n"
                     f"SET hoodie.write.table.version={_table_version(name) or 6};\n"
                     f"CREATE DATABASE {db};\nUSE {db};\n{script.rstrip().rstrip(';')};\n")
    sql_file = tmp_path / "all_fixtures.sql"
    sql_file.write_text("\n".join(parts))
    warehouse = tmp_path / "warehouse"
    try:
        # test_cli's default environment, its JVMs on JIT tier 1 only (quick_jvm): three scripts' statements are too
        # few for C2 to pay back its compiling on two cores (measured: this run about 45-89 s -> 30-47 s)
        done = sqlext("sql", "-f", str(sql_file), "--metastore", "none", "--warehouse", str(warehouse),
                      "--output", "csv", *SPARK_CONF, timeout=600)
        bound = [n for n in ordered if n in _JAVA_INSTANT_BOUND]
        if bound:
            assert done.returncode == 1 and _JAVA_INSTANT_BOUND[bound[0]] in done.stderr, done.stderr[-2000:]
        else:
            assert done.returncode == 0, done.stderr[-2000:]
        for name, (db, table, location) in tables.items():
            if name in _JAVA_INSTANT_BOUND:
                continue
            found = [p.parent for p in warehouse.glob(f"{db}*/{table}/.hoodie")]
            assert len(found) == 1, f"{name}: table {db}.{table} not found under {warehouse}"
            java_table = str(fixture_table(name))
            assert HoodieTableMetaClient.load(str(found[0])).table_config.version == \
                HoodieTableMetaClient.load(java_table).table_config.version, name
            expected = hudi_rs_read(java_table)
            columns = _data_columns(java_table)
            got = hudi_rs_read(str(found[0]))
            assert (arrow_rows(got, columns) if got.num_rows else []) == \
                (arrow_rows(expected, columns) if expected.num_rows else []), name
    finally:
        for _, _, location in tables.values():
            if location:
                shutil.rmtree(location, ignore_errors=True)
