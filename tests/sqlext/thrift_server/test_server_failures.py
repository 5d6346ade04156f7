"""Misbehaving clients hurt nobody else: malformed frames, oversized frames and messages (the server runs
with `--max-message-size` 1 MiB), a client that vanishes in the middle of a fetch, a wrong password and an
unknown RPC each end (at most) their own connection, while a client connected before them goes on working
and the server holds no session or Spark job for them afterwards."""
from __future__ import annotations

import socket
import struct
import subprocess
import sys
import time
import urllib.error
import urllib.request

import pytest

from thrift_server.clients import Raw
from thrift_server.support import CLIENTS, MAX_MESSAGE_SIZE, PASSWORD, USER, client_env


@pytest.fixture
def bystander(hive_server):
    """A client connected before the trouble starts; it must still work afterwards."""
    raw = Raw(hive_server.port)
    yield raw
    raw.client.CloseSession(raw.t.TCloseSessionReq(raw.session))
    raw.transport.close()


def _still_works(raw: Raw) -> None:
    assert raw.fetch_all(raw.execute("SELECT 40 + 2 AS answer")) == [[42]]


def _closed_by_server(sock: socket.socket, timeout: float = 30) -> bool:
    sock.settimeout(timeout)
    try:
        while True:
            data = sock.recv(4096)
            if not data:
                return True
    except ConnectionResetError:
        return True
    except socket.timeout:
        return False


@pytest.mark.parametrize("payload", [
    b"GET / HTTP/1.1\r\nHost: x\r\n\r\n",                                   # not Thrift at all
    b"\x80\x01\x00\x01" + b"\xff" * 64,                                      # binary protocol, garbage inside
    b"\x01\x00\x00\x00\x05PLAIN" + b"\x09\x00\x00\x00\x01x",                 # SASL START, then a bad status
    b"\x01\x00\x00\x00\x05PLAIN" + b"\x02" + struct.pack(">I", 64 << 20),  # SASL frame of 64 MiB announced
])
def test_malformed_and_oversized_frames_close_only_their_connection(hive_server, bystander, payload):
    with socket.create_connection(("127.0.0.1", hive_server.port)) as sock:
        sock.sendall(payload)
        assert _closed_by_server(sock)
    _still_works(bystander)


def test_oversized_message_is_refused(hive_server, bystander):
    big = Raw(hive_server.port)
    with pytest.raises(Exception):
        big.execute("SELECT '" + "x" * (2 * MAX_MESSAGE_SIZE) + "'")
    _still_works(bystander)
    with socket.create_connection(("127.0.0.1", hive_server.http_port)) as sock:  # refused before its body
        sock.sendall(f"POST /cliservice HTTP/1.1\r\nHost: x\r\nContent-Type: application/x-thrift\r\n"
                     f"Content-Length: {2 * MAX_MESSAGE_SIZE}\r\n\r\n".encode())
        sock.settimeout(30)
        assert sock.recv(4096).startswith(b"HTTP/1.1 413 ")
    assert hive_server.health()["connections"] >= 1


def test_unknown_rpc_gets_unknown_method_and_the_connection_goes_on(hive_server):
    from thrift.Thrift import TApplicationException, TMessageType, TType

    raw = Raw(hive_server.port)
    prot = raw.client._oprot
    prot.writeMessageBegin("NoSuchRpc", TMessageType.CALL, 7)
    prot.writeStructBegin("args")
    prot.writeFieldBegin("req", TType.STRING, 1)
    prot.writeBinary(b"\xff\xfe binary, not UTF-8")
    prot.writeFieldEnd()
    prot.writeFieldStop()
    prot.writeStructEnd()
    prot.writeMessageEnd()
    prot.trans.flush()
    iprot = raw.client._iprot
    name, kind, seqid = iprot.readMessageBegin()
    error = TApplicationException()
    error.read(iprot)
    iprot.readMessageEnd()
    assert (name, kind, seqid, error.type) == ("NoSuchRpc", TMessageType.EXCEPTION, 7,
                                               TApplicationException.UNKNOWN_METHOD)
    _still_works(raw)


VANISHING_CLIENT = """
import os, sys
sys.path.insert(0, {clients_dir!r})
from clients import Raw
raw = Raw({port})
op = raw.execute("SELECT id, repeat('x', 200) AS pad FROM range(0, 4000000, 1, 8)")
rows, more = raw.fetch(op, 1000)
print(len(rows), more, flush=True)
os._exit(0)  # gone without closing anything
"""


def _wait_for(predicate, timeout: float = 60):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.5)
    return predicate()


def test_client_vanishing_mid_fetch(hive_server, bystander):
    before = hive_server.health()
    script = VANISHING_CLIENT.format(clients_dir=str(CLIENTS.parent), port=hive_server.port)
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300, env=client_env())
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.split() == ["1000", "True"]
    after = _wait_for(lambda: (h := hive_server.health())["sessions"] <= before["sessions"]
                      and h["active_spark_jobs"] == 0 and h)
    assert after, hive_server.health()
    assert after["operations"] <= before["operations"]
    _still_works(bystander)


def test_wrong_password_is_rejected_and_others_go_on(auth_server):
    script = ("import sys; from pyhive import hive\n"
              "c = hive.connect(host='127.0.0.1', port={port}, auth='CUSTOM', username='{user}', password='{pw}')\n"
              "cur = c.cursor(); cur.execute('SELECT 1'); print(cur.fetchall())\n")
    wrong = subprocess.run([sys.executable, "-c", script.format(port=auth_server.port, user=USER, pw="wrong")],
                           capture_output=True, text=True, timeout=120, env=client_env())
    assert wrong.returncode != 0
    assert "authentication failed" in wrong.stderr.lower() or "bad" in wrong.stderr.lower(), wrong.stderr[-2000:]
    right = subprocess.run([sys.executable, "-c", script.format(port=auth_server.port, user=USER, pw=PASSWORD)],
                           capture_output=True, text=True, timeout=120, env=client_env())
    assert right.returncode == 0, right.stderr[-2000:]
    assert right.stdout.strip() == "[(1,)]"


def test_nosasl_and_anonymous_http_are_refused_when_users_are_configured(auth_server):
    raw = Raw(auth_server.port)
    status = raw.open_resp.status
    assert status.statusCode == 3 and status.sqlState == "28000"
    assert "SASL PLAIN" in status.errorMessage
    request = urllib.request.Request(f"http://127.0.0.1:{auth_server.http_port}/cliservice", data=b"\x80\x01",
                                     method="POST")
    with pytest.raises(urllib.error.HTTPError) as err:
        urllib.request.urlopen(request, timeout=30)
    assert err.value.code == 401
