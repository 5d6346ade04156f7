"""Spark types on the HiveServer2 wire: type descriptors for result-set metadata, the JDBC type codes the
catalog RPCs report, and how each column travels in a columnar row set.

BOOLEAN, TINYINT, SMALLINT, INT, BIGINT, FLOAT/DOUBLE and BINARY have typed columns; every other type travels
as a string column, formatted by Spark itself before the rows leave it (`wire_columns`): decimals as plain
numbers with their scale, dates `yyyy-MM-dd`, timestamps `yyyy-MM-dd HH:mm:ss[.fraction]` in the session time
zone, arrays / maps / structs as JSON. The metadata keeps the real type (DECIMAL with precision and scale
qualifiers, CHAR/VARCHAR with their length), as Spark's own Thrift server reports it.
"""
from __future__ import annotations

import re

from pyspark.sql import Column, functions as F
from pyspark.sql import types as T

from storage.engine.spark_columns import quote
from sqlext.server.third_party.tcliservice.ttypes import (
    TColumnDesc,
    TPrimitiveTypeEntry,
    TTableSchema,
    TTypeDesc,
    TTypeEntry,
    TTypeId,
    TTypeQualifiers,
    TTypeQualifierValue,
)
from sqlext.server.third_party.tcliservice.constants import CHARACTER_MAXIMUM_LENGTH, PRECISION, SCALE


class Wire:
    """Which TColumn field carries a column."""

    BOOL = "boolVal"
    BYTE = "byteVal"
    I16 = "i16Val"
    I32 = "i32Val"
    I64 = "i64Val"
    DOUBLE = "doubleVal"
    STRING = "stringVal"
    BINARY = "binaryVal"


_TYPED = {
    TTypeId.BOOLEAN_TYPE: Wire.BOOL, TTypeId.TINYINT_TYPE: Wire.BYTE, TTypeId.SMALLINT_TYPE: Wire.I16,
    TTypeId.INT_TYPE: Wire.I32, TTypeId.BIGINT_TYPE: Wire.I64, TTypeId.FLOAT_TYPE: Wire.DOUBLE,
    TTypeId.DOUBLE_TYPE: Wire.DOUBLE, TTypeId.BINARY_TYPE: Wire.BINARY,
}

_SIMPLE_IDS = [
    (T.BooleanType, TTypeId.BOOLEAN_TYPE), (T.ByteType, TTypeId.TINYINT_TYPE),
    (T.ShortType, TTypeId.SMALLINT_TYPE), (T.IntegerType, TTypeId.INT_TYPE), (T.LongType, TTypeId.BIGINT_TYPE),
    (T.FloatType, TTypeId.FLOAT_TYPE), (T.DoubleType, TTypeId.DOUBLE_TYPE), (T.DecimalType, TTypeId.DECIMAL_TYPE),
    (T.CharType, TTypeId.CHAR_TYPE), (T.VarcharType, TTypeId.VARCHAR_TYPE), (T.StringType, TTypeId.STRING_TYPE),
    (T.DateType, TTypeId.DATE_TYPE), (T.TimestampNTZType, TTypeId.TIMESTAMP_TYPE),
    (T.TimestampType, TTypeId.TIMESTAMP_TYPE), (T.BinaryType, TTypeId.BINARY_TYPE),
    (T.ArrayType, TTypeId.ARRAY_TYPE), (T.MapType, TTypeId.MAP_TYPE), (T.StructType, TTypeId.STRUCT_TYPE),
    (T.NullType, TTypeId.NULL_TYPE), (T.YearMonthIntervalType, TTypeId.INTERVAL_YEAR_MONTH_TYPE),
    (T.DayTimeIntervalType, TTypeId.INTERVAL_DAY_TIME_TYPE), (T.UserDefinedType, TTypeId.USER_DEFINED_TYPE),
]


def type_id(dtype: T.DataType) -> int:
    """The TTypeId Spark's Thrift server reports for a Spark type (STRING for types Hive has no name for)."""
    for cls, tid in _SIMPLE_IDS:
        if isinstance(dtype, cls):
            return tid
    return TTypeId.STRING_TYPE


def wire_of(dtype: T.DataType) -> str:
    return _TYPED.get(type_id(dtype), Wire.STRING)


def type_desc(dtype: T.DataType) -> TTypeDesc:
    """One primitive entry, with precision/scale or length qualifiers (clients read `types[0].primitiveEntry`,
    also for complex types)."""
    qualifiers = None
    if isinstance(dtype, T.DecimalType):
        qualifiers = {PRECISION: TTypeQualifierValue(i32Value=dtype.precision),
                      SCALE: TTypeQualifierValue(i32Value=dtype.scale)}
    elif isinstance(dtype, (T.CharType, T.VarcharType)):
        qualifiers = {CHARACTER_MAXIMUM_LENGTH: TTypeQualifierValue(i32Value=dtype.length)}
    entry = TPrimitiveTypeEntry(type=type_id(dtype),
                                typeQualifiers=TTypeQualifiers(qualifiers=qualifiers) if qualifiers else None)
    return TTypeDesc(types=[TTypeEntry(primitiveEntry=entry)])


