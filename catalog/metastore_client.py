"""The Hive Metastore (HMS) Thrift client: `MetastoreClient` over `hmsclient.HMSClient`, its URIs and errors.

`MetastoreClient` connects lazily, raises errors naming the URI, and reconnects once, transparently, when the
connection broke (e.g. the metastore was restarted). `parse_metastore_uris` reads Hive's
``thrift://h1:p1,thrift://h2:p2`` list syntax.
"""
from __future__ import annotations

import contextlib
import logging
import socket
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import TypeVar
from urllib.parse import urlsplit

from hmsclient import HMSClient
from hmsclient.genthrift.hive_metastore.ttypes import (
    AlreadyExistsException,
    Database,
    NoSuchObjectException,
    Partition,
    Table,
)
from thrift.Thrift import TApplicationException
from thrift.protocol import TBinaryProtocol
from thrift.transport import TSocket, TTransport
from thrift.transport.TTransport import TTransportException
from storage.exception import HoodieError

log = logging.getLogger(__name__)

T = TypeVar("T")

DEFAULT_HMS_PORT = 9083

# ----------------------------------------------------------------------------------------------
# Errors
# ----------------------------------------------------------------------------------------------
class MetastoreError(HoodieError, RuntimeError):
    """Base class for the metastore problems raised by the catalog (client, embedded metastore)."""


class MetastoreUnavailableError(MetastoreError):
    """The metastore at `uri` cannot be reached (refused, timed out, connection broken)."""

    def __init__(self, uri: str, cause: BaseException | str):
        self.uri = uri
        self.cause = cause
        reason = cause if isinstance(cause, str) else _describe(cause)
        super().__init__(f"Hive metastore at {uri} is unavailable: {reason}")


class MetastoreStartError(MetastoreError):
    """The embedded metastore did not come up; the message carries the tail of its logs."""


# How the embedded metastore's answer to a call starts once its directory is gone (LoopbackHiveMetaStore.java's
# DirectoryGuard.PREFIX): such an answer becomes a `MetastoreWarehouseGoneError`.
WAREHOUSE_GONE_PREFIX = "the embedded Hive metastore of warehouse "


class MetastoreWarehouseGoneError(MetastoreUnavailableError):
    """The warehouse of an embedded metastore (or its ``.metastore`` directory) was deleted or replaced while in use:
    the metastore stopped with the Derby database that held its tables, and none is started in its place (that
    would recreate the deleted warehouse, empty)."""


def _describe(exc: BaseException) -> str:
    # Thrift wraps the socket error in `.inner`; the inner one is what a user can act on.
    inner = getattr(exc, "inner", None)
    text = f"{type(exc).__name__}: {exc}"
    return f"{text} ({type(inner).__name__}: {inner})" if inner else text


# ----------------------------------------------------------------------------------------------
# URIs
# ----------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class ThriftAddress:
    host: str
    port: int

    @property
    def uri(self) -> str:
        return f"thrift://{self.host}:{self.port}"


def parse_metastore_uris(uris: str) -> list[ThriftAddress]:
    """Parse ``thrift://h1:p1,thrift://h2:p2`` (Hive's list syntax) into addresses, in order."""
    addresses = []
    for part in (p.strip() for p in uris.split(",")):
        if not part:
            continue
        parsed = urlsplit(part if "://" in part else f"thrift://{part}")
        if parsed.scheme != "thrift" or not parsed.hostname:
            raise ValueError(f"not a metastore URI (expected thrift://host:port): {part!r}")
        addresses.append(ThriftAddress(parsed.hostname, parsed.port or DEFAULT_HMS_PORT))
    if not addresses:
        raise ValueError(f"no metastore URI in {uris!r}")
    return addresses



# ----------------------------------------------------------------------------------------------
# Client
# ----------------------------------------------------------------------------------------------
# Transport-level failures: the connection is unusable, so drop it and (once) reconnect.
# Thrift application exceptions (MetaException, NoSuchObjectException, ...) are answers, not failures.
_TRANSPORT_ERRORS = (TTransportException, OSError, EOFError)


