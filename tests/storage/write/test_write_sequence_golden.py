"""The tables a fixed sequence of writes and services produces stay what they were when the commit path was
consolidated: every completed instant's action, operation and per-partition write counts, the files each
partition ends with, and the rows. `write_sequence_golden.json` was produced by this module's `summary` run on the
code before the consolidation (c903945); regenerate it only for a deliberate change of what is written
(`python tests/storage/write/test_write_sequence_golden.py <out.json>` from a checkout with a venv).

Only the DataFrame API drives the sequence, so the same script runs on both sides of a refactoring."""
from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest

GOLDEN = Path(__file__).with_name("write_sequence_golden.json")
SCHEMA = "id int, name string, ts long, dt string"


def _options(name: str, table_type: str) -> dict[str, str]:
    opts = {"hoodie.table.name": name, "hoodie.datasource.write.table.type": table_type,
            "hoodie.datasource.write.recordkey.field": "id", "hoodie.datasource.write.precombine.field": "ts",
            "hoodie.datasource.write.partitionpath.field": "dt", "hoodie.cleaner.commits.retained": "2",
            "hoodie.keep.min.commits": "3", "hoodie.keep.max.commits": "4",
            "hoodie.clustering.inline": "true", "hoodie.clustering.inline.max.commits": "4",
            # the golden file predates the metadata table, whose compaction would hold archival back
            "hoodie.metadata.enable": "false"}
    if table_type == "MERGE_ON_READ":
        # small-file handling off: the sequence keeps writing logs (merge-on-read inserts into small log-free
        # slices, as Hudi's delta-commit partitioner does, came after the golden file; test_file_sizing has them)
        opts.update({"hoodie.compact.inline": "true", "hoodie.compact.inline.max.delta.commits": "3",
                     "hoodie.parquet.small.file.limit": "0"})
    return opts


def _steps() -> list[tuple[str, list[tuple]]]:
    """(operation, rows) of each write: inserts, updates across partitions, a delete, an overwrite."""
    steps = [("bulk_insert", [(i, f"a{i}", 1, f"p{i % 3}") for i in range(30)]),
             ("insert", [(i, f"b{i}", 1, f"p{i % 3}") for i in range(30, 45)])]
    for n in range(2, 8):
        steps.append(("upsert", [(i, f"u{n}", n, f"p{i % 3}") for i in range(n, 45, 7)]
                      + [(100 + n, f"n{n}", n, "p1")]))
    steps.append(("delete", [(i, "", 9, f"p{i % 3}") for i in (3, 4, 5)]))
    steps.append(("insert_overwrite", [(200 + i, "o", 10, "p2") for i in range(4)]))
    steps.append(("upsert", [(i, "z", 11, f"p{i % 3}") for i in range(0, 12)]))
    return steps


def run_sequence(spark, base: Path, table_type: str, extra: dict[str, str] | None = None) -> None:
    opts = {**_options(base.name, table_type), **(extra or {})}
    for operation, rows in _steps():
        spark.createDataFrame(rows, SCHEMA).write.format("hudi").options(**opts) \
            .option("hoodie.datasource.write.operation", operation).mode("append").save(str(base))


def summary(spark, base: Path) -> dict:
    from storage.table.meta_client import HoodieTableMetaClient

    meta = HoodieTableMetaClient.load(str(base))
    instants = []
    for instant in meta.timeline.completed():
        entry = {"action": instant.action}
        if instant.action in ("commit", "deltacommit", "replacecommit"):
            md = meta.active_timeline.commit_metadata(instant)
            entry["operation"] = md.operationType
            entry["partitions"] = {
                partition: sorted([s.numWrites, s.numInserts, s.numUpdateWrites, s.numDeletes,
                                   ".log." in (s.path or "")] for s in stats)
                for partition, stats in sorted(md.partitionToWriteStats.items())}
            entry["replaced"] = {p: len(ids) for p, ids in sorted((md.partitionToReplaceFileIds or {}).items())}
        instants.append(entry)
    files = {}
    for root, dirs, names in os.walk(base):
        dirs[:] = [d for d in dirs if not d.startswith(".hoodie")]
        if root != str(base):
            part = os.path.relpath(root, base)
            files[part] = sorted("log" if ".log." in n else "parquet" for n in names
                                 if n.endswith(".parquet") or ".log." in n)
    rows = spark.read.format("hudi").load(str(base)).select("id", "name", "ts", "dt").orderBy("id").collect()
    return {"instants": instants, "files": dict(sorted(files.items())), "rows": [list(r) for r in rows]}


@pytest.mark.parametrize("table_type", ["COPY_ON_WRITE", "MERGE_ON_READ"])
def test_the_same_writes_give_the_same_tables(spark, tmp_path, table_type):
    base = tmp_path / f"seq_{table_type[:3].lower()}"
    run_sequence(spark, base, table_type)
    got = summary(spark, base)
    want = json.loads(GOLDEN.read_text())[table_type]
    assert got["rows"] == want["rows"]
    assert got["files"] == want["files"]
    assert [i["action"] for i in got["instants"]] == [i["action"] for i in want["instants"]]
    assert got["instants"] == want["instants"]


if __name__ == "__main__":  # regenerate: python test_write_sequence_golden.py <out.json>
    import tempfile

    import sqlext

    out = {}
    with tempfile.TemporaryDirectory() as tmp:
        # the test session's settings (tests/conftest.py), without its metastore
        session = sqlext.session(master="local[2]", warehouse=Path(tmp) / "warehouse", metastore="none",
                                 conf={"spark.ui.enabled": "false", "spark.sql.shuffle.partitions": "4",
                                       "spark.ui.showConsoleProgress": "false", "spark.driver.memory": "2g",
                                       "hoodie.datasource.hive_sync.enable": "false"})
        for kind in ("COPY_ON_WRITE", "MERGE_ON_READ"):
            path = Path(tmp) / f"seq_{kind[:3].lower()}"
            run_sequence(session, path, kind)
            out[kind] = summary(session, path)
    Path(sys.argv[1]).write_text(json.dumps(out, indent=1, sort_keys=True) + "\n")
