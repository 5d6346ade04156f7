"""Bounded, seeded fuzzing. Damaged metadata and log files (random truncation and bit flips of log files,
commit files and hoodie.properties) end in the project's own clear errors (HoodieError) or read the right row
count, never a hang; random mutations of SQL statements through sqlext end in clear errors (the project's, or
Spark's parse / analysis errors), never an internal Python error."""
from __future__ import annotations

import logging
import os
import random
import shutil
import signal
import time

import pytest
from pyspark.errors import PySparkException

from storage.exception import HoodieError
from storage.file_group.log_format import HoodieLogFileReader
from storage.file_group.log_block import HoodieLogBlockType
from storage.read.file_slice_reader import FileSliceReadContext, read_file_slice
from storage.table.fs_view import FileSystemView
from storage.table.meta_client import HoodieTableMetaClient
from storage.table.schema_resolver import table_data_schema

SCHEMA = "id int, name string, ts long, dt string"
CASES = 300
READ_TIMEOUT_S = 20


def count_rows(path: str) -> int:
    """The snapshot row count through the project's reader (file-system view, log merging), without Spark."""
    meta = HoodieTableMetaClient.load(path)
    ctx = FileSliceReadContext.for_table(meta)
    schema = table_data_schema(meta)
    return sum(read_file_slice(s, schema, ctx).num_rows for s in FileSystemView(meta).latest_merged_file_slices())


@pytest.fixture(scope="module")
def damaged_table_source(spark, tmp_path_factory):
    path = str(tmp_path_factory.mktemp("fuzz") / "t")
    opts = {"hoodie.table.name": "t", "hoodie.datasource.write.recordkey.field": "id",
            "hoodie.datasource.write.precombine.field": "ts", "hoodie.datasource.write.partitionpath.field": "dt",
            "hoodie.datasource.write.table.type": "MERGE_ON_READ"}
    for rows, op in ([(i, f"n{i}", 1, f"p{i % 2}") for i in range(20)], "upsert"), \
                    ([(i, f"u{i}", 2, f"p{i % 2}") for i in range(0, 20, 3)] + [(100, "new", 2, "p0")], "upsert"), \
                    ([(i, "x", 3, f"p{i % 2}") for i in (1, 2, 5)], "delete"):
        spark.createDataFrame(rows, SCHEMA).write.format("hudi").options(**opts) \
            .option("hoodie.datasource.write.operation", op).mode("append").save(path)
    return path


def _targets(root: str) -> list[str]:
    out = []
    for d, _, files in os.walk(root):
        if os.path.join(".hoodie", "metadata") in d:  # its damage: tests/storage/metadata/test_metadata_fuzz.py
            continue
        for f in files:
            if ".log." in f or f.endswith((".commit", ".deltacommit")) or f == "hoodie.properties":
                out.append(os.path.relpath(os.path.join(d, f), root))
    return sorted(out)


def _record_regions(path: str) -> list[tuple[int, int]]:
    """Byte ranges of data and delete blocks: Hudi's log format has no checksum over their records, so a bit
    flipped inside one can change a value (a key, too) without any reader noticing; that is the one damage the
    format cannot detect."""
    with HoodieLogFileReader(path, lazy=True) as reader:
        return [(b.offset, b.offset + b.size) for b in reader
                if b.block_type in (HoodieLogBlockType.AVRO_DATA_BLOCK, HoodieLogBlockType.DELETE_BLOCK,
                                    HoodieLogBlockType.PARQUET_DATA_BLOCK)]


def _timeout(signum, frame):
    raise TimeoutError(f"a read of a damaged table took more than {READ_TIMEOUT_S}s")