class MetastoreClient:
    """Thin, reconnecting wrapper over `hmsclient.HMSClient` for one metastore URI (or list).

    Connects on the first call. A call that fails on the transport (server restarted, socket reset)
    drops the connection, reconnects once and retries; if that fails too it raises
    `MetastoreUnavailableError` naming the URI. Calls are serialised with a lock because a Thrift
    client is not safe to share between threads.

    `reviver`, if given, is called before reconnecting and returns the URI to use; pass
    ``EmbeddedMetastore.start`` so a dead embedded metastore is restarted instead of just reported.
    Note that a retried write whose first attempt reached a dying server may answer
    AlreadyExists/NoSuchObject on the retry.
    """

    def __init__(self, uri: str, *, connect_timeout_s: float = 5.0, call_timeout_s: float = 60.0,
                 reviver: Callable[[], str] | None = None):
        parse_metastore_uris(uri)  # fail fast on a malformed URI
        self._uri = uri
        self._connect_timeout_s = connect_timeout_s
        self._call_timeout_s = call_timeout_s
        self._reviver = reviver
        self._client: HMSClient | None = None
        self._lock = threading.RLock()

    @property
    def uri(self) -> str:
        return self._uri

    # -- connection management ----------------------------------------------------------------
    def _open(self) -> HMSClient:
        last_error: BaseException | None = None
        for address in parse_metastore_uris(self._uri):
            try:
                return self._open_one(address)
            except OSError as exc:
                last_error = exc
                log.debug("metastore %s not reachable: %s", address.uri, exc)
        assert last_error is not None
        raise MetastoreUnavailableError(self._uri, last_error)

    def _open_one(self, address: ThriftAddress) -> HMSClient:
        # Connect ourselves instead of TSocket.open(): it logs every refused connection at ERROR
        # level, and we want separate connect and call timeouts.
        sock = socket.create_connection((address.host, address.port), timeout=self._connect_timeout_s)
        tsocket = TSocket.TSocket(address.host, address.port)
        tsocket.setHandle(sock)
        tsocket.setTimeout(self._call_timeout_s * 1000)
        protocol = TBinaryProtocol.TBinaryProtocol(TTransport.TBufferedTransport(tsocket))
        log.debug("connected to metastore %s", address.uri)
        return HMSClient(iprot=protocol)

    def close(self) -> None:
        with self._lock:
            client, self._client = self._client, None
            if client is not None:
                with contextlib.suppress(Exception):
                    client.close()

    def __enter__(self) -> MetastoreClient:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def _call(self, fn: Callable[[HMSClient], T]) -> T:
        with self._lock:
            for attempt in (1, 2):
                try:
                    if self._client is None:
                        if attempt == 2 and self._reviver is not None:
                            self._uri = self._reviver()
                        self._client = self._open()
                    return fn(self._client)
                except MetastoreUnavailableError:
                    self.close()
                    if attempt == 2:
                        raise
                except TApplicationException as exc:
                    if not str(exc.message or "").startswith(WAREHOUSE_GONE_PREFIX):
                        raise
                    self.close()  # the metastore is stopping: retrying would only meet a closed port
                    raise MetastoreWarehouseGoneError(self._uri, str(exc.message)) from exc
                except _TRANSPORT_ERRORS as exc:
                    self.close()
                    if attempt == 2 or _is_timeout(exc):
                        # A timed-out call may still be running server-side: do not repeat it.
                        raise MetastoreUnavailableError(self._uri, exc) from exc
                    log.info("metastore %s connection broken (%s); reconnecting", self._uri, exc)
        raise AssertionError("unreachable")

    # -- databases -------------------------------------------------------------------------------
    def get_all_databases(self) -> list[str]:
        return self._call(lambda c: c.get_all_databases())

    def get_database(self, name: str) -> Database | None:
        try:
            return self._call(lambda c: c.get_database(name))
        except NoSuchObjectException:
            return None

    def create_database(self, database: Database | str, *, location: str | None = None,
                        description: str = "", if_not_exists: bool = True) -> bool:
        """Create a database; returns False when it already existed (and `if_not_exists`)."""
        db = database if isinstance(database, Database) else Database(
            name=database, description=description, locationUri=location, parameters={})
        try:
            self._call(lambda c: c.create_database(db))
            return True
        except AlreadyExistsException:
            if not if_not_exists:
                raise
            return False

    def drop_database(self, name: str, *, delete_data: bool = False, cascade: bool = False) -> bool:
        """Drop a database; returns False when it did not exist.

        Checks existence first because Hive 2.3 answers a drop of a missing database with a
        MetaException (a server-side NPE) rather than NoSuchObjectException."""
        if self.get_database(name) is None:
            return False
        try:
            self._call(lambda c: c.drop_database(name, delete_data, cascade))
            return True
        except NoSuchObjectException:
            return False

    # -- tables ----------------------------------------------------------------------------------
    def get_all_tables(self, db: str) -> list[str]:
        return self._call(lambda c: c.get_all_tables(db))

    def get_table(self, db: str, name: str) -> Table | None:
        try:
            return self._call(lambda c: c.get_table(db, name))
        except NoSuchObjectException:
            return None

    def create_table(self, table: Table) -> None:
        self._call(lambda c: c.create_table(table))

    def alter_table(self, db: str, name: str, table: Table, *, cascade: bool = False) -> None:
        """Replace the definition of `db.name` with `table` (a different name in `table` renames).

        `cascade` also applies column changes to every partition's storage descriptor (Hive readers use a
        partition's own columns, so a synced column change must reach them)."""
        if cascade:
            self._call(lambda c: c.alter_table_with_cascade(db, name, table, True))
        else:
            self._call(lambda c: c.alter_table(db, name, table))

    def drop_table(self, db: str, name: str, delete_data: bool = False) -> bool:
        """Drop a table; returns False when it did not exist. External tables never lose data."""
        try:
            self._call(lambda c: c.drop_table(db, name, delete_data))
            return True
        except NoSuchObjectException:
            return False

    # -- partitions ------------------------------------------------------------------------------
    def add_partitions(self, partitions: list[Partition]) -> int:
        """Register partitions (thrift `Partition` objects); returns how many were added."""
        if not partitions:
            return 0
        return self._call(lambda c: c.add_partitions(partitions))

    def drop_partition(self, db: str, table: str, values: list[str], delete_data: bool = False) -> bool:
        """Drop one partition by its values (in partition-key order); False when it did not exist."""
        try:
            return self._call(lambda c: c.drop_partition(db, table, values, delete_data))
        except NoSuchObjectException:
            return False

    def alter_partitions(self, db: str, table: str, partitions: list[Partition]) -> None:
        """Replace the definitions (e.g. the location) of existing partitions."""
        if partitions:
            self._call(lambda c: c.alter_partitions(db, table, partitions))

    def get_partitions(self, db: str, table: str, max_parts: int = -1) -> list[Partition]:
        return self._call(lambda c: c.get_partitions(db, table, max_parts))

    def get_partition_names(self, db: str, table: str, max_parts: int = -1) -> list[str]:
        return self._call(lambda c: c.get_partition_names(db, table, max_parts))


def _is_timeout(exc: BaseException) -> bool:
    if isinstance(exc, TTransportException) and exc.type == TTransportException.TIMED_OUT:
        return True
