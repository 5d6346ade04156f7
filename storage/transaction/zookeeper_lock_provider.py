"""Hudi's ZookeeperBasedLockProvider: the lock recipe of ZooKeeper (Curator's InterProcessMutex in Hudi, kazoo's
`Lock` here, the same znode protocol): each contender creates an ephemeral sequential znode under
`<hoodie.write.lock.zookeeper.base_path>/<lock_key>` and the lowest one holds the lock. Our znodes are named
`<uuid>-lock-<sequence>` and Curator's `_c_<uuid>-lock-<sequence>`: both sides order each other's contenders by
the sequence after `lock-`, so Java Hudi writers and these contend for the same lock.

The znode is ephemeral, so the lock lives as long as the holder's ZooKeeper session: the client heartbeats the
session by itself, and a holder that dies (or is cut off longer than `session_timeout_ms`) loses its session and
with it the lock. A server that cannot be reached within `connection_timeout_ms` (or one that goes away while a
lock is wanted) is a `HoodieLockError` naming the provider, the ensemble and the lock path.
"""
from __future__ import annotations

import getpass
import logging
import os
import socket
import threading
import time
from dataclasses import dataclass
from typing import ClassVar

from kazoo.client import KazooClient, KazooState
from kazoo.exceptions import KazooException, LockTimeout
from kazoo.handlers.threading import KazooTimeoutError
from kazoo.recipe.lock import Lock
from kazoo.retry import KazooRetry, RetryFailedError

from storage.config import LockConfigKeys as LK
from storage.exception import HoodieLockError
from storage.transaction.lock_provider import (
    LockContext,
    LockProvider,
    register_lock_provider,
)

log = logging.getLogger(__name__)

CLASS_NAME = "org.apache.hudi.client.transaction.lock.ZookeeperBasedLockProvider"


@dataclass(frozen=True)
class ZookeeperLockSettings:
    hosts: str
    lock_path: str
    session_timeout_s: float
    connection_timeout_s: float
    retry_wait_s: float
    retry_max_wait_s: float
    num_retries: int

    @classmethod
    def of(cls, context: LockContext) -> ZookeeperLockSettings:
        config = context.config
        url = config.get(LK.ZK_URL)
        base = config.get(LK.ZK_BASE_PATH)
        key = config.get(LK.ZK_LOCK_KEY) or context.table_name
        missing = [k.key for k, v in ((LK.ZK_URL, url), (LK.ZK_BASE_PATH, base), (LK.ZK_LOCK_KEY, key)) if not v]
        if missing:
            raise HoodieLockError(f"the ZooKeeper lock ({LK.PROVIDER.key}={CLASS_NAME}) of table {context.base_path} "
                                  f"needs {', '.join(missing)}")
        return cls(hosts=_with_port(url, config.get(LK.ZK_PORT)), lock_path=f"/{base.strip('/')}/{key.strip('/')}",
                   session_timeout_s=config.get(LK.ZK_SESSION_TIMEOUT_MS) / 1000,
                   connection_timeout_s=config.get(LK.ZK_CONNECTION_TIMEOUT_MS) / 1000,
                   retry_wait_s=config.get(LK.RETRY_WAIT_TIME_MS) / 1000,
                   retry_max_wait_s=config.get(LK.RETRY_MAX_WAIT_TIME_MS) / 1000,
                   num_retries=max(config.get(LK.NUM_RETRIES), 0))


class CuratorCompatibleLock(Lock):
    """kazoo's lock with Curator's node-name marker, so that each recognises and orders the other's contenders."""

    _NODE_NAME = "-lock-"
    _EXCLUDE_NAMES: ClassVar[list[str]] = ["-lock-"]  # kazoo concatenates it as a list


def _with_port(url: str, port: int | None) -> str:
    """`zookeeper.url` may name hosts without ports: those take `zookeeper.port` (ZooKeeper's 2181 otherwise)."""
    hosts = [h.strip() for h in url.split(",") if h.strip()]
    return ",".join(h if ":" in h else f"{h}:{port or 2181}" for h in hosts)


def _identity() -> str:
    return f"{getpass.getuser()}@{socket.gethostname()} pid {os.getpid()} thread {threading.current_thread().name}"


