"""TimestampBasedKeyGenerator's partition path: a time field formatted with `hoodie.keygen.timebased.*`.

As Apache Hudi's TimestampBasedAvroKeyGenerator: the field holds epoch seconds (UNIX_TIMESTAMP), milliseconds
(EPOCHMILLISECONDS), microseconds (EPOCHMICROSECONDS), a number in `...timestamp.scalar.time.unit` (SCALAR) or
a date string in one of the `...input.dateformat` patterns (DATE_STRING, MIXED); the moment is truncated to
milliseconds and printed with `...output.dateformat` in the output timezone. A null field is partitioned as
Hudi does it (1 time unit after the epoch), a string that parses with no input format fails the write.

Everything is a Spark column expression on TIMESTAMP_NTZ values, so the result does not depend on the Spark
session's time zone (Java Hudi formats in the configured timezones; both default to UTC here, as in hudi-rs).
"""
from __future__ import annotations

import re
from dataclasses import dataclass

from pyspark.sql import Column
from pyspark.sql import functions as F

from storage.config import HoodieConfig, TimestampKeyGeneratorKeys as TK
from storage.exception import HoodieKeyError

NUMERIC_TYPES = ("UNIX_TIMESTAMP", "EPOCHMILLISECONDS", "EPOCHMICROSECONDS", "SCALAR")
STRING_TYPES = ("DATE_STRING", "MIXED")
UTC = "UTC"

# time unit -> (timestampadd unit, divisor): finer units than milliseconds are truncated to milliseconds first,
# as Java's TimeUnit.MILLISECONDS.convert does
_UNITS = {
    "NANOSECONDS": ("MILLISECOND", 1_000_000), "MICROSECONDS": ("MILLISECOND", 1_000),
    "MILLISECONDS": ("MILLISECOND", 1), "SECONDS": ("SECOND", 1), "MINUTES": ("MINUTE", 1),
    "HOURS": ("HOUR", 1), "DAYS": ("DAY", 1),
}
_TYPE_UNITS = {"UNIX_TIMESTAMP": "SECONDS", "EPOCHMILLISECONDS": "MILLISECONDS", "EPOCHMICROSECONDS": "MICROSECONDS"}
# values Hudi's Spark key generators treat as a null partition field
_NULL_MARKERS = ("__HIVE_DEFAULT_PARTITION__", "__null__", "__empty__")
_OFFSET_LETTERS = set("XxZOVz")


def _epoch() -> Column:
    return F.expr("TIMESTAMP_NTZ'1970-01-01 00:00:00'")


