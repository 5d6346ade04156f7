"""A Spark session's settings by key prefix, read in one py4j call each.

PySpark's `spark.conf.getAll` and `SparkConf.getAll` proxy every entry through py4j (two calls an entry: 15-50 ms
per write for a session's few dozen settings, more while the JVM is busy), and every write reads its session's
storage, Hive sync and `hoodie.*` settings. The runtime settings come as one string (Scala's `k -> v` spelling of
the map, entries split by a control character) and the static ones by Spark's own prefix filter; anything that
does not parse falls back to PySpark's way.
"""
from __future__ import annotations

_SEPARATOR = "\u0001"
_ARROW = " -> "


def runtime_conf(spark, prefixes: tuple[str, ...]) -> dict[str, str]:
    """The session's runtime settings (`spark.conf`, what `SET` changes) whose keys start with one of `prefixes`."""
    try:
        text = spark._jsparkSession.conf().getAll().mkString(_SEPARATOR)
        entries = [entry.partition(_ARROW) for entry in text.split(_SEPARATOR)] if text else []
        if all(arrow for _, arrow, _ in entries):
            return {k: v for k, _, v in entries if k.startswith(prefixes)}
    except Exception:  # noqa: BLE001 - not a classic session (Spark Connect): PySpark's own call
        pass
    values = spark.conf.getAll
    values = values() if callable(values) else values
    return {k: v for k, v in dict(values).items() if k.startswith(prefixes)}


_STATIC: dict[tuple[str, str], dict[str, str]] = {}


def static_conf(spark, prefix: str) -> dict[str, str]:
    """The SparkContext's settings (fixed at start) whose keys start with `prefix`, keys in full; read once per
    SparkContext (every read and write asks for the storage settings)."""
    context = _context_id(spark)
    if context is None:
        return _read_static_conf(spark, prefix)
    key = (context, prefix)
    if key not in _STATIC:
        _STATIC[key] = _read_static_conf(spark, prefix)
    return dict(_STATIC[key])


def _context_id(spark) -> str | None:
    """Which SparkContext (no py4j call: the Python object and its JVM proxy's id, both new with a new context);
    None for a session without one (Spark Connect): not cached."""
    try:
        sc = spark.sparkContext
        return f"{id(sc)}:{sc._jsc._target_id}"
    except Exception:  # noqa: BLE001
        return None


def _read_static_conf(spark, prefix: str) -> dict[str, str]:
    try:
        found = spark.sparkContext._jsc.sc().conf().getAllWithPrefix(prefix)
        return {prefix + pair._1(): pair._2() for pair in found}
    except Exception:  # noqa: BLE001
        return {k: v for k, v in spark.sparkContext.getConf().getAll() if k.startswith(prefix)}
