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
from .consumer import ConsumeContext, MessagesContext, PullConsumer
from .context import JetStream
from .ordered import OrderedConsumer
from .pull import PullSubscription
from .push import JetStreamSubscription

__all__ = [
    "AccountInfo",
    "AckPolicy",
    "ConsumeContext",
    "ConsumerConfig",
    "ConsumerInfo",
    "DeliverPolicy",
    "DiscardPolicy",
    "JetStream",
    "JetStreamSubscription",
    "MessagesContext",
    "MsgMetadata",
    "OrderedConsumer",
    "PriorityPolicy",
    "PubAck",
    "PullConsumer",
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
