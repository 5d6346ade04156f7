"""The batch's partition counts (storage.write.prepare.partition_counts): grouped by the partition fields' values
with their paths computed in Arrow, or by Spark's path column; both give the same counts and the same errors."""
from __future__ import annotations

import pytest
from pyspark.sql.pandas.types import to_arrow_schema

from storage.config import HoodieConfig
from storage.exception import HoodieWriteError
from storage.write.operation import WriteOperationType
from storage.write.prepare import key_records, partition_counts, target_schema
from storage.write.table_settings import resolve_table_settings


def _keyed(spark, rows, schema, partitions, hive=True, keygen=None):
    opts = {"hoodie.table.name": "t", "hoodie.datasource.write.recordkey.field": "id",
            "hoodie.datasource.write.partitionpath.field": ",".join(partitions),
            "hoodie.datasource.write.hive_style_partitioning": str(hive).lower()}
    if keygen:
        opts["hoodie.datasource.write.keygenerator.class"] = keygen
    settings = resolve_table_settings(HoodieConfig.of(opts), None)
    df = spark.createDataFrame(rows, schema)
    op = WriteOperationType.BULK_INSERT
    return key_records(df, settings, op, target_schema(to_arrow_schema(df.schema, timezone="UTC"), None, op)), settings.keygen


@pytest.mark.parametrize("rows,schema,partitions,hive,expected", [
    ([(1, "a"), (2, None), (3, ""), (4, "a"), (5, "b/c")], "id long, dt string", ["dt"], True,
     {"dt=a": 2, "dt=__HIVE_DEFAULT_PARTITION__": 2, "dt=b/c": 1}),
    ([(1, "x", 7), (2, "x", 7), (3, "y", None)], "id long, region string, n int", ["region", "n"], False,
     {"x/7": 2, "y/__HIVE_DEFAULT_PARTITION__": 1}),
])
def test_counts_by_values_match_counts_by_paths(spark, rows, schema, partitions, hive, expected):
    records, keygen = _keyed(spark, rows, schema, partitions, hive)
    assert partition_counts(records, None, keygen) == expected
    assert partition_counts(records) == expected  # Spark's path column


def test_counts_of_keys_arrow_does_not_spell_stay_in_spark(spark):
    records, keygen = _keyed(spark, [(1, 1.5), (2, 1.5)], "id long, x double", ["x"], hive=False)
    assert partition_counts(records, None, keygen) == {"1.5": 2}  # Spark's text of a double


def test_a_path_escaping_the_table_fails_before_anything_runs(spark):
    records, keygen = _keyed(spark, [(1, "ok"), (2, "../up")], "id long, dt string", ["dt"])
    with pytest.raises(HoodieWriteError, match=r"HoodieKeyError: partition field 'dt' value '\.\./up' contains"):
        partition_counts(records, None, keygen)
    with pytest.raises(HoodieWriteError, match=r"HoodieKeyError: partition field 'dt' value '\.\./up' contains"):
        partition_counts(records)


def test_an_unpartitioned_table_has_one_path(spark):
    records, keygen = _keyed(spark, [(1, "a"), (2, "b")], "id long, dt string", [],
                             keygen="org.apache.hudi.keygen.NonpartitionedKeyGenerator")
    assert partition_counts(records, None, keygen) == {"": 2}
    assert partition_counts(records.limit(0), None, keygen) == {}


@pytest.mark.parametrize("op,is_global,count_keys,parallelism,expected", [
    (WriteOperationType.UPSERT, False, False, 0, True),
    (WriteOperationType.DELETE, False, False, 0, True),
    (WriteOperationType.INSERT, False, False, 0, True),
    (WriteOperationType.UPSERT, True, False, 0, False),  # a key's records may sit in two partitions' tasks
    (WriteOperationType.UPSERT, False, True, 0, False),  # SQL MERGE counts repeated keys before the lookup
    (WriteOperationType.UPSERT, False, False, 4, False),  # the dedup shuffle's width was asked for
    (WriteOperationType.BULK_INSERT, False, False, 0, False),  # its tasks roll files by input order
    (WriteOperationType.INSERT_OVERWRITE, False, False, 0, False),
])
def test_which_writes_combine_in_their_tasks(op, is_global, count_keys, parallelism, expected):
    from storage.write.prepare import combines_in_tasks

    assert combines_in_tasks(op, is_global, count_keys, parallelism) is expected
