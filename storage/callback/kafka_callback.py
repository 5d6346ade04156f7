"""HoodieWriteCommitKafkaCallback: produces the callback message (JSON) to `hoodie.write.commit.callback.kafka.topic`
through confluent-kafka (librdkafka), keyed by the table name so one table's messages stay in order on one
partition (or on `...kafka.partition` when set), with Hudi's acks / retries.

The produce is flushed before returning: a message not delivered within the timeout raises, and the write
result reports it.
"""
from __future__ import annotations

import logging

from storage.callback.message import HoodieWriteCommitCallbackMessage
from storage.config import HoodieConfig
from storage.config import WriteCommitCallbackConfigKeys as CB
from storage.exception import HoodieCommitCallbackError

log = logging.getLogger(__name__)

_DELIVERY_TIMEOUT_S = 30.0


class HoodieWriteCommitKafkaCallback:
    def __init__(self, config: HoodieConfig):
        for prop in (CB.KAFKA_BOOTSTRAP_SERVERS, CB.KAFKA_TOPIC):
            if not config.get(prop):
                raise HoodieCommitCallbackError(f"{prop.key} must be set for the Kafka commit callback")
        self.topic = config.get(CB.KAFKA_TOPIC)
        self.partition = config.get(CB.KAFKA_PARTITION)
        self.producer_conf = {"bootstrap.servers": config.get(CB.KAFKA_BOOTSTRAP_SERVERS),
                              "acks": config.get(CB.KAFKA_ACKS), "retries": config.get(CB.KAFKA_RETRIES),
                              "message.timeout.ms": int(_DELIVERY_TIMEOUT_S * 1000)}

    def call(self, message: HoodieWriteCommitCallbackMessage) -> None:
        try:
            from confluent_kafka import Producer
        except ImportError:
            raise HoodieCommitCallbackError("the Kafka commit callback needs confluent-kafka "
                                            "(pip install 'hudi-lakehouse[kafka]')") from None
        errors: list = []
        producer = Producer(self.producer_conf)
        extra = {} if self.partition is None else {"partition": self.partition}
        producer.produce(self.topic, key=message.tableName.encode(), value=message.to_json().encode(),
                         on_delivery=lambda err, _msg: errors.append(err) if err else None, **extra)
        left = producer.flush(_DELIVERY_TIMEOUT_S)
        if errors or left:
            reason = errors[0] if errors else f"not delivered within {_DELIVERY_TIMEOUT_S:.0f} s"
            raise HoodieCommitCallbackError(f"Kafka commit callback to topic {self.topic} "
                                            f"({self.producer_conf['bootstrap.servers']}) failed for "
                                            f"{message.commitTime}: {reason}")
        log.info("sent commit callback for %s to Kafka topic %s", message.commitTime, self.topic)
