"""The catalog RPCs (GetCatalogs, GetSchemas, GetTables, GetTableTypes, GetColumns, GetTypeInfo, GetFunctions,
GetPrimaryKeys, GetCrossReference): their JDBC result layouts and rows, read from the client session's Spark
session catalog the way Spark's Thrift server reads them (so the columns and types of a Hudi table, its
`_ro` / `_rt` tables and temporary views are what Spark reports), except GetPrimaryKeys, which answers the
record key fields of Hudi tables (Spark's server answers no keys). Without a metastore the tables are what the
session's SHOW TABLES lists: Spark's, and the warehouse's Hudi tables with the `_ro` / `_rt` views of the
merge-on-read ones (sqlext.sql.show.hudi_table_names), whose columns are those a `SELECT *` of them answers.

Name patterns are JDBC patterns: `%` any sequence, `_` one character, backslash escapes; an empty or absent
pattern matches everything; matching ignores case.
"""
from __future__ import annotations

import json
import logging
import re
from dataclasses import dataclass
from typing import Callable, Iterable

import pyarrow as pa
from pyspark.sql import SparkSession
from pyspark.sql import types as T
from pyspark.sql.pandas.types import to_arrow_schema

from sqlext.server.schema import column_size, decimal_digits, jdbc_code, num_prec_radix, sql_name

log = logging.getLogger(__name__)

STRING, INT, SMALLINT, TINYINT, BOOLEAN = T.StringType(), T.IntegerType(), T.ShortType(), T.ByteType(), T.BooleanType()
GLOBAL_TEMP_DB_CONF = "spark.sql.globalTempDatabase"
_CHAR_VARCHAR = "__CHAR_VARCHAR_TYPE_STRING"


def layout(*columns: tuple[str, T.DataType]) -> T.StructType:
    return T.StructType([T.StructField(name, dtype, True) for name, dtype in columns])


CATALOGS = layout(("TABLE_CAT", STRING))
SCHEMAS = layout(("TABLE_SCHEM", STRING), ("TABLE_CATALOG", STRING))
TABLES = layout(("TABLE_CAT", STRING), ("TABLE_SCHEM", STRING), ("TABLE_NAME", STRING), ("TABLE_TYPE", STRING),
                ("REMARKS", STRING), ("TYPE_CAT", STRING), ("TYPE_SCHEM", STRING), ("TYPE_NAME", STRING),
                ("SELF_REFERENCING_COL_NAME", STRING), ("REF_GENERATION", STRING))
TABLE_TYPES = layout(("TABLE_TYPE", STRING))
COLUMNS = layout(("TABLE_CAT", STRING), ("TABLE_SCHEM", STRING), ("TABLE_NAME", STRING), ("COLUMN_NAME", STRING),
                 ("DATA_TYPE", INT), ("TYPE_NAME", STRING), ("COLUMN_SIZE", INT), ("BUFFER_LENGTH", TINYINT),
                 ("DECIMAL_DIGITS", INT), ("NUM_PREC_RADIX", INT), ("NULLABLE", INT), ("REMARKS", STRING),
                 ("COLUMN_DEF", STRING), ("SQL_DATA_TYPE", INT), ("SQL_DATETIME_SUB", INT),
                 ("CHAR_OCTET_LENGTH", INT), ("ORDINAL_POSITION", INT), ("IS_NULLABLE", STRING),
                 ("SCOPE_CATALOG", STRING), ("SCOPE_SCHEMA", STRING), ("SCOPE_TABLE", STRING),
                 ("SOURCE_DATA_TYPE", SMALLINT), ("IS_AUTO_INCREMENT", STRING))
TYPE_INFO = layout(("TYPE_NAME", STRING), ("DATA_TYPE", INT), ("PRECISION", INT), ("LITERAL_PREFIX", STRING),
                   ("LITERAL_SUFFIX", STRING), ("CREATE_PARAMS", STRING), ("NULLABLE", SMALLINT),
                   ("CASE_SENSITIVE", BOOLEAN), ("SEARCHABLE", SMALLINT), ("UNSIGNED_ATTRIBUTE", BOOLEAN),
                   ("FIXED_PREC_SCALE", BOOLEAN), ("AUTO_INCREMENT", BOOLEAN), ("LOCAL_TYPE_NAME", STRING),
                   ("MINIMUM_SCALE", SMALLINT), ("MAXIMUM_SCALE", SMALLINT), ("SQL_DATA_TYPE", INT),
                   ("SQL_DATETIME_SUB", INT), ("NUM_PREC_RADIX", INT))
