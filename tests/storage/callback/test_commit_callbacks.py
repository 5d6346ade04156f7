"""Hudi's commit callbacks against real receivers: an HTTP server on loopback and librdkafka's mock Kafka
cluster (the real protocol), read back by a real consumer. A failing callback never fails the commit."""
from __future__ import annotations

import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from storage.callback.http_callback import HoodieWriteCommitHttpCallback
from storage.callback.message import HoodieWriteCommitCallbackMessage
from storage.config import HoodieConfig
from storage.exception import HoodieCommitCallbackError
from storage.client.write_client import HoodieWriteClient

HTTP_CLASS = "org.apache.hudi.callback.impl.HoodieWriteCommitHttpCallback"
KAFKA_CLASS = "org.apache.hudi.utilities.callback.kafka.HoodieWriteCommitKafkaCallback"


class Receiver:
    """A loopback HTTP server recording each POST; `answers` are the status codes of the first requests
    (then 200), `delay_s` a pause before answering."""

    def __init__(self, answers=(), delay_s: float = 0.0):
        self.requests: list[tuple[dict, bytes]] = []
        self.answers = list(answers)
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):
                body = self.rfile.read(int(self.headers["Content-Length"]))
                receiver.requests.append((self.headers, body))
                time.sleep(delay_s)
                status = receiver.answers.pop(0) if receiver.answers else 200
                self.send_response(status)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, *args):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/hudi/commits"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self):
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def receiver():
    made = []

    def make(answers=(), delay_s=0.0):
        made.append(Receiver(answers, delay_s))
        return made[-1]
    yield make
    for r in made:
        r.close()


def _options(name: str, **extra) -> dict[str, str]:
    return {"hoodie.table.name": name, "hoodie.datasource.write.recordkey.field": "id",
            "hoodie.datasource.write.precombine.field": "ts", "hoodie.datasource.write.partitionpath.field": "dt",
            **extra}


def _write(spark, path, options, rows=((1, 1, "a"), (2, 1, "b"), (3, 1, "b"))):
    df = spark.createDataFrame(list(rows), "id INT, ts INT, dt STRING")
    return HoodieWriteClient(spark, str(path), HoodieConfig.of(options)).write(df)


def _message() -> HoodieWriteCommitCallbackMessage:
    return HoodieWriteCommitCallbackMessage("20240101000000000", "t", "/tmp/t", [], "commit", {})


def test_http_callback_posts_hudis_message_with_api_key_and_headers(spark, tmp_path, receiver):
    server = receiver()
    opts = _options("cb_http", **{"hoodie.write.commit.callback.on": "true",
                                  "hoodie.write.commit.callback.http.url": server.url,
                                  "hoodie.write.commit.callback.http.api.key": "secret-key",
                                  "hoodie.write.commit.callback.http.custom.headers": "X-Team: lake;X-Env:test"})
    result = _write(spark, tmp_path / "t", opts)
    assert result.callback_failures == []
    assert len(server.requests) == 1
    headers, body = server.requests[0]
    assert headers["HUDI-CALLBACK-KEY"] == "secret-key"
    assert headers["Content-Type"] == "application/json"
    assert headers["X-Team"] == "lake" and headers["X-Env"] == "test"
    message = json.loads(body)
    assert message["commitTime"] == result.instant_time
    assert message["tableName"] == "cb_http"
    assert message["basePath"].rstrip("/").endswith("/t")
    assert message["commitActionType"] == "commit"
    stats = message["hoodieWriteStat"]
    assert sorted(s["partitionPath"] for s in stats) == ["a", "b"]
    assert sum(s["numInserts"] for s in stats) == 3
    assert all(s["path"] and s["fileId"] for s in stats)
    assert "schema" in message["extraMetadata"]


def test_callback_off_by_default(spark, tmp_path, receiver):
    server = receiver()
    result = _write(spark, tmp_path / "t", _options("cb_off", **{
        "hoodie.write.commit.callback.http.url": server.url}))
    assert result.callback_failures == [] and server.requests == []


def test_failing_http_callback_is_reported_and_the_commit_stands(spark, tmp_path, receiver, caplog):
    server = receiver(answers=[500] * 10)
    opts = _options("cb_fail", **{"hoodie.write.commit.callback.on": "true",
                                  "hoodie.write.commit.callback.http.url": server.url,
                                  "hoodie.write.commit.callback.http.retries": "1"})
    result = _write(spark, tmp_path / "t", opts)
    assert result.metadata is not None
    [(name, error)] = result.callback_failures
    assert name == HTTP_CLASS
    assert isinstance(error, HoodieCommitCallbackError) and server.url in str(error) and "500" in str(error)
    assert len(server.requests) == 2  # one retry
    assert any("commit callback" in r.getMessage() for r in caplog.records)
    assert spark.read.format("hudi").load(str(tmp_path / "t")).count() == 3