class ZookeeperBasedLockProvider(LockProvider):
    def __init__(self, context: LockContext):
        self.settings = ZookeeperLockSettings.of(context)
        self.table = context.base_path
        self.client = self._new_client()
        self._lock = None
        self._started = False
        self._lost = threading.Event()

    def _new_client(self) -> KazooClient:
        s = self.settings
        # requests cut by a lost connection: Curator's bounded exponential back-off, as Hudi configures it;
        # (re)connecting: tried until connection_timeout_ms ends the wait (a cold server may drop a first attempt)
        backoff = {"delay": s.retry_wait_s, "backoff": 2, "max_delay": s.retry_max_wait_s}
        client = KazooClient(hosts=s.hosts, timeout=s.session_timeout_s,
                             connection_retry=KazooRetry(max_tries=-1, **backoff),
                             command_retry=KazooRetry(max_tries=s.num_retries, **backoff))
        client.add_listener(self._on_state)
        return client

    @property
    def lock_name(self) -> str:
        return f"ZooKeeper lock {self.settings.lock_path} at {self.settings.hosts}"

    def _unreachable(self, why: str) -> HoodieLockError:
        return HoodieLockError(
            f"ZooKeeper at {self.settings.hosts} ({LK.ZK_URL.key}) is unreachable for the lock "
            f"{self.settings.lock_path} of table {self.table} ({LK.PROVIDER.key}={CLASS_NAME}): {why}")

    def _on_state(self, state: str) -> None:
        # runs on kazoo's event thread: only flag and log here
        if state == KazooState.LOST and self._lock is not None:
            self._lost.set()
            log.error("%s: session expired while held; the lock is released by ZooKeeper", self.lock_name)
        elif state == KazooState.SUSPENDED and self._lock is not None:
            log.warning("%s: connection to ZooKeeper suspended while held", self.lock_name)

    def _connect(self, timeout_s: float) -> None:
        if self.client.connected:
            return
        wait = min(self.settings.connection_timeout_s, max(timeout_s, 0.1))
        try:
            if self._started:
                self._wait_connected(wait)  # a started client reconnects by itself
            else:
                self.client.start(timeout=wait)
                self._started = True
        except KazooTimeoutError:
            self._stop_client()  # no client left retrying in the background
            raise self._unreachable(f"no connection within {wait:.1f}s "
                                    f"({LK.ZK_CONNECTION_TIMEOUT_MS.key}={int(self.settings.connection_timeout_s * 1000)})")

    def _wait_connected(self, wait: float) -> None:
        deadline = time.monotonic() + wait
        while not self.client.connected:
            if time.monotonic() >= deadline:
                raise KazooTimeoutError("not connected")
            time.sleep(0.05)

    def try_lock(self, timeout_s: float) -> bool:
        if self._lock is not None:
            raise HoodieLockError(f"{self.lock_name} is already held by this provider")
        started = time.monotonic()
        self._connect(timeout_s)
        lock = CuratorCompatibleLock(self.client, self.settings.lock_path, identifier=_identity())
        remaining = max(timeout_s - (time.monotonic() - started), 0.0)
        # kazoo's lock waits without a timeout on a request sent just as the server went away (its client retries
        # the connection forever): past the wait, a client still disconnected is stopped, which fails that request
        watchdog = threading.Timer(remaining + self.settings.connection_timeout_s, self._stop_if_disconnected)
        watchdog.daemon = True
        watchdog.start()
        try:
            acquired = lock.acquire(blocking=True, timeout=remaining)
        except LockTimeout:
            acquired = False
        except (RetryFailedError, KazooException, KazooTimeoutError) as exc:
            lock.cancel()
            raise self._unreachable(f"{type(exc).__name__} while acquiring") from exc
        finally:
            watchdog.cancel()
        if not acquired:
            return False
        self._lost.clear()
        self._lock = lock
        return True

    @property
    def lost(self) -> bool:
        """True when the session expired while this provider held the lock (ZooKeeper released it)."""
        return self._lost.is_set()

    def unlock(self) -> None:
        lock, self._lock = self._lock, None
        if lock is None:
            return
        if self._lost.is_set():
            return  # the session (and its ephemeral znode) is gone already
        if not self.client.connected:
            # a request would wait for the reconnect; ending the session instead frees the znode (at the latest
            # when the server expires the session), and a reconnect can never revive this holder's lock
            log.warning("%s: not connected at unlock; closing the session to release it", self.lock_name)
            self._stop_client()
            return
        try:
            lock.release()
        except (KazooException, KazooTimeoutError) as exc:
            # the znode goes with the session at the latest: only log, the lock cannot outlive the session
            log.warning("releasing %s failed (%s); ZooKeeper frees it when the session expires", self.lock_name, exc)

    def owner_info(self) -> str:
        if not self.client.connected:
            return ""
        try:
            contenders = CuratorCompatibleLock(self.client, self.settings.lock_path).contenders()
        except (KazooException, KazooTimeoutError):
            return ""
        return contenders[0] if contenders else ""

    def close(self) -> None:
        self.unlock()
        self._stop_client()

    def _stop_if_disconnected(self) -> None:
        if not self.client.connected:
            log.warning("%s: no connection to ZooKeeper while acquiring; giving up", self.lock_name)
            self._stop_client()

    def _stop_client(self) -> None:
        if not self._started:
            return
        self._started = False
        try:
            self.client.stop()
            self.client.close()
        except (KazooException, KazooTimeoutError) as exc:
            log.warning("closing the ZooKeeper client of %s: %s", self.lock_name, exc)
        self.client = self._new_client()  # a closed kazoo client is not started again


def _factory(context: LockContext) -> LockProvider:
    return ZookeeperBasedLockProvider(context)


register_lock_provider(CLASS_NAME, _factory)

