"""A session's settings by prefix in one py4j call (storage.io.spark_conf): the same as PySpark's per-entry way."""
from __future__ import annotations

from storage.io.spark_conf import runtime_conf, static_conf
from storage.io.storage_options import session_storage_options


def test_runtime_settings_equal_pyspark_getall(spark):
    awkward = {"hoodie.test.conf.a": "x -> y, z=1)", "hoodie.test.conf.b": "é ünï", "hoodie.test.conf.c": "",
               "spark.hadoop.fs.test.key": "k,v"}
    try:
        for k, v in awkward.items():
            spark.conf.set(k, v)
        prefixes = ("hoodie.test.conf.", "spark.hadoop.")
        want = {k: v for k, v in spark.conf.getAll.items() if k.startswith(prefixes)}
        assert runtime_conf(spark, prefixes) == want
        assert awkward.items() <= want.items()
        assert session_storage_options(spark).get("fs.test.key") == "k,v"
    finally:
        for k in awkward:
            spark.conf.unset(k)
    assert runtime_conf(spark, ("hoodie.test.conf.",)) == {}


def test_static_settings_equal_pyspark_getall(spark):
    everything = dict(spark.sparkContext.getConf().getAll())
    assert static_conf(spark, "spark.app.") == {k: v for k, v in everything.items() if k.startswith("spark.app.")}
    assert static_conf(spark, "spark.app.")
    assert static_conf(spark, "no.such.prefix.") == {}
