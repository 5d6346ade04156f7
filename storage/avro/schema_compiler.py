"""The walk of an Avro schema that the datum reader and the datum writer share.

A schema is compiled once into one step per node (a reader step decodes a value, a writer step encodes one), so
decoding or encoding a datum runs no schema interpretation. The walk resolves what the Avro specification leaves
to a parser: named types (record, enum, fixed) referenced by full or short name within their namespace,
recursive references, type attributes given as `{"type": "string", ...}` with extra properties (Java's
`avro.java.string`), and logical types (applied on top of the underlying type's step; an unknown one is
ignored, as the specification says).
"""
from __future__ import annotations

import json
from typing import Any, Callable, Generic, NamedTuple, TypeVar

from storage.exception import HoodieAvroSchemaError

PRIMITIVES = frozenset({"null", "boolean", "int", "long", "float", "double", "bytes", "string"})
_NAMED = frozenset({"record", "error", "enum", "fixed"})

Step = TypeVar("Step")


class UnionValue(NamedTuple):
    """A union value with the index of its branch. A reader compiled with `tag_unions` returns these; a writer
    takes one wherever the value alone does not tell the branch (a Python int fits both `int` and `long`)."""

    index: int
    value: Any


def parse_schema(schema: Any) -> Any:
    """The schema as JSON values: JSON text is parsed, a bare type name and parsed values are kept."""
    if isinstance(schema, bytes):
        schema = schema.decode("utf-8", errors="replace")
    if isinstance(schema, str) and schema.lstrip().startswith(("{", "[", '"')):
        try:
            return json.loads(schema)
        except json.JSONDecodeError as exc:
            raise HoodieAvroSchemaError(f"Avro schema is not JSON: {exc}") from exc
    return schema


def schema_label(schema: Any) -> str:
    """A short name of a schema for messages: the record name, or the type."""
    if isinstance(schema, dict):
        return str(schema.get("name") or schema.get("type"))
    return "union" if isinstance(schema, list) else str(schema)


class SchemaCompiler(Generic[Step]):
    """Turns a parsed schema into a `Step` per node through the hooks a reader or writer defines.

    `path` (for messages) is `Record.field`, extended by `[]` for array items and `{}` for map values."""

    def __init__(self) -> None:
        self._steps: dict[str, Step | None] = {}  # by full name; None while the type's fields are compiled

    def compile(self, schema: Any) -> Step:
        return self._node(schema, "", schema_label(schema))

    # -- hooks -----------------------------------------------------------------------------------------------

    def primitive(self, kind: str, path: str) -> Step:
        raise NotImplementedError

    def record(self, name: str, fields: list[tuple[dict[str, Any], Step]], path: str) -> Step:
        raise NotImplementedError

    def enum(self, name: str, symbols: list[str], path: str) -> Step:
        raise NotImplementedError

    def fixed(self, name: str, size: int, path: str) -> Step:
        raise NotImplementedError

    def array(self, items: Step, path: str) -> Step:
        raise NotImplementedError

    def map(self, values: Step, path: str) -> Step:
        raise NotImplementedError

    def union(self, branches: list[Step], path: str) -> Step:
        raise NotImplementedError

    def logical(self, schema: dict[str, Any], base: Step, path: str) -> Step:
        """`base` with the logical type of `schema` applied (return `base` for types not handled)."""
        raise NotImplementedError

    def forward(self, resolve: Callable[[], Step], path: str) -> Step:
        """A step that defers to the step `resolve()` returns once built (a recursive reference)."""
        raise NotImplementedError

    # -- the walk --------------------------------------------------------------------------------------------

    def _node(self, schema: Any, namespace: str, path: str) -> Step:
        if isinstance(schema, list):
            if not schema:
                raise HoodieAvroSchemaError(f"{path}: a union needs at least one branch")
            return self.union([self._node(branch, namespace, path) for branch in schema], path)
        if isinstance(schema, str):
            return self.primitive(schema, path) if schema in PRIMITIVES else self._reference(schema, namespace, path)
        if not isinstance(schema, dict) or "type" not in schema:
            raise HoodieAvroSchemaError(f"{path}: {schema!r} is not an Avro schema")
        kind = schema["type"]
        if kind in _NAMED:
            step = self._named(schema, namespace, path)
        elif kind == "array":
            step = self.array(self._node(_attribute(schema, "items", path), namespace, f"{path}[]"), path)
        elif kind == "map":
            step = self.map(self._node(_attribute(schema, "values", path), namespace, f"{path}{{}}"), path)
        else:  # a type name (primitive or named) with properties
            step = self._node(kind, namespace, path)
        return self.logical(schema, step, path) if "logicalType" in schema else step

    def _named(self, schema: dict[str, Any], namespace: str, path: str) -> Step:
        full, namespace = _full_name(schema, namespace, path)
        if full in self._steps:
            raise HoodieAvroSchemaError(f"{path}: Avro type {full!r} is defined twice")
        self._steps[full] = None
        short = full.rsplit(".", 1)[-1]
        kind = schema["type"]
        if kind == "enum":
            step = self.enum(short, list(_attribute(schema, "symbols", path)), path)
        elif kind == "fixed":
            step = self.fixed(short, int(_attribute(schema, "size", path)), path)
        else:
            fields = []
            for field in _attribute(schema, "fields", path):
                field_path = f"{short}.{_attribute(field, 'name', path)}"
                fields.append((field, self._node(_attribute(field, "type", field_path), namespace, field_path)))
            step = self.record(short, fields, path)
        self._steps[full] = step
        return step

    def _reference(self, name: str, namespace: str, path: str) -> Step:
        candidates = [name] if "." in name else [f"{namespace}.{name}", name] if namespace else [name]
        for full in candidates:
            if full in self._steps:
                step = self._steps[full]
                return step if step is not None else self.forward(lambda full=full: self._steps[full], path)
        raise HoodieAvroSchemaError(f"{path}: unknown Avro type {name!r}")


def _full_name(schema: dict[str, Any], namespace: str, path: str) -> tuple[str, str]:
    """(full name, namespace for names inside) of a named type."""
    name = _attribute(schema, "name", path)
    if not isinstance(name, str) or not name:
        raise HoodieAvroSchemaError(f"{path}: Avro type name {name!r} is not a name")
    if "." in name:
        return name, name.rsplit(".", 1)[0]
    namespace = schema.get("namespace", namespace) or ""
    return (f"{namespace}.{name}" if namespace else name), namespace


def _attribute(schema: dict[str, Any], key: str, path: str) -> Any:
    try:
        return schema[key]
    except (KeyError, TypeError):
        raise HoodieAvroSchemaError(f"{path}: Avro schema {schema!r} has no {key!r}") from None