FUNCTIONS = layout(("FUNCTION_CAT", STRING), ("FUNCTION_SCHEM", STRING), ("FUNCTION_NAME", STRING),
                   ("REMARKS", STRING), ("FUNCTION_TYPE", INT), ("SPECIFIC_NAME", STRING))
# KEQ_SEQ (sic) is the name HiveServer2 and Spark's Thrift server give the key sequence column
PRIMARY_KEYS = layout(("TABLE_CAT", STRING), ("TABLE_SCHEM", STRING), ("TABLE_NAME", STRING),
                      ("COLUMN_NAME", STRING), ("KEQ_SEQ", INT), ("PK_NAME", STRING))
CROSS_REFERENCE = layout(("PKTABLE_CAT", STRING), ("PKTABLE_SCHEM", STRING), ("PKTABLE_NAME", STRING),
                         ("PKCOLUMN_NAME", STRING), ("FKTABLE_CAT", STRING), ("FKTABLE_SCHEM", STRING),
                         ("FKTABLE_NAME", STRING), ("FKCOLUMN_NAME", STRING), ("KEY_SEQ", INT),
                         ("UPDATE_RULE", INT), ("DELETE_RULE", INT), ("FK_NAME", STRING), ("PK_NAME", STRING),
                         ("DEFERRABILITY", INT))

Rows = tuple[T.StructType, pa.Table]


def rows(schema: T.StructType, values: Iterable[tuple]) -> Rows:
    names = schema.names
    return schema, pa.Table.from_pylist([dict(zip(names, v)) for v in values], schema=to_arrow_schema(schema))


# -- patterns -------------------------------------------------------------------------------------------
def pattern_matcher(pattern: str | None) -> Callable[[str], bool]:
    """A JDBC search pattern as a predicate (None / '' / '%' match everything)."""
    if not pattern or pattern == "%":
        return lambda name: True
    regex, i = [], 0
    while i < len(pattern):
        ch = pattern[i]
        if ch == "\\" and i + 1 < len(pattern):
            regex.append(re.escape(pattern[i + 1]))
            i += 2
            continue
        regex.append(".*" if ch == "%" else "." if ch == "_" else re.escape(ch))
        i += 1
    compiled = re.compile("".join(regex), re.IGNORECASE | re.DOTALL)
    return lambda name: compiled.fullmatch(name) is not None


# -- the session catalog through the JVM (what Spark's Thrift server reads) --------------------------------
@dataclass(frozen=True)
class CatalogEntry:
    db: str | None          # None for a local temporary view
    name: str
    table_type: str         # TABLE or VIEW
    comment: str
    read_schema: Callable[[], T.StructType]  # on demand: GetTables needs none, and a view's costs an analysis

    @property
    def schema(self) -> T.StructType:
        return self.read_schema()