def test_damaged_files_give_clear_errors_or_right_counts(damaged_table_source, tmp_path, caplog):
    caplog.set_level(logging.ERROR)
    expected = count_rows(damaged_table_source)
    assert expected == 18
    targets = _targets(damaged_table_source)
    assert any(".log." in t for t in targets) and any("hoodie.properties" in t for t in targets)
    rng = random.Random(15)
    outcomes: dict[str, int] = {}
    previous = signal.signal(signal.SIGALRM, _timeout)
    try:
        for case in range(CASES):
            rel = rng.choice(targets)
            work = str(tmp_path / f"c{case}")
            shutil.copytree(damaged_table_source, work)
            target = os.path.join(work, rel)
            data = bytearray(open(target, "rb").read())
            flipped: list[int] = []
            if rng.random() < 0.5:
                kind, data = "truncate", data[:rng.randrange(len(data))]
            else:
                kind = "flip"
                for _ in range(rng.randint(1, 3)):
                    flipped.append(rng.randrange(len(data)))
                    data[flipped[-1]] ^= 1 << rng.randrange(8)
            regions = _record_regions(os.path.join(damaged_table_source, rel)) if ".log." in rel else []
            with open(target, "wb") as f:
                f.write(bytes(data))
            signal.alarm(READ_TIMEOUT_S)
            try:
                got = count_rows(work)
                outcome = "right count" if got == expected else f"count {got}"
            except HoodieError as exc:
                outcome = type(exc).__name__
            finally:
                signal.alarm(0)
            if outcome.startswith("count"):
                undetectable = flipped and all(any(a <= p < b for a, b in regions) for p in flipped)
                assert undetectable, f"case {case}: {kind} of {rel} read {outcome}, expected {expected} or an error"
                outcome = "record bytes flipped (no checksum in the format)"
            key = f"{'log' if '.log.' in rel else rel.rsplit('.', 1)[-1]} {kind}: {outcome}"
            outcomes[key] = outcomes.get(key, 0) + 1
            shutil.rmtree(work)
    finally:
        signal.signal(signal.SIGALRM, previous)
    print("\n".join(f"{k}: {v}" for k, v in sorted(outcomes.items())))
    assert sum(v for k, v in outcomes.items() if "Error" in k) > CASES // 4  # damage is detected, not ignored


STATEMENTS = [
    "CREATE TABLE {t} (id INT, name STRING, ts BIGINT, dt STRING) USING hudi PARTITIONED BY (dt) "
    "TBLPROPERTIES (primaryKey = 'id', preCombineField = 'ts')",
    "INSERT INTO {t} VALUES (1, 'a', 1, 'p1'), (2, 'b', 1, 'p2')",
    "UPDATE {t} SET name = 'z' WHERE id = 1",
    "DELETE FROM {t} WHERE id = 2",
    "MERGE INTO {t} t USING (SELECT 3 AS id, 'c' AS name, 2L AS ts, 'p1' AS dt) s ON t.id = s.id "
    "WHEN MATCHED THEN UPDATE SET * WHEN NOT MATCHED THEN INSERT *",
    "SELECT name, count(*) FROM {t} WHERE ts > 0 GROUP BY name",
    "CALL show_commits(table => '{t}', limit => 5)",
    "ALTER TABLE {t} SET TBLPROPERTIES ('hoodie.keep.max.commits' = '30')",
]
_WORDS = ["SELECT", "FROM", "WHERE", "TABLE", "(", ")", ",", "'", "=", "*", "NULL", "id", "hudi", ";", "--", "1e999"]


def _mutate(statement: str, rng: random.Random) -> str:
    tokens = statement.split(" ")
    i = rng.randrange(len(tokens))
    how = rng.choice(["drop", "duplicate", "swap", "replace", "cut"])
    if how == "drop":
        del tokens[i]
    elif how == "duplicate":
        tokens.insert(i, tokens[i])
    elif how == "swap":
        j = rng.randrange(len(tokens))
        tokens[i], tokens[j] = tokens[j], tokens[i]
    elif how == "replace":
        tokens[i] = rng.choice(_WORDS)
    else:
        return statement[:rng.randrange(1, len(statement))]
    return " ".join(tokens)


def test_mutated_sql_gives_clear_errors(spark, tmp_path):
    from sqlext.sql import install

    install(spark, getattr(spark, "_sqlext_catalog").resolver)
    db = f"fuzz_{os.getpid()}"
    spark.sql(f"CREATE DATABASE IF NOT EXISTS {db}")
    table = f"{db}.t"
    for statement in STATEMENTS:
        spark.sql(statement.format(t=table))
    rng = random.Random(15)
    started, cases, errors = time.monotonic(), 0, 0
    while cases < 200 and time.monotonic() - started < 90:
        statement = _mutate(rng.choice(STATEMENTS).format(t=table), rng)
        cases += 1
        try:
            spark.sql(statement).collect()
        except (HoodieError, PySparkException):
            errors += 1
        except Exception as exc:  # an internal error escaping the SQL layer
            pytest.fail(f"{statement!r} raised {type(exc).__name__}: {exc}")
    assert cases >= 20 and errors > 0
