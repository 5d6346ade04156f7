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


class HoodieUsersFileError(HoodieServerError):
    """The users file cannot be read or written, or a line of it is malformed."""
