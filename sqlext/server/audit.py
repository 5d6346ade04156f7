"""The server's audit log: one JSON line per statement, written when the statement's operation closes (the client
closed it, its session ended, or the server stopped), so that the line carries how it ended and how many rows
the client fetched.

Fields: `time` (UTC, when the statement arrived), `user`, `client` (address:port; `http` requests carry the
proxy's or client's address), `session`, `operation`, `statement_sha256`, `statement` (whitespace collapsed,
at most 4,000 characters), `tables` (every table the statement names, CTE names excluded; empty when it does
not parse), `outcome` (ok, error, denied, canceled, timedout, closed: closed before it finished), `sqlstate`
(on error), `rows` (rows fetched), `duration_ms`.

Lines go to the `sqlext.audit` logger and, with `--audit-log FILE` (`sqlext.serve.audit.log`), appended to FILE.
"""
from __future__ import annotations

import hashlib
import json
import logging
import threading
from datetime import datetime, timezone

from sqlext.server.statement_text import named_tables

log = logging.getLogger("sqlext.audit")

MAX_STATEMENT_CHARS = 4000


class AuditLog:
    def __init__(self, path: str | None = None):
        self.path = path
        self._lock = threading.Lock()

    def write(self, entry: dict) -> None:
        line = json.dumps(entry, sort_keys=True)
        log.info(line)
        if self.path:
            with self._lock, open(self.path, "a", encoding="utf-8") as out:
                out.write(line + "\n")


def statement_entry(*, started_ms: int, user: str, client: str, session: str, operation: str, statement: str,
                    outcome: str, sqlstate: str | None, rows: int, duration_ms: int) -> dict:
    return {"time": datetime.fromtimestamp(started_ms / 1000, timezone.utc).isoformat(timespec="milliseconds"),
            "user": user, "client": client, "session": session, "operation": operation,
            "statement_sha256": hashlib.sha256(statement.encode("utf-8")).hexdigest(),
            "statement": " ".join(statement.split())[:MAX_STATEMENT_CHARS], "tables": tables_of(statement),
            "outcome": outcome, "sqlstate": sqlstate, "rows": rows, "duration_ms": duration_ms}


def tables_of(statement: str) -> list[str]:
    """The tables `statement` names (`db.t`, `format.path`), sorted, without the names of its CTEs."""
    import sqlglot

    try:
        trees = [t for t in sqlglot.parse(statement, read="spark") if t is not None]
    except Exception:  # noqa: BLE001 - the audit line must be written whatever the statement is
        return []
    return sorted({".".join(part for part in (t.catalog, t.db, t.name) if part)
                   for tree in trees for t in named_tables(tree)})
