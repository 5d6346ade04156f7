"""`format("hudi")` on Spark's DataFrameReader / DataFrameWriter, routed to `storage`.

PySpark's reader and writer keep their format and options on the JVM side; we record them on the Python
objects too, so `save()` / `load()` of a hudi source can run the Python write pipeline and readers, and
every other format behaves exactly as before.
"""
from __future__ import annotations

import functools
import logging

from pyspark.sql.readwriter import DataFrameReader, DataFrameWriter

log = logging.getLogger(__name__)

HUDI_FORMATS = {"hudi", "org.apache.hudi"}
_installed = False


def _state(obj) -> dict:
    if not hasattr(obj, "_hudi_state"):
        obj._hudi_state = {"format": None, "options": {}, "mode": "errorifexists"}
    return obj._hudi_state


def _record_format(original):
    @functools.wraps(original)
    def wrapper(self, source, *args, **kwargs):
        _state(self)["format"] = str(source).lower()
        return original(self, source, *args, **kwargs)
    return wrapper


def _record_option(original):
    @functools.wraps(original)
    def wrapper(self, key, value, *args, **kwargs):
        _state(self)["options"][str(key)] = value if isinstance(value, str) else _text(value)
        return original(self, key, value, *args, **kwargs)
    return wrapper


def _record_options(original):
    @functools.wraps(original)
    def wrapper(self, *args, **options):
        for mapping in args:
            options = {**mapping, **options}
        for key, value in options.items():
            _state(self)["options"][str(key)] = value if isinstance(value, str) else _text(value)
        return original(self, **options)
    return wrapper


def _record_mode(original):
    @functools.wraps(original)
    def wrapper(self, save_mode, *args, **kwargs):
        _state(self)["mode"] = (save_mode or "errorifexists").lower()
        return original(self, save_mode, *args, **kwargs)
    return wrapper


def _text(value) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def _save(original):
    @functools.wraps(original)
    def wrapper(self, path=None, format=None, mode=None, partitionBy=None, **options):
        state = _state(self)
        fmt = (format or state["format"] or "").lower()
        if fmt not in HUDI_FORMATS:
            return original(self, path, format, mode, partitionBy, **options)
        from storage.write.write_client import write_dataframe

        opts = {**state["options"], **{k: _text(v) for k, v in options.items()}}
        if partitionBy:
            cols = [partitionBy] if isinstance(partitionBy, str) else list(partitionBy)
            opts.setdefault("hoodie.datasource.write.partitionpath.field", ",".join(cols))
        target = path or opts.get("path")
        if not target:
            raise ValueError("hudi save needs a path")
        write_dataframe(self._df.sparkSession, self._df, target, opts, mode or state["mode"])
    return wrapper


def _load(original):
    @functools.wraps(original)
    def wrapper(self, path=None, format=None, schema=None, **options):
        state = _state(self)
        fmt = (format or state["format"] or "").lower()
        if fmt not in HUDI_FORMATS:
            return original(self, path, format, schema, **options)
        from storage.read import read_table

        opts = {**state["options"], **{k: _text(v) for k, v in options.items()}}
        target = path or opts.get("path")
        if not target:
            raise ValueError("hudi load needs a path")
        return read_table(self._spark, target, opts)
    return wrapper


def install() -> None:
    """Patch PySpark's reader and writer once per process."""
    global _installed
    if _installed:
        return
    for cls in (DataFrameReader, DataFrameWriter):
        cls.format = _record_format(cls.format)
        cls.option = _record_option(cls.option)
        cls.options = _record_options(cls.options)
    DataFrameWriter.mode = _record_mode(DataFrameWriter.mode)
    DataFrameWriter.save = _save(DataFrameWriter.save)
    DataFrameReader.load = _load(DataFrameReader.load)
    _installed = True
    log.debug("hudi data source installed on DataFrameReader/DataFrameWriter")
