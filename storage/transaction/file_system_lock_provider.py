"""Hudi's FileSystemBasedLockProvider: the lock is the file `<hoodie.write.lock.filesystem.path>/lock` (default
the table's `.hoodie/`), created only if absent (a local exclusive create, an S3 `If-None-Match` PUT), so
exactly one process holds it. A lock file older than `hoodie.write.lock.filesystem.expire` minutes (0: never)
is taken as abandoned by a dead holder and removed. Its content names the holder (host, pid, thread, time);
`unlock` removes it only when this provider created it.
"""
from __future__ import annotations

import json
import os
import socket
import threading
import time
import uuid

from storage.config import LockConfigKeys as LK
from storage.exception import HoodieFileAlreadyExistsError, HoodieLockError
from storage.transaction.lock_provider import LockContext, LockProvider, register_lock_provider, poll_until

CLASS_NAME = "org.apache.hudi.client.transaction.lock.FileSystemBasedLockProvider"
LOCK_FILE_NAME = "lock"
_POLL_S = 0.05


class FileSystemBasedLockProvider(LockProvider):
    def __init__(self, context: LockContext):
        directory = context.config.get(LK.FILESYSTEM_PATH) or context.meta_path
        self.path = f"{directory.rstrip('/')}/{LOCK_FILE_NAME}"
        self.storage = context.storage
        self.expire_s = context.config.get(LK.FILESYSTEM_EXPIRE_MINUTES) * 60
        if self.expire_s < 0:
            raise HoodieLockError(f"{LK.FILESYSTEM_EXPIRE_MINUTES.key} must be >= 0 (minutes), got "
                                  f"{self.expire_s // 60}")
        self._token = ""

    def try_lock(self, timeout_s: float) -> bool:
        return poll_until(self._try_once, timeout_s, _POLL_S)

    def _try_once(self) -> bool:
        self._remove_if_expired()
        token = uuid.uuid4().hex
        content = json.dumps({"owner": token, "host": socket.gethostname(), "pid": os.getpid(),
                              "thread": threading.current_thread().name, "time": time.time()})
        try:
            self.storage.create(self.path, content.encode())
        except HoodieFileAlreadyExistsError:
            return False
        self._token = token
        return True

    def _remove_if_expired(self) -> None:
        if not self.expire_s:
            return
        try:
            age = time.time() - self.storage.modification_time(self.path)
        except FileNotFoundError:
            return
        if self.storage.exists(self.path) and age > self.expire_s:
            self.storage.delete(self.path)

    def unlock(self) -> None:
        if not self._token:
            return
        token, self._token = self._token, ""
        try:
            owner = json.loads(self.storage.read_text(self.path)).get("owner")
        except (FileNotFoundError, ValueError):
            return
        if owner == token:  # an expired lock may have been taken over: never remove another holder's file
            self.storage.delete(self.path)

    @property
    def lock_name(self) -> str:
        return self.path

    def owner_info(self) -> str:
        try:
            return self.storage.read_text(self.path)
        except (FileNotFoundError, OSError):
            return ""


register_lock_provider(CLASS_NAME, FileSystemBasedLockProvider)
