"""The embedded metastores of this user on this machine: one small file per warehouse whose metastore was started,
and a tag on each metastore JVM's command line naming the registry it belongs to.

`sqlext metastore status` and `sqlext metastore stop --all` read it. It lives in
``$XDG_STATE_HOME/sqlext/metastores`` (``~/.local/state/sqlext/metastores``), or where
``$SQLEXT_METASTORE_REGISTRY`` points (tests use their own, so they never see or stop anyone else's).
An entry only points at a warehouse: whether its metastore runs is read from the warehouse itself. The tag
(``-Dsqlext.metastore.registry=<dir>``) is what finds a metastore whose warehouse was deleted, or whose entry was
overwritten by a newer metastore of a warehouse of the same path: the process list outlives both.
"""
from __future__ import annotations

import hashlib
import json
import logging
import os
from pathlib import Path

log = logging.getLogger(__name__)

REGISTRY_ENV = "SQLEXT_METASTORE_REGISTRY"
REGISTRY_PROPERTY = "sqlext.metastore.registry"  # a JVM system property nobody reads: only a tag for ps/procfs


def registry_dir() -> Path:
    configured = os.environ.get(REGISTRY_ENV)
    if configured:
        return Path(configured).absolute()
    state_home = os.environ.get("XDG_STATE_HOME") or Path.home() / ".local" / "state"
    return (Path(state_home) / "sqlext" / "metastores").absolute()


def jvm_tag() -> str:
    """The command-line option that marks a metastore JVM as one of this registry."""
    return f"-D{REGISTRY_PROPERTY}={registry_dir()}"


def tagged_for_this_registry(args: list[str]) -> bool:
    """Whether a metastore JVM with command line `args` belongs to this registry.

    An untagged JVM (started by a version without tags) belongs to the default registry only."""
    prefix = f"-D{REGISTRY_PROPERTY}="
    tag = next((a[len(prefix):] for a in args if a.startswith(prefix)), None)
    if tag is None:
        return not os.environ.get(REGISTRY_ENV)
    return Path(tag) == registry_dir()


def _entry(warehouse: Path) -> Path:
    return registry_dir() / f"{hashlib.sha256(str(warehouse).encode()).hexdigest()[:20]}.json"


def register(warehouse: Path) -> None:
    """Record the warehouse (a registry that cannot be written only costs `status` its entry)."""
    entry = _entry(warehouse)
    try:
        entry.parent.mkdir(parents=True, exist_ok=True)
        tmp = entry.with_suffix(f".{os.getpid()}.tmp")
        tmp.write_text(json.dumps({"warehouse": str(warehouse)}))
        os.replace(tmp, entry)
    except OSError as exc:
        log.warning("cannot record the metastore of %s in %s: %s", warehouse, entry.parent, exc)


def unregister(warehouse: Path) -> None:
    _entry(warehouse).unlink(missing_ok=True)


def registered_warehouses() -> list[Path]:
    root = registry_dir()
    if not root.is_dir():
        return []
    warehouses = []
    for entry in sorted(root.glob("*.json")):
        try:
            warehouses.append(Path(json.loads(entry.read_text())["warehouse"]))
        except (OSError, ValueError, KeyError, TypeError):
            log.debug("ignoring unreadable registry entry %s", entry)
    return warehouses
