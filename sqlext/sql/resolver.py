"""Which Hudi table a SQL table reference names: `db.name`, `name` (current database) or `hudi.`/abs/path``.

`TableResolver` is the interface the planners use; `WarehouseResolver` is the default, file-system only
implementation (Spark's warehouse layout plus a small registry of tables created with an explicit LOCATION).
A Hive-Metastore-backed resolver (catalog/) implements the same protocol.
"""
from __future__ import annotations

import copy
import json
import logging
import os
import tempfile
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Callable, Protocol, runtime_checkable

from sqlglot import exp

from storage.io.storage_location import normalize_base_path
from storage.table.meta_client import HoodieTableMetaClient

log = logging.getLogger(__name__)

PATH_QUALIFIER = "hudi"  # hudi.`/abs/path` names a table by its base path
DEFAULT_DB = "default"


@dataclass(frozen=True)
class TableName:
    """A table reference as written in SQL (not yet resolved)."""

    name: str
    db: str | None = None
    path: str | None = None  # set for the path form hudi.`/abs/path`

    @classmethod
    def of(cls, table: exp.Table) -> "TableName":
        name, db = table.name, table.db or None
        if db and db.lower() == PATH_QUALIFIER and _looks_like_path(name):
            return cls(name=os.path.basename(name.rstrip("/")) or name, path=name)
        return cls(name=name.lower(), db=db.lower() if db else None)

    @classmethod
    def parse(cls, text: str) -> "TableName":
        """From a string such as 'db.t', 't' or '/abs/path' (the first argument of hudi_table_changes)."""
        text = text.strip()
        if _looks_like_path(text):
            return cls(name=os.path.basename(text.rstrip("/")) or text, path=text)
        db, _, name = text.rpartition(".")
        return cls(name=name.strip("`").lower(), db=db.strip("`").lower() or None)

    def __str__(self) -> str:
        if self.path:
            return f"{PATH_QUALIFIER}.`{self.path}`"
        return f"{self.db}.{self.name}" if self.db else self.name


READ_OPTIMIZED = "read_optimized"
SNAPSHOT = "snapshot"
SUFFIX_QUERY_TYPES = {"_ro": READ_OPTIMIZED, "_rt": SNAPSHOT}  # Hive sync's views of a MOR table


@dataclass(frozen=True)
class HudiTableRef:
    """A resolved Hudi table: its name (db None for the path form) and base path. `query_type` is set for the
    `<t>_ro` / `<t>_rt` views Hive sync makes of a MOR table: reads of the ref use that query type."""

    name: str
    db: str | None
    path: str
    query_type: str | None = None

    @property
    def qualified_name(self) -> str:
        return f"{self.db}.{self.name}" if self.db else f"{PATH_QUALIFIER}.`{self.path}`"


@runtime_checkable
class TableResolver(Protocol):
    """What the SQL front end needs from a catalog."""

    @property
    def current_database(self) -> str: ...

    def resolve(self, name: TableName) -> HudiTableRef | None:
        """The Hudi table `name` refers to, or None when it is not (or not yet) a Hudi table."""

    def location_for(self, name: TableName) -> HudiTableRef:
        """Where CREATE TABLE without LOCATION puts the table (the managed location)."""

    def register(self, ref: HudiTableRef) -> None:
        """Remember a table created (or adopted) at an explicit location."""

    def unregister(self, ref: HudiTableRef) -> None:
        """Forget a registered table (no-op for managed locations)."""

    def refresh(self, ref: HudiTableRef) -> None:
        """The table's schema or properties changed (ALTER TABLE): bring the catalog entry in line."""

    def rename(self, ref: HudiTableRef, new_name: TableName) -> HudiTableRef:
        """ALTER TABLE ... RENAME TO: the catalog entry moves to `new_name` (the data stays where it is)."""

    def database_exists(self, db: str) -> bool: ...

    def use(self, db: str) -> None:
        """`USE db` was executed."""


def _looks_like_path(text: str) -> bool:
    return text.startswith("/") or "://" in text or text.startswith("file:")


def resolve_path_form(name: TableName) -> HudiTableRef | None:
    """hudi.`/abs/path`: the table at that path, whatever catalog is in use."""
    path = normalize_base_path(name.path)
    return HudiTableRef(name=name.name, db=None, path=path) if is_hudi_table(path) else None


def is_hudi_table(path: str) -> bool:
    try:
        return HoodieTableMetaClient.exists(path)
    except OSError:
        return False


def is_mor_table(path: str) -> bool:
    try:
        return HoodieTableMetaClient.load(path).table_config.is_mor
    except Exception:
        return False


