"""Who may connect: the users file (salted scrypt hashes, written by `sqlext serve --add-user`) and the
authenticator each transport asks (SASL PLAIN on the binary port, HTTP Basic on `/cliservice`).

A users file line is ``name:scrypt:N:r:p:salt:hash`` (salt and hash base64); the file is created with mode
0600 and replaced atomically. Passwords are never stored or logged; a successful check is remembered as an
HMAC under a per-process key so that HTTP clients, which send credentials with every request, do not pay
for scrypt each time.
"""
from __future__ import annotations

import base64
import hashlib
import hmac
import logging
import os
import secrets
import tempfile
import threading
from collections import OrderedDict
from dataclasses import dataclass
from pathlib import Path

from sqlext.server.config import AUTH_PLAIN
from sqlext.server.errors import HoodieAuthenticationError, HoodieUsersFileError

log = logging.getLogger(__name__)

SCRYPT_N, SCRYPT_R, SCRYPT_P = 2 ** 14, 8, 1
_SALT_BYTES = 16
_VERIFIED_CACHE_SIZE = 1024


@dataclass(frozen=True)
class UserEntry:
    name: str
    n: int
    r: int
    p: int
    salt: bytes
    digest: bytes

    def matches(self, password: str) -> bool:
        candidate = _scrypt(password, self.salt, self.n, self.r, self.p, len(self.digest))
        return hmac.compare_digest(candidate, self.digest)

    def line(self) -> str:
        b64 = base64.b64encode
        return (f"{self.name}:scrypt:{self.n}:{self.r}:{self.p}:{b64(self.salt).decode()}:"
                f"{b64(self.digest).decode()}")

    @classmethod
    def create(cls, name: str, password: str) -> "UserEntry":
        salt = secrets.token_bytes(_SALT_BYTES)
        return cls(name, SCRYPT_N, SCRYPT_R, SCRYPT_P, salt, _scrypt(password, salt, SCRYPT_N, SCRYPT_R, SCRYPT_P, 32))


def _scrypt(password: str, salt: bytes, n: int, r: int, p: int, length: int) -> bytes:
    return hashlib.scrypt(password.encode("utf-8"), salt=salt, n=n, r=r, p=p, maxmem=256 * 1024 * 1024,
                          dklen=length)


def check_user_name(name: str) -> str:
    if not name or any(c in name for c in ":\n\r\t ") or len(name) > 128:
        raise HoodieUsersFileError(f"invalid user name {name!r}: 1-128 characters, no ':' or white space")
    return name


class UsersFile:
    """The users of `path`, re-read when the file changes (users added while the server runs can log in)."""

    def __init__(self, path: str | os.PathLike):
        self.path = Path(path)
        self._users: dict[str, UserEntry] = {}
        self._stamp: int | None = None
        self._lock = threading.Lock()

    def users(self) -> dict[str, UserEntry]:
        with self._lock:
            try:
                stamp = self.path.stat().st_mtime_ns
            except FileNotFoundError:
                raise HoodieUsersFileError(f"users file {self.path} does not exist "
                                           f"(create it with `sqlext serve --add-user NAME --users {self.path}`)")
            if stamp != self._stamp:
                self._users = self._parse(self.path.read_text(encoding="utf-8"))
                self._stamp = stamp
            return self._users

    def _parse(self, text: str) -> dict[str, UserEntry]:
        users = {}
        for number, raw in enumerate(text.splitlines(), 1):
            line = raw.strip()
            if not line or line.startswith("#"):
                continue
            parts = line.split(":")
            try:
                name, scheme, n, r, p, salt, digest = parts
                if scheme != "scrypt":
                    raise ValueError(f"unknown hash scheme {scheme!r}")
                users[name] = UserEntry(name, int(n), int(r), int(p), base64.b64decode(salt, validate=True),
                                        base64.b64decode(digest, validate=True))
            except ValueError as exc:
                raise HoodieUsersFileError(f"users file {self.path}, line {number}: malformed entry "
                                           f"(expected name:scrypt:N:r:p:salt:hash): {exc}") from None
        return users

    def add(self, name: str, password: str) -> bool:
        """Add `name` or change its password; True when the user is new."""
        check_user_name(name)
        if not password:
            raise HoodieUsersFileError(f"empty password for user {name}")
        existing = self.users() if self.path.exists() else {}
        new = name not in existing
        entries = {**existing, name: UserEntry.create(name, password)}
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=self.path.parent, prefix=f".{self.path.name}.", suffix=".tmp")
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as fh:  # mkstemp creates it 0600
                fh.write("# sqlext serve users: name:scrypt:N:r:p:salt:hash\n")
                fh.writelines(entry.line() + "\n" for entry in entries.values())
                fh.flush()
                os.fsync(fh.fileno())
            os.replace(tmp, self.path)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise
        return new


class Authenticator:
    """Decides whether a user may open a session. `mode` is one of config.AUTH_MODES."""

    def __init__(self, mode: str, users: UsersFile | None = None):
        self.mode = mode
        self.users = users
        self._key = secrets.token_bytes(32)
        self._verified: OrderedDict[bytes, str] = OrderedDict()
        self._lock = threading.Lock()

    @property
    def requires_password(self) -> bool:
        return self.mode == AUTH_PLAIN

    def authenticate(self, user: str, password: str) -> str:
        """The user name when `user`/`password` may log in; HoodieAuthenticationError otherwise."""
        if not self.requires_password:
            return user or "anonymous"
        if not user:
            raise HoodieAuthenticationError("authentication failed: no user name given")
        token = hmac.new(self._key, f"{user}\0{password}".encode("utf-8"), hashlib.sha256).digest()
        with self._lock:
            if token in self._verified:
                self._verified.move_to_end(token)
                return user
        entry = self.users.users().get(user) if self.users is not None else None
        if entry is None or not entry.matches(password):
            log.warning("authentication failed for user %r", user)
            raise HoodieAuthenticationError(f"authentication failed for user {user!r}: unknown user or wrong password")
        with self._lock:
            self._verified[token] = user
            while len(self._verified) > _VERIFIED_CACHE_SIZE:
                self._verified.popitem(last=False)
        return user

    def refuse_without_credentials(self) -> None:
        """A transport that carried no credentials (NOSASL binary, HTTP without Authorization)."""
        if self.requires_password:
            raise HoodieAuthenticationError(
                "this server checks passwords (hive.server2.authentication=plain): connect with SASL PLAIN "
                "(PyHive auth='CUSTOM' or 'LDAP', JDBC user/password) or HTTP Basic, not NOSASL")