class SessionCatalogView:
    """Databases, tables and temporary views of one Spark session."""

    def __init__(self, spark: SparkSession):
        self.spark = spark
        self._jvm = spark.sparkContext._jvm
        self._catalog = spark._jsparkSession.sessionState().catalog()
        self.global_temp_db = spark.conf.get(GLOBAL_TEMP_DB_CONF, "global_temp")

    def _list(self, seq) -> list:
        return list(self._jvm.scala.jdk.javaapi.CollectionConverters.asJava(seq))

    def databases(self, pattern: str | None) -> list[str]:
        match = pattern_matcher(pattern)
        return [db for db in self._list(self._catalog.listDatabases()) if match(db)]

    def tables(self, db: str, pattern: str | None) -> list[CatalogEntry]:
        match = pattern_matcher(pattern)
        if db == self.global_temp_db:
            names = [n for n in self._list(self._catalog.globalTempViewManager().listViewNames("*")) if match(n)]
            return [self._temp_view(n, db) for n in names]
        idents = self._list(self._catalog.listTables(db, "*", False))
        entries = []
        for ident in [i for i in idents if match(i.table())]:
            try:
                entries.append(self._table(ident))
            except Exception as exc:  # a table dropped meanwhile, or an entry Spark cannot read: skip it
                log.warning("catalog: skipping %s.%s: %s", db, ident.table(), exc)
        known = {i.table().lower() for i in idents}
        return entries + [self._hudi_table(db, n) for n in self._hudi_names(db) if n.lower() not in known and match(n)]

    def _hudi_names(self, db: str) -> list[str]:
        """The Hudi tables and views the session's SQL front end lists beside Spark's (no metastore: the
        warehouse's), as its SHOW TABLES does."""
        from sqlext.sql.show import hudi_table_names

        front = getattr(self.spark, "_sqlext_frontend", None)
        return hudi_table_names(front.resolver, db) if front is not None else []

    def temp_views(self, pattern: str | None) -> list[CatalogEntry]:
        match = pattern_matcher(pattern)
        return [self._temp_view(i.table(), None) for i in self._list(self._catalog.listLocalTempViews("*"))
                if match(i.table())]

    def _table(self, ident) -> CatalogEntry:
        table = self._catalog.getTableMetadata(ident)
        kind = "VIEW" if table.tableType().name() == "VIEW" else "TABLE"
        comment = table.comment().get() if table.comment().isDefined() else ""
        schema = _with_char_types(T.StructType.fromJson(json.loads(table.schema().json())))
        return CatalogEntry(ident.database().get(), ident.table(), kind, comment or "", lambda: schema)

    def _temp_view(self, name: str, db: str | None) -> CatalogEntry:
        qualified = _quoted(db, name)
        return CatalogEntry(db, name, "VIEW", "", lambda: self.spark.table(qualified).schema)

    def _hudi_table(self, db: str, name: str) -> CatalogEntry:
        """A Hudi table (or `_ro` / `_rt` view) Spark's catalog does not know: its columns are what the SQL front
        end reads from it."""
        qualified = _quoted(db, name)
        return CatalogEntry(db, name, "TABLE", "", lambda: self.spark.sql(f"SELECT * FROM {qualified}").schema)

    def functions(self, db: str, pattern: str | None):
        """(name, ExpressionInfo) of the functions `db` sees whose name matches."""
        match = pattern_matcher(pattern)
        for pair in self._list(self._catalog.listFunctions(db, "*")):
            ident = pair._1()
            if match(ident.funcName()):
                yield ident.funcName(), self._catalog.lookupFunctionInfo(ident)


def _quoted(db: str | None, name: str) -> str:
    return f"`{db}`.`{name}`" if db else f"`{name}`"


def _with_char_types(schema: T.StructType) -> T.StructType:
    """CHAR(n) / VARCHAR(n) columns, which the catalog keeps as strings with the original type in metadata."""
    fields = []
    for field in schema.fields:
        raw = (field.metadata or {}).get(_CHAR_VARCHAR)
        found = re.fullmatch(r"(char|varchar)\((\d+)\)", raw.strip().lower()) if raw else None
        if found:
            dtype = (T.CharType if found.group(1) == "char" else T.VarcharType)(int(found.group(2)))
            field = T.StructField(field.name, dtype, field.nullable, field.metadata)
        fields.append(field)
    return T.StructType(fields)


# -- the RPCs -----------------------------------------------------------------------------------------
def get_catalogs(spark: SparkSession) -> Rows:
    return rows(CATALOGS, [])


def get_schemas(spark: SparkSession, schema_pattern: str | None) -> Rows:
    view = SessionCatalogView(spark)
    names = view.databases(schema_pattern)
    if pattern_matcher(schema_pattern)(view.global_temp_db):
        names.append(view.global_temp_db)
    return rows(SCHEMAS, [(db, "") for db in names])


def _entries(view: SessionCatalogView, schema_pattern, table_pattern, with_temp_views: bool) -> list[CatalogEntry]:
    entries = [e for db in view.databases(schema_pattern) for e in view.tables(db, table_pattern)]
    if pattern_matcher(schema_pattern)(view.global_temp_db):
        entries += view.tables(view.global_temp_db, table_pattern)
    if with_temp_views:
        entries += view.temp_views(table_pattern)
    return entries


def get_tables(spark: SparkSession, schema_pattern: str | None, table_pattern: str | None,
               table_types: list[str] | None) -> Rows:
    wanted = {t.upper() for t in table_types} if table_types else None
    entries = _entries(SessionCatalogView(spark), schema_pattern, table_pattern,
                       with_temp_views=wanted is None or "VIEW" in wanted)
    return rows(TABLES, [("", e.db, e.name, e.table_type, e.comment, None, None, None, None, None)
                         for e in entries if wanted is None or e.table_type in wanted])


