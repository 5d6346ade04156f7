"""Record keys and partition paths (spec §7), computed by Spark natively, never row by row in Python.

Types follow Apache Hudi: SIMPLE (one key field, one partition field), COMPLEX (`f1:v1,f2:v2` keys,
several partition fields), NON_PARTITION, TIMESTAMP (partition path formatted from a time field).
"""
from __future__ import annotations

from dataclasses import dataclass, field

from pyspark.sql import Column
from pyspark.sql import functions as F

from storage.config import HoodieConfig, parse_list
from storage.config import WriteConfigKeys as WK
from storage.exception import HoodieKeyError
from storage.keygen.timestamp_based import TimestampBasedConfig

HIVE_DEFAULT_PARTITION = "__HIVE_DEFAULT_PARTITION__"
NULL_RECORDKEY_PLACEHOLDER = "__null__"
EMPTY_RECORDKEY_PLACEHOLDER = "__empty__"

_CLASS_TO_TYPE = {
    "SimpleKeyGenerator": "SIMPLE",
    "SimpleAvroKeyGenerator": "SIMPLE",
    "ComplexKeyGenerator": "COMPLEX",
    "ComplexAvroKeyGenerator": "COMPLEX",
    "NonpartitionedKeyGenerator": "NON_PARTITION",
    "NonpartitionedAvroKeyGenerator": "NON_PARTITION",
    "GlobalDeleteKeyGenerator": "NON_PARTITION",
    "TimestampBasedKeyGenerator": "TIMESTAMP",
    "TimestampBasedAvroKeyGenerator": "TIMESTAMP",
    "CustomKeyGenerator": "CUSTOM",
    "CustomAvroKeyGenerator": "CUSTOM",
}


def resolve_keygen_type(class_or_type: str | None, record_keys: list[str], partition_fields: list[str]) -> str:
    """The key generator type for a Hudi class name or type name, or the default for the fields given."""
    if class_or_type:
        simple = class_or_type.rsplit(".", 1)[-1]
        if simple in _CLASS_TO_TYPE:
            return _CLASS_TO_TYPE[simple]
        if simple.upper() in set(_CLASS_TO_TYPE.values()):
            return simple.upper()
        raise HoodieKeyError(f"unsupported key generator {class_or_type!r}; supported: {sorted(set(_CLASS_TO_TYPE))}")
    if not partition_fields:
        return "NON_PARTITION"
    if len(record_keys) > 1 or len(partition_fields) > 1:
        return "COMPLEX"
    return "SIMPLE"


@dataclass
class KeyGenerator:
    keygen_type: str
    record_key_fields: list[str]
    partition_fields: list[str]
    hive_style: bool = False
    url_encode: bool = False
    keygen_config: HoodieConfig = field(default_factory=HoodieConfig)  # its hoodie.keygen.* options

    # -- record key ------------------------------------------------------------------------------
    def record_key(self) -> Column:
        """`_hoodie_record_key`; fails the Spark job with a message naming the field for a null/empty key."""
        if not self.record_key_fields:
            raise HoodieKeyError(f"no record key field configured ({WK.RECORDKEY_FIELD.key})")
        if len(self.record_key_fields) == 1 and self.keygen_type != "COMPLEX":
            name = self.record_key_fields[0]
            value = _as_string(name)
            return F.when(value.isNull() | (value == ""), F.raise_error(
                F.lit(f"HoodieKeyError: record key field '{name}' cannot be null or empty"))).otherwise(value)
        parts = []
        for name in self.record_key_fields:
            value = _as_string(name)
            encoded = F.when(value.isNull(), F.lit(NULL_RECORDKEY_PLACEHOLDER)).when(
                value == "", F.lit(EMPTY_RECORDKEY_PLACEHOLDER)).otherwise(value)
            parts.append(F.concat(F.lit(f"{name}:"), encoded))
        all_null = None
        for name in self.record_key_fields:
            cond = _as_string(name).isNull() | (_as_string(name) == "")
            all_null = cond if all_null is None else (all_null & cond)
        joined = F.concat_ws(",", *parts)
        return F.when(all_null, F.raise_error(F.lit(
            f"HoodieKeyError: all record key fields {self.record_key_fields} are null or empty"))).otherwise(joined)

    # -- partition path --------------------------------------------------------------------------
    def partition_path(self) -> Column:
        if self.keygen_type == "NON_PARTITION" or not self.partition_fields:
            return F.lit("")
        if self.keygen_type == "TIMESTAMP":
            name = self.partition_fields[0].partition(":")[0]
            return self._segment(name, self._timestamp_value(name))
        if self.keygen_type == "CUSTOM":
            return F.concat_ws("/", *[self._custom_segment(spec) for spec in self.partition_fields])
        return F.concat_ws("/", *[self._segment(name, _as_string(name)) for name in self.partition_fields])

    def _custom_segment(self, spec: str) -> Column:
        name, _, kind = spec.partition(":")
        if kind.lower() == "timestamp":
            return self._segment(name, self._timestamp_value(name))
        return self._segment(name, _as_string(name))

    def _segment(self, name: str, value: Column) -> Column:
        value = F.when(value.isNull() | (value == ""), F.lit(HIVE_DEFAULT_PARTITION)).otherwise(value)
        if self.url_encode:
            value = escape_path_name(value)
        # a ".." segment would let a data value write files outside the table (the regex only runs on values
        # holding "..": a regex per record costs more than the rest of the key expressions)
        dotdot = F.instr(value, "..") > 0
        value = F.when(dotdot & value.rlike(r"(^|/)\.\.(/|$)"), F.raise_error(F.concat(
            F.lit(f"HoodieKeyError: partition field '{name}' value '"), value,
            F.lit("' contains a '..' path segment")))).otherwise(value)
        return F.concat(F.lit(f"{name}="), value) if self.hive_style else value

    def _timestamp_value(self, name: str) -> Column:
        return self.timestamp_config().partition_value(name, F.col(_quote(name)))

    def timestamp_config(self) -> TimestampBasedConfig:
        return TimestampBasedConfig.of(self.keygen_config)

    def required_fields(self) -> list[str]:
        parts = [spec.partition(":")[0] for spec in self.partition_fields] if self.keygen_type != "NON_PARTITION" else []
        return list(dict.fromkeys(self.record_key_fields + parts))


