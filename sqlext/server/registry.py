"""Where running `sqlext serve` processes can be found: one small JSON file per server under the warehouse it
serves, `<warehouse>/.sqlext/servers/<pid>.json` (endpoint, auth mode, pid, warehouse, metastore).

The server writes its record atomically once it listens and removes it when it stops; the `sqlext` CLI reads
the records of its warehouse to send statements to a running server instead of starting Spark itself. One
file per server (not one per warehouse): two servers of one warehouse — say one checking passwords on all
interfaces, one on the loopback — each remove only their own record. A record whose process is gone (a
server killed with SIGKILL) or whose port refuses connections (nothing listens there any more: the server is
stopping, or the pid was reused) is stale: readers skip it and remove it. A port that does not answer in time
is only skipped (a server too busy to accept now may still be there). Records written on another machine (a
warehouse on a shared file system) are left alone: their pids mean nothing here.
"""
from __future__ import annotations

import enum
import errno
import json
import logging
import os
import socket
import time
from dataclasses import asdict, dataclass, fields
from pathlib import Path

from storage.write.heartbeat import pid_alive

log = logging.getLogger(__name__)

REGISTRY_DIR = Path(".sqlext") / "servers"
PROBE_TIMEOUT_S = 0.5
_WILDCARDS = {"": "127.0.0.1", "0.0.0.0": "127.0.0.1", "::": "::1"}


@dataclass(frozen=True)
class ServerRecord:
    host: str                   # where a client on this machine connects (the loopback for a wildcard bind)
    port: int                   # the binary (NOSASL / SASL) port
    auth: str                   # nosasl | none | plain (sqlext.server.config)
    pid: int
    warehouse: str
    metastore: str | None       # the metastore URI its session uses; None: no metastore
    embedded_metastore: bool    # that metastore is the warehouse's embedded one
    hostname: str = ""
    started_at: float = 0.0

    def to_json(self) -> str:
        return json.dumps(asdict(self), indent=1)

    @classmethod
    def from_json(cls, text: str) -> ServerRecord:
        data = json.loads(text)
        known = {f.name for f in fields(cls)}
        return cls(**{k: v for k, v in data.items() if k in known})  # fields added later are ignored


class PortState(enum.Enum):
    OPEN = "open"
    REFUSED = "refused"         # nothing listens there
    NO_ANSWER = "no answer"     # timed out or unreachable: cannot tell


def connect_host(bind_host: str) -> str:
    return _WILDCARDS.get(bind_host, bind_host)


def registry_dir(warehouse: str | os.PathLike) -> Path:
    return Path(warehouse) / REGISTRY_DIR


def record_path(warehouse: str | os.PathLike, pid: int) -> Path:
    return registry_dir(warehouse) / f"{pid}.json"


def new_record(host: str, port: int, auth: str, warehouse: str, metastore: str | None,
               embedded_metastore: bool) -> ServerRecord:
    """The record of this process's server."""
    return ServerRecord(host=connect_host(host), port=port, auth=auth, pid=os.getpid(), warehouse=str(warehouse),
                        metastore=metastore, embedded_metastore=embedded_metastore,
                        hostname=socket.gethostname(), started_at=time.time())


# -- the server's side -----------------------------------------------------------------------------------
def register(record: ServerRecord) -> Path | None:
    """Write `record` (atomically: readers never see half a file); None when the warehouse cannot be written,
    which only costs the CLI its discovery of this server."""
    path = record_path(record.warehouse, record.pid)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(f".{os.getpid()}.tmp")
        tmp.write_text(record.to_json())
        os.replace(tmp, path)
    except OSError as exc:
        log.warning("cannot record this server in %s (the sqlext CLI will not find it): %s", path.parent, exc)
        return None
    log.info("registered in %s", path)
    return path


def unregister(path: Path | None) -> None:
    if path is None:
        return
    try:
        path.unlink(missing_ok=True)
    except OSError as exc:
        log.warning("cannot remove the server record %s: %s", path, exc)


# -- the reader's side ------------------------------------------------------------------------------------
def read_records(warehouse: str | os.PathLike) -> list[tuple[Path, ServerRecord]]:
    """Every readable record of the warehouse (stale ones included)."""
    root = registry_dir(warehouse)
    if not root.is_dir():
        return []
    found = []
    for path in sorted(root.glob("*.json")):
        try:
            found.append((path, ServerRecord.from_json(path.read_text())))
        except (OSError, ValueError, TypeError) as exc:
            log.debug("ignoring unreadable server record %s: %s", path, exc)
    return found


def probe(host: str, port: int, timeout_s: float = PROBE_TIMEOUT_S) -> PortState:
    """Whether something accepts connections at host:port (connected and closed at once)."""
    try:
        with socket.create_connection((host, port), timeout=timeout_s):
            return PortState.OPEN
    except ConnectionRefusedError:
        return PortState.REFUSED
    except OSError as exc:
        return PortState.REFUSED if exc.errno == errno.ECONNREFUSED else PortState.NO_ANSWER


def _state(record: ServerRecord) -> PortState | None:
    """The record's port state; None when its process is gone."""
    return probe(record.host, record.port) if pid_alive(record.pid) else None


def live_servers(warehouse: str | os.PathLike) -> list[ServerRecord]:
    """The servers of `warehouse` that run on this machine and answer on their port, newest first; stale
    records are removed on the way."""
    live = []
    here = socket.gethostname()
    for path, record in read_records(warehouse):
        if record.hostname and record.hostname != here:
            log.debug("server record %s was written on %s: skipped", path, record.hostname)
            continue
        state = _state(record)
        if state is PortState.OPEN:
            live.append(record)
        elif state is PortState.NO_ANSWER:
            log.info("sqlext serve at %s:%d (pid %d) does not answer: skipped", record.host, record.port,
                     record.pid)
        else:
            log.info("removing stale server record %s: %s", path, f"process {record.pid} is gone"
                     if state is None else f"nothing listens on {record.host}:{record.port}")
            unregister(path)
    return sorted(live, key=lambda r: r.started_at, reverse=True)
