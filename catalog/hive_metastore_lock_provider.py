"""Hudi's HiveMetastoreBasedLockProvider: an EXCLUSIVE table-level lock in the Hive Metastore (`lock`,
`check_lock`, `unlock`, `heartbeat` of the HMS Thrift API), registered with storage's lock-provider registry
under Hudi's class name when `catalog` is imported (storage/ never imports catalog/).

The locked metastore table is `hoodie.write.lock.hivemetastore.database` / `.table` (default: the Hudi table's
database and name); the metastore is `hoodie.write.lock.hivemetastore.uris`, else `hive.metastore.uris`,
`HIVE_METASTORE_URIS` or the metastore this process's catalog uses. A lock request the metastore queues
(WAITING) is polled with `check_lock` until acquired or the wait ends, then withdrawn with `unlock`. While held,
the lock is heartbeated every `hoodie.write.lock.heartbeat_interval_ms` so the metastore does not expire it
(`hive.txn.timeout`); a process that dies stops heartbeating and the metastore frees its lock.
"""
from __future__ import annotations

import getpass
import logging
import os
import socket
import threading
import time

from hmsclient.genthrift.hive_metastore import ttypes as t

from catalog.metastore_client import MetastoreClient
from storage.config import LockConfigKeys as LK
from storage.exception import HoodieLockError
from storage.transaction.lock_provider import LockContext, LockProvider, register_lock_provider

log = logging.getLogger(__name__)

CLASS_NAME = "org.apache.hudi.hive.transaction.lock.HiveMetastoreBasedLockProvider"
_POLL_S = 0.1


def _metastore_uri(context: LockContext) -> str:
    from catalog.hive_sync import metastore_in_use

    uri = (context.config.get(LK.HIVE_METASTORE_URIS) or context.config.props.get("hive.metastore.uris")
           or os.environ.get("HIVE_METASTORE_URIS") or metastore_in_use())
    if not uri:
        raise HoodieLockError(f"the Hive Metastore lock of {context.base_path} needs a metastore: set "
                              f"{LK.HIVE_METASTORE_URIS.key} (thrift://host:port)")
    return uri


class HiveMetastoreBasedLockProvider(LockProvider):
    def __init__(self, context: LockContext):
        self.database = context.config.get(LK.HIVE_DATABASE) or context.database or "default"
        self.table = context.config.get(LK.HIVE_TABLE) or context.table_name
        if not self.table:
            raise HoodieLockError(f"the Hive Metastore lock of {context.base_path} needs a table name: set "
                                  f"{LK.HIVE_TABLE.key}")
        self.client = MetastoreClient(_metastore_uri(context))
        self.heartbeat_s = context.config.get(LK.HEARTBEAT_INTERVAL_MS) / 1000
        self._lock_id: int | None = None
        self._stop_heartbeat = threading.Event()
        self._heartbeat: threading.Thread | None = None

    @property
    def lock_name(self) -> str:
        return f"Hive Metastore lock on {self.database}.{self.table} at {self.client.uri}"

    def _request(self) -> t.LockRequest:
        component = t.LockComponent(type=t.LockType.EXCLUSIVE, level=t.LockLevel.TABLE, dbname=self.database,
                                    tablename=self.table, operationType=t.DataOperationType.NO_TXN)
        return t.LockRequest(component=[component], user=getpass.getuser(), hostname=socket.gethostname())

    def try_lock(self, timeout_s: float) -> bool:
        deadline = time.monotonic() + max(timeout_s, 0)
        response = self.client._call(lambda c: c.lock(self._request()))
        while response.state == t.LockState.WAITING and time.monotonic() < deadline:
            time.sleep(_POLL_S)
            response = self.client._call(lambda c: c.check_lock(t.CheckLockRequest(lockid=response.lockid)))
        if response.state == t.LockState.ACQUIRED:
            self._lock_id = response.lockid
            self._start_heartbeat()
            return True
        self._release(response.lockid)  # withdraw the queued request: it must not be granted to no one later
        return False

    def _start_heartbeat(self) -> None:
        self._stop_heartbeat.clear()
        self._heartbeat = threading.Thread(target=self._beat, name=f"hms-lock-heartbeat-{self._lock_id}", daemon=True)
        self._heartbeat.start()

    def _beat(self) -> None:
        lock_id = self._lock_id
        while not self._stop_heartbeat.wait(self.heartbeat_s):
            try:
                self.client._call(lambda c: c.heartbeat(t.HeartbeatRequest(lockid=lock_id)))
            except Exception as exc:  # retried at the next interval
                log.warning("heartbeat of %s failed: %s", self.lock_name, exc)

    def unlock(self) -> None:
        if self._lock_id is None:
            return
        self._stop_heartbeat.set()
        if self._heartbeat is not None:
            self._heartbeat.join(timeout=5)
        lock_id, self._lock_id = self._lock_id, None
        self._release(lock_id)

    def _release(self, lock_id: int) -> None:
        try:
            self.client._call(lambda c: c.unlock(t.UnlockRequest(lockid=lock_id)))
        except t.NoSuchLockException:
            pass  # already released (expired or aborted by the metastore)
        except Exception as exc:
            raise HoodieLockError(f"could not release {self.lock_name} (lock id {lock_id}): {exc}") from exc

    def owner_info(self) -> str:
        try:
            locks = self.client._call(lambda c: c.show_locks(t.ShowLocksRequest(dbname=self.database,
                                                                                 tablename=self.table)))
        except Exception:
            return ""
        held = [f"lock {e.lockid} of {e.user}@{e.hostname}" for e in locks.locks or []
                if e.state == t.LockState.ACQUIRED]
        return ", ".join(held)

    def close(self) -> None:
        self.unlock()
        self.client.close()


register_lock_provider(CLASS_NAME, HiveMetastoreBasedLockProvider)
