"""Hudi 1.1's StorageBasedLockProvider: the lock is the file `<table>/.hoodie/.locks/table_lock.json`, holding
Hudi's JSON `{"expired": bool, "validUntil": epoch ms, "owner": id}`, changed only by conditional writes: created
if absent, else replaced only if unchanged since it was read (S3: `If-None-Match: *` / `If-Match: <etag>`; local
files: an exclusive hard link / a rename under a short OS file lock).

A lock is free when the file is absent, marked expired (a clean unlock), or its `validUntil` (plus a clock-drift
margin) has passed: its holder died or lost contact. The holder renews `validUntil` every
`hoodie.write.lock.storage.heartbeat.poll.secs` in a heartbeat thread, so a live holder keeps the lock however
long it needs it, and a dead one loses it `hoodie.write.lock.storage.validity.timeout.secs` after its last renewal.
A store that cannot be reached is a `HoodieLockError` naming the provider, the store and the table.
"""
from __future__ import annotations

import fcntl
import hashlib
import json
import logging
import os
import socket
import threading
import time
import uuid
from dataclasses import dataclass

from storage.config import LockConfigKeys as LK
from storage.exception import HoodieIOError, HoodieLockError
from storage.io.storage_location import parse_location
from storage.transaction.lease_renewal import LeaseRenewal
from storage.transaction.lock_provider import (
    poll_until,
    LockContext,
    LockProvider,
    register_lock_provider,
)

log = logging.getLogger(__name__)

CLASS_NAME = "org.apache.hudi.client.transaction.lock.StorageBasedLockProvider"
LOCKS_FOLDER = ".locks"
LOCK_FILE_NAME = "table_lock.json"
CLOCK_DRIFT_MS = 500  # clocks of writers may differ this much: a lock counts as expired only past it
_S3_SCHEMES = ("s3", "s3a", "s3n")


@dataclass(frozen=True)
class LockData:
    """Hudi's StorageLockData, field for field (Hudi's own writers read the same file)."""

    expired: bool
    valid_until_ms: int
    owner: str

    def to_bytes(self) -> bytes:
        return json.dumps({"expired": self.expired, "validUntil": self.valid_until_ms, "owner": self.owner}).encode()

    @classmethod
    def parse(cls, data: bytes) -> LockData:
        doc = json.loads(data)
        return cls(bool(doc["expired"]), int(doc["validUntil"]), str(doc["owner"]))

    def is_valid(self, now_ms: int) -> bool:
        return not self.expired and now_ms <= self.valid_until_ms + CLOCK_DRIFT_MS


@dataclass(frozen=True)
class LockFile:
    data: LockData
    etag: str  # what a conditional overwrite must still find


class LocalLockFileClient:
    """Compare-and-swap on a local file: creation is an exclusive hard link of a complete temporary file; a
    replacement compares and renames while holding an OS lock on a guard file beside it, so two processes never
    both replace the version they read."""

    def __init__(self, path: str):
        self.path = path
        self.endpoint = f"local file {path}"

    @staticmethod
    def _etag(raw: bytes) -> str:
        return hashlib.sha256(raw).hexdigest()

    def read(self) -> LockFile | None:
        try:
            with open(self.path, "rb") as f:
                raw = f.read()
        except FileNotFoundError:
            return None
        return LockFile(LockData.parse(raw), self._etag(raw))

    def write(self, data: LockData, previous: LockFile | None) -> LockFile | None:
        raw = data.to_bytes()
        os.makedirs(os.path.dirname(self.path), exist_ok=True)
        tmp = f"{self.path}.{os.getpid()}.{threading.get_ident()}.{uuid.uuid4().hex[:8]}.tmp"
        with open(tmp, "wb") as f:
            f.write(raw)
            f.flush()
            os.fsync(f.fileno())
        try:
            return self._create(tmp, raw) if previous is None else self._replace(tmp, raw, previous.etag)
        finally:
            if os.path.exists(tmp):
                os.remove(tmp)

    def _create(self, tmp: str, raw: bytes) -> LockFile | None:
        try:
            os.link(tmp, self.path)
        except FileExistsError:
            return None
        return LockFile(LockData.parse(raw), self._etag(raw))

    def _replace(self, tmp: str, raw: bytes, etag: str) -> LockFile | None:
        with open(f"{self.path}.guard", "a+b") as guard:
            fcntl.flock(guard, fcntl.LOCK_EX)  # held for one read and one rename
            try:
                current = self.read()
                if current is None or current.etag != etag:
                    return None
                os.replace(tmp, self.path)
            finally:
                fcntl.flock(guard, fcntl.LOCK_UN)
        return LockFile(LockData.parse(raw), self._etag(raw))


class S3LockFileClient:
    """Compare-and-swap on S3 with conditional PUTs (storage.io.conditional_put)."""

    def __init__(self, path: str, context: LockContext):
        from storage.io.storage_options import s3_settings

        loc = parse_location(path)
        self.bucket, self.key, self.uri = loc.authority, loc.path.lstrip("/"), path
        self.settings = s3_settings(context.storage.options, self.bucket)
        self.endpoint = f"S3 endpoint {self.settings.endpoint_url or 'of AWS'} ({path})"

    def read(self) -> LockFile | None:
        from storage.io.conditional_put import read_with_etag

        found = read_with_etag(self.settings, self.bucket, self.key, self.uri)
        return None if found is None else LockFile(LockData.parse(found[0]), found[1])

    def write(self, data: LockData, previous: LockFile | None) -> LockFile | None:
        from storage.io.conditional_put import put_conditional

        etag = put_conditional(self.settings, self.bucket, self.key, data.to_bytes(), self.uri,
                               previous.etag if previous else None)
        return None if etag is None else LockFile(data, etag)


