"""Which served user may read or change which table: a policy file of grants, checked on every statement.

The policy file (`sqlext serve --policy FILE`; edited with `--grant` / `--revoke` or by hand, re-read when it
changes) holds lines of

    GRANT <SELECT|MODIFY|ADMIN> ON <object> TO <USER|GROUP> <name>
    GROUP <name>: <user>, <user>, ...
    # comments

Objects are `db.table`, `db.*`, `*` (fnmatch wildcards, case-insensitive; the catalog is the session's) and
`path:/dir/*` for tables named by path (`hudi.\\`/dir/t\\``). Privileges include the lower ones: MODIFY (INSERT,
UPDATE, DELETE, MERGE, CALL of a procedure that writes) includes SELECT, ADMIN (DDL, services, savepoints,
restore, rollbacks, upgrades) includes both. A statement needs, for every table it names (subqueries, CTEs'
bodies, views as objects of their own, `format.\\`path\\`` relations): MODIFY on the tables it writes, ADMIN on
what it creates, alters or drops (`db.*` for a database), SELECT on the rest. A statement of a kind this module
does not classify needs ADMIN on `*`. Without a policy file every authenticated user may do everything (and the
server says so at start-up). `SHOW GRANTS` lists the grants that apply to the session's user.
"""
from __future__ import annotations

import fnmatch
import logging
import os
import re
import threading
from dataclasses import dataclass
from typing import Callable

from sqlext.server.statement_guard import HoodieAccessDeniedError
from sqlext.server.statement_text import named_tables, without_comments

log = logging.getLogger(__name__)

PRIVILEGES = ("SELECT", "MODIFY", "ADMIN")  # each includes the ones before it
ALL = "*"

_GRANT = re.compile(r"^\s*GRANT\s+(SELECT|MODIFY|ADMIN)\s+ON\s+(\S+)\s+TO\s+(USER|GROUP)\s+(\S+)\s*$", re.IGNORECASE)
_GROUP = re.compile(r"^\s*GROUP\s+([^:\s]+)\s*:\s*(.*)$", re.IGNORECASE)
SHOW_GRANTS = re.compile(r"^\s*SHOW\s+GRANTS\s*;?\s*$", re.IGNORECASE)

# CALL procedures by what they do to their table (names as registered in sqlext/sql/procedures)
_READING_PROCEDURES = ("show_", "help", "stats_", "validate_", "copy_to_temp_view")
_ADMIN_PROCEDURES = ("create_savepoint", "delete_savepoint", "rollback_to_savepoint", "rollback_to_instant",
                     "upgrade_table", "downgrade_table")
_CALL = re.compile(r"^\s*CALL\s+(?:system\.)?(\w+)\s*\((.*)\)\s*;?\s*$", re.IGNORECASE | re.DOTALL)
_CALL_TABLE = re.compile(r"\b(table|path)\s*=>\s*'([^']*)'", re.IGNORECASE)
_SHOW_ON_TABLE = re.compile(r"^\s*SHOW\s+(?:CREATE\s+TABLE|PARTITIONS|TBLPROPERTIES|COLUMNS\s+(?:IN|FROM))\s+"
                            r"([\w.`]+)", re.IGNORECASE)
_HARMLESS = re.compile(r"^\s*(SHOW|SET|RESET|USE|LIST|CLEAR\s+CACHE|DESC(?:RIBE)?\s+(?:DATABASE|SCHEMA|FUNCTION|"
                       r"CATALOG))\b", re.IGNORECASE)


@dataclass(frozen=True)
class Grant:
    privilege: str
    object: str
    kind: str       # USER or GROUP
    principal: str

    @classmethod
    def parse(cls, line: str) -> "Grant | None":
        """The grant a policy line states (comments ignored); None when it is not a grant."""
        found = _GRANT.match(line.split("#", 1)[0])
        return cls(found.group(1).upper(), found.group(2), found.group(3).upper(), found.group(4)) if found else None

    def line(self) -> str:
        return f"GRANT {self.privilege} ON {self.object} TO {self.kind} {self.principal}"

    def covers(self, privilege: str, obj: str) -> bool:
        return PRIVILEGES.index(self.privilege) >= PRIVILEGES.index(privilege) and \
            fnmatch.fnmatchcase(obj.lower(), self.object.lower())


