"""The binary transport: one listening socket for NOSASL and SASL PLAIN clients, a thread per connection.

The first byte tells them apart: 0x80 starts a strict binary-protocol message (NOSASL), 0x01 a SASL START
frame. Anything else, a malformed message, a frame or message larger than the maximum message size, or a
failed authentication closes that connection only; the sessions opened over a connection are closed with it.
"""
from __future__ import annotations

import itertools
import logging
import socket
import ssl
import threading

from thrift.protocol.TProtocol import TProtocolException
from thrift.transport.TSocket import TSocket
from thrift.transport.TTransport import TBufferedTransport, TTransportException

from sqlext.server.errors import HoodieAuthenticationError, HoodieProtocolError
from sqlext.server.handler import Connection, TCLIServiceHandler
from sqlext.server.processor import Processor, protocol_factory
from sqlext.server.sasl import SaslStatus, TSaslServerTransport

log = logging.getLogger(__name__)

BINARY_VERSION_BYTE = 0x80
_connection_ids = itertools.count(1)


class MeteredSocket(TSocket):
    """A server-side socket transport counting the bytes of the message being read: more than `limit` bytes
    raise HoodieProtocolError (checked per socket read, so the limit holds to within one read buffer)."""

    def __init__(self, sock: socket.socket, limit: int):
        super().__init__()
        self.setHandle(sock)
        self.limit = limit
        self.count = 0

    def start_message(self) -> None:
        self.count = 0

    def read(self, sz: int) -> bytes:
        data = super().read(sz)
        self.count += len(data)
        if self.count > self.limit:
            raise HoodieProtocolError(f"message of more than {self.limit} bytes exceeds the maximum message size "
                                      f"(hive.server2.thrift.max.message.size)")
        return data


class _Replayed:
    """A TLS socket whose first byte was read already (TLS sockets cannot peek): served again first."""

    def __init__(self, sock, first: bytes):
        self._sock, self._first = sock, first

    def recv(self, size: int) -> bytes:
        if self._first:
            out, self._first = self._first, b""
            return out
        return self._sock.recv(size)

    def __getattr__(self, name):
        return getattr(self._sock, name)


def tls_accept(context, conn: socket.socket, timeout_s: float = 30.0):
    """`conn` after the server side of a TLS handshake (a plaintext or failing client raises ssl.SSLError)."""
    conn.settimeout(timeout_s)
    secure = context.wrap_socket(conn, server_side=True)
    secure.settimeout(None)
    return secure


class BinaryServer:
    def __init__(self, service, host: str, port: int):
        self.service = service
        self.host = host
        self._sock = socket.create_server((host, port), reuse_port=False, backlog=128)
        self.port = self._sock.getsockname()[1]
        self._threads: set[threading.Thread] = set()
        self._open: dict[int, socket.socket] = {}
        self._lock = threading.Lock()
        self._stopping = threading.Event()
        self._acceptor = threading.Thread(target=self._accept_loop, name="sqlext-binary-accept", daemon=True)

    def start(self) -> None:
        self._acceptor.start()

    def stop(self) -> None:
        self._stopping.set()
        try:
            self._sock.close()
        except OSError:
            pass
        with self._lock:
            conns = list(self._open.values())
        for conn in conns:
            try:
                conn.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass

    def _accept_loop(self) -> None:
        while not self._stopping.is_set():
            try:
                conn, addr = self._sock.accept()
            except OSError:
                if self._stopping.is_set():
                    return
                continue
            with self._lock:
                busy = len(self._open) >= self.service.config.max_worker_threads
            if busy:
                log.warning("refusing connection from %s: %d connections open (hive.server2.thrift.max.worker."
                            "threads)", addr, self.service.config.max_worker_threads)
                conn.close()
                continue
            conn_id = next(_connection_ids)
            with self._lock:
                self._open[conn_id] = conn
            thread = threading.Thread(target=self._serve, args=(conn, conn_id, f"{addr[0]}:{addr[1]}"),
                                      name=f"sqlext-conn-{conn_id}", daemon=True)
            thread.start()

    def _serve(self, conn: socket.socket, conn_id: int, peer: str) -> None:
        connection = Connection(conn_id, peer, "binary")
        config = self.service.config
        try:
            conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            if self.service.tls is not None:
                secure = tls_accept(self.service.tls, conn)
                first = secure.recv(1)
                wire = _Replayed(secure, first)
            else:
                first = conn.recv(1, socket.MSG_PEEK)
                wire = conn
            if not first:
                return
            metered = MeteredSocket(wire, config.max_message_size)
            if first[0] == SaslStatus.START:
                sasl = TSaslServerTransport(metered, self.service.authenticator.authenticate, config.max_message_size)
                connection.user = sasl.negotiate()
                connection.credentials = True
                transport = sasl
            elif first[0] == BINARY_VERSION_BYTE:
                transport = TBufferedTransport(metered)
            else:
                raise HoodieProtocolError(f"malformed first byte 0x{first[0]:02x} (expected a binary-protocol "
                                          f"message 0x80 or a SASL START frame 0x01)")
            self._process(connection, transport, metered)
        except HoodieAuthenticationError as exc:
            log.info("connection %s from %s: %s", conn_id, peer, exc)
        except ssl.SSLError as exc:
            log.info("connection %s from %s refused: TLS handshake failed (a plaintext client?): %s", conn_id, peer,
                     exc)
        except (HoodieProtocolError, TProtocolException, UnicodeDecodeError) as exc:
            log.warning("connection %s from %s closed: %s", conn_id, peer, exc)
        except (TTransportException, ConnectionError, OSError) as exc:
            log.debug("connection %s from %s ended: %s", conn_id, peer, exc)
        except Exception:  # noqa: BLE001 - one connection's failure never reaches the others
            log.exception("connection %s from %s failed", conn_id, peer)
        finally:
            self._finish(conn, conn_id, peer)

    def _process(self, connection: Connection, transport, metered: MeteredSocket) -> None:
        processor = Processor(TCLIServiceHandler(self.service, connection))
        protocol = protocol_factory(self.service.config.max_message_size).getProtocol(transport)
        while not self._stopping.is_set():
            metered.start_message()
            processor.process(protocol, protocol)

    def _finish(self, conn: socket.socket, conn_id: int, peer: str) -> None:
        with self._lock:
            self._open.pop(conn_id, None)
        try:
            conn.close()
        except OSError:
            pass
        closed = self.service.sessions.close_connection(conn_id)
        if closed:
            log.info("connection %s from %s gone: closed its %d session(s)", conn_id, peer, closed)

    @property
    def connections(self) -> int:
        with self._lock:
            return len(self._open)
