"""Procedures for `CALL [system.]name(arg => value, ...)` (Hudi's Spark SQL procedures).

`registry` holds them; each other module of this package registers its procedures when imported, and all
of them are imported on first lookup (`registry.get` / `registry.names`). To add procedures, create a module
here that calls `registry.register(...)` or uses `@registry.procedure(...)`.
"""
from sqlext.sql.procedures.registry import (  # noqa: F401
    Procedure, ProcedureParameter, get, load_all, names, optional, procedure, register, required)
