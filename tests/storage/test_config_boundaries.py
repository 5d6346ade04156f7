"""The configuration boundary (issue 37): options enter storage/ as one typed `HoodieConfig`, wrapped once at the
entry points (the SQL statements, procedures, CLI and DataFrame data source of sqlext/, the Hive sync of catalog/)
and in tests; every `hoodie.*` key is spelt once, in the registry (storage/config.py).

(a) No parameter or class field of storage/ takes options as a raw mapping. A name that carries options
    (`OPTION_NAME`: options, opts, props, properties, config, conf, with or without a prefix such as `bloom_`)
    fails when it is annotated with dict / Mapping, when it is not annotated at all, and when it is an optional
    `HoodieConfig | None` (an optional config defaults to an empty `HoodieConfig()`). `RAW_MAPPINGS_ALLOWED`
    lists the raw mappings that are no options, each with its reason.
(b) No `HoodieConfig.of(...)` in storage/ outside the registry: a function given a config passes it on, and a
    table's properties meet the options in one place (`HoodieTableConfig.with_options`).
(c) No string constant of storage/, catalog/ or sqlext/ (docstrings aside) spells a `hoodie.*` config key outside
    storage/config.py: code names a key by its `ConfigProperty.key`. Not keys, hence allowed: the file names of
    `NON_KEY_NAMES`, a key prefix (a string that is `hoodie.` and key segments ending in `.`) as the value of a
    named constant (an UPPER_CASE module or class attribute), and `hoodie.<segments>.*` (a family of keys in a
    message). bench/ and tests/ are users of the option API, spelling options as users do, and are not checked.
"""
from __future__ import annotations

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
REGISTRY_MODULE = "storage/config.py"

OPTION_NAME = re.compile(r"^(?:\w+_)?(?:options|opts|props|properties|config|conf)$")
RAW_MAPPING_TYPES = {"dict", "Dict", "Mapping", "MutableMapping"}
# (module, qualified name of the parameter or field) -> why the raw mapping is legitimate
RAW_MAPPINGS_ALLOWED = {
    ("storage/config.py", "HoodieConfig.props"): "the typed config's own store of the options, as given",
    ("storage/config.py", "validate_options.options"): "checks options and SQL TBLPROPERTIES (Hudi's SQL names "
                                                       "too) as the user gave them, before anything wraps them",
    ("storage/table/table_config.py", "HoodieTableConfig.props"): "the parsed hoodie.properties of a table",
    ("storage/table/table_config.py", "table_checksum.props"): "the properties hoodie.table.checksum is computed over",
    ("storage/table/table_config.py", "legacy_table_checksum.props"): "the old checksum form's properties",
    ("storage/table/table_config.py", "_check_checksum.props"): "a hoodie.properties file just parsed",
    ("storage/table/table_config.py", "_serialize.props"): "the properties written to hoodie.properties",
    ("storage/table/properties_file.py", "format_properties.props"): "the Java properties file format",
}

KEY = re.compile(r"(?<![\w.])hoodie(?:\.[a-z0-9_]+){2,}(?P<family>\.\*)?")
PREFIX = re.compile(r"hoodie(?:\.[a-z0-9_]+)*\.")
NON_KEY_NAMES = {"hoodie.properties", "hoodie.properties.backup"}  # the table's properties file and its backup
CONSTANT_NAME = re.compile(r"^_*[A-Z][A-Z0-9_]*$")


def _files(*packages: str) -> list[Path]:
    return [p for package in packages for p in sorted((ROOT / package).rglob("*.py"))]


def _rel(path: Path) -> str:
    return path.relative_to(ROOT).as_posix()


# -- (a) raw option mappings -------------------------------------------------------------------------------------


def _names(annotation: ast.AST) -> set[str]:
    if isinstance(annotation, ast.Constant) and isinstance(annotation.value, str):  # a quoted annotation
        try:
            annotation = ast.parse(annotation.value, mode="eval")
        except SyntaxError:
            return set()
    return {n.id if isinstance(n, ast.Name) else n.attr for n in ast.walk(annotation)
            if isinstance(n, (ast.Name, ast.Attribute))}