@dataclass(frozen=True)
class TimestampBasedConfig:
    """The `hoodie.keygen.timebased.*` options of one table, checked."""

    timestamp_type: str
    output_format: str
    input_formats: tuple[str, ...] = ()
    input_timezone: str = UTC
    output_timezone: str = UTC
    scalar_unit: str = "SECONDS"

    @classmethod
    def of(cls, config: HoodieConfig) -> "TimestampBasedConfig":
        ts_type = (config.get(TK.TIMESTAMP_TYPE) or "").strip().upper()
        if ts_type not in NUMERIC_TYPES + STRING_TYPES:
            raise HoodieKeyError(f"TimestampBasedKeyGenerator needs {TK.TIMESTAMP_TYPE.key} set to one of "
                                 f"{', '.join(NUMERIC_TYPES + STRING_TYPES)}; got {ts_type or 'nothing'!r}")
        output = config.get(TK.OUTPUT_DATE_FORMAT) or ""
        if not output.strip():
            raise HoodieKeyError(f"TimestampBasedKeyGenerator needs {TK.OUTPUT_DATE_FORMAT.key} "
                                 "(e.g. yyyy/MM/dd)")
        delimiter = config.get(TK.INPUT_DATE_FORMAT_LIST_DELIMITER_REGEX) or ","
        inputs = tuple(f.strip() for f in re.split(delimiter, config.get(TK.INPUT_DATE_FORMAT) or "") if f.strip())
        if ts_type in STRING_TYPES and not inputs:
            raise HoodieKeyError(f"timestamp type {ts_type} needs {TK.INPUT_DATE_FORMAT.key} "
                                 "(e.g. yyyy-MM-dd'T'HH:mm:ss.SSSZ)")
        unit = (config.get(TK.SCALAR_TIME_UNIT) or "SECONDS").strip().upper()
        if ts_type == "SCALAR" and unit not in _UNITS:
            raise HoodieKeyError(f"unsupported {TK.SCALAR_TIME_UNIT.key} {unit!r}; one of {', '.join(_UNITS)}")
        both = config.get(TK.TIMEZONE)
        return cls(ts_type, output, inputs,
                   input_timezone=both or config.get(TK.INPUT_TIMEZONE) or UTC,
                   output_timezone=both or config.get(TK.OUTPUT_TIMEZONE) or UTC,
                   scalar_unit=_TYPE_UNITS.get(ts_type, unit))

    # -- the partition path value ------------------------------------------------------------------
    def partition_value(self, field: str, column: Column) -> Column:
        """`column` (the field `field`) formatted as its partition path value."""
        utc = self._utc_wall_clock(field, column)
        local = utc if self.output_timezone.upper() == UTC else \
            F.convert_timezone(F.lit(UTC), F.lit(self.output_timezone), utc)
        return F.date_format(local, self.output_format)

    def _utc_wall_clock(self, field: str, column: Column) -> Column:
        is_null = column.isNull() | column.cast("string").isin(*_NULL_MARKERS)
        if self.timestamp_type in STRING_TYPES:
            moment, default = self._parsed(field, column.cast("string")), F.timestamp_add("MILLISECOND", F.lit(1), _epoch())
        else:
            moment, default = self._after_epoch(column.cast("long")), self._after_epoch(F.lit(1).cast("long"))
        return F.when(is_null, default).otherwise(moment)

    def _after_epoch(self, amount: Column) -> Column:
        unit, divisor = _UNITS[self.scalar_unit]
        if divisor != 1:  # integral division truncating toward zero, as Java's
            amount = F.call_function("div", amount, F.lit(divisor))
        return F.timestamp_add(unit, amount, _epoch())

    def _parsed(self, field: str, text: Column) -> Column:
        parsed = F.coalesce(*[self._parse_one(text, fmt) for fmt in self.input_formats])
        return F.when(parsed.isNotNull(), parsed).otherwise(F.raise_error(F.concat(
            F.lit(f"HoodieKeyError: partition field '{field}' value '"), text,
            F.lit(f"' does not parse with {TK.INPUT_DATE_FORMAT.key} {', '.join(self.input_formats)!r}"))))

    def _parse_one(self, text: Column, joda_format: str) -> Column:
        fmt = java_time_pattern(joda_format)
        instant = F.try_to_timestamp(text, F.lit(fmt))
        if has_offset(fmt):  # the text names its offset: the moment is known, whatever the session zone
            return F.timestamp_add("MICROSECOND", F.unix_micros(instant), _epoch())
        # no offset: the text is a wall clock in the input timezone (try_to_timestamp only tells if it parses)
        wall = F.when(instant.isNotNull(), F.to_timestamp_ntz(text, F.lit(fmt)))
        if self.input_timezone.upper() == UTC:
            return wall
        return F.convert_timezone(F.lit(self.input_timezone), F.lit(UTC), wall)


def java_time_pattern(joda: str) -> str:
    """A Joda-Time pattern (what Hudi's key generator parses with) as a java.time pattern (what Spark parses
    with). They differ in the zone offset: Joda's `Z` / `ZZ` also accept a literal `Z` for UTC, java.time's
    `XX` / `XXX` do; `ZZZ` (a zone id) is `VV`."""
    out, i, quoted = [], 0, False
    while i < len(joda):
        ch = joda[i]
        if ch == "'":
            quoted = not quoted
        if ch == "Z" and not quoted:
            run = len(joda[i:]) - len(joda[i:].lstrip("Z"))
            out.append({1: "XX", 2: "XXX"}.get(run, "VV"))
            i += run
            continue
        out.append(ch)
        i += 1
    return "".join(out)


def has_offset(pattern: str) -> bool:
    """Does a java.time pattern read a zone or offset (outside quoted literals)?"""
    unquoted = re.sub(r"'[^']*'", "", pattern)
    return any(c in _OFFSET_LETTERS for c in unquoted)
