"""`format("hudi")` and Hudi tables of the catalog on Spark's DataFrame API, routed (on the driver) to `storage`.

PySpark's reader and writer keep their format and options on the JVM side; we record them on the Python
objects too, so `save()` / `load()` of a hudi source can run the write client and readers (Spark jobs the
driver starts: dedup, index lookup, one task per file group, one commit), and every other format behaves
exactly as before. With the SQL front end of `sqlext.session()` installed (its catalog resolver), names are
routed too: `saveAsTable`, `insertInto`, `writeTo(...).append()` / `.overwritePartitions()`, `spark.table` and
`spark.read.table` on Hudi tables; any other table goes to Spark unchanged.

A write whose Hive sync would re-point a catalog table registered at another location (or replace a table
that is not Hudi's) fails before writing anything, naming the table and both locations; the write option
`sqlext.catalog.relocate.table=true` re-registers the table at the written path instead. `saveAsTable` of a new
table syncs it under the name saved to.
"""
from __future__ import annotations

import functools
import logging

from pyspark.sql import SparkSession
from pyspark.sql.readwriter import DataFrameReader, DataFrameWriter, DataFrameWriterV2

from storage.config import HiveSyncConfigKeys as HK, HoodieConfig, ReadConfigKeys as RK, WriteConfigKeys as WK
from storage.exception import HoodieWriteError

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
        opts = {**state["options"], **{k: _text(v) for k, v in options.items()}}
        target = path or opts.get("path")
        if not target:
            raise ValueError("hudi save needs a path")
        _write(self._df, target, opts, mode or state["mode"], partitionBy)
    return wrapper


def _load(original):
    @functools.wraps(original)
    def wrapper(self, path=None, format=None, schema=None, **options):
        state = _state(self)
        fmt = (format or state["format"] or "").lower()
        if fmt not in HUDI_FORMATS:
            return original(self, path, format, schema, **options)
        from sqlext.datasource.skipping_frame import HoodieDataFrame

        opts = {**state["options"], **{k: _text(v) for k, v in options.items()}}
        target = path or opts.get("path")
        if not target:
            raise ValueError("hudi load needs a path")
        return HoodieDataFrame.read(self._spark, target, HoodieConfig.of(opts))
    return wrapper


# -- catalog names ------------------------------------------------------------------------------------------------
def _hudi_table(spark: SparkSession, name: str):
    """(resolver, TableName, HudiTableRef or None) when the session has the SQL front end; None otherwise."""
    front = getattr(spark, "_sqlext_frontend", None)
    if front is None:
        return None
    from sqlext.sql.resolver import TableName

    table_name = TableName.parse(name)
    return front.resolver, table_name, front.resolver.resolve(table_name)


def _save_as_table(original):
    @functools.wraps(original)
    def wrapper(self, name, format=None, mode=None, partitionBy=None, **options):
        state = _state(self)
        fmt = (format or state["format"] or "").lower()
        found = _hudi_table(self._df.sparkSession, name)
        if found is None or (fmt not in HUDI_FORMATS and found[2] is None):
            return original(self, name, format, mode, partitionBy, **options)
        resolver, table_name, ref = found
        if fmt and fmt not in HUDI_FORMATS:
            raise HoodieWriteError(f"table {ref.qualified_name} is a Hudi table; saveAsTable with format {fmt!r}")
        opts = {**state["options"], **{k: _text(v) for k, v in options.items()}}
        opts.setdefault(WK.TABLE_NAME.key, table_name.name)
        save_mode = (mode or state["mode"]).lower()
        if ref is None:
            ref = resolver.location_for(table_name)
            if ref.db:
                # the sync after the first commit registers the table under the name saved to, not under
                # default.<hoodie.table.name>; the table records its database, as Hudi's saveAsTable does
                opts.setdefault(WK.DATABASE_NAME.key, ref.db)
                opts.setdefault(HK.DATABASE.key, ref.db)
                opts.setdefault(HK.TABLE.key, ref.name)
            _write(self._df, ref.path, opts, "append", partitionBy)
            resolver.register(ref)
        elif save_mode not in ("ignore",):
            if save_mode in ("error", "errorifexists", "default"):
                raise HoodieWriteError(f"table {ref.qualified_name} already exists (save mode {save_mode})")
            _write(self._df, ref.path, opts, save_mode, partitionBy)
    return wrapper


