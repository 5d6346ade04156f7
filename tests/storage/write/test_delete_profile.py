"""A delete's workload profile counted from the index lookup's cached matches (storage.write.locate
.deletes_by_matches, matches_profile): one count per file group of the stored keys found, no join back onto the
batch. The table afterwards is the one a replay of the deletes gives, under partition-scoped and global indexes."""
from __future__ import annotations

import pytest
from hudi_oracle import arrow_rows, hudi_rs_read, rows
from pyspark.sql import functions as F

import storage.write.write_operation as write_operation
from storage.index.hoodie_index import LOC_FILE_ID, LOOKUP_COUNT
from storage.meta_fields import RECORD_KEY
from storage.table.meta_client import HoodieTableMetaClient

SCHEMA = "id int, name string, ts long, dt string"
COLS = ["id", "name", "ts", "dt"]


def _dt(i):
    return f"2024-01-0{1 + i % 3}"


BASE = [(i, f"b{i}", 5, _dt(i)) for i in range(30)]
# repeated keys, a key stored nowhere, and key 5 named in a partition it is not stored in
DELETES = [(i, "x", 0, _dt(i)) for i in (1, 3, 3, 4, 27, 99)] + [(5, "x", 0, _dt(6))]


def _write(spark, path, data, opts, operation, staged=None):
    df = spark.createDataFrame(data, SCHEMA).coalesce(1)
    if staged:  # a batch read from files: Spark knows its size, and the lookup broadcasts it
        df.write.parquet(staged)
        df = spark.read.parquet(staged)
    df.write.format("hudi").options(**opts).option("hoodie.datasource.write.operation", operation) \
        .mode("append").save(path)


@pytest.mark.parametrize("table_type,index", [("COPY_ON_WRITE", "BLOOM"), ("MERGE_ON_READ", "BLOOM"),
                                              ("MERGE_ON_READ", "GLOBAL_BLOOM"), ("COPY_ON_WRITE", "SIMPLE")])
def test_delete_profile_counts_the_lookups_matches(spark, tmp_path, monkeypatch, table_type, index):
    path = str(tmp_path / "t")
    opts = {"hoodie.table.name": "d", "hoodie.datasource.write.table.type": table_type,
            "hoodie.datasource.write.recordkey.field": "id", "hoodie.datasource.write.precombine.field": "ts",
            "hoodie.datasource.write.partitionpath.field": "dt", "hoodie.index.type": index,
            "hoodie.sqlext.engine": "SPARK",  # the Spark path's profile from the lookup's matches
            "hoodie.datasource.write.hive_style_partitioning": "true"}
    _write(spark, path, BASE[:15], opts, "upsert")
    _write(spark, path, BASE[15:], opts, "upsert")  # a second file group per partition
    profiles, lookups, tallies = [], [], []
    counted = write_operation.matches_profile

    def spy(lookup, *rest):
        lookups.append(lookup)
        if LOOKUP_COUNT in lookup.columns:  # rows of a partition's batch records: a delete does not ask for them
            tallies.append(lookup.where(F.col(RECORD_KEY).isNull() & F.col(LOC_FILE_ID).isNull()).count())
        profiles.append(counted(lookup, *rest))
        return profiles[-1]

    monkeypatch.setattr(write_operation, "matches_profile", spy)
    _write(spark, path, DELETES, opts, "delete", str(tmp_path / "deletes"))

    deleted = {1, 3, 4, 27} | ({5} if index.startswith("GLOBAL") else set())  # partition-scoped: 5 is not found
    expected = rows([dict(zip(COLS, r)) for r in BASE if r[0] not in deleted], COLS)
    assert arrow_rows(hudi_rs_read(path), COLS) == expected
    [profile] = profiles
    # the bloom lookups count the keys found per file group on the way (no aggregation job); SIMPLE's are grouped
    assert (LOOKUP_COUNT in lookups[0].columns) == ("BLOOM" in index)
    assert tallies == ([0] if "BLOOM" in index else [])
    assert not profile.inserts and profile.total_updates == len(deleted)  # each stored key once
    meta = HoodieTableMetaClient.load(path)
    stats = meta.active_timeline.commit_metadata(meta.timeline.completed().instants[-1]).write_stats()
    assert {s.fileId for s in stats} == {f for _, f in profile.updates}
    assert sum(s.numDeletes for s in stats) == len(deleted)
