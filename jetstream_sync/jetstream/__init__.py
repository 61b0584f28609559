"""JetStream: streams, consumers and publishing, on top of the core client.

``nc.jetstream()`` returns a :class:`JetStream`; the models mirror the server's JSON.
"""

from .ack import MsgMetadata, SequencePair
from .advisories import (
    AdvisoryWatcher,
    ConsumerPinnedAdvisory,
    ConsumerUnpinnedAdvisory,
    MaxDeliveriesAdvisory,
    MsgTerminatedAdvisory,
)
from .api import (
    AccountInfo,
    AckPolicy,
    ConsumerConfig,
    ConsumerInfo,
    ConsumerPause,
    ConsumerReset,
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
    StreamPurgeRequest,
    StreamsListIterator,
)
from .consumer import ConsumeContext, MessagesContext, PullConsumer
from .context import JetStream
from .counter import Counter, CounterEntry, CounterValue
from .deadletter import DeadLetter, DeadLetters
from .kv import BucketStatus, Entry, KeyValue, KeyValueConfig, KeyWatcher
from .object_store import (
    ObjectInfo,
    ObjectLink,
    ObjectMeta,
    ObjectMetaOptions,
    ObjectResult,
    ObjectStore,
    ObjectStoreConfig,
    ObjectStoreStatus,
    ObjectWatcher,
)
from .ordered import OrderedConsumer
from .pull import PullSubscription
from .push import JetStreamSubscription

__all__ = [
    "AccountInfo",
    "AckPolicy",
    "AdvisoryWatcher",
    "ConsumeContext",
    "ConsumerConfig",
    "ConsumerInfo",
    "ConsumerPause",
    "ConsumerPinnedAdvisory",
    "ConsumerReset",
    "ConsumerUnpinnedAdvisory",
    "Counter",
    "CounterEntry",
    "CounterValue",
    "DeadLetter",
    "DeadLetters",
    "DeliverPolicy",
    "DiscardPolicy",
    "JetStream",
    "JetStreamSubscription",
    "MaxDeliveriesAdvisory",
    "MessagesContext",
    "MsgMetadata",
    "MsgTerminatedAdvisory",
    "ObjectInfo",
    "ObjectLink",
    "ObjectMeta",
    "ObjectMetaOptions",
    "ObjectResult",
    "ObjectStore",
    "ObjectStoreConfig",
    "ObjectStoreStatus",
    "ObjectWatcher",
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
    "StreamPurgeRequest",
    "StreamsListIterator",
]

# Key-Value
__all__ += ["BucketStatus", "Entry", "KeyValue", "KeyValueConfig", "KeyWatcher"]

# Atomic batch publish (ADR-50): js.batch_publish()
from .batch import AtomicBatch  # noqa: E402

__all__ += ["AtomicBatch"]
