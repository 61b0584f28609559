"""JetStream: streams, consumers and publishing, on top of the core client.

``nc.jetstream()`` returns a :class:`JetStream`; the models mirror the server's JSON.
"""

from .ack import MsgMetadata, SequencePair
from .api import (
    AccountInfo,
    AckPolicy,
    ConsumerConfig,
    ConsumerInfo,
    DeliverPolicy,
    DiscardPolicy,
    PriorityPolicy,
    PubAck,
    RawStreamMsg,
    ReplayPolicy,
    RetentionPolicy,
    StorageType,
    StoreCompression,
    StreamConfig,
    StreamInfo,
)
from .context import JetStream
from .pull import PullSubscription

__all__ = [
    "AccountInfo",
    "AckPolicy",
    "ConsumerConfig",
    "ConsumerInfo",
    "DeliverPolicy",
    "DiscardPolicy",
    "JetStream",
    "MsgMetadata",
    "PriorityPolicy",
    "PubAck",
    "PullSubscription",
    "RawStreamMsg",
    "ReplayPolicy",
    "RetentionPolicy",
    "SequencePair",
    "StorageType",
    "StoreCompression",
    "StreamConfig",
    "StreamInfo",
]
