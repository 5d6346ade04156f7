"""Hudi's LockManager: acquires a provider's lock with retries (`hoodie.write.lock.client.num_retries`, waiting
`hoodie.write.lock.client.wait_time_ms_between_retry` between attempts, each attempt waiting up to
`hoodie.write.lock.wait_time_ms` at the provider) and fails with a `HoodieLockError` naming the lock, its
holder and the keys to tune when it never gets it."""
from __future__ import annotations

import logging
import time

from storage.config import HoodieConfig
from storage.config import LockConfigKeys as LK
from storage.exception import HoodieLockError
from storage.transaction.lock_provider import LockProvider

log = logging.getLogger(__name__)


class LockManager:
    def __init__(self, provider: LockProvider, config: HoodieConfig):
        self.provider = provider
        self.wait_s = config.get(LK.WAIT_TIME_MS) / 1000
        self.retries = max(config.get(LK.CLIENT_NUM_RETRIES), 0)
        self.retry_wait_s = config.get(LK.CLIENT_RETRY_WAIT_TIME_MS) / 1000

    def lock(self) -> None:
        started = time.monotonic()
        for attempt in range(self.retries + 1):
            try:
                if self.provider.try_lock(self.wait_s):
                    log.debug("acquired %s (attempt %d)", self.provider.lock_name, attempt + 1)
                    return
            except HoodieLockError:
                raise
            except Exception as exc:  # a provider's transport error: retried like a busy lock
                log.warning("acquiring %s failed (attempt %d): %s", self.provider.lock_name, attempt + 1, exc)
            if attempt < self.retries:
                time.sleep(self.retry_wait_s)
        holder = self.provider.owner_info()
        raise HoodieLockError(
            f"could not acquire {self.provider.lock_name} within {time.monotonic() - started:.1f}s "
            f"({self.retries + 1} attempts of {LK.WAIT_TIME_MS.key}={int(self.wait_s * 1000)}; "
            f"{LK.CLIENT_NUM_RETRIES.key}={self.retries})" + (f"; held by {holder}" if holder else ""))

    def unlock(self) -> None:
        self.provider.unlock()

    def close(self) -> None:
        self.provider.close()
