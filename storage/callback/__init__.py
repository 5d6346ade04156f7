"""Hudi's commit callbacks (`hoodie.write.commit.callback.*`): after each completed commit a message goes to an
external system — an HTTP endpoint (`HoodieWriteCommitHttpCallback`, Hudi's default) or a Kafka topic
(`HoodieWriteCommitKafkaCallback`) — so it can react (incremental pulls, cleaning, syncing) without polling.
"""
from storage.callback.factory import create_commit_callback  # noqa: F401
from storage.callback.message import HoodieWriteCommitCallbackMessage  # noqa: F401
