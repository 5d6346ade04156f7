"""Record keys and partition paths as Apache Hudi's key generators produce them (expected strings by hand)."""
import pytest

from storage.config import HoodieConfig
from storage.keygen import create_key_generator
from storage.keygen.key_generator import (
    HoodieKeyError,
    partition_values_from_path,
    resolve_keygen_type,
    timestamp_partition_fields,
)
from storage.keygen.timestamp_based import has_offset, java_time_pattern
from storage.table.table_config import HoodieTableConfig


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


# -- TimestampBasedKeyGenerator ----------------------------------------------------------------------
TS = "org.apache.hudi.keygen.TimestampBasedKeyGenerator"
T = "hoodie.keygen.timebased."


def _paths(spark, rows, schema, **opts):
    return [p for _, p in _keys(spark, rows, schema, ["id"], ["ts"], keygen=TS, **opts)]


@pytest.mark.parametrize("rows,schema,opts,expected", [
    # Java's TimeUnit conversions truncate to milliseconds; a null field goes 1 unit past the epoch
    ([(1, 1705311000123456), (2, None)], "id long, ts long",
     {T + "timestamp.type": "EPOCHMICROSECONDS", T + "output.dateformat": "yyyy-MM-dd HH:mm:ss.SSS"},
     ["2024-01-15 09:30:00.123", "1970-01-01 00:00:00.000"]),
    ([(1, 19737), (2, 19738)], "id long, ts long",
     {T + "timestamp.type": "SCALAR", T + "timestamp.scalar.time.unit": "DAYS", T + "output.dateformat": "yyyy/MM/dd"},
     ["2024/01/15", "2024/01/16"]),
    ([(1, 1705311000.9), (2, None)], "id long, ts double",
     {T + "timestamp.type": "UNIX_TIMESTAMP", T + "output.dateformat": "yyyy/MM/dd/HH"},
     ["2024/01/15/09", "1970/01/01/00"]),
    # one timezone for input and output: 09:30 UTC is 15:00 in Kolkata
    ([(1, 1705311000000)], "id long, ts long",
     {T + "timestamp.type": "EPOCHMILLISECONDS", T + "output.dateformat": "yyyy/MM/dd/HH",
      T + "timezone": "Asia/Kolkata"}, ["2024/01/15/15"]),
    # Joda's `Z` reads a literal Z (UTC) and +hhmm; a text without offset is in the input timezone
    ([(1, "2024-01-15T10:30:00.000Z"), (2, "2024-01-15T10:30:00.000+0530"), (3, None)], "id long, ts string",
     {T + "timestamp.type": "DATE_STRING", T + "input.dateformat": "yyyy-MM-dd'T'HH:mm:ss.SSSZ",
      T + "output.dateformat": "yyyy/MM/dd/HH"}, ["2024/01/15/10", "2024/01/15/05", "1970/01/01/00"]),
    ([(1, "2024-01-15 10:30:00"), (2, "2024/01/16")], "id long, ts string",
     {T + "timestamp.type": "DATE_STRING", T + "input.dateformat": "yyyy-MM-dd HH:mm:ss,yyyy/MM/dd",
      T + "input.timezone": "Asia/Kolkata", T + "output.dateformat": "yyyy-MM-dd-HH"},
     ["2024-01-15-05", "2024-01-15-18"]),
])
def test_timestamp_types_as_hudi_formats_them(spark, rows, schema, opts, expected):
    assert _paths(spark, rows, schema, **opts) == expected


def test_timestamp_partition_path_ignores_the_session_time_zone(spark):
    opts = {T + "timestamp.type": "EPOCHMILLISECONDS", T + "output.dateformat": "yyyy/MM/dd/HH"}
    string_opts = {T + "timestamp.type": "DATE_STRING", T + "input.dateformat": "yyyy-MM-dd HH:mm",
                   T + "output.dateformat": "yyyy/MM/dd/HH"}
    before = spark.conf.get("spark.sql.session.timeZone")
    spark.conf.set("spark.sql.session.timeZone", "America/Los_Angeles")
    try:
        assert _paths(spark, [(1, 1705311000000)], "id long, ts long", **opts) == ["2024/01/15/09"]
        assert _paths(spark, [(1, "2024-01-15 23:30")], "id long, ts string", **string_opts) == ["2024/01/15/23"]
    finally:
        spark.conf.set("spark.sql.session.timeZone", before)