@dataclass(frozen=True)
class Policy:
    grants: tuple[Grant, ...] = ()
    groups: tuple[tuple[str, frozenset[str]], ...] = ()

    @classmethod
    def parse(cls, text: str, source: str = "policy") -> "Policy":
        grants, groups = [], {}
        for number, raw in enumerate(text.splitlines(), 1):
            line = raw.split("#", 1)[0].strip()
            if not line:
                continue
            grant, group = Grant.parse(line), _GROUP.match(line)
            if grant:
                grants.append(grant)
            elif group:
                groups[group.group(1)] = frozenset(m.strip() for m in group.group(2).split(",") if m.strip())
            else:
                raise ValueError(f"{source}:{number}: expected 'GRANT <SELECT|MODIFY|ADMIN> ON <object> TO "
                                 f"<USER|GROUP> <name>' or 'GROUP <name>: <users>', got {raw.strip()!r}")
        return cls(tuple(grants), tuple(sorted(groups.items())))

    def grants_of(self, user: str) -> list[Grant]:
        groups = {name for name, members in self.groups if user in members}
        return [g for g in self.grants if (g.kind == "USER" and g.principal in (user, ALL))
                or (g.kind == "GROUP" and g.principal in groups)]

    def allows(self, user: str, privilege: str, obj: str) -> bool:
        return any(g.covers(privilege, obj) for g in self.grants_of(user))


class PolicyFile:
    """The policy file, re-read when its modification time changes."""

    def __init__(self, path: str):
        self.path = path
        self._lock = threading.Lock()
        self._stamp: tuple[int, int] | None = None
        self._policy = Policy()

    def policy(self) -> Policy:
        try:
            st = os.stat(self.path)
        except FileNotFoundError:
            raise HoodieAccessDeniedError(f"the policy file {self.path} is missing: nothing is granted") from None
        with self._lock:
            if self._stamp != (st.st_mtime_ns, st.st_size):
                with open(self.path, encoding="utf-8") as f:
                    self._policy = Policy.parse(f.read(), self.path)
                self._stamp = (st.st_mtime_ns, st.st_size)
            return self._policy

    def change(self, statement: str, revoke: bool = False) -> Grant:
        """Add (or with `revoke` remove) the grant `statement` ("SELECT ON db.* TO USER alice") to the file."""
        grant = Grant.parse(f"GRANT {statement}")
        if grant is None:
            raise ValueError(f"expected '<SELECT|MODIFY|ADMIN> ON <object> TO <USER|GROUP> <name>', got {statement!r}")
        lines = open(self.path, encoding="utf-8").read().splitlines() if os.path.exists(self.path) else []
        kept = [line for line in lines if Grant.parse(line) != grant]
        if not revoke:
            kept.append(grant.line())
        with open(self.path, "w", encoding="utf-8") as f:
            f.write("\n".join(kept) + "\n")
        return grant


class Authorizer:
    def __init__(self, policy_file: PolicyFile):
        self.policy_file = policy_file

    def check(self, user: str, statement: str, current_database: str,
              is_temp_view: Callable[[str], bool] = lambda name: False) -> None:
        """Raise HoodieAccessDeniedError (logged) naming the first privilege `user` lacks for `statement`;
        `is_temp_view(name)`: whether the session has a temporary view of that name (checked when it was made)."""
        policy = self.policy_file.policy()
        for privilege, obj in required_privileges(statement, current_database, is_temp_view):
            if not policy.allows(user, privilege, obj):
                log.warning("denied: user %s lacks %s on %s: %s", user, privilege, obj, " ".join(statement.split())[:200])
                raise HoodieAccessDeniedError(f"user {user} lacks the {privilege} privilege on {obj} (granted in "
                                              f"the server's policy file {self.policy_file.path})")

    def listing_filter(self, user: str) -> Callable[[str, str], bool]:
        """Whether a catalog listing shows (database, table) to `user`: SELECT on it (the session's temporary
        views, without a database, always); one read of the policy for the whole listing."""
        policy = self.policy_file.policy()
        return lambda database, table: not database or policy.allows(user, "SELECT", f"{database}.{table}".lower())

    def show_grants(self, user: str) -> list[tuple[str, str, str, str]]:
        return [(g.privilege, g.object, g.kind, g.principal) for g in self.policy_file.policy().grants_of(user)]


# -- what a statement needs -----------------------------------------------------------------------------------
def required_privileges(statement: str, current_database: str,
                        is_temp_view: Callable[[str], bool] = lambda name: False) -> list[tuple[str, str]]:
    """(privilege, object) pairs `statement` needs, writes first. An unqualified name of one of the session's
    temporary views needs nothing (Spark resolves it to the view, whose query was checked when it was made)."""
    import sqlglot
    from sqlglot import exp

    text = without_comments(statement).strip()
    explain = re.match(r"^\s*EXPLAIN\s+(?:EXTENDED\s+|FORMATTED\s+|CODEGEN\s+|COST\s+)?", text, re.IGNORECASE)
    if explain:
        return [("SELECT", obj) for _, obj in required_privileges(text[explain.end():], current_database,
                                                                  is_temp_view)]
    call = _CALL.match(text)
    if call:
        return _call_privileges(call.group(1).lower(), call.group(2), current_database)
    shown = _SHOW_ON_TABLE.match(text)
    if shown:
        return [("SELECT", _qualified(shown.group(1).replace("`", ""), current_database))]
    if _HARMLESS.match(text):
        return []
    try:
        trees = [t for t in sqlglot.parse(text, read="spark") if t is not None]
    except Exception:  # noqa: BLE001 - what no parser understands needs the highest privilege
        return [("ADMIN", ALL)]
    needed: list[tuple[str, str]] = []
    for tree in trees:
        needed += _tree_privileges(tree, current_database, exp, is_temp_view)
    return needed