class TableRegistry:
    """Tables created with an explicit LOCATION, persisted as `<warehouse>/.sqlext/tables.json` so a new
    session finds them. Re-read when the file changes (another session may have added tables)."""

    VERSION = 1

    def __init__(self, warehouse_dir: str):
        self.file = Path(warehouse_dir) / ".sqlext" / "tables.json"
        self._tables: dict[str, HudiTableRef] = {}
        self._stamp: float | None = None

    def _refresh(self) -> None:
        try:
            stamp = self.file.stat().st_mtime_ns
        except FileNotFoundError:
            self._tables, self._stamp = {}, None
            return
        if stamp == self._stamp:
            return
        data = json.loads(self.file.read_text(encoding="utf-8") or "{}")
        self._tables = {key: HudiTableRef(**value) for key, value in data.get("tables", {}).items()}
        self._stamp = stamp

    def get(self, db: str, name: str) -> HudiTableRef | None:
        self._refresh()
        return self._tables.get(f"{db}.{name}")

    def put(self, ref: HudiTableRef) -> None:
        self._refresh()
        self._tables[f"{ref.db}.{ref.name}"] = ref
        self._save()

    def names(self, db: str) -> list[str]:
        self._refresh()
        return [ref.name for key, ref in self._tables.items() if key.split(".", 1)[0] == db]

    def remove(self, db: str, name: str) -> None:
        self._refresh()
        if self._tables.pop(f"{db}.{name}", None) is not None:
            self._save()

    def _save(self) -> None:
        self.file.parent.mkdir(parents=True, exist_ok=True)
        payload = {"version": self.VERSION, "tables": {k: asdict(v) for k, v in sorted(self._tables.items())}}
        # write-then-rename: a concurrent reader sees the old or the new file, never half of one
        fd, tmp = tempfile.mkstemp(dir=self.file.parent, prefix=".tables.", suffix=".tmp")
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            json.dump(payload, fh, indent=1)
        os.replace(tmp, self.file)
        self._stamp = self.file.stat().st_mtime_ns


class DatabaseScope:
    """What every resolver shares: the current database (a name, or Spark's `currentDatabase` when given a callable)
    and the managed location `<database dir>/<name>` of a table; subclasses say where a database's directory is."""

    def __init__(self, current_db: str | Callable[[], str] = DEFAULT_DB):
        self._current = current_db

    @property
    def current_database(self) -> str:
        current = self._current() if callable(self._current) else self._current
        return (current or DEFAULT_DB).lower()

    def for_session(self, current_db: str | Callable[[], str]):
        """The same resolver with its own current database (another client session over the same catalog)."""
        scoped = copy.copy(self)
        scoped._current = current_db
        return scoped

    def use(self, db: str) -> None:
        if not callable(self._current):  # with Spark's currentDatabase, Spark's USE already switched
            self._current = db.lower()

    def _db_dir(self, db: str) -> str:
        raise NotImplementedError

    def location_for(self, name: TableName) -> HudiTableRef:
        db = name.db or self.current_database
        return HudiTableRef(name=name.name, db=db, path=f"{self._db_dir(db)}/{name.name}")


class WarehouseResolver(DatabaseScope):
    """Spark's warehouse layout: `db.name` -> `<warehouse>/<db>.db/<name>`, `default.name` -> `<warehouse>/<name>`;
    a table is a Hudi table when `.hoodie/hoodie.properties` exists there. Tables created with LOCATION are
    found through the registry first."""

    def __init__(self, warehouse_dir: str | os.PathLike, current_db: str | Callable[[], str] = DEFAULT_DB):
        super().__init__(current_db)
        self.warehouse = normalize_base_path(warehouse_dir)
        self.registry = TableRegistry(self.warehouse)

    def _db_dir(self, db: str) -> str:
        return self.warehouse if db == DEFAULT_DB else f"{self.warehouse}/{db}.db"

    def database_exists(self, db: str) -> bool:
        return db.lower() == DEFAULT_DB or os.path.isdir(self._db_dir(db.lower()))

    def resolve(self, name: TableName) -> HudiTableRef | None:
        if name.path:
            return resolve_path_form(name)
        db = name.db or self.current_database
        registered = self.registry.get(db, name.name)
        if registered is not None:
            if is_hudi_table(registered.path):
                return registered
            log.warning("registered table %s.%s has no Hudi table at %s", db, name.name, registered.path)
        managed = self.location_for(TableName(name.name, db))
        if is_hudi_table(managed.path):
            return managed
        return self._synced_view(name, db)

    def _synced_view(self, name: TableName, db: str) -> HudiTableRef | None:
        """`<t>_ro` / `<t>_rt` of a MOR table `<t>` (what Hive sync names them), without a metastore."""
        query_type = SUFFIX_QUERY_TYPES.get(name.name[-3:])
        if query_type is None or len(name.name) <= 3:
            return None
        base = self.resolve(TableName(name.name[:-3], db))
        if base is None or base.query_type is not None or not is_mor_table(base.path):
            return None
        return HudiTableRef(name.name, db, base.path, query_type)

    def table_names(self, db: str) -> list[str]:
        """Hudi tables of `db` (SHOW TABLES): managed directories holding a table, and registered locations."""
        db = db.lower()
        root = self._db_dir(db)
        managed = []
        if os.path.isdir(root):
            managed = [e.name for e in os.scandir(root) if e.is_dir() and not e.name.startswith(".")
                       and not e.name.endswith(".db") and is_hudi_table(e.path)]
        registered = [n for n in self.registry.names(db) if self.resolve(TableName(n, db)) is not None]
        return sorted(set(managed) | set(registered))

    def register(self, ref: HudiTableRef) -> None:
        if ref.db is None:
            return
        if ref.path == self.location_for(TableName(ref.name, ref.db)).path:
            return  # the managed location needs no entry
        self.registry.put(ref)

    def unregister(self, ref: HudiTableRef) -> None:
        if ref.db is not None:
            self.registry.remove(ref.db, ref.name)

    def refresh(self, ref: HudiTableRef) -> None:
        """Nothing to do: the warehouse layout keeps no copy of the schema or properties."""

    def rename(self, ref: HudiTableRef, new_name: TableName) -> HudiTableRef:
        """The data stays at its path; the new name is registered at that explicit location."""
        new_ref = HudiTableRef(name=new_name.name, db=new_name.db or ref.db or self.current_database, path=ref.path)
        self.unregister(ref)
        self.registry.put(new_ref)
        return new_ref
