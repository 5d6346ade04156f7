"""Every byte of a table goes through `storage.io`: no module of storage/ outside storage/io opens, lists, stats,
writes or deletes files itself (builtin open, os / os.path / shutil file calls, pyarrow.parquet at all: parquet
files and in-memory parquet blocks go through storage.io.parquet), so tables on object stores work everywhere and
object-store requests are counted in one place."""
from __future__ import annotations

import ast
from pathlib import Path

STORAGE = Path(__file__).resolve().parents[3] / "storage"
FORBIDDEN_OS = {"open", "listdir", "scandir", "walk", "remove", "unlink", "rename", "replace", "link", "makedirs",
                "mkdir", "rmdir", "stat", "fsync", "fdopen", "truncate"}
FORBIDDEN_OS_PATH = {"exists", "isdir", "isfile", "getsize", "getmtime", "lexists"}
FORBIDDEN_PARQUET = {"read_table", "read_schema", "read_metadata", "ParquetFile", "write_table", "ParquetWriter",
                     "ParquetDataset"}


def _dotted(node: ast.AST) -> str:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return f"{_dotted(node.value)}.{node.attr}"
    return ""


def violations(source: str) -> list[str]:
    found = []
    for node in ast.walk(ast.parse(source)):
        if not isinstance(node, ast.Call):
            continue
        name = _dotted(node.func)
        head, _, last = name.rpartition(".")
        if name == "open" or (head == "os" and last in FORBIDDEN_OS) or (head == "os.path" and last in FORBIDDEN_OS_PATH) \
                or head == "shutil" or (head in ("pq", "pyarrow.parquet") and last in FORBIDDEN_PARQUET):
            found.append(f"line {node.lineno}: {name}()")
    return found


# Local files that are not the table's: each module, and why it may touch the OS directly.
LOCAL_SCRATCH = {
    "storage/merge/spillable_map.py": "spill files of one merge in hoodie.memory.spillable.map.path, on the task's "
                                      "local disk, never in table storage",
    "storage/transaction/storage_lock_provider.py": "the local-file form of the storage-based lock needs an "
                                                    "exclusive hard link and an OS file lock, which HoodieStorage "
                                                    "does not offer (its S3 form goes through storage/io)",
}


def test_storage_modules_use_the_storage_layer():
    problems = {}
    for path in sorted(STORAGE.rglob("*.py")):
        if path.relative_to(STORAGE).parts[0] == "io":
            continue
        found = violations(path.read_text())
        if found and str(path.relative_to(STORAGE.parent)) not in LOCAL_SCRATCH:
            problems[str(path.relative_to(STORAGE.parent))] = found
    assert problems == {}, "direct file access outside storage/io: " + repr(problems)
    assert all((STORAGE.parent / name).exists() for name in LOCAL_SCRATCH), "an exemption outlived its module"


def test_the_check_catches_direct_access():
    bad = "import os, shutil\nimport pyarrow.parquet as pq\nopen('x')\nos.path.getsize('x')\nshutil.rmtree('d')\n" \
          "pq.read_table('/t/f.parquet')\n"
    assert len(violations(bad)) == 4
