"""The server side of the SASL transport HiveServer2 clients use on the binary port (mechanism PLAIN).

Negotiation: the client sends a START frame naming the mechanism, then its initial response
``authzid NUL user NUL password`` (Python clients with status OK, Java clients with COMPLETE); the server
answers COMPLETE, or BAD with the reason. Every frame is a status byte, a 4-byte big-endian length and the
payload. Afterwards each Thrift message travels in frames of a 4-byte length and the payload (PLAIN has no
integrity or privacy layer). Frames longer than the configured maximum message size are refused.
"""
from __future__ import annotations

import struct
from enum import IntEnum
from io import BytesIO
from typing import Callable

from thrift.transport.TTransport import CReadableTransport, TTransportBase, TTransportException

from sqlext.server.errors import HoodieAuthenticationError, HoodieProtocolError

MECHANISM = b"PLAIN"
_LENGTH = struct.Struct(">I")


class SaslStatus(IntEnum):
    START = 1
    OK = 2
    BAD = 3
    ERROR = 4
    COMPLETE = 5


class TSaslServerTransport(TTransportBase, CReadableTransport):
    """SASL PLAIN over `trans` (a transport with readAll/write/flush, e.g. a socket transport)."""

    def __init__(self, trans, authenticate: Callable[[str, str], str], max_frame_size: int):
        self._trans = trans
        self._authenticate = authenticate
        self._max = max_frame_size
        self._rbuf = BytesIO(b"")
        self._wbuf = BytesIO()
        self.user: str | None = None

    # -- negotiation ---------------------------------------------------------------------------------
    def negotiate(self) -> str:
        """Run the SASL exchange; the authenticated user, or HoodieAuthenticationError / HoodieProtocolError
        after telling the client why."""
        status, mechanism = self._read_negotiation_frame()
        if status != SaslStatus.START:
            raise HoodieProtocolError(f"SASL negotiation must begin with START, got status {status}")
        if mechanism.upper() != MECHANISM:
            self._send(SaslStatus.BAD, f"unsupported SASL mechanism {mechanism.decode('utf-8', 'replace')!r} "
                                       f"(this server speaks PLAIN)".encode())
            raise HoodieAuthenticationError(f"unsupported SASL mechanism {mechanism!r}")
        status, response = self._read_negotiation_frame()
        if status not in (SaslStatus.OK, SaslStatus.COMPLETE):
            raise HoodieProtocolError(f"SASL PLAIN response expected, got status {status}")
        parts = response.split(b"\0")
        if len(parts) != 3:
            self._send(SaslStatus.BAD, b"malformed PLAIN response (expected authzid NUL user NUL password)")
            raise HoodieProtocolError("malformed SASL PLAIN response")
        user, password = parts[1].decode("utf-8", "replace"), parts[2].decode("utf-8", "replace")
        try:
            self.user = self._authenticate(user, password)
        except HoodieAuthenticationError as exc:
            self._send(SaslStatus.BAD, str(exc).encode("utf-8"))
            raise
        self._send(SaslStatus.COMPLETE, b"")
        return self.user

    def _read_negotiation_frame(self) -> tuple[int, bytes]:
        header = self._trans.readAll(5)
        status, length = header[0], _LENGTH.unpack(header[1:])[0]
        if status not in SaslStatus.__members__.values():
            raise HoodieProtocolError(f"malformed SASL frame: unknown status byte {status}")
        self._check_length(length)
        return status, self._trans.readAll(length) if length else b""

    def _send(self, status: SaslStatus, payload: bytes) -> None:
        self._trans.write(bytes([status]) + _LENGTH.pack(len(payload)) + payload)
        self._trans.flush()

    def _check_length(self, length: int) -> None:
        if length > self._max:
            raise HoodieProtocolError(f"frame of {length} bytes exceeds the maximum message size of {self._max} "
                                      f"bytes (hive.server2.thrift.max.message.size)")

    # -- data frames ---------------------------------------------------------------------------------
    def isOpen(self) -> bool:
        return self._trans.isOpen()

    def open(self) -> None:
        raise TTransportException(TTransportException.ALREADY_OPEN, "server transport is open")

    def close(self) -> None:
        self._trans.close()

    def read(self, sz: int) -> bytes:
        data = self._rbuf.read(sz)
        if data:
            return data
        self._read_frame()
        return self._rbuf.read(sz)

    def _read_frame(self) -> None:
        length = _LENGTH.unpack(self._trans.readAll(4))[0]
        self._check_length(length)
        self._rbuf = BytesIO(self._trans.readAll(length))

    def write(self, buf: bytes) -> None:
        self._wbuf.write(buf)

    def flush(self) -> None:
        data = self._wbuf.getvalue()
        self._wbuf = BytesIO()
        self._trans.write(_LENGTH.pack(len(data)) + data)
        self._trans.flush()

    # -- CReadableTransport: lets the C-accelerated protocol read straight from the frame buffer -------
    @property
    def cstringio_buf(self):
        return self._rbuf

    def cstringio_refill(self, partialread: bytes, reqlen: int):
        data = partialread
        while len(data) < reqlen:
            self._read_frame()
            data += self._rbuf.getvalue()
        self._rbuf = BytesIO(data)
        return self._rbuf
