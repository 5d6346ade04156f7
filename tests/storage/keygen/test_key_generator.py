"""Record keys and partition paths as Apache Hudi's key generators produce them (expected strings by hand)."""
import pytest

from storage.config import HoodieConfig
from storage.keygen import create_key_generator
from storage.keygen.key_generator import (
    HoodieKeyError,
    partition_values_from_path,
    resolve_keygen_type,
)


def _keys(spark, rows, schema, record_keys, partitions, keygen=None, hive=False, encode=False, **opts):
    gen = create_key_generator(HoodieConfig.of(opts), record_keys, partitions, keygen, hive, encode)
    df = spark.createDataFrame(rows, schema)
    return [tuple(r) for r in df.select(gen.record_key(), gen.partition_path()).collect()]


def test_simple_key_plain_and_hive_style(spark):
    rows = [(1, "2024-01-01"), (2, None), (3, "")]
    plain = _keys(spark, rows, "id long, dt string", ["id"], ["dt"])
    assert plain == [("1", "2024-01-01"), ("2", "__HIVE_DEFAULT_PARTITION__"), ("3", "__HIVE_DEFAULT_PARTITION__")]
    hive = _keys(spark, rows[:1], "id long, dt string", ["id"], ["dt"], hive=True)
    assert hive == [("1", "dt=2024-01-01")]


def test_complex_key_and_multi_level_partitions(spark):
    rows = [(1, "a", "x", "y"), (2, None, "x", "z")]
    got = _keys(spark, rows, "id long, name string, p1 string, p2 string", ["id", "name"], ["p1", "p2"], hive=True)
    assert got == [("id:1,name:a", "p1=x/p2=y"), ("id:2,name:__null__", "p1=x/p2=z")]
    plain = _keys(spark, rows[:1], "id long, name string, p1 string, p2 string", ["id", "name"], ["p1", "p2"])
    assert plain == [("id:1,name:a", "x/y")]
    # one key field with the complex generator keeps the field name, as ComplexKeyGenerator does
    single = _keys(spark, rows[:1], "id long, name string, p1 string, p2 string", ["id"], ["p1"],
                   keygen="org.apache.hudi.keygen.ComplexKeyGenerator")
    assert single == [("id:1", "x")]


def test_non_partitioned(spark):
    got = _keys(spark, [(7, "x")], "id long, dt string", ["id"], [],
                keygen="org.apache.hudi.keygen.NonpartitionedKeyGenerator")
    assert got == [("7", "")]


@pytest.mark.parametrize("rows,schema,opts,expected", [
    ([(1, 1704196800000)], "id long, ts long",
     {"hoodie.keygen.timebased.timestamp.type": "EPOCHMILLISECONDS",
      "hoodie.keygen.timebased.output.dateformat": "yyyy/MM/dd"}, "2024/01/02"),
    ([(1, 1704196800)], "id long, ts long",
     {"hoodie.keygen.timebased.timestamp.type": "UNIX_TIMESTAMP",
      "hoodie.keygen.timebased.output.dateformat": "yyyyMMddHH"}, "2024010212"),
    ([(1, "2024-03-05 10:11:12")], "id long, ts string",
     {"hoodie.keygen.timebased.timestamp.type": "DATE_STRING",
      "hoodie.keygen.timebased.input.dateformat": "yyyy-MM-dd HH:mm:ss",
      "hoodie.keygen.timebased.output.dateformat": "yyyy-MM-dd"}, "2024-03-05"),
])
def test_timestamp_based_partition_path(spark, rows, schema, opts, expected):
    got = _keys(spark, rows, schema, ["id"], ["ts"], keygen="org.apache.hudi.keygen.TimestampBasedKeyGenerator",
                **opts)
    assert got == [("1", expected)]


def test_url_encoding_escapes_like_hive(spark):
    got = _keys(spark, [(1, "a/b c:d%e=f")], "id long, dt string", ["id"], ["dt"], encode=True, hive=True)
    # Hive's escapePathName: '/', ':', '%', '=' become %XX; the space stays
    assert got == [("1", "dt=a%2Fb c%3Ad%25e%3Df")]
    untouched = _keys(spark, [(1, "plain-value_1")], "id long, dt string", ["id"], ["dt"], encode=True)
    assert untouched == [("1", "plain-value_1")]


@pytest.mark.parametrize("rows,error", [
    ([(None, "d")], "record key field 'id' cannot be null or empty"),
    ([(1, "../../etc")], "contains a '..' path segment"),
])
def test_bad_keys_fail_with_a_message_naming_the_field(spark, rows, error):
    with pytest.raises(Exception) as exc:
        _keys(spark, rows, "id long, dt string", ["id"], ["dt"])
    assert error in str(exc.value)


def test_keygen_type_resolution():
    assert resolve_keygen_type(None, ["id"], ["dt"]) == "SIMPLE"
    assert resolve_keygen_type(None, ["id", "x"], ["dt"]) == "COMPLEX"
    assert resolve_keygen_type(None, ["id"], []) == "NON_PARTITION"
    assert resolve_keygen_type("org.apache.hudi.keygen.TimestampBasedAvroKeyGenerator", ["id"], ["ts"]) == "TIMESTAMP"
    with pytest.raises(HoodieKeyError, match="unsupported key generator 'com.acme.MyKeyGen'"):
        resolve_keygen_type("com.acme.MyKeyGen", ["id"], ["dt"])


def test_partition_values_from_path():
    assert partition_values_from_path("dt=2024-01-01/region=eu", ["dt", "region"], True) == {
        "dt": "2024-01-01", "region": "eu"}
    assert partition_values_from_path("2024-01-01/eu", ["dt", "region"], False) == {"dt": "2024-01-01", "region": "eu"}
    assert partition_values_from_path("", ["dt"], False) == {}
