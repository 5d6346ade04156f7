"""The import graph of `storage/`: each layer only looks down, and no module imports itself back through others.

Layers, lowest first (a module may import its own layer and the ones below):
  0  the package's base modules (config, exception, meta_fields, fs_utils, arrow_util) and testing
  1  io, avro, bloom, file_group, keygen, merge, layout, engine   - bytes and formats
  2  table, timeline, metadata                                    - the table, its timeline, metadata-table records
  3  transaction, index, read, callback                           - what writers and readers share
  4  write                                                        - the write path
  5  table_service                                                - compaction, clean, clustering, ...
  6  client                                                       - the write client: writes and their services
and storage imports neither catalog nor sqlext (catalog may import storage, sqlext both).
Imports under `if TYPE_CHECKING:` are not dependencies at run time and are not counted.
"""
from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
LAYERS = {
    **{name: 0 for name in ("(base)", "testing")},
    **{name: 1 for name in ("io", "avro", "bloom", "file_group", "keygen", "merge", "layout", "engine")},
    **{name: 2 for name in ("table", "timeline", "metadata")},
    **{name: 3 for name in ("transaction", "index", "read", "callback")},
    "write": 4,
    "table_service": 5,
    "client": 6,
}
# Back-imports allowed while they last (none today). Listed so that no new one can appear unseen; an entry that
# no longer exists fails the test, so the list only shrinks.
KNOWN_BACK_IMPORTS: set[tuple[str, str]] = set()


def _modules() -> dict[str, Path]:
    found = {}
    for path in sorted((ROOT / "storage").rglob("*.py")):
        name = ".".join(path.relative_to(ROOT).with_suffix("").parts)
        found[name.removesuffix(".__init__")] = path
    return found


def _is_type_checking(node: ast.If) -> bool:
    test = node.test
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or \
        (isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")


def _imported(tree: ast.AST, package: str) -> set[str]:
    names: set[str] = set()

    def visit(node: ast.AST) -> None:
        if isinstance(node, ast.If) and _is_type_checking(node):
            for child in node.orelse:
                visit(child)
            return
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join(parts + ([node.module] if node.module else []))
            names.add(base)
            names.update(f"{base}.{alias.name}" for alias in node.names)
        for child in ast.iter_child_nodes(node):
            visit(child)

    visit(tree)
    return names


def _graph() -> dict[str, set[str]]:
    modules = _modules()
    graph = {}
    for name, path in modules.items():
        package = name if path.name == "__init__.py" else name.rsplit(".", 1)[0]
        imported = _imported(ast.parse(path.read_text(), str(path)), package)
        graph[name] = {m for m in imported if m in modules and m != name} | \
            {m for m in imported if m.split(".")[0] in ("catalog", "sqlext")}
    return graph


def _layer(module: str) -> int:
    parts = module.split(".")
    return LAYERS[parts[1] if len(parts) > 2 or parts[1] in LAYERS else "(base)"]


def _back_imports(graph: dict[str, set[str]]) -> set[tuple[str, str]]:
    return {(a, b) for a, targets in graph.items() for b in targets
            if b.startswith("storage.") and _layer(b) > _layer(a)}


def test_every_storage_package_has_a_layer():
    packages = {p.name for p in (ROOT / "storage").iterdir() if p.is_dir() and (p / "__init__.py").exists()}
    assert packages <= set(LAYERS), f"give {sorted(packages - set(LAYERS))} a layer in this test"


def test_storage_imports_neither_catalog_nor_sqlext():
    graph = _graph()
    assert sorted((a, b) for a, targets in graph.items() for b in targets if not b.startswith("storage")) == []


def test_no_module_imports_a_higher_layer():
    back = _back_imports(_graph())
    assert sorted(back - KNOWN_BACK_IMPORTS) == [], "a lower layer imports a higher one (see the module doc)"
    assert sorted(KNOWN_BACK_IMPORTS - back) == [], "a known back-import is gone: remove it from the list"


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan's algorithm, iteratively)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found = []
    counter = 0
    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next((c for c in children if c in graph), None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = counter
                    counter += 1
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph[child]))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    top = stack.pop()
                    on_stack.discard(top)
                    component.append(top)
                    if top == node:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return found


def test_no_import_cycles_in_storage():
    graph = _graph()
    # the known back-imports close cycles of their own until issue 37 removes them: cycles without them must not be
    pruned = {a: {b for b in targets if (a, b) not in KNOWN_BACK_IMPORTS} for a, targets in graph.items()}
    assert _cycles(pruned) == []


def test_the_cycle_finder_finds_a_cycle():
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