def _tree_privileges(tree, current_database: str, exp, is_temp_view: Callable[[str], bool]) -> list[tuple[str, str]]:
    tables = [t for t in named_tables(tree) if t.db or not is_temp_view(t.name)]

    def objects(nodes) -> list[str]:
        return list(dict.fromkeys(_object(t, current_database) for t in nodes))

    temporary = _temporary_view(tree, exp)
    if temporary:
        # a session's own temporary view needs nothing on itself, a global one (seen by every session as
        # global_temp.<name>) ADMIN; both SELECT on what they read
        view = tree.this.this if isinstance(tree.this, exp.Schema) else tree.this
        made = [("ADMIN", f"global_temp.{view.name}".lower())] if temporary == "global" else []
        return made + [("SELECT", obj) for obj in objects(t for t in tables if t is not view)]
    target, privilege = None, "SELECT"
    if isinstance(tree, (exp.Insert, exp.Merge, exp.Update, exp.Delete)):
        target, privilege = tree.this, "MODIFY"
    elif isinstance(tree, exp.Create):
        target, privilege = tree.this, "ADMIN"
        if str(tree.args.get("kind", "")).upper() in ("DATABASE", "SCHEMA"):
            return [("ADMIN", f"{_name_of(target)}.*")]
        if str(tree.args.get("kind", "")).upper() == "FUNCTION":
            return [("ADMIN", ALL)]
    elif isinstance(tree, (exp.Drop, exp.Alter, exp.TruncateTable, exp.Refresh, exp.Analyze, exp.Cache,
                           exp.Uncache, exp.LoadData)):
        # statements that only name what they change (DROP's tables, TRUNCATE's expressions, ALTER's this)
        if str(tree.args.get("kind", "")).upper() in ("DATABASE", "SCHEMA"):
            return [("ADMIN", f"{t.name}.*") for t in tables] or [("ADMIN", ALL)]
        return [("ADMIN", obj) for obj in objects(tables)] or [("ADMIN", ALL)]
    elif isinstance(tree, exp.Use):
        return []
    elif not isinstance(tree, (exp.Query, exp.Describe)):
        return [("ADMIN", ALL)]  # a kind of statement this module does not classify
    if isinstance(target, exp.Schema):
        target = target.this
    written = _object(target, current_database) if isinstance(target, exp.Table) else None
    needed = [(privilege, written)] if written else []
    return needed + [("SELECT", obj) for obj in objects(tables) if obj != written]


def _temporary_view(create, exp) -> str | None:
    """"session" for CREATE TEMPORARY VIEW, "global" for CREATE GLOBAL TEMPORARY VIEW, else None."""
    if not isinstance(create, exp.Create) or str(create.args.get("kind", "")).upper() != "VIEW":
        return None
    props = create.args.get("properties")
    kinds = {type(p) for p in (props.expressions if props else [])}
    if exp.TemporaryProperty not in kinds:
        return None
    return "global" if exp.GlobalProperty in kinds else "session"


def _call_privileges(procedure: str, args: str, current_database: str) -> list[tuple[str, str]]:
    privilege = "SELECT" if procedure.startswith(_READING_PROCEDURES) else \
        "ADMIN" if procedure in _ADMIN_PROCEDURES else "MODIFY"
    named = _CALL_TABLE.search(args)
    if named is None:
        return [(privilege, ALL)] if privilege != "SELECT" else []
    kind, value = named.group(1).lower(), named.group(2)
    obj = f"path:{os.path.normpath(value)}" if kind == "path" or "/" in value else _qualified(value, current_database)
    return [(privilege, obj)]


def _object(table, current_database: str) -> str:
    """`db.table` of a table reference; `path:/p` of a `format.\\`/p\\`` relation."""
    name = table.name
    if "/" in name or ":" in name:
        return f"path:{os.path.normpath(name.removeprefix('file:'))}"
    return _qualified(f"{table.db}.{name}" if table.db else name, current_database)


def _name_of(node) -> str:
    return getattr(node, "name", None) or str(node)


def _qualified(name: str, current_database: str) -> str:
    parts = [p for p in name.split(".") if p]
    if len(parts) == 1:
        return f"{current_database}.{parts[0]}".lower()
    return ".".join(parts[-2:]).lower()  # a catalog prefix names the session's catalog
