"""Java-written table version 8 and 9 tables, written to by us: a copy of each fixture is upserted (an existing
key updated, a new key, a key deleted), then compacted (merge-on-read), clustered and cleaned. After each step our
reader and hudi-rs give the same rows, equal to Java's rows with exactly our changes. Our writer keeps the table's
metadata table (`hoodie.metadata.enable`, default true; initialised on a table that had none) in step: its `files`
partition lists exactly the committed files, a record index stays equal to a scan of the table (rebuild and
compare), and so does each secondary index."""
from __future__ import annotations

import shutil

import pytest

from fixture_tables import fixture_names
from hudi_oracle import META, arrow_rows, check_record_index, check_secondary_indexes, hudi_rs_read, spark_rows
from storage.config import HoodieConfig
from storage.metadata.table_metadata import HoodieTableMetadata
from storage.metadata.table_metadata_util import committed_files
from storage.table.fs_view import FileSystemView
from storage.table.meta_client import HoodieTableMetaClient
from storage.table_service.clean import clean_table
from storage.table_service.clustering import run_clustering, schedule_clustering
from storage.table_service.compaction import run_compaction, schedule_compaction

V8_V9 = [n for n in fixture_names() if "_v8" in n or "_v9" in n]


def _new_key(value):
    return value + 100000 if isinstance(value, int) else f"{value}-new"


def _data_rows(spark, base):
    return spark.read.format("hudi").load(str(base)).drop(*META)


def _check(spark, base, expected: list[tuple], step: str) -> None:
    ours = spark_rows(spark.read.format("hudi").load(str(base)))
    assert ours == expected, f"{step}: our reader differs from the expected rows"
    theirs = arrow_rows(hudi_rs_read(str(base)))
    assert theirs == expected, f"{step}: hudi-rs differs from the expected rows"


@pytest.mark.parametrize("name", V8_V9)
def test_java_v8_v9_table_written_by_us(spark, fixture_table, tmp_path, name):
    base = tmp_path / name
    shutil.copytree(fixture_table(name), base)
    meta = HoodieTableMetaClient.load(str(base))
    version, is_mor = meta.table_config.version, meta.table_config.is_mor
    keys = meta.table_config.record_key_fields
    ordering = meta.table_config.precombine_field
    java_instants = {p.name for p in (base / ".hoodie" / "timeline").iterdir()}
    had_record_index = "record_index" in meta.table_config.props.get("hoodie.table.metadata.partitions", "")

    java = _data_rows(spark, base).orderBy(*keys).collect()
    assert len(java) >= 3, "the fixture needs three rows to update, delete and copy"
    columns = list(java[0].asDict())
    updated, deleted, template = java[0].asDict(), java[1].asDict(), java[-1].asDict()
    changed = next(c for c in columns if c not in keys and c != ordering and c not in meta.table_config.partition_fields
                   and isinstance(updated[c], str))
    updated[changed] = f"{updated[changed]}-ours"
    fresh = dict(template, **{k: _new_key(template[k]) for k in keys})
    if ordering:  # our versions win under event-time ordering too
        for row in (updated, fresh, deleted):
            row[ordering] = row[ordering] + 1000 if isinstance(row[ordering], int) else row[ordering]

    schema = _data_rows(spark, base).schema
    upserts = spark.createDataFrame([tuple(r[c] for c in columns) for r in (updated, fresh)], schema)
    upserts.write.format("hudi").option("hoodie.datasource.write.operation", "upsert").mode("append").save(str(base))
    delete = spark.createDataFrame([tuple(deleted[c] for c in columns)], schema)
    delete.write.format("hudi").option("hoodie.datasource.write.operation", "delete").mode("append").save(str(base))

    key_of = lambda r: tuple(r[k] for k in keys)  # noqa: E731
    rows = {key_of(r.asDict()): r.asDict() for r in java}
    rows[key_of(updated)] = updated
    rows[key_of(fresh)] = fresh
    del rows[key_of(deleted)]
    expected = spark_rows(spark.createDataFrame([tuple(r[c] for c in columns) for r in rows.values()], schema))
    _check(spark, base, expected, "after the upsert and delete")

    meta = HoodieTableMetaClient.load(str(base))
    assert meta.table_config.version == version, "a write never changes the table version"
    _check_listing(meta)
    if had_record_index:
        check_record_index(spark, base)
        check_secondary_indexes(spark, base)

    if is_mor:
        instant = schedule_compaction(str(base))
        assert instant is not None
        run_compaction(spark, str(base), instant)
        _check(spark, base, expected, "after compaction")
    schedule_clustering(str(base), HoodieConfig.of({"hoodie.clustering.plan.strategy.small.file.limit": "104857600"}))
    run_clustering(spark, str(base))
    _check(spark, base, expected, "after clustering")
    clean_table(spark, str(base), HoodieConfig.of({"hoodie.cleaner.commits.retained": "1"}))
    _check(spark, base, expected, "after clean")
    # every instant we wrote is in the table's own layout: completion times in completed names, Avro content
    ours = [p for p in (base / ".hoodie" / "timeline").iterdir() if p.is_file() and p.name not in java_instants]
    assert ours and all(p.read_bytes()[:4] == b"Obj\x01" for p in ours if p.stat().st_size)
    completed = [p.name for p in ours if not p.name.endswith((".requested", ".inflight"))]
    assert completed and all("_" in n.split(".")[0] for n in completed), completed
    _check_listing(HoodieTableMetaClient.load(str(base)))
    if had_record_index:
        check_record_index(spark, base)
        check_secondary_indexes(spark, base)


def _check_listing(meta: HoodieTableMetaClient) -> None:
    partitions = meta.table_config.props.get("hoodie.table.metadata.partitions", "").split(",")
    assert "files" in partitions
    listed = {p: f for p, f in committed_files(FileSystemView(meta, use_metadata_table=False)).items() if f}
    assert HoodieTableMetadata(meta).files_in_partitions(sorted(listed)) == listed
