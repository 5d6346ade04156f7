"""HoodieCommitCallbackFactory: the callback `hoodie.write.commit.callback.class` names.

Hudi's class names select the built-in HTTP and Kafka callbacks; any other value is a Python class
(`package.module.ClassName`) constructed with the write's `HoodieConfig` and called with the message.
"""
from __future__ import annotations

import importlib

from storage.config import HoodieConfig
from storage.config import WriteCommitCallbackConfigKeys as CB
from storage.exception import HoodieCommitCallbackError

_BUILT_IN = {
    "org.apache.hudi.callback.impl.HoodieWriteCommitHttpCallback":
        "storage.callback.http_callback.HoodieWriteCommitHttpCallback",
    "org.apache.hudi.utilities.callback.kafka.HoodieWriteCommitKafkaCallback":
        "storage.callback.kafka_callback.HoodieWriteCommitKafkaCallback",
}


def create_commit_callback(config: HoodieConfig):
    """The configured callback object (with a `call(message)` method)."""
    name = config.get(CB.CALLBACK_CLASS_NAME)
    target = _BUILT_IN.get(name, name)
    module_name, _, class_name = target.rpartition(".")
    try:
        cls = getattr(importlib.import_module(module_name), class_name)
    except (ImportError, AttributeError, ValueError) as exc:
        raise HoodieCommitCallbackError(f"{CB.CALLBACK_CLASS_NAME.key}={name!r} is not a known callback or an "
                                        f"importable Python class: {exc}") from None
    return cls(config)