def test_timestamp_hive_style_and_url_encoding(spark):
    opts = {T + "timestamp.type": "UNIX_TIMESTAMP", T + "output.dateformat": "yyyy/MM/dd"}
    assert _keys(spark, [(1, 1705311000)], "id long, ts long", ["id"], ["ts"], keygen=TS, hive=True, **opts) == [
        ("1", "ts=2024/01/15")]
    assert _keys(spark, [(1, 1705311000)], "id long, ts long", ["id"], ["ts"], keygen=TS, encode=True, **opts) == [
        ("1", "2024%2F01%2F15")]


def test_unparsable_date_string_fails_naming_field_and_value(spark):
    with pytest.raises(Exception, match="partition field 'ts' value 'garbage' does not parse"):
        _paths(spark, [(1, "garbage")], "id long, ts string", **{
            T + "timestamp.type": "DATE_STRING", T + "input.dateformat": "yyyy-MM-dd", T + "output.dateformat": "yyyy"})


@pytest.mark.parametrize("opts,message", [
    ({T + "output.dateformat": "yyyy"}, "needs hoodie.keygen.timebased.timestamp.type"),
    ({T + "timestamp.type": "EPOCH", T + "output.dateformat": "yyyy"}, "got 'EPOCH'"),
    ({T + "timestamp.type": "UNIX_TIMESTAMP"}, "needs hoodie.keygen.timebased.output.dateformat"),
    ({T + "timestamp.type": "DATE_STRING", T + "output.dateformat": "yyyy"},
     "needs hoodie.keygen.timebased.input.dateformat"),
    ({T + "timestamp.type": "SCALAR", T + "timestamp.scalar.time.unit": "weeks", T + "output.dateformat": "yyyy"},
     "unsupported hoodie.keygen.timebased.timestamp.scalar.time.unit 'WEEKS'"),
])
def test_timestamp_options_are_checked_before_any_work(opts, message):
    with pytest.raises(HoodieKeyError, match=message):
        create_key_generator(HoodieConfig.of(opts), ["id"], ["ts"], TS, False, False)


def test_table_properties_supply_the_timestamp_options(spark):
    """A later write names no key generator options: the table's persisted ones apply, the write's win."""
    table = HoodieTableConfig({T + "timestamp.type": "EPOCHMILLISECONDS", T + "output.dateformat": "yyyy/MM/dd",
                               "hoodie.table.name": "t"})
    gen = create_key_generator(table.with_options(), ["id"], ["ts"], TS, False, False)
    df = spark.createDataFrame([(1, 1705311000000)], "id long, ts long")
    assert df.select(gen.partition_path()).first()[0] == "2024/01/15"
    gen = create_key_generator(table.with_options(HoodieConfig.of({T + "output.dateformat": "yyyyMM"})), ["id"],
                               ["ts"], TS, False, False)
    assert df.select(gen.partition_path()).first()[0] == "202401"


def test_custom_key_generator_timestamp_field(spark):
    opts = {T + "timestamp.type": "EPOCHMILLISECONDS", T + "output.dateformat": "yyyyMMdd"}
    got = _keys(spark, [(1, "eu", 1705311000000)], "id long, region string, ts long", ["id"],
                ["region:simple", "ts:timestamp"], keygen="org.apache.hudi.keygen.CustomKeyGenerator", **opts)
    assert got == [("1", "eu/20240115")]


def test_joda_offset_patterns_become_java_time_patterns():
    assert java_time_pattern("yyyy-MM-dd'T'HH:mm:ss.SSSZ") == "yyyy-MM-dd'T'HH:mm:ss.SSSXX"
    assert java_time_pattern("yyyy-MM-dd HH:mmZZ") == "yyyy-MM-dd HH:mmXXX"
    assert java_time_pattern("yyyy 'Zulu' ZZZ") == "yyyy 'Zulu' VV"
    assert has_offset("yyyy-MM-dd'T'HH:mm:ss.SSSXX") and not has_offset("yyyy-MM-dd'T'HH 'Z'")


def test_partition_values_of_a_formatted_timestamp_path():
    """One partition field owns the whole path (a timestamp key generator's yyyy/MM/dd/HH is one value)."""
    assert partition_values_from_path("2024/01/15/10", ["ts"], False) == {"ts": "2024/01/15/10"}
    assert partition_values_from_path("ts=2024/01/15", ["ts"], True) == {"ts": "2024/01/15"}
    assert partition_values_from_path("eu/2024/01/15", ["region:simple", "ts:timestamp"], False) == {}
    assert timestamp_partition_fields("TIMESTAMP", ["ts"]) == ["ts"]
    assert timestamp_partition_fields("CUSTOM", ["region:simple", "ts:timestamp"]) == ["ts"]
    assert timestamp_partition_fields("SIMPLE", ["ts"]) == []
