"""The HTTP transport: HiveServer2's `transportMode=http`. Each POST to `/<http path>` carries one
binary-protocol message and gets the reply; credentials come as HTTP Basic with every request (checked
against the users file in `plain` mode). Sessions are not tied to a connection. `GET /health` answers the
server's counters as JSON (sessions, operations, connections)."""
from __future__ import annotations

import base64
import binascii
import json
import logging
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from thrift.transport.TTransport import TMemoryBuffer

from sqlext.server.errors import HoodieAuthenticationError
from sqlext.server.handler import Connection, TCLIServiceHandler
from sqlext.server.processor import Processor, protocol_factory

log = logging.getLogger(__name__)

THRIFT_CONTENT_TYPE = "application/x-thrift"


class _Handler(BaseHTTPRequestHandler):
    server_version = "sqlext-thrift-http"
    protocol_version = "HTTP/1.1"

    @property
    def service(self):
        return self.server.service

    def log_message(self, format, *args):  # noqa: A002 - BaseHTTPRequestHandler's signature
        log.debug("http %s: " + format, self.address_string(), *args)

    def do_GET(self):  # noqa: N802
        if self.path.rstrip("/") == "/health":
            self._reply(200, json.dumps(self.service.stats()).encode(), "application/json")
        else:
            self._reply(404, b"not found\n", "text/plain")

    def do_POST(self):  # noqa: N802
        if self.path.split("?", 1)[0].strip("/") != self.server.http_path:
            self._reply(404, f"no Thrift service at {self.path} (use /{self.server.http_path})\n".encode(),
                        "text/plain")
            return
        length = int(self.headers.get("Content-Length") or 0)
        limit = self.service.config.max_message_size
        if length <= 0 or length > limit:
            self.close_connection = True
            self._reply(413 if length > limit else 411,
                        f"request of {length} bytes: expected 1 to {limit} (hive.server2.thrift.max.message.size)\n"
                        .encode(), "text/plain")
            return
        try:
            user = self._user()
        except HoodieAuthenticationError as exc:
            self.send_response(401)
            self.send_header("WWW-Authenticate", 'Basic realm="sqlext"')
            body = f"{exc}\n".encode()
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)
            return
        body = self.rfile.read(length)
        connection = Connection(0, self.address_string(), "http", user=user, credentials=user is not None)
        inbuf, outbuf = TMemoryBuffer(body), TMemoryBuffer()
        factory = protocol_factory(limit)
        try:
            Processor(TCLIServiceHandler(self.service, connection)).process(factory.getProtocol(inbuf),
                                                                            factory.getProtocol(outbuf))
        except Exception as exc:  # noqa: BLE001 - a malformed message: this request fails, nothing else
            log.warning("http request from %s: malformed message: %s", self.address_string(), exc)
            self._reply(400, f"malformed Thrift message: {exc}\n".encode(), "text/plain")
            return
        self._reply(200, outbuf.getvalue(), THRIFT_CONTENT_TYPE)

    def _user(self) -> str | None:
        header = self.headers.get("Authorization")
        auth = self.service.authenticator
        if not header:
            auth.refuse_without_credentials()
            return None
        scheme, _, value = header.partition(" ")
        if scheme.lower() != "basic":
            raise HoodieAuthenticationError(f"unsupported HTTP authentication scheme {scheme!r} (use Basic)")
        try:
            user, _, password = base64.b64decode(value.strip(), validate=True).decode("utf-8").partition(":")
        except (binascii.Error, UnicodeDecodeError):
            raise HoodieAuthenticationError("malformed HTTP Basic credentials") from None
        return auth.authenticate(user, password)

    def _reply(self, code: int, body: bytes, content_type: str) -> None:
        self.send_response(code)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


class HttpServer:
    def __init__(self, service, host: str, port: int, path: str):
        self._httpd = ThreadingHTTPServer((host, port), _Handler)
        self._httpd.daemon_threads = True
        self._httpd.service = service
        self._httpd.http_path = path.strip("/")
        if service.tls is not None:  # the handshake happens in the request's thread, on its first read
            self._httpd.socket = service.tls.wrap_socket(self._httpd.socket, server_side=True,
                                                         do_handshake_on_connect=False)
        self.port = self._httpd.server_address[1]
        self._thread = threading.Thread(target=self._httpd.serve_forever, name="sqlext-http", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()