def _insert_into(original):
    @functools.wraps(original)
    def wrapper(self, tableName, overwrite=None):
        found = _hudi_table(self._df.sparkSession, tableName)
        if found is None or found[2] is None:
            return original(self, tableName, overwrite)
        _insert(self._df, found[2], _state(self)["options"], "insert_overwrite_table" if overwrite else "insert")
    return wrapper


def _writer_v2_init(original):
    @functools.wraps(original)
    def wrapper(self, df, table):
        original(self, df, table)
        self._hudi_table_name = table
    return wrapper


def _writer_v2_write(original, operation: str):
    @functools.wraps(original)
    def wrapper(self, *args, **kwargs):
        found = _hudi_table(self._spark, getattr(self, "_hudi_table_name", ""))
        if found is None or found[2] is None:
            return original(self, *args, **kwargs)
        _insert(self._df, found[2], _state(self)["options"], operation)
    return wrapper


def _insert(df, ref, options: dict, operation: str) -> None:
    """INSERT semantics: the DataFrame's columns by position onto the table's data columns."""
    from storage.table.meta_client import HoodieTableMetaClient
    from storage.table.schema_resolver import table_data_schema

    meta = HoodieTableMetaClient.load_in_session(df.sparkSession, ref.path, HoodieConfig.of(options))
    schema = table_data_schema(meta, None, None)
    columns = list(schema.names) if schema is not None else df.columns
    if len(columns) != len(df.columns):
        raise HoodieWriteError(f"cannot insert into {ref.qualified_name}: the table has {len(columns)} data columns "
                               f"({', '.join(columns)}), the DataFrame {len(df.columns)} ({', '.join(df.columns)})")
    opts = {**options, WK.TABLE_NAME.key: meta.table_config.name, WK.OPERATION.key: operation}
    _write(df.toDF(*columns), ref.path, opts, "append", None)


def _write(df, path: str, opts: dict, mode: str, partition_by) -> None:
    """Every DataFrame write of a Hudi table: refused before anything is written when the Hive sync after its
    commit would re-point or replace a catalog table (catalog.hive_sync.check_write_target)."""
    from catalog.hive_sync import check_write_target
    from storage.client.write_client import write_dataframe

    if partition_by:
        cols = [partition_by] if isinstance(partition_by, str) else list(partition_by)
        opts.setdefault(WK.PARTITIONPATH_FIELD.key, ",".join(cols))
    check_write_target(df.sparkSession, path, opts)
    write_dataframe(df.sparkSession, df, path, HoodieConfig.of(opts), mode)


def _table(original, spark_of):
    @functools.wraps(original)
    def wrapper(self, tableName):
        spark = spark_of(self)
        found = _hudi_table(spark, tableName)
        if found is None or found[2] is None:
            return original(self, tableName)
        from sqlext.datasource.skipping_frame import HoodieDataFrame

        ref = found[2]
        options = {**(_state(self)["options"] if isinstance(self, DataFrameReader) else {})}
        if ref.query_type:
            options[RK.QUERY_TYPE.key] = ref.query_type
        return HoodieDataFrame.read(spark, ref.path, HoodieConfig.of(options))
    return wrapper


def install() -> None:
    """Patch PySpark's reader and writer once per process."""
    global _installed
    if _installed:
        return
    for cls in (DataFrameReader, DataFrameWriter, DataFrameWriterV2):
        cls.option = _record_option(cls.option)
        cls.options = _record_options(cls.options)
    for cls in (DataFrameReader, DataFrameWriter):
        cls.format = _record_format(cls.format)
    DataFrameWriter.mode = _record_mode(DataFrameWriter.mode)
    DataFrameWriter.save = _save(DataFrameWriter.save)
    DataFrameWriter.saveAsTable = _save_as_table(DataFrameWriter.saveAsTable)
    DataFrameWriter.insertInto = _insert_into(DataFrameWriter.insertInto)
    DataFrameWriterV2.__init__ = _writer_v2_init(DataFrameWriterV2.__init__)
    DataFrameWriterV2.append = _writer_v2_write(DataFrameWriterV2.append, "insert")
    DataFrameWriterV2.overwritePartitions = _writer_v2_write(DataFrameWriterV2.overwritePartitions,
                                                             "insert_overwrite")
    DataFrameReader.load = _load(DataFrameReader.load)
    DataFrameReader.table = _table(DataFrameReader.table, lambda reader: reader._spark)
    SparkSession.table = _table(SparkSession.table, lambda session: session)
    _installed = True
    log.debug("hudi data source installed on DataFrameReader/DataFrameWriter")