# Hive's escapePathName (what `hoodie.datasource.write.partitionpath.urlencode` applies): these characters
# become %XX (upper-case hex); everything else, including spaces and non-ASCII, stays as it is
_ESCAPED_CHARS = [chr(c) for c in range(1, 0x20)] + ['"', "#", "'", "*", "/", ":", "=", "?", "\\", "\x7f",
                                                      "{", "[", "]", "^"]
_NEEDS_ESCAPE = "[" + "".join(f"\\x{{{ord(c):02X}}}" for c in ["%"] + _ESCAPED_CHARS) + "]"


def escape_path_name(value: Column) -> Column:
    escaped = F.replace(value, F.lit("%"), F.lit("%25"))  # first, so the escapes below are not re-escaped
    for char in _ESCAPED_CHARS:
        escaped = F.replace(escaped, F.lit(char), F.lit(f"%{ord(char):02X}"))
    return F.when(value.rlike(_NEEDS_ESCAPE), escaped).otherwise(value)


def _quote(name: str) -> str:
    return ".".join(f"`{p}`" for p in name.split("."))


def _as_string(name: str) -> Column:
    return F.col(_quote(name)).cast("string")


def create_key_generator(config: HoodieConfig, record_keys: list[str], partition_fields: list[str],
                         keygen_class: str | None, hive_style: bool, url_encode: bool) -> KeyGenerator:
    """The key generator of a write, with the `hoodie.keygen.*` options of `config` (for an existing table, the
    table's properties layered with the write's options: `HoodieTableConfig.with_options`, where the write's win,
    as in Hudi)."""
    keygen_type = resolve_keygen_type(keygen_class, record_keys, partition_fields)
    parts = [] if keygen_type == "NON_PARTITION" else partition_fields
    keygen = KeyGenerator(keygen_type, record_keys, parts, hive_style, url_encode, config.subset(_KEYGEN_PREFIXES))
    if timestamp_partition_fields(keygen_type, parts):
        keygen.timestamp_config()  # a missing or bad hoodie.keygen.timebased.* option fails here, before any work
    return keygen


_KEYGEN_PREFIXES = ("hoodie.keygen.", "hoodie.deltastreamer.keygen.")


def timestamp_partition_fields(keygen_type: str, partition_fields: list[str]) -> list[str]:
    """The partition fields whose path value is a formatted time (TIMESTAMP, CUSTOM `f:timestamp`), not the
    field's value."""
    if keygen_type == "TIMESTAMP":
        return [partition_fields[0].partition(":")[0]] if partition_fields else []
    if keygen_type == "CUSTOM":
        return [name for name, _, kind in (f.partition(":") for f in partition_fields) if kind.lower() == "timestamp"]
    return []


def partition_values_from_path(partition_path: str, fields: list[str], hive_style: bool) -> dict[str, str]:
    """Partition field values encoded in a partition path, as Hudi's Spark file index maps them: one path
    segment per field (after `field=` in hive style), or the whole path when there is one field (a timestamp
    key generator's `yyyy/MM/dd` is one value). Empty when the path does not map onto the fields."""
    names = [f.partition(":")[0] for f in fields]
    if not names or not partition_path:
        return {}
    if len(names) == 1:
        prefix = f"{names[0]}="
        value = partition_path[len(prefix):] if hive_style and partition_path.startswith(prefix) else partition_path
        return {names[0]: value}
    segments = partition_path.split("/")
    if len(segments) != len(names):
        return {}
    return {name: seg.split("=", 1)[1] if hive_style and "=" in seg else seg for name, seg in zip(names, segments)}


__all__ = ["KeyGenerator", "HoodieKeyError", "create_key_generator", "resolve_keygen_type", "parse_list",
           "partition_values_from_path", "timestamp_partition_fields"]