def table_schema(schema: T.StructType, first_position: int = 1) -> TTableSchema:
    return TTableSchema(columns=[
        TColumnDesc(columnName=field.name, typeDesc=type_desc(field.dataType), position=position,
                    comment=field.metadata.get("comment", "") if field.metadata else "")
        for position, field in enumerate(schema.fields, first_position)])


def wire_columns(schema: T.StructType) -> list[Column]:
    """Spark expressions turning each column into its wire form (typed columns stay as they are)."""
    return [_wire_column(F.col(quote(field.name)), field.dataType).alias(field.name) for field in schema.fields]


def _wire_column(col: Column, dtype: T.DataType) -> Column:
    wire = wire_of(dtype)
    if wire == Wire.DOUBLE and isinstance(dtype, T.FloatType):
        return col.cast("double")
    if wire != Wire.STRING or isinstance(dtype, (T.StringType, T.CharType, T.VarcharType)):
        return col
    if isinstance(dtype, (T.ArrayType, T.MapType, T.StructType)):
        return F.to_json(col)
    return col.cast("string")  # decimal (plain, with scale), date, timestamp (fraction trimmed), interval, NULL


def _quote_if_needed(name: str) -> str:
    return name if _PLAIN_NAME.match(name) else quote(name)


_PLAIN_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


# -- JDBC (java.sql.Types) codes and sizes, as Spark's Thrift server reports them in GetColumns ------------------
_JDBC_CODES = [
    (T.BooleanType, 16), (T.ByteType, -6), (T.ShortType, 5), (T.IntegerType, 4), (T.LongType, -5), (T.FloatType, 6),
    (T.DoubleType, 8), (T.DecimalType, 3), (T.CharType, 1), (T.VarcharType, 12), (T.StringType, 12),
    (T.DateType, 91), (T.TimestampType, 93), (T.TimestampNTZType, 93), (T.BinaryType, -2), (T.ArrayType, 2003),
    (T.MapType, 2000), (T.StructType, 2002), (T.NullType, 0),
]
JDBC_OTHER = 1111
_NUMERIC = (T.ByteType, T.ShortType, T.IntegerType, T.LongType, T.FloatType, T.DoubleType, T.DecimalType)
_SIZED = _NUMERIC + (T.BooleanType, T.DateType, T.TimestampType, T.TimestampNTZType, T.NullType,
                     T.YearMonthIntervalType, T.DayTimeIntervalType)


def jdbc_code(dtype: T.DataType) -> int:
    return next((code for cls, code in _JDBC_CODES if isinstance(dtype, cls)), JDBC_OTHER)


def column_size(dtype: T.DataType) -> int | None:
    """COLUMN_SIZE: Spark's default size of fixed-size types, the length of CHAR, NULL for the others."""
    if isinstance(dtype, T.CharType):
        return dtype.length
    if isinstance(dtype, T.DecimalType):
        return 8 if dtype.precision <= 18 else 16
    if isinstance(dtype, _SIZED):
        return {T.BooleanType: 1, T.ByteType: 1, T.ShortType: 2, T.IntegerType: 4, T.LongType: 8, T.FloatType: 4,
                T.DoubleType: 8, T.DateType: 4, T.TimestampType: 8, T.TimestampNTZType: 8, T.NullType: 1,
                T.YearMonthIntervalType: 4, T.DayTimeIntervalType: 8}[type(dtype)]
    return None


def decimal_digits(dtype: T.DataType) -> int | None:
    if isinstance(dtype, (T.BooleanType, T.IntegerType)):
        return 0
    if isinstance(dtype, T.DecimalType):
        return dtype.scale
    if isinstance(dtype, (T.TimestampType, T.TimestampNTZType)):
        return 6
    return {T.FloatType: 7, T.DoubleType: 15}.get(type(dtype))


def num_prec_radix(dtype: T.DataType) -> int | None:
    return 10 if isinstance(dtype, _NUMERIC) else None


def sql_name(dtype: T.DataType) -> str:
    """Spark's `DataType.sql` (what GetColumns reports as TYPE_NAME): INT, DECIMAL(10,2), ARRAY<STRING>, ..."""
    if isinstance(dtype, T.StructType):
        return "STRUCT<" + ", ".join(f"{_quote_if_needed(f.name)}: {sql_name(f.dataType)}" for f in dtype.fields) + ">"
    if isinstance(dtype, T.ArrayType):
        return f"ARRAY<{sql_name(dtype.elementType)}>"
    if isinstance(dtype, T.MapType):
        return f"MAP<{sql_name(dtype.keyType)}, {sql_name(dtype.valueType)}>"
    return dtype.simpleString().upper()
