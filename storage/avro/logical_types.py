"""Avro logical types: the Python values the datum reader returns for them and the writer takes.

As fastavro (and Java's conversions) do: decimal <-> `decimal.Decimal`, date <-> `datetime.date`, time-millis /
time-micros <-> `datetime.time`, timestamp-millis / -micros <-> UTC-aware `datetime.datetime` (a naive one is
written as UTC), local-timestamp-millis / -micros <-> naive `datetime.datetime`, uuid <-> `uuid.UUID`. The writer
also takes the underlying value itself (days, milliseconds, ... as int; a uuid as str). A logical type on an
underlying type it does not annotate, or with invalid attributes, is ignored, as the specification says.
"""
from __future__ import annotations

import datetime as dt
import decimal
import uuid
from typing import Any, Callable, NamedTuple

EPOCH = dt.datetime(1970, 1, 1, tzinfo=dt.timezone.utc)
EPOCH_NAIVE = dt.datetime(1970, 1, 1)
EPOCH_DATE = dt.date(1970, 1, 1)
_MICROS_PER_DAY = 86_400_000_000


class LogicalType(NamedTuple):
    """Conversions of one logical type: raw Avro value -> Python value, Python value -> raw, and whether the
    writer takes a value (to choose a union branch)."""

    decode: Callable[[Any], Any]
    encode: Callable[[Any], Any]
    accepts: Callable[[Any], bool]


def logical_type(schema: dict[str, Any]) -> LogicalType | None:
    """The conversions of `schema`'s logical type, or None when it has none this module knows for its type."""
    name, base = schema.get("logicalType"), schema.get("type")
    if name == "decimal" and base in ("bytes", "fixed"):
        return _decimal(schema)
    known = _BY_NAME.get(name)
    return known[1] if known is not None and known[0] == base else None


# ----------------------------------------------------------------------------------------------- decimal


def _decimal(schema: dict[str, Any]) -> LogicalType | None:
    precision, scale, size = schema.get("precision"), schema.get("scale", 0), schema.get("size")
    if not isinstance(precision, int) or not isinstance(scale, int) or not 0 <= scale <= precision or precision < 1:
        return None
    limit = 10**precision

    def decode(raw: bytes) -> decimal.Decimal:
        sign, digits, exponent = decimal.Decimal(int.from_bytes(raw, "big", signed=True)).as_tuple()
        return decimal.Decimal((sign, digits, exponent - scale))  # exact: no context precision applies

    def encode(value: Any) -> bytes:
        unscaled = _unscaled(value, scale)
        if abs(unscaled) >= limit:
            raise ValueError(f"{value} does not fit decimal({precision},{scale})")
        return _twos_complement(unscaled, size)

    return LogicalType(decode, encode, lambda v: isinstance(v, decimal.Decimal))


def _unscaled(value: Any, scale: int) -> int:
    """The unscaled integer of `value` at `scale`; a value with more fractional digits is refused (Java's
    DecimalConversion does not round either)."""
    if isinstance(value, int) and not isinstance(value, bool):
        return value * 10**scale
    if not isinstance(value, decimal.Decimal) or not value.is_finite():
        raise ValueError(f"{value!r} is not a finite decimal.Decimal")
    sign, digits, exponent = value.as_tuple()
    if exponent < -scale:
        raise ValueError(f"{value} has more than {scale} fractional digits")
    unscaled = int("".join(map(str, digits)) or "0") * 10 ** (exponent + scale)
    return -unscaled if sign else unscaled


def _twos_complement(unscaled: int, size: int | None) -> bytes:
    """Big-endian two's complement: minimal (as Java's BigInteger.toByteArray) for bytes, `size` for fixed."""
    needed = ((unscaled if unscaled >= 0 else ~unscaled).bit_length() + 8) // 8
    if size is not None and needed > size:
        raise ValueError(f"{unscaled} needs {needed} bytes, the fixed type has {size}")
    return unscaled.to_bytes(size if size is not None else needed, "big", signed=True)


# ----------------------------------------------------------------------------------------------- dates and times


def _date_to_days(value: Any) -> int:
    if isinstance(value, dt.datetime):
        value = value.date()
    return value if isinstance(value, int) else (value - EPOCH_DATE).days


def _time_to_micros(value: Any) -> int:
    if isinstance(value, int):
        return value
    return ((value.hour * 60 + value.minute) * 60 + value.second) * 1_000_000 + value.microsecond


def _time_to_millis(value: Any) -> int:
    return value if isinstance(value, int) else _time_to_micros(value) // 1000


def _uuid_text(value: Any) -> str:
    if not isinstance(value, (uuid.UUID, str)):
        raise ValueError(f"{value!r} is not a uuid")
    return str(value)


def _micros_to_time(micros: int) -> dt.time:
    if not 0 <= micros < _MICROS_PER_DAY:
        raise ValueError(f"time of day {micros} us is out of range")
    seconds, micro = divmod(micros, 1_000_000)
    minutes, second = divmod(seconds, 60)
    hour, minute = divmod(minutes, 60)
    return dt.time(hour, minute, second, micro)


def _timestamp(unit: dt.timedelta, local: bool) -> LogicalType:
    epoch = EPOCH_NAIVE if local else EPOCH

    def encode(value: Any) -> int:
        if isinstance(value, int):
            return value
        if local:
            value = value.replace(tzinfo=None)  # a local timestamp is its wall-clock reading
        elif value.tzinfo is None:
            value = value.replace(tzinfo=dt.timezone.utc)  # naive datetimes are UTC, like Spark's timestamps
        return (value - epoch) // unit

    return LogicalType(lambda raw: epoch + raw * unit, encode, lambda v: isinstance(v, dt.datetime))


_MILLI, _MICRO = dt.timedelta(milliseconds=1), dt.timedelta(microseconds=1)
_BY_NAME: dict[str, tuple[str, LogicalType]] = {
    "date": ("int", LogicalType(lambda days: EPOCH_DATE + dt.timedelta(days=days), _date_to_days,
                                lambda v: isinstance(v, dt.date) and not isinstance(v, dt.datetime))),
    "time-millis": ("int", LogicalType(lambda ms: _micros_to_time(ms * 1000), _time_to_millis,
                                       lambda v: isinstance(v, dt.time))),
    "time-micros": ("long", LogicalType(_micros_to_time, _time_to_micros, lambda v: isinstance(v, dt.time))),
    "timestamp-millis": ("long", _timestamp(_MILLI, local=False)),
    "timestamp-micros": ("long", _timestamp(_MICRO, local=False)),
    "local-timestamp-millis": ("long", _timestamp(_MILLI, local=True)),
    "local-timestamp-micros": ("long", _timestamp(_MICRO, local=True)),
    "uuid": ("string", LogicalType(uuid.UUID, _uuid_text, lambda v: isinstance(v, uuid.UUID))),
}
