"""Java class names in table properties (CREATE TABLE ... TBLPROPERTIES / OPTIONS, ALTER TABLE ... SET
TBLPROPERTIES): payload classes, record mergers, lock providers, key generators, compaction strategies.

Scripts written for Java Hudi name JVM classes. Where the class has a meaning in this engine (the behaviour
it selects is implemented here, or it only tunes the JVM engine and the behaviour here is the same) the
property is accepted, with a warning when the class itself is not used; where the class selects behaviour
this engine does not have, the statement is rejected with an error naming the property and what is
supported, so nothing runs with silently different semantics.
"""
from __future__ import annotations

import logging
import re
from dataclasses import dataclass

from sqlglot import exp

from sqlext.sql.table import session_hoodie_conf
from storage.config import KEY_PREFIX, HoodieConfig, WriteConfigKeys as WK, validate_options
from storage.config import CompactionConfigKeys as CCK, LockConfigKeys as LK, SparkSqlConfigKeys as SK
from storage.config import TableConfigKeys as TK
from storage.exception import HoodieConfigError

log = logging.getLogger(__name__)


def prop_key(prop: exp.Property) -> str:
    """The key of a TBLPROPERTIES / OPTIONS entry as written (quoted or not)."""
    key = prop.this
    return key.name if isinstance(key, (exp.Var, exp.Identifier, exp.Literal)) else key.sql(dialect="spark")


def prop_value(ctx, prop: exp.Property) -> str:
    """The literal value of a property entry; anything else is an error naming the property."""
    value = prop.args.get("value")
    if isinstance(value, (exp.Literal, exp.Var, exp.Identifier)):
        return value.name
    if isinstance(value, exp.Boolean):
        return "true" if value.this else "false"
    raise ctx.error(f"property '{prop_key(prop)}' needs a literal value", prop)

_JAVA_CLASS = re.compile(r"^(?:[a-z_][\w]*\.)+[A-Z][\w$]*$")


@dataclass(frozen=True)
class ClassRule:
    what: str
    supported: dict[str, str | None]   # simple class name -> warning (None: used as is, no warning)
    free: bool = False                 # any class accepted with a warning (tuning only)


_PAYLOAD = ClassRule("payload class", {
    "OverwriteWithLatestAvroPayload": None,
    "DefaultHoodieRecordPayload": None,
    "EventTimeAvroPayload": "merges as DefaultHoodieRecordPayload (the larger ordering value wins)",
})
_MERGER = ClassRule("record merger", {
    "HoodieAvroRecordMerger": "records are merged by this engine with the table's payload semantics",
    "HoodieSparkRecordMerger": "records are merged by this engine with the table's payload semantics",
    "DefaultSparkRecordMerger": "records are merged by this engine with the table's payload semantics",
    "OverwriteWithLatestMerger": "records are merged by this engine with the table's payload semantics",
})
_LOCK = ClassRule("lock provider", {   # storage.transaction's registry (the metastore one from catalog/)
    "InProcessLockProvider": None,
    "FileSystemBasedLockProvider": None,
    "HiveMetastoreBasedLockProvider": None,
})
_KEYGEN = ClassRule("key generator", {name: None for name in (
    "SimpleKeyGenerator", "SimpleAvroKeyGenerator", "ComplexKeyGenerator", "ComplexAvroKeyGenerator",
    "NonpartitionedKeyGenerator", "NonpartitionedAvroKeyGenerator", "GlobalDeleteKeyGenerator",
    "TimestampBasedKeyGenerator", "TimestampBasedAvroKeyGenerator", "CustomKeyGenerator", "CustomAvroKeyGenerator")})
_COMPACTION_STRATEGY = ClassRule("compaction strategy", {
    "LogFileSizeBasedCompactionStrategy": None, "UnBoundedCompactionStrategy": None})
_SYNC = ClassRule("meta sync class", {}, free=True)   # the catalog layer reads these (Hive sync)

RULES: dict[str, ClassRule] = {
    "payloadclass": _PAYLOAD,
    **{key: _PAYLOAD for key in (*WK.PAYLOAD_CLASS.keys(), *TK.PAYLOAD_CLASS.keys())},
    **{key: _MERGER for key in SK.RECORD_MERGER_IMPLS.keys()},
    LK.PROVIDER.key: _LOCK,
    WK.KEYGENERATOR_CLASS.key: _KEYGEN,
    TK.KEYGEN_CLASS.key: _KEYGEN,
    CCK.STRATEGY.key: _COMPACTION_STRATEGY,
}


def _rule_for(key: str) -> ClassRule | None:
    lower = key.lower()
    if lower in RULES:
        return RULES[lower]
    if "sync" in lower or "extractor" in lower:
        return _SYNC
    return None


def check_properties(ctx, props: dict[str, str], node=None, *, table: str | None = None) -> list[str]:
    """Validate `props`: every key against the config registry and Hudi's SQL names (a misspelt key option such
    as `preCombineFeild` fails naming the key meant; unknown and not honoured keys warn, or fail under
    hoodie.strict.config, given here or SET in the session; unparsable values fail) and their class-valued
    properties; returns the warnings logged. Raises the statement's error (ctx.error) for a key, value or class
    this engine cannot honour."""
    where = f" of {table}" if table else ""
    strict = HoodieConfig.of(session_hoodie_conf(ctx.spark), props).get(WK.STRICT_CONFIG)
    try:
        warnings = validate_options(props, f"properties{where}", strict=strict, table_properties=True)
    except HoodieConfigError as exc:
        raise ctx.error(str(exc), node, table=table) from None
    for key, value in props.items():
        message = _check(key, value)
        if message is None:
            continue
        kind, text = message
        if kind == "error":
            raise ctx.error(f"property '{key}'{where} = '{value}': {text}", node, table=table)
        warnings.append(f"property '{key}'{where} = '{value}': {text}")
        log.warning("%s", warnings[-1])
    return warnings


def _check(key: str, value: str) -> tuple[str, str] | None:
    rule = _rule_for(key)
    classes = [v.strip() for v in str(value).split(",") if v.strip()]
    if rule is None:
        if any(_JAVA_CLASS.match(c) for c in classes) and key.lower().startswith(KEY_PREFIX):
            return "warning", "a Java class this engine does not load; the property is kept but has no effect here"
        return None
    if rule.free:
        return None
    notes = []
    for cls in classes:
        simple = cls.rsplit(".", 1)[-1]
        if simple not in rule.supported:
            supported = ", ".join(sorted(rule.supported)) or "none"
            return "error", (f"the {rule.what} {cls} is not supported by this engine (supported: {supported}); "
                             "nothing was changed")
        if rule.supported[simple]:
            notes.append(rule.supported[simple])
    if notes:
        return "warning", "; ".join(dict.fromkeys(notes))
    return None