def get_table_types(spark: SparkSession) -> Rows:
    return rows(TABLE_TYPES, [("TABLE",), ("VIEW",)])


def get_columns(spark: SparkSession, schema_pattern: str | None, table_pattern: str | None,
                column_pattern: str | None) -> Rows:
    match = pattern_matcher(column_pattern)
    out = []
    for entry in _entries(SessionCatalogView(spark), schema_pattern, table_pattern, with_temp_views=True):
        for position, field in enumerate(_fields(entry), 1):
            if match(field.name):
                out.append(_column_row(entry, field, position))
    return rows(COLUMNS, out)


def _fields(entry: CatalogEntry) -> list[T.StructField]:
    try:
        return entry.schema.fields
    except Exception as exc:  # a table that cannot be read (its files gone meanwhile, say): skip it, as tables do
        log.warning("catalog: no columns for %s.%s: %s", entry.db, entry.name, exc)
        return []


def _column_row(entry: CatalogEntry, field: T.StructField, position: int) -> tuple:
    dtype = field.dataType
    comment = (field.metadata or {}).get("comment") or ""
    return (None, entry.db, entry.name, field.name, jdbc_code(dtype), sql_name(dtype), column_size(dtype), None,
            decimal_digits(dtype), num_prec_radix(dtype), 1 if field.nullable else 0, comment, None, None, None,
            None, position, "YES" if field.nullable else "NO", None, None, None, None, "NO")


# name, JDBC code, precision (NULL when not numeric); complex types are not searchable
_TYPE_INFO = [
    ("VOID", 0, None), ("BOOLEAN", 16, None), ("STRING", 12, None), ("BINARY", -2, None), ("TINYINT", -6, 3),
    ("SMALLINT", 5, 5), ("INT", 4, 10), ("BIGINT", -5, 19), ("FLOAT", 6, 7), ("DOUBLE", 8, 15),
    ("DECIMAL", 3, 38), ("DATE", 91, None), ("TIMESTAMP", 93, None), ("ARRAY", 2003, None), ("MAP", 2000, None),
    ("STRUCT", 2002, None), ("CHAR", 1, None), ("VARCHAR", 12, None), ("INTERVAL_YEAR_MONTH", 1111, None),
    ("INTERVAL_DAY_TIME", 1111, None),
]


def get_type_info(spark: SparkSession) -> Rows:
    return rows(TYPE_INFO, [
        (name, code, precision, None, None, None, 1, name == "STRING", 0 if name in ("ARRAY", "MAP", "STRUCT") else 3,
         precision is None, False, False, None, 0, 0, None, None, 10 if precision is not None else None)
        for name, code, precision in _TYPE_INFO])


def get_functions(spark: SparkSession, schema_pattern: str | None, function_pattern: str | None) -> Rows:
    view = SessionCatalogView(spark)
    out = []
    for db in view.databases(schema_pattern):
        for name, info in view.functions(db, function_pattern):
            out.append(("", db, name, f"Usage: {info.getUsage()}\nExtended Usage:{info.getExtended()}", 0,
                        info.getClassName()))
    return rows(FUNCTIONS, out)


def get_primary_keys(spark: SparkSession, schema: str | None, table: str | None) -> Rows:
    """The record key fields of a Hudi table, in key order (no rows for other tables)."""
    from sqlext.sql.resolver import TableName
    from storage.table.meta_client import HoodieTableMetaClient

    front = getattr(spark, "_sqlext_frontend", None)
    if not table or front is None:
        return rows(PRIMARY_KEYS, [])
    db = (schema or front.resolver.current_database).lower()
    ref = front.resolver.resolve(TableName(table.lower(), db))
    if ref is None:
        return rows(PRIMARY_KEYS, [])
    keys = HoodieTableMetaClient.load(ref.path).table_config.record_key_fields
    return rows(PRIMARY_KEYS, [(None, db, table, key, seq, None) for seq, key in enumerate(keys, 1)])


def get_cross_reference(spark: SparkSession) -> Rows:
    """Hudi tables have no foreign keys."""
    return rows(CROSS_REFERENCE, [])
