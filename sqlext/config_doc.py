"""The registry of `hoodie.*` keys as text, for `sqlext config [--key K]` and `CALL help(cmd => 'hoodie.…')`."""
from __future__ import annotations

from storage.config import REGISTRY, ConfigProperty
from storage.exception import HoodieConfigError


def config_properties(key: str | None = None) -> list[ConfigProperty]:
    """Every registered property, or the one `key` names (an alternative spelling resolves to it)."""
    if key is None:
        return REGISTRY.properties()
    prop = REGISTRY.lookup(key.strip())
    if prop is None:
        hint = REGISTRY.suggest(key.strip())
        raise HoodieConfigError(f"unknown config key {key}" + (f" (did you mean {hint}?)" if hint else ""))
    return [prop]


def describe(prop: ConfigProperty) -> str:
    """One key as text: key, default, honoured, alternatives, doc."""
    lines = [prop.key,
             f"\tdefault: {'(none)' if prop.default is None else prop.default}",
             f"\thonoured: {'yes' if REGISTRY.honoured(prop.key) else 'no'}"]
    if prop.alternatives:
        lines.append(f"\talternatives: {', '.join(prop.alternatives)}")
    if prop.doc:
        lines.append(f"\tdoc: {prop.doc}")
    lines.append(f"\tgroup: {REGISTRY.group(prop.key)}")
    return "\n".join(lines)


def config_text(key: str | None = None) -> str:
    return "\n".join(describe(p) for p in config_properties(key)) + "\n"