def test_http_callback_retries_5xx_then_delivers(receiver):
    server = receiver(answers=[503, 502])
    callback = HoodieWriteCommitHttpCallback(HoodieConfig.of({
        "hoodie.write.commit.callback.http.url": server.url, "hoodie.write.commit.callback.http.retries": "3"}))
    callback.call(_message())
    assert len(server.requests) == 3
    assert server.requests[-1][0]["HUDI-CALLBACK-KEY"] == "hudi_write_commit_http_callback"  # Hudi's default


def test_http_callback_does_not_retry_4xx(receiver):
    server = receiver(answers=[401])
    callback = HoodieWriteCommitHttpCallback(HoodieConfig.of({"hoodie.write.commit.callback.http.url": server.url}))
    with pytest.raises(HoodieCommitCallbackError, match="401"):
        callback.call(_message())
    assert len(server.requests) == 1


def test_http_callback_times_out(receiver):
    server = receiver(delay_s=2.0)
    callback = HoodieWriteCommitHttpCallback(HoodieConfig.of({
        "hoodie.write.commit.callback.http.url": server.url, "hoodie.write.commit.callback.http.timeout.seconds": "1",
        "hoodie.write.commit.callback.http.retries": "0"}))
    started = time.monotonic()
    with pytest.raises(HoodieCommitCallbackError, match="timed out"):
        callback.call(_message())
    assert time.monotonic() - started < 1.9


def test_http_callback_needs_a_url():
    with pytest.raises(HoodieCommitCallbackError, match="hoodie.write.commit.callback.http.url"):
        HoodieWriteCommitHttpCallback(HoodieConfig.of({}))


@pytest.fixture(scope="module")
def kafka_bootstrap():
    """librdkafka's mock cluster: a Kafka-protocol broker in this process, alive while `mock` is."""
    confluent_kafka = pytest.importorskip("confluent_kafka")
    mock = confluent_kafka.Producer({"test.mock.num.brokers": 1})
    brokers = mock.list_topics(timeout=10).brokers.values()
    yield ",".join(f"{b.host}:{b.port}" for b in brokers)
    del mock


def _consume_one(bootstrap: str, topic: str, partition: int = 0):
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "test", "enable.auto.commit": False})
    consumer.assign([TopicPartition(topic, partition, 0)])  # from the first offset, no group rebalance
    try:
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            msg = consumer.poll(0.5)
            if msg is not None and not msg.error():
                return msg
        raise AssertionError(f"no message on {topic}")
    finally:
        consumer.close()


def test_kafka_callback_message_read_back_by_a_consumer(spark, tmp_path, kafka_bootstrap):
    opts = _options("cb_kafka", **{"hoodie.write.commit.callback.on": "true",
                                   "hoodie.write.commit.callback.class": KAFKA_CLASS,
                                   "hoodie.write.commit.callback.kafka.bootstrap.servers": kafka_bootstrap,
                                   "hoodie.write.commit.callback.kafka.topic": "hudi_commits",
                                   "hoodie.write.commit.callback.kafka.partition": "0"})
    result = _write(spark, tmp_path / "t", opts)
    assert result.callback_failures == []
    msg = _consume_one(kafka_bootstrap, "hudi_commits")
    assert msg.key() == b"cb_kafka"  # the table name: one table's messages stay in order
    message = json.loads(msg.value())
    assert message["commitTime"] == result.instant_time and message["tableName"] == "cb_kafka"
    assert sum(s["numInserts"] for s in message["hoodieWriteStat"]) == 3


def test_kafka_callback_without_topic_is_reported_naming_the_key(spark, tmp_path, kafka_bootstrap):
    opts = _options("cb_kafka_bad", **{"hoodie.write.commit.callback.on": "true",
                                       "hoodie.write.commit.callback.class": KAFKA_CLASS,
                                       "hoodie.write.commit.callback.kafka.bootstrap.servers": kafka_bootstrap})
    result = _write(spark, tmp_path / "t", opts)
    [(name, error)] = result.callback_failures
    assert name == KAFKA_CLASS and "hoodie.write.commit.callback.kafka.topic" in str(error)
    assert result.metadata is not None


def test_python_callback_class(spark, tmp_path):
    opts = _options("cb_py", **{"hoodie.write.commit.callback.on": "true",
                                "hoodie.write.commit.callback.class": f"{__name__}.RecordingCallback"})
    RecordingCallback.messages.clear()
    result = _write(spark, tmp_path / "t", opts)
    assert result.callback_failures == []
    assert [m.commitTime for m in RecordingCallback.messages] == [result.instant_time]


def test_unknown_callback_class_is_reported(spark, tmp_path):
    opts = _options("cb_unknown", **{"hoodie.write.commit.callback.on": "true",
                                     "hoodie.write.commit.callback.class": "no.such.Callback"})
    result = _write(spark, tmp_path / "t", opts)
    [(_, error)] = result.callback_failures
    assert "hoodie.write.commit.callback.class" in str(error) and "no.such.Callback" in str(error)


class RecordingCallback:
    messages: list = []

    def __init__(self, config):
        self.config = config

    def call(self, message):
        RecordingCallback.messages.append(message)
