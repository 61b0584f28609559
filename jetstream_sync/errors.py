"""The whole exception tree of jetstream_sync.

Every error the package raises or reports through ``error_cb`` is one of these. Each
message names the problem (the subject, the limit, the server's words) and never a secret.

::

    NATSError
    ├── InvalidArgumentError (also ValueError)       bad input to a public call
    │   ├── BadSubjectError                           empty, whitespace, wildcard publish
    │   ├── BadTimeoutError                           negative, NaN or non-numeric timeout
    │   └── MaxPayloadError                           payload larger than the server allows
    ├── TimeoutError (also builtins.TimeoutError)     a deadline ran out
    ├── ConnectionClosedError                         the client is closed (or closing)
    ├── ConnectionLostError                           the connection dropped under a waiting call
    ├── NoServersError                                no server could be reached
    ├── AuthorizationError                            the server refused the credentials
    ├── SecureConnectionRequiredError                 TLS wanted on one side but not the other
    ├── StaleConnectionError                          pings went unanswered
    ├── LameDuckModeError                             the server announced it is leaving
    ├── ProtocolError                                 the server sent bytes we cannot parse
    ├── ServerError                                   -ERR from the server
    │   └── PermissionsError                          publish/subscribe not allowed
    ├── NoRespondersError                             a request had nobody listening (503)
    ├── SlowConsumerError                             a subscription queue overflowed
    ├── OutboundBufferLimitError                      reconnect buffer full
    ├── MessagesLostError                             messages discarded (close with unsent data)
    ├── BadSubscriptionError                          the subscription has ended
    ├── CallbackError                                 a user callback raised (reported, not raised)
    └── ClientForkedError                             a client used in a process it was not made in

Lower-layer failures (``OSError``, ``ssl.SSLError``, ``socket.timeout``) are translated into
this tree in one place, :func:`map_os_error`.
"""

from __future__ import annotations

import builtins
import ssl
from typing import Optional

__all__ = [
    "AuthorizationError",
    "BadSubjectError",
    "BadSubscriptionError",
    "BadTimeoutError",
    "CallbackError",
    "ClientForkedError",
    "ConnectionClosedError",
    "ConnectionLostError",
    "InvalidArgumentError",
    "LameDuckModeError",
    "MaxPayloadError",
    "MessagesLostError",
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
    "TimeoutError",
    "map_os_error",
]


class NATSError(Exception):
    """Root of every error raised by jetstream_sync."""


class InvalidArgumentError(NATSError, ValueError):
    """A public call was given an argument it cannot accept."""


class BadSubjectError(InvalidArgumentError):
    """A subject or queue name is empty, has whitespace, or has a wildcard where none may be."""


class BadTimeoutError(InvalidArgumentError):
    """A timeout is negative, NaN or not a number."""


class MaxPayloadError(InvalidArgumentError):
    """A payload is larger than the server's max_payload."""


class TimeoutError(NATSError, builtins.TimeoutError):
    """A blocking call's deadline ran out."""


class ConnectionClosedError(NATSError):
    """The client is closed, or was closed while the call waited."""


class ConnectionLostError(NATSError):
    """The connection dropped while a call was waiting on it.

    When reported through ``error_cb`` for a disconnect, ``unconfirmed`` counts the frames
    written to the dead socket after the server's last PONG: they may not have arrived.
    """

    def __init__(self, message: str, *, unconfirmed: int = 0):
        super().__init__(message)
        self.unconfirmed = unconfirmed


class NoServersError(NATSError):
    """No server in the pool could be reached."""


class AuthorizationError(NATSError):
    """The server refused the credentials."""


class SecureConnectionRequiredError(NATSError):
    """TLS is required by one side and not offered by the other."""


class StaleConnectionError(NATSError):
    """The server stopped answering pings."""


class LameDuckModeError(NATSError):
    """The server announced lame-duck mode: it will close its clients soon."""


class ProtocolError(NATSError):
    """The server sent bytes that are not valid NATS protocol."""


class ServerError(NATSError):
    """The server sent ``-ERR``."""


class PermissionsError(ServerError):
    """The account may not publish or subscribe to a subject."""


class NoRespondersError(NATSError):
    """A request had no responders (status 503)."""


class SlowConsumerError(NATSError):
    """A subscription's pending queue is full: messages were dropped.

    ``sid`` and ``subject`` name the subscription, ``dropped`` counts the drops so far.
    """

    def __init__(self, message: str, *, sid: int = 0, subject: str = "", dropped: int = 0):
        super().__init__(message)
        self.sid = sid
        self.subject = subject
        self.dropped = dropped


class OutboundBufferLimitError(NATSError):
    """Publishes buffered while disconnected would exceed the reconnect buffer."""


class MessagesLostError(NATSError):
    """Outbound messages were discarded (for example when closing with unsent data).

    ``count`` is how many.
    """

    def __init__(self, message: str, *, count: int = 0):
        super().__init__(message)
        self.count = count


class BadSubscriptionError(NATSError):
    """The subscription has ended (unsubscribed, drained, limit reached or closed)."""


class CallbackError(NATSError):
    """A user callback raised; the original exception is ``__cause__``."""


class ClientForkedError(NATSError):
    """A client was used in a process other than the one that created it (after fork)."""


def map_os_error(exc: BaseException, *, where: str) -> NATSError:
    """Translate a lower-layer failure into the public tree. The one place this happens."""
    if isinstance(exc, NATSError):
        return exc
    if isinstance(exc, ssl.SSLCertVerificationError):
        err: NATSError = SecureConnectionRequiredError(
            f"{where}: TLS certificate verification failed: "
            f"{getattr(exc, 'verify_message', None) or exc}"
        )
    elif isinstance(exc, ssl.SSLError):
        err = SecureConnectionRequiredError(
            f"{where}: TLS error: {getattr(exc, 'reason', None) or exc}"
        )
    elif isinstance(exc, builtins.TimeoutError):
        err = TimeoutError(f"{where}: timed out")
    elif isinstance(exc, ConnectionRefusedError):
        err = ConnectionLostError(f"{where}: connection refused")
    elif isinstance(exc, OSError):
        detail: Optional[str] = exc.strerror or str(exc) or type(exc).__name__
        err = ConnectionLostError(f"{where}: {detail}")
    else:
        err = NATSError(f"{where}: {type(exc).__name__}: {exc}")
    err.__cause__ = exc
    return err
