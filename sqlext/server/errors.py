"""Errors of the HiveServer2-protocol server. Each carries the SQLSTATE its TStatus reports."""
from __future__ import annotations

from storage.exception import HoodieError


class HoodieServerError(HoodieError):
    """A request the server refuses or cannot complete; answered as an ERROR status with `sqlstate`."""

    sqlstate = "HY000"  # general error


class HoodieInvalidHandleError(HoodieServerError):
    """A session or operation handle the server does not know (closed, expired, or never issued)."""

    sqlstate = "HY010"  # function sequence error


class HoodieAuthenticationError(HoodieServerError):
    """Wrong user or password, or a transport that carries no credentials where they are required."""

    sqlstate = "28000"  # invalid authorization specification


class HoodieProtocolError(HoodieServerError):
    """A malformed or oversized frame: the connection that sent it is closed, nothing else is affected."""

    sqlstate = "08S01"  # communication link failure


class HoodieUnsupportedRequestError(HoodieServerError):
    """A known RPC or request option this server does not implement (delegation tokens, row-based result
    sets of protocol versions before V6, ...)."""

    sqlstate = "0A000"  # feature not supported


class HoodieSessionLimitError(HoodieServerError):
    """OpenSession beyond a session limit (the server's, or HiveServer2's per user / per address ones)."""

    sqlstate = "08004"  # the server rejected the connection


class HoodieOperationLimitError(HoodieServerError):
    """ExecuteStatement while the session already runs as many statements as allowed; the session goes on."""

    sqlstate = "53000"  # insufficient resources: try again when a statement ended


class HoodieResultLimitError(HoodieServerError):
    """A result with more rows than the server hands out: the statement fails rather than answer in part."""

    sqlstate = "54000"  # program limit exceeded


class HoodieUsersFileError(HoodieServerError):
    """The users file cannot be read or written, or a line of it is malformed."""


# -- what a status says about any exception ----------------------------------------------------------
def sqlstate(exc: BaseException) -> str:
    from sqlext.sql.errors import HoodieSqlError

    if isinstance(exc, HoodieServerError):
        return exc.sqlstate
    spark_state = _spark_sqlstate(exc)
    if spark_state:
        return spark_state
    return "42000" if isinstance(exc, HoodieSqlError) else "HY000"


def _spark_sqlstate(exc: BaseException | None) -> str | None:
    """The SQLSTATE of a Spark error in `exc`'s cause chain (Spark's error classes carry one)."""
    seen = 0
    while exc is not None and seen < 10:
        getter = getattr(exc, "getSqlState", None)
        if callable(getter):
            try:
                state = getter()
            except Exception:
                state = None
            if state:
                return state
        exc, seen = exc.__cause__ or exc.__context__, seen + 1
    return None


def message(exc: BaseException) -> str:
    from sqlext.sql.assign import spark_message
    from storage.exception import HoodieError

    if isinstance(exc, HoodieError):
        return str(exc)
    return spark_message(exc) if isinstance(exc, Exception) else type(exc).__name__
