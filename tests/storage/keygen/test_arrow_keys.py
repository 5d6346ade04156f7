"""The Arrow spelling of the key generators (storage.keygen.arrow_keys) against the Spark one, row by row: the
same record keys, partition paths and errors, on data with nulls, empty strings and awkward values."""
import random

import pyarrow as pa
import pytest

from storage.config import HoodieConfig
from storage.keygen import create_key_generator
from storage.keygen.arrow_keys import partition_paths, record_keys, supports
from storage.exception import HoodieKeyError

SCHEMA = pa.schema([("id", pa.int64()), ("name", pa.string()), ("n", pa.int32()), ("dt", pa.string()),
                    ("region", pa.string()), ("f", pa.float64())])


def _rows(count: int, seed: int) -> pa.Table:
    rng = random.Random(seed)
    words = [None, "", "a", "b/c", "x y", "é", "2026-01-01", "..x", "a..b"]
    return pa.table({
        "id": [rng.choice([None, -5, 0, 7, 2**62]) if i % 7 == 0 else i for i in range(count)],
        "name": [rng.choice(words) for _ in range(count)],
        "n": [rng.choice([None, -1, 3]) for _ in range(count)],
        "dt": [rng.choice(words) for _ in range(count)],
        "region": [rng.choice(["eu", "us", None, ""]) for _ in range(count)],
        "f": [1.5] * count,
    }, schema=SCHEMA)


def _keygen(record_keys_, partitions, keygen=None, hive=False, encode=False):
    return create_key_generator(HoodieConfig.of({}), record_keys_, partitions, keygen, hive, encode)


def _spark_keys(spark, gen, table):
    df = spark.createDataFrame(table.to_pylist(), "id long, name string, n int, dt string, region string, f double")
    return [tuple(r) for r in df.select(gen.record_key(), gen.partition_path()).collect()]


def _arrow_keys(gen, table):
    return list(zip(record_keys(gen, table).to_pylist(), partition_paths(gen, table).to_pylist()))


CASES = [
    (["name"], ["dt"], None, False),
    (["id"], ["dt"], None, True),
    (["n"], ["region"], None, False),
    (["id", "name"], ["dt", "region"], None, True),
    (["id", "name"], ["dt", "n"], None, False),
    (["name"], ["region"], "org.apache.hudi.keygen.ComplexKeyGenerator", True),
    (["id"], [], "org.apache.hudi.keygen.NonpartitionedKeyGenerator", False),
]


@pytest.mark.parametrize("keys,partitions,keygen,hive", CASES)
def test_arrow_keys_match_spark_keys(spark, keys, partitions, keygen, hive):
    gen = _keygen(keys, partitions, keygen, hive)
    assert supports(gen, SCHEMA)
    table = _rows(300, seed=len(keys) * 10 + len(partitions))
    valid, refused = _split_by_arrow(gen, table)
    assert valid.num_rows > 100
    # the rows Arrow accepts, Spark accepts with the same keys (one job); some rows Arrow refuses, Spark refuses
    assert _arrow_keys(gen, valid) == _spark_keys(spark, gen, valid)
    for row, message in refused[:2]:
        with pytest.raises(Exception) as spark_exc:
            _spark_keys(spark, gen, row)
        assert message in str(spark_exc.value)


def _split_by_arrow(gen, table: pa.Table) -> tuple[pa.Table, list[tuple[pa.Table, str]]]:
    """(the rows whose keys Arrow computes, [(a row Arrow refuses, its message)]), row by row."""
    keep, refused = [], []
    for i in range(table.num_rows):
        try:
            _arrow_keys(gen, table.slice(i, 1))
            keep.append(i)
        except HoodieKeyError as exc:
            refused.append((table.slice(i, 1), str(exc)))
    return table.take(keep), refused


@pytest.mark.parametrize("keys,partitions,row,message", [
    (["id"], ["dt"], {"id": None, "dt": "d"}, "record key field 'id' cannot be null or empty"),
    (["name"], ["dt"], {"name": "", "dt": "d"}, "record key field 'name' cannot be null or empty"),
    (["id", "name"], ["dt"], {"id": None, "name": "", "dt": "d"},
     "all record key fields ['id', 'name'] are null or empty"),
    (["id"], ["dt"], {"id": 1, "dt": "../../etc"}, "partition field 'dt' value '../../etc' contains a '..' path segment"),
    (["id"], ["dt"], {"id": 1, "dt": "a/..\n"}, "contains a '..' path segment"),
])
def test_bad_keys_fail_as_in_spark(spark, keys, partitions, row, message):
    gen = _keygen(keys, partitions)
    full = {"id": 1, "name": "x", "n": 1, "dt": "d", "region": "eu", "f": 0.0, **row}
    table = pa.Table.from_pylist([full], schema=SCHEMA)
    with pytest.raises(HoodieKeyError) as exc:
        _arrow_keys(gen, table)
    assert message in str(exc.value)
    with pytest.raises(Exception) as spark_exc:
        _spark_keys(spark, gen, table)
    assert str(exc.value) in str(spark_exc.value)


def test_unsupported_key_generators_stay_in_spark():
    assert not supports(_keygen(["f"], ["dt"]), SCHEMA)  # a double's text differs between Spark and Arrow
    assert not supports(_keygen(["id"], ["dt"], encode=True), SCHEMA)
    assert not supports(_keygen(["id"], ["missing"]), SCHEMA)
    custom = _keygen(["id"], ["dt:simple"], "org.apache.hudi.keygen.CustomKeyGenerator")
    assert not supports(custom, SCHEMA)
    assert supports(_keygen(["ID"], ["Dt"]), SCHEMA)  # names resolve case-insensitively, as in Spark
