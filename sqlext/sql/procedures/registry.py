"""The procedure registry behind `CALL [system.]name(...)`.

A procedure declares its parameters (Hudi's names, a Spark SQL type, required or a default) and its output
schema (Hudi's column names), and a function `run(call, args) -> rows | DataFrame`. Modules register
procedures with `register(Procedure(...))` or the `@procedure(...)` decorator; every module of the
`sqlext.sql.procedures` package is imported on first use of the registry, so a new module there registers
itself by being there (e.g. `hive_sync.py`).

    from sqlext.sql.procedures.registry import optional, procedure, required

    @procedure("show_commits", [required("table", "string"), optional("limit", "int", 10)],
               "commit_time string, action string, ...", "the latest completed commits")
    def show_commits(call, args):
        meta = call.meta_client(args["table"])
        return [(...), ...]          # tuples in output-schema order, or a DataFrame
"""
from __future__ import annotations

import importlib
import logging
import pkgutil
import threading
from dataclasses import dataclass, field
from typing import Any, Callable

log = logging.getLogger(__name__)

_MISSING = object()


@dataclass(frozen=True)
class ProcedureParameter:
    """One parameter: Hudi's name, a Spark SQL type name (string, int, long, double, boolean, map<string,string>),
    required or not, and the default used when it is not given."""

    name: str
    type: str
    required: bool = False
    default: Any = None

    def describe(self) -> str:
        if self.required:
            return f"{self.name} {self.type} (required)"
        return f"{self.name} {self.type} (optional, default {self.default!r})"


def required(name: str, type_: str) -> ProcedureParameter:
    return ProcedureParameter(name, type_, True)


def optional(name: str, type_: str, default: Any = None) -> ProcedureParameter:
    return ProcedureParameter(name, type_, False, default)


@dataclass(frozen=True)
class Procedure:
    name: str
    parameters: tuple[ProcedureParameter, ...]
    output: str                                  # Spark DDL schema of the result, Hudi's column names
    run: Callable[..., Any]                      # run(call: ProcedureCall, args: dict[str, Any]) -> rows | DataFrame
    description: str = ""
    aliases: tuple[str, ...] = field(default_factory=tuple)

    def parameter(self, name: str) -> ProcedureParameter | None:
        lower = name.lower()
        return next((p for p in self.parameters if p.name.lower() == lower), None)

    def usage(self) -> str:
        lines = [f"{self.name}: {self.description}".rstrip(": "), "parameters:"]
        lines += [f"  {p.describe()}" for p in self.parameters] or ["  (none)"]
        lines.append(f"output: {self.output}")
        return "\n".join(lines)


_lock = threading.RLock()
_procedures: dict[str, Procedure] = {}
_loaded = False


def register(proc: Procedure, *, replace: bool = False) -> Procedure:
    """Add a procedure (its name and aliases, case-insensitive). Registering a name twice is an error unless
    `replace` (module reloads)."""
    with _lock:
        for name in (proc.name, *proc.aliases):
            key = name.lower()
            existing = _procedures.get(key)
            same_origin = existing is not None and _origin(existing) == _origin(proc)  # a module reloaded
            if existing is not None and not (replace or same_origin):
                raise ValueError(f"procedure {name!r} is already registered (by {existing.run.__module__})")
            _procedures[key] = proc
    return proc


def _origin(proc: Procedure) -> tuple[str, str]:
    return getattr(proc.run, "__module__", ""), getattr(proc.run, "__qualname__", "")


def procedure(name: str, parameters: list[ProcedureParameter] | tuple = (), output: str = "result string",
              description: str = "", aliases: tuple[str, ...] = ()) -> Callable:
    """Decorator form of `register`."""
    def wrap(fn: Callable) -> Callable:
        register(Procedure(name, tuple(parameters), output, fn, description or (fn.__doc__ or "").strip().split("\n")[0],
                           tuple(aliases)))
        return fn
    return wrap


def load_all() -> None:
    """Import every module of the procedures package once (each registers its procedures)."""
    global _loaded
    if _loaded:
        return
    with _lock:
        if _loaded:
            return
        import sqlext.sql.procedures as package

        for info in pkgutil.iter_modules(package.__path__):
            if info.name in ("registry", "call") or info.name.startswith("_"):
                continue
            try:
                importlib.import_module(f"{package.__name__}.{info.name}")
            except Exception:  # one broken module must not take CALL down for the others
                log.exception("could not load procedures from %s.%s", package.__name__, info.name)
        _loaded = True


def get(name: str) -> Procedure | None:
    load_all()
    return _procedures.get(name.lower())


def names() -> list[str]:
    load_all()
    return sorted({p.name for p in _procedures.values()})