def lock_file_path(meta_path: str) -> str:
    return f"{meta_path.rstrip('/')}/{LOCKS_FOLDER}/{LOCK_FILE_NAME}"


def _client_for(path: str, context: LockContext):
    scheme = parse_location(path).scheme
    if scheme in _S3_SCHEMES:
        return S3LockFileClient(path, context)
    if context.storage.is_local:
        return LocalLockFileClient(parse_location(path).path if scheme else path)
    raise HoodieLockError(f"{LK.PROVIDER.key}={CLASS_NAME} needs conditional writes, which this engine does on S3 "
                          f"and local files, not on {scheme}:// (table {context.base_path})")


@dataclass(frozen=True)
class StorageLockSettings:
    validity_s: float
    heartbeat_s: float
    retry_wait_s: float

    @classmethod
    def of(cls, context: LockContext) -> StorageLockSettings:
        config = context.config
        validity, poll = config.get(LK.STORAGE_VALIDITY_TIMEOUT_SECS), config.get(LK.STORAGE_HEARTBEAT_POLL_SECS)
        if poll <= 0 or validity < 10 * poll:
            # as Hudi: a holder must get ten renewals in before its lock could expire
            raise HoodieLockError(f"{LK.STORAGE_VALIDITY_TIMEOUT_SECS.key}={validity:g} must be at least 10 times "
                                  f"{LK.STORAGE_HEARTBEAT_POLL_SECS.key}={poll:g} (> 0), table {context.base_path}")
        return cls(validity, poll, max(config.get(LK.RETRY_WAIT_TIME_MS), 1) / 1000)


def _now_ms() -> int:
    return int(time.time() * 1000)


class StorageBasedLockProvider(LockProvider):
    def __init__(self, context: LockContext):
        self.settings = StorageLockSettings.of(context)
        self.path = lock_file_path(context.meta_path)
        self.table = context.base_path
        self.client = _client_for(self.path, context)
        self.owner = f"{uuid.uuid4()}@{socket.gethostname()}:{os.getpid()}"
        self._state = threading.Lock()  # between the caller's thread and the heartbeat
        self._held: LockFile | None = None
        self._renewal = LeaseRenewal(f"storage-lock-heartbeat-{self.owner[:8]}")

    @property
    def lock_name(self) -> str:
        return f"storage lock {self.path}"

    def _unreachable(self, exc: Exception) -> HoodieLockError:
        return HoodieLockError(f"{self.client.endpoint} cannot be reached for the lock of table {self.table} "
                               f"({LK.PROVIDER.key}={CLASS_NAME}): {exc}")

    def _io(self, fn, *args):
        try:
            return fn(*args)
        except (HoodieIOError, OSError) as exc:
            raise self._unreachable(exc) from exc
        except (ValueError, KeyError) as exc:
            raise HoodieLockError(f"{self.path} is not a lock file of Hudi's StorageBasedLockProvider: {exc}") from exc

    def try_lock(self, timeout_s: float) -> bool:
        if self._held is not None:
            raise HoodieLockError(f"{self.lock_name} is already held by this provider ({self.owner})")
        return poll_until(self._try_once, timeout_s, self.settings.retry_wait_s)

    def _try_once(self) -> bool:
        current = self._io(self.client.read)
        if current is not None and current.data.is_valid(_now_ms()):
            return False
        if current is not None and not current.data.expired:
            log.warning("%s: taking over the lock of %s, not renewed since it expired", self.lock_name,
                        current.data.owner)
        written = self._io(self.client.write, self._fresh(), current)
        if written is None:
            return False  # another writer changed the file first
        with self._state:
            self._held = written
        self._renewal.start(self.settings.heartbeat_s, self._renew)
        return True

    def _fresh(self) -> LockData:
        return LockData(False, _now_ms() + int(self.settings.validity_s * 1000), self.owner)

    def _renew(self) -> bool:
        """Extend validUntil; False when the lock was taken over (the heartbeat then stops)."""
        with self._state:
            if self._held is None or self._renewal.stopped:
                return False
            try:
                renewed = self.client.write(self._fresh(), self._held)
            except (HoodieIOError, OSError) as exc:  # transient, maybe: retried at the next beat
                log.warning("%s: renewal failed, retrying: %s", self.lock_name, exc)
                return True
            if renewed is None:
                self._renewal.mark_lost()
                log.error("%s: taken over by another writer after this holder failed to renew it", self.lock_name)
                return False
            self._held = renewed
            return True

    @property
    def lost(self) -> bool:
        """True when another writer took the lock over while this provider believed it held it."""
        return self._renewal.lost

    def unlock(self) -> None:
        self._renewal.stop()
        with self._state:
            held, self._held = self._held, None
        if held is None:
            return
        released = self._io(self.client.write, LockData(True, held.data.valid_until_ms, self.owner), held)
        if released is None:
            log.error("%s: already taken over by another writer at release", self.lock_name)

    def owner_info(self) -> str:
        try:
            current = self.client.read()
        except Exception:  # noqa: BLE001 - only for a message
            return ""
        if current is None or not current.data.is_valid(_now_ms()):
            return ""
        until = time.strftime("%H:%M:%S", time.gmtime(current.data.valid_until_ms / 1000))
        return f"owner {current.data.owner} (valid until {until} UTC)"

    def close(self) -> None:
        self.unlock()


register_lock_provider(CLASS_NAME, StorageBasedLockProvider)
