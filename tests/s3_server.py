"""A real S3 endpoint for tests: moto's server mode (`moto_server`) on a free loopback port, started once per test
session and stopped after. No mocks of pyarrow or boto: every request crosses HTTP."""
from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
import uuid
from dataclasses import dataclass

import pytest

ACCESS_KEY, SECRET_KEY, REGION = "testing-key", "testing-secret", "us-east-1"


@dataclass(frozen=True)
class S3Endpoint:
    host: str
    port: int

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}"

    def hadoop_conf(self) -> dict[str, str]:
        """The Spark conf a user sets for this endpoint (Hadoop's S3A keys)."""
        return {"spark.hadoop.fs.s3a.endpoint": self.url, "spark.hadoop.fs.s3a.access.key": ACCESS_KEY,
                "spark.hadoop.fs.s3a.secret.key": SECRET_KEY, "spark.hadoop.fs.s3a.path.style.access": "true",
                "spark.hadoop.fs.s3a.endpoint.region": REGION}

    def options(self) -> dict[str, str]:
        """The same as write/read options (`fs.s3a.*`)."""
        return {k[len("spark.hadoop."):]: v for k, v in self.hadoop_conf().items()}

    def hudi_rs_options(self) -> dict[str, str]:
        return {"aws_endpoint_url": self.url, "aws_allow_http": "true", "aws_access_key_id": ACCESS_KEY,
                "aws_secret_access_key": SECRET_KEY, "aws_region": REGION}

    def client(self):
        import boto3

        return boto3.client("s3", endpoint_url=self.url, aws_access_key_id=ACCESS_KEY,
                            aws_secret_access_key=SECRET_KEY, region_name=REGION)

    def new_bucket(self, prefix: str = "t") -> str:
        name = f"{prefix}-{uuid.uuid4().hex[:12]}"
        self.client().create_bucket(Bucket=name)
        return name

    def keys(self, bucket: str, prefix: str = "") -> list[str]:
        out = []
        for page in self.client().get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix):
            out += [o["Key"] for o in page.get("Contents", [])]
        return out


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_moto(log_path: str) -> tuple[subprocess.Popen, S3Endpoint]:
    port = _free_port()
    exe = os.path.join(os.path.dirname(sys.executable), "moto_server")
    cmd = [exe] if os.path.exists(exe) else [sys.executable, "-m", "moto.server"]
    with open(log_path, "ab") as out:
        proc = subprocess.Popen([*cmd, "-H", "127.0.0.1", "-p", str(port)], stdout=out, stderr=subprocess.STDOUT)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"moto_server exited with {proc.returncode}; see {log_path}")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                return proc, S3Endpoint("127.0.0.1", port)
        except OSError:
            time.sleep(0.2)
    proc.kill()
    raise RuntimeError(f"moto_server did not start on port {port}; see {log_path}")


@pytest.fixture(scope="session")
def s3_server(tmp_path_factory):
    proc, endpoint = start_moto(str(tmp_path_factory.mktemp("moto") / "moto.log"))
    try:
        yield endpoint
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()


@pytest.fixture
def s3_spark(spark, s3_server):
    """The shared session configured for the S3 server the way a user configures Spark (`spark.hadoop.fs.s3a.*`),
    restored afterwards."""
    conf = s3_server.hadoop_conf()
    for key, value in conf.items():
        spark.conf.set(key, value)
    try:
        yield spark
    finally:
        for key in conf:
            spark.conf.unset(key)