def _optional_config(annotation: ast.AST) -> bool:
    names = _names(annotation)
    text = ast.unparse(annotation)
    return "HoodieConfig" in names and ("None" in text or "Optional" in names)


def _problem(annotation: ast.AST | None) -> str | None:
    if annotation is None:
        return "not annotated (annotate it: HoodieConfig, or the typed settings it carries)"
    names = _names(annotation)
    if names & RAW_MAPPING_TYPES:
        return f"a raw mapping ({ast.unparse(annotation)}): take a HoodieConfig (named config) or typed settings"
    if _optional_config(annotation):
        return f"optional config ({ast.unparse(annotation)}): default to an empty HoodieConfig() instead of None"
    return None


def raw_option_mappings(module: str, source: str) -> list[str]:
    """`module:line qualified.name: problem` for every parameter or class field of `source` that carries options
    without a `HoodieConfig` (rule (a)), the allowed ones left out."""
    found = []

    def check(qualname: str, name: str, annotation: ast.AST | None, line: int) -> None:
        if not OPTION_NAME.match(name) or (module, f"{qualname}.{name}") in RAW_MAPPINGS_ALLOWED:
            return
        problem = _problem(annotation)
        if problem:
            found.append(f"{module}:{line} {qualname}.{name}: {problem}")

    def visit(node: ast.AST, scope: str) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)):
                qualname = f"{scope}{child.name}"
                args = child.args
                for arg in [*args.posonlyargs, *args.args, *args.kwonlyargs, args.vararg, args.kwarg]:
                    if arg is not None and arg.arg not in ("self", "cls"):
                        check(qualname, arg.arg, arg.annotation, arg.lineno)
                visit(child, f"{qualname}.")
            elif isinstance(child, ast.ClassDef):
                for statement in child.body:
                    if isinstance(statement, ast.AnnAssign) and isinstance(statement.target, ast.Name):
                        check(f"{scope}{child.name}", statement.target.id, statement.annotation, statement.lineno)
                visit(child, f"{scope}{child.name}.")
            else:
                visit(child, scope)

    visit(ast.parse(source), "")
    return found


def test_storage_takes_options_as_a_hoodie_config():
    found = [v for path in _files("storage") for v in raw_option_mappings(_rel(path), path.read_text())]
    assert found == [], "options reach storage/ as a HoodieConfig (see the module doc):\n" + "\n".join(found)


def test_every_allowed_raw_mapping_still_exists():
    """The allow-list only shrinks: an entry whose parameter is gone (or became typed) fails."""
    params = set()
    for module, _ in RAW_MAPPINGS_ALLOWED:
        tree = ast.parse((ROOT / module).read_text())
        for node in ast.walk(tree):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                params |= {(module, node.name, a.arg, a.annotation) for a in [*node.args.args, *node.args.kwonlyargs]}
            elif isinstance(node, ast.ClassDef):
                params |= {(module, node.name, s.target.id, s.annotation) for s in node.body
                           if isinstance(s, ast.AnnAssign) and isinstance(s.target, ast.Name)}
    raw = {(module, f"{owner}.{name}") for module, owner, name, annotation in params
           if annotation is not None and _names(annotation) & RAW_MAPPING_TYPES}
    assert sorted(set(RAW_MAPPINGS_ALLOWED) - raw) == []


def test_rule_a_finds_raw_option_mappings():
    source = '''
from typing import Mapping
class Event:
    options: dict
    props: dict[str, str]
def run(spark, options: dict[str, str] | None = None, *, table_props: Mapping[str, str]): ...
def plan(meta, opts): ...
def scan(meta, config: HoodieConfig | None = None): ...
def fine(meta, config: HoodieConfig = HoodieConfig(), storage_options: StorageOptions = None, rows: dict = None): ...
'''
    found = raw_option_mappings("storage/x.py", source)
    assert [f.split(":")[1].split(" ")[1] for f in found] == [
        "Event.options", "Event.props", "run.options", "run.table_props", "plan.opts", "scan.config"]
    assert raw_option_mappings("storage/table/table_config.py", "class HoodieTableConfig:\n    props: dict\n") == []


