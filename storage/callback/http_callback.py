"""HoodieWriteCommitHttpCallback: POSTs the callback message as JSON to `hoodie.write.commit.callback.http.url`,
with Hudi's `HUDI-CALLBACK-KEY` header (the API key) and any custom headers.

Unlike Hudi's, which logs a failed POST and moves on, a failure here raises (after the configured retries), so
the write result reports it; the commit stands either way.
"""
from __future__ import annotations

import logging
import time
import urllib.error
import urllib.request

from storage.callback.message import HoodieWriteCommitCallbackMessage
from storage.config import HoodieConfig
from storage.config import WriteCommitCallbackConfigKeys as CB
from storage.exception import HoodieCommitCallbackError

log = logging.getLogger(__name__)

HEADER_KEY_API_KEY = "HUDI-CALLBACK-KEY"
_RETRY_PAUSE_S = 0.2


def parse_custom_headers(text: str | None) -> dict[str, str]:
    """'Name1:value1;Name2:value2' -> headers; malformed entries are skipped with a warning, as in Hudi."""
    headers = {}
    for token in (text or "").split(";"):
        if not token.strip():
            continue
        parts = token.split(":")
        if len(parts) == 2 and parts[0].strip() and parts[1].strip():
            headers[parts[0].strip()] = parts[1].strip()
        else:
            log.warning("ignoring custom header %r of %s (format: Name1:value1;Name2:value2)", token,
                        CB.HTTP_CUSTOM_HEADERS.key)
    return headers


class HoodieWriteCommitHttpCallback:
    def __init__(self, config: HoodieConfig):
        self.url = config.get(CB.HTTP_URL)
        if not self.url:
            raise HoodieCommitCallbackError(f"{CB.HTTP_URL.key} must be set for the HTTP commit callback")
        self.api_key = config.get(CB.HTTP_API_KEY)
        self.timeout_s = config.get(CB.HTTP_TIMEOUT_SECONDS)
        self.retries = max(0, config.get(CB.HTTP_RETRIES))
        self.headers = {HEADER_KEY_API_KEY: self.api_key, "Content-Type": "application/json",
                        **parse_custom_headers(config.get(CB.HTTP_CUSTOM_HEADERS))}

    def call(self, message: HoodieWriteCommitCallbackMessage) -> None:
        body = message.to_json().encode("utf-8")
        for attempt in range(self.retries + 1):
            error = self._post(body)
            if error is None:
                log.info("sent commit callback for %s to %s", message.commitTime, self.url)
                return
            if not error[1] or attempt == self.retries:
                raise HoodieCommitCallbackError(f"HTTP commit callback to {self.url} failed for "
                                                f"{message.commitTime}: {error[0]}")
            log.warning("HTTP commit callback to %s failed (%s); retrying", self.url, error[0])
            time.sleep(_RETRY_PAUSE_S * (attempt + 1))

    def _post(self, body: bytes) -> tuple[str, bool] | None:
        """None on success, else (reason, whether a retry may help)."""
        request = urllib.request.Request(self.url, data=body, headers=self.headers, method="POST")
        try:
            with urllib.request.urlopen(request, timeout=self.timeout_s) as response:
                response.read()
            return None
        except urllib.error.HTTPError as exc:
            return f"HTTP {exc.code} {exc.reason}", exc.code >= 500
        except (urllib.error.URLError, TimeoutError, OSError) as exc:
            return str(getattr(exc, "reason", exc)), True
