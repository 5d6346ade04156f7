"""TLS on both transports of `sqlext serve` (--ssl-cert / --ssl-key): impyla (binary and HTTP), PyHive (HTTPS)
and beeline (a PKCS12 trust store) connect and query with the server's certificate verified; plaintext clients on
either port are refused and the server stays up."""
from __future__ import annotations

import datetime
import ipaddress
import json
import subprocess
import sys
import textwrap

import pytest

from thrift_server.support import client_env, run_beeline


def _self_signed(directory) -> tuple[str, str]:
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "127.0.0.1")])
    now = datetime.datetime.now(datetime.timezone.utc)
    cert = (x509.CertificateBuilder().subject_name(name).issuer_name(name).public_key(key.public_key())
            .serial_number(x509.random_serial_number()).not_valid_before(now - datetime.timedelta(minutes=5))
            .not_valid_after(now + datetime.timedelta(days=1))
            .add_extension(x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address("127.0.0.1")),
                                                        x509.DNSName("localhost")]), critical=False)
            .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
            .sign(key, hashes.SHA256()))
    cert_path, key_path = directory / "server.pem", directory / "server.key"
    cert_path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_path.write_bytes(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                           serialization.NoEncryption()))
    return str(cert_path), str(key_path)


@pytest.fixture
def tls_server(spark, tmp_path):
    from sqlext.server.config import ServerConfig
    from sqlext.server.server import HiveService

    cert, key = _self_signed(tmp_path)
    service = HiveService(spark, ServerConfig(port=0, http_port=0, ssl_cert=cert, ssl_key=key)).start()
    yield service, cert
    service.stop()


_CLIENT = textwrap.dedent("""
    import json, sys, urllib.request
    args = json.loads(sys.argv[1])
    out = {}

    def attempt(name, fn):
        try:
            out[name] = {"rows": [list(map(str, r)) for r in fn()]}
        except Exception as exc:
            out[name] = {"error": f"{type(exc).__name__}: {exc}"[:300]}

    def impyla(**kw):
        from impala.dbapi import connect
        cursor = connect(host="127.0.0.1", **kw).cursor()
        cursor.execute("SELECT 40 + 2")
        return cursor.fetchall()

    def pyhive_https(verify):
        from pyhive import hive
        cursor = hive.connect(host="127.0.0.1", port=args["http"], scheme="https", username="u",
                              check_hostname="true", ssl_cert="required" if verify else "none").cursor()
        cursor.execute("SELECT 40 + 2")
        return cursor.fetchall()

    tls = dict(use_ssl=True, ca_cert=args["cert"], timeout=30)
    attempt("impyla binary tls", lambda: impyla(port=args["binary"], auth_mechanism="NOSASL", **tls))
    attempt("impyla binary tls plain-sasl", lambda: impyla(port=args["binary"], auth_mechanism="PLAIN", user="u",
                                                            password="p", **tls))
    attempt("impyla http tls", lambda: impyla(port=args["http"], auth_mechanism="NOSASL", use_http_transport=True,
                                              http_path="cliservice", **tls))
    attempt("pyhive https", lambda: pyhive_https(True))
    attempt("impyla binary plaintext", lambda: impyla(port=args["binary"], auth_mechanism="NOSASL", timeout=10))
    attempt("impyla http plaintext", lambda: impyla(port=args["http"], auth_mechanism="NOSASL",
                                                    use_http_transport=True, http_path="cliservice", timeout=10))
    attempt("http plaintext health", lambda: [[urllib.request.urlopen(f"http://127.0.0.1:{args['http']}/health",
                                                                      timeout=10).status]])
    attempt("impyla binary tls again", lambda: impyla(port=args["binary"], auth_mechanism="NOSASL", **tls))
    print(json.dumps(out))
""")


def test_tls_clients_connect_and_plaintext_is_refused(tls_server):
    service, cert = tls_server
    env = {**client_env(), "SSL_CERT_FILE": cert}  # PyHive's HTTPS verifies against the default trust store
    done = subprocess.run([sys.executable, "-c", _CLIENT, json.dumps(
        {"binary": service.binary.port, "http": service.http.port, "cert": cert})], capture_output=True, text=True,
        timeout=300, env=env)
    assert done.returncode == 0, done.stderr[-4000:]
    got = json.loads(done.stdout.strip().splitlines()[-1])
    for name in ("impyla binary tls", "impyla binary tls plain-sasl", "impyla http tls", "pyhive https",
                 "impyla binary tls again"):
        assert got[name] == {"rows": [["42"]]}, (name, got[name])
    for name in ("impyla binary plaintext", "impyla http plaintext", "http plaintext health"):
        assert "error" in got[name], (name, got[name])


def test_beeline_over_tls(tls_server, tmp_path):
    service, cert = tls_server
    store = tmp_path / "trust.p12"
    made = subprocess.run(["keytool", "-importcert", "-noprompt", "-alias", "sqlext", "-file", cert, "-keystore",
                           str(store), "-storetype", "PKCS12", "-storepass", "changeit"], capture_output=True,
                          text=True, timeout=120)
    assert made.returncode == 0, made.stderr
    url = (f"jdbc:hive2://127.0.0.1:{service.binary.port}/default;ssl=true;sslTrustStore={store};"
           f"trustStorePassword=changeit")
    done = run_beeline(url, "SELECT 40 + 2 AS answer;")
    assert done.returncode == 0 and "42" in done.stdout.split(), done.stdout + done.stderr[-3000:]
    plain = run_beeline(f"jdbc:hive2://127.0.0.1:{service.binary.port}/default", "SELECT 1;", timeout=120)
    assert plain.returncode != 0