# -- (b) no re-wrapping ------------------------------------------------------------------------------------------


def rewraps(module: str, source: str) -> list[str]:
    """`module:line` of every `HoodieConfig.of(...)` call of `source` (rule (b))."""
    return [f"{module}:{node.lineno}" for node in ast.walk(ast.parse(source))
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "of"
            and isinstance(node.func.value, ast.Name) and node.func.value.id == "HoodieConfig"]


def test_storage_never_rewraps_options():
    found = [v for path in _files("storage") if _rel(path) != REGISTRY_MODULE
             for v in rewraps(_rel(path), path.read_text())]
    assert found == [], "HoodieConfig.of(...) belongs to the entry points (sqlext/, catalog/) and tests: " + \
        ", ".join(found)


def test_rule_b_finds_a_rewrap():
    assert rewraps("storage/x.py", "def f(options):\n    return HoodieConfig.of(options or {})\n") == ["storage/x.py:2"]


# -- (c) hoodie.* keys only in the registry ----------------------------------------------------------------------


def _docstrings(tree: ast.AST) -> set[int]:
    return {id(node.body[0].value) for node in ast.walk(tree)
            if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef))
            and node.body and isinstance(node.body[0], ast.Expr) and isinstance(node.body[0].value, ast.Constant)}


def _named_constants(tree: ast.Module) -> set[int]:
    """The string constants that are the value (or an element of the tuple value) of an UPPER_CASE module or class
    attribute."""
    found = set()
    scopes = [tree, *(n for n in ast.walk(tree) if isinstance(n, ast.ClassDef))]
    for scope in scopes:
        for statement in scope.body:
            targets = statement.targets if isinstance(statement, ast.Assign) else \
                [statement.target] if isinstance(statement, ast.AnnAssign) else []
            if not targets or not all(isinstance(t, ast.Name) and CONSTANT_NAME.match(t.id) for t in targets):
                continue
            value = statement.value
            elements = value.elts if isinstance(value, (ast.Tuple, ast.List, ast.Set)) else [value]
            found |= {id(e) for e in elements if isinstance(e, ast.Constant)}
    return found


def key_literals(module: str, source: str) -> list[str]:
    """`module:line 'text'` for every string constant of `source` spelling a hoodie.* config key (rule (c))."""
    tree = ast.parse(source)
    skip, constants = _docstrings(tree), _named_constants(tree)
    found = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Constant) or not isinstance(node.value, str) or id(node) in skip:
            continue
        text = node.value
        if PREFIX.fullmatch(text):
            if id(node) not in constants:
                found.append(f"{module}:{node.lineno} {text!r} (a key prefix: make it a named constant)")
            continue
        keys = [m.group(0) for m in KEY.finditer(text) if not m.group("family") and m.group(0) not in NON_KEY_NAMES]
        if keys:
            found.append(f"{module}:{node.lineno} {text[:80]!r} (spells {', '.join(keys)}: use the ConfigProperty's "
                         ".key)")
    return found


def test_hoodie_keys_are_spelt_only_in_the_registry():
    found = [v for path in _files("storage", "catalog", "sqlext") if _rel(path) != REGISTRY_MODULE
             for v in key_literals(_rel(path), path.read_text())]
    assert found == [], "a hoodie.* key outside storage/config.py:\n" + "\n".join(found)


def test_rule_c_finds_key_literals():
    source = '''
"""Module doc naming hoodie.table.name: fine."""
PREFIXES = ("hoodie.keygen.", "hoodie.deltastreamer.keygen.")
PROPERTIES = "hoodie.properties"
def f(options, table):
    """A docstring may name hoodie.cleaner.policy."""
    if key.startswith("hoodie."):
        pass
    options["hoodie.datasource.write.operation"] = "upsert"
    raise ValueError(f"bad {table} (hoodie.index.type); see hoodie.keygen.timebased.* and hoodie.properties.backup")
'''
    found = key_literals("storage/x.py", source)
    assert [f.split(" ")[0] for f in found] == ["storage/x.py:7", "storage/x.py:9", "storage/x.py:10"]
    assert found[2].endswith("(spells hoodie.index.type: use the ConfigProperty's .key)")
