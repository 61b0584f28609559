"""jetstream_sync: a synchronous, thread-based, blocking client for NATS and JetStream.

No asyncio anywhere::

    import jetstream_sync as nats

    with nats.connect("nats://127.0.0.1:4222") as nc:
        sub = nc.subscribe("greet.*")
        nc.publish("greet.joe", b"hello")
        print(sub.next_msg(timeout=1.0).data)
"""

from ._version import __version__
from .client import DEFAULT_URL, Client, connect
from .errors import (
    AuthorizationError,
    BadSubjectError,
    BadSubscriptionError,
    BadTimeoutError,
    CallbackError,
    ClientForkedError,
    ConnectionClosedError,
    ConnectionLostError,
    InvalidArgumentError,
    LameDuckModeError,
    MaxPayloadError,
    MessagesLostError,
    NATSError,
    NoRespondersError,
    NoServersError,
    OutboundBufferLimitError,
    PermissionsError,
    ProtocolError,
    SecureConnectionRequiredError,
    ServerError,
    SlowConsumerError,
    StaleConnectionError,
    TimeoutError,
)
from .msg import Headers, Msg
from .subscription import Subscription

__all__ = [
    "DEFAULT_URL",
    "AuthorizationError",
    "BadSubjectError",
    "BadSubscriptionError",
    "BadTimeoutError",
    "CallbackError",
    "Client",
    "ClientForkedError",
    "ConnectionClosedError",
    "ConnectionLostError",
    "Headers",
    "InvalidArgumentError",
    "LameDuckModeError",
    "MaxPayloadError",
    "MessagesLostError",
    "Msg",
    "NATSError",
    "NoRespondersError",
    "NoServersError",
    "OutboundBufferLimitError",
    "PermissionsError",
    "ProtocolError",
    "SecureConnectionRequiredError",
    "ServerError",
    "SlowConsumerError",
    "StaleConnectionError",
    "Subscription",
    "TimeoutError",
    "__version__",
    "connect",
]
