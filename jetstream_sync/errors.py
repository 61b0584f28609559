"""The whole exception tree of jetstream_sync.

Every error the package raises or reports through ``error_cb`` is one of these. Each
message names the problem (the subject, the limit, the server's words) and never a secret.

::

    NATSError (nats-py's Error: the same class)
    ├── InvalidArgumentError (also ValueError)       bad input to a public call
    │   ├── BadSubjectError                           empty, whitespace, wildcard publish
    │   ├── BadTimeoutError                           negative, NaN or non-numeric timeout
    │   ├── MaxPayloadError                           payload larger than the server allows
    │   ├── BadHeaderError                            a header key or value that cannot be sent
    │   ├── InvalidUserCredentialsError               a bad creds file or nkey seed
    │   ├── InvalidCallbackTypeError                  a callback that is not callable (or async)
    │   └── ServerNotInPoolError                      reconnect_to_server_handler chose a stranger
    ├── TimeoutError (also builtins.TimeoutError)     a deadline ran out
    │   ├── FetchTimeoutError                         a pull subscription's fetch got nothing
    │   ├── FlushTimeoutError                         flush() got no PONG in time
    │   └── DrainTimeoutError                         drain() did not finish in time
    ├── ConnectionClosedError                         the client is closed (or closing)
    │   └── ConnectionDrainingError                   a publish while drain() flushes publishes
    ├── ConnectionLostError                           the connection dropped under a waiting call
    │   ├── UnexpectedEOF                             the server closed the connection
    │   ├── ConnectionRefusedError (also the builtin) nothing listens at the address
    │   └── ConnectionReconnectingError               (nats-py's name; never raised here)
    ├── NoServersError                                no server could be reached
    ├── AuthorizationError                            the server refused the credentials
    ├── SecureConnectionRequiredError                 TLS wanted on one side but not the other
    │   ├── SecureConnRequiredError                   the server demands TLS
    │   ├── SecureConnWantedError                     we asked for TLS, the server offers none
    │   └── SecureConnFailedError (also ssl.SSLError) the TLS handshake failed
    ├── StaleConnectionError                          pings went unanswered
    ├── LameDuckModeError                             the server announced it is leaving
    ├── ProtocolError                                 the server sent bytes we cannot parse
    │   └── JsonParseError                            an INFO that is not a JSON object
    ├── ServerError                                   -ERR from the server
    │   └── PermissionsError                          publish/subscribe not allowed
    ├── NoRespondersError                             a request had nobody listening (503)
    ├── SlowConsumerError                             a subscription queue overflowed
    ├── OutboundBufferLimitError                      reconnect buffer full
    ├── MessagesLostError                             messages discarded (close with unsent data)
    ├── BadSubscriptionError                          the subscription has ended
    ├── CallbackError                                 a hook raised (reported, not raised)
    ├── ClientForkedError                             a client used in a process it was not made in
    ├── MsgAlreadyAckdError                           a second terminal ack of a message
    └── JetStreamError                                anything JetStream
        ├── JetStreamNotEnabledError                  no JetStream on the server or account
        ├── NoStreamResponseError                     a JS publish that no stream captured (503)
        ├── NotJSMessageError                         a message without a $JS.ACK reply
        ├── PublishStalledError (= TooManyStalledMsgsError)  publish_async window full too long
        ├── NoConsumerResponseError (also NoRespondersError)  a pull nobody answered (503)
        ├── NoHeartbeatError                          a consumer's idle heartbeats stopped coming
        ├── ConsumerSequenceMismatchError             a gap in a push consumer's sequence
        ├── DirectGetNotAllowedError (also NoRespondersError)  a direct get of a stream
        │                                             without allow_direct (nobody answers)
        ├── CounterError                              anything counters (js.counter(), ADR-49)
        │   ├── CounterNotEnabledError (also BadRequestError)  10168: no allow_msg_counter
        │   ├── CounterIncrementError (also BadRequestError)   10169-10171: not an increment
        │   ├── CounterBrokenError (also BadRequestError)      10172: a stored value unreadable
        │   └── CounterNotFoundError (also NotFoundError)      no counter on that subject yet
        ├── PullStatusError(status, description)      a pull ended by a status that is an error:
        │   ├── ConsumerDeletedError                  409 Consumer Deleted
        │   ├── ConsumerIsPushBasedError              409 Consumer is push based
        │   ├── PullLimitExceededError                409 Exceeded MaxWaiting / MaxRequest...
        │   ├── ConsumerLeadershipChangedError        409 Leadership Change, Server Shutdown
        │   ├── PinIdMismatchError                    423 (another client holds the pin)
        │   └── BadPullRequestError                   400 Bad Request (an APIError too)
        ├── KeyValueError                             anything Key-Value (js.key_value())
        │   ├── BucketNotFoundError (also ObjectStoreError, StreamNotFoundError)  no bucket
        │   ├── BadBucketError                        the stream KV_<bucket> is not a bucket
        │   ├── KeyNotFoundError (also NotFoundError)     no value for the key
        │   │   └── KeyDeletedError                   its latest entry is a delete/purge marker
        │   ├── KeyWrongLastSequenceError (also StreamWrongLastSequenceError)  lost a CAS race
        │   ├── NoKeysError                           keys() / history() found nothing
        │   ├── KeyHistoryTooLargeError (also InvalidArgumentError)  history above 64
        │   ├── KeyValueLimitMarkerTTLNotSupportedError   limit_marker_ttl on a server before 2.11
        │   ├── InvalidKeyError (also InvalidArgumentError)          a key KV cannot store
        │   └── InvalidBucketNameError (also ObjectStoreError, InvalidArgumentError)
        ├── BatchError                                anything of an atomic batch (ADR-50,
        │   │                                         js.batch_publish())
        │   ├── BatchClosedError                      add/commit after commit, discard, failure
        │   ├── BatchNotCommittedError                the with block ended without commit()
        │   ├── BatchOutcomeUnknownError              commit sent, no answer: stored whole or
        │   │                                         not at all (also ConnectionLost, Timeout)
        │   └── (BatchPublishError: also here)
        ├── FastIngestError                           anything of a fast-ingest batch (ADR-50,
        │   │                                         js.fast_publisher()): batch_id, batch_seq,
        │   │                                         pub_ack (what the server kept, if known)
        │   ├── FastIngestGapError                    messages that never reached the server
        │   ├── FastIngestMessageError                a message the server refused (.error)
        │   ├── FastIngestClosedError                 add/commit after commit() or close()
        │   └── (FastIngestPublishError: also here)
        └── APIError(code, err_code, description)     the server's API error, by err_code:
            ├── NotFoundError                         any other 404 (nats-py's name), and:
            │   ├── StreamNotFoundError               10059
            │   ├── ConsumerNotFoundError             10014
            │   ├── NoMessageFoundError               10037 (or status 404 on direct get)
            │   └── (KeyNotFoundError, ObjectNotFoundError: also here, as in nats-py)
            ├── BadRequestError                       any other 400 (nats-py's name), and:
            │   ├── StreamNameAlreadyInUseError       10058
            │   ├── StreamSubjectOverlapError         10065
            │   ├── StreamWrongLastSequenceError      10071 (KeyWrongLastSequenceError too)
            │   ├── StreamWrongLastMsgIdError         10070
            │   ├── StreamNotMatchError               10060 (expected stream)
            │   ├── ConsumerAlreadyExistsError        10148, 10013
            │   ├── ConsumerDoesNotExistError         10149 (update of a missing consumer)
            │   ├── MessageTooLargeError              10054
            │   ├── ConsumerInvalidResetError         10204 (reset_consumer against the policy)
            │   ├── PriorityGroupError                10159-10162, 10178, 10196, 10197 (ADR-42)
            │   ├── MessageTTLDisabledError           10166: a TTL on a stream without allow_msg_ttl
            │   ├── MessageScheduleError              10186, 10187, 10189-10192, 10203, 10212,
            │   │   │                                 10223: a message schedule refused (ADR-51)
            │   │   └── MessageSchedulesDisabledError 10188: the stream has no allow_msg_schedules
            │   ├── DurableSourceError                10213, 10215, 10216, 10218-10222: a source or
            │   │                                     mirror's own consumer refused (ADR-60)
            │   └── (the 400s of BatchPublishError and FastIngestPublishError below: also here)
            ├── BatchPublishError (also BatchError)   an atomic batch refused, nothing stored:
            │   ├── BatchNotEnabledError              10174: the stream lacks allow_atomic
            │   ├── BatchIncompleteError              10176: a message missing, or 10 s idle
            │   ├── BatchSequenceMissingError         10175
            │   ├── BatchUnsupportedHeaderError       10177 (Nats-Expected-Last-Msg-Id)
            │   ├── BatchIdInvalidError               10179 (longer than 64 characters)
            │   ├── BatchTooLargeError                10199 (the server's limit, 1000 by default)
            │   ├── BatchCommitInvalidError           10200 (Nats-Batch-Commit not 1 or eob)
            │   ├── BatchDuplicateMsgIdError          10201 (a Nats-Msg-Id seen before)
            │   │   (the eight above are BadRequestErrors too: 400)
            │   └── BatchTooManyInflightError         10210 (429): 50 open batches per stream
            ├── FastIngestPublishError (also FastIngestError)  a fast-ingest batch refused:
            │   ├── FastIngestNotEnabledError         10205: the stream lacks allow_batched
            │   ├── FastIngestInvalidPatternError     10206: a reply subject it cannot read
            │   ├── FastIngestInvalidBatchIdError     10207 (longer than 64 characters)
            │   ├── FastIngestUnknownBatchError       10208: ended, or 10 s idle
            │   │   (after a sent commit: FastIngestOutcomeUnknownError, a FastIngestError)
            │   │   (the four above are BadRequestErrors too: 400)
            │   └── FastIngestTooManyInflightError    10211 (429): 1,000 open per stream
            ├── ApiLevelError                         10185 (412): the server's JetStream API
            │                                         level is below what the feature needs
            ├── TooManyResultsError                   413: a multi-last direct get whose
            │                                         subjects match more than 1024 subjects
            ├── JetStreamServerError (also ServerError)   any 500
            └── ServiceUnavailableError               any 503 (cluster busy, no leader yet)

    Every err_code above is a 400 or a 404 in nats-server's errors.json (but the 429s 10210
    and 10211), so nats-py code's ``except BadRequestError`` / ``except NotFoundError``
    catches the same answers here.

Object Store (``js.object_store()``, ADR-20), a branch of JetStreamError::

    JetStreamError
    └── ObjectStoreError                              anything Object Store
        ├── InvalidBucketNameError (Key-Value's too)      not 1+ of A-Z a-z 0-9 _ -
        ├── InvalidObjectNameError (also InvalidArgumentError)  empty, or not a str
        ├── BucketNotFoundError (Key-Value's too)         no stream OBJ_<bucket>
        ├── ObjectNotFoundError (also NotFoundError)  no such object, or it is deleted
        │   └── ObjectDeletedError                    update_meta of a deleted or missing object
        ├── ObjectAlreadyExistsError                  a rename or link onto a live object
        ├── BadObjectMetaError                        stored object info that cannot be read
        ├── LinkIsABucketError                        get of a link to a whole bucket
        └── DigestMismatchError                       the data read is not what the info says

Lower-layer failures (``OSError``, ``ssl.SSLError``, ``socket.timeout``) are translated into
this tree in one place, :func:`map_os_error`.
"""

from __future__ import annotations

import builtins
import socket
import ssl
from typing import Any, Optional

__all__ = [
    "APIError",
    "ApiLevelError",
    "AuthorizationError",
    "BadHeaderError",
    "BadObjectMetaError",
    "BadPullRequestError",
    "BadRequestError",
    "BadSubjectError",
    "BadSubscriptionError",
    "BadTimeoutError",
    "BucketNotFoundError",
    "CallbackError",
    "ClientForkedError",
    "ConnectionClosedError",
    "ConnectionDrainingError",
    "ConnectionLostError",
    "ConnectionReconnectingError",
    "ConnectionRefusedError",
    "ConsumerAlreadyExistsError",
    "ConsumerDeletedError",
    "ConsumerDoesNotExistError",
    "ConsumerIsPushBasedError",
    "ConsumerLeadershipChangedError",
    "ConsumerNotFoundError",
    "ConsumerSequenceMismatchError",
    "DigestMismatchError",
    "DrainTimeoutError",
    "DurableSourceError",
    "Error",
    "FlushTimeoutError",
    "InvalidArgumentError",
    "InvalidBucketNameError",
    "InvalidCallbackTypeError",
    "InvalidObjectNameError",
    "InvalidUserCredentialsError",
    "JetStreamError",
    "JetStreamNotEnabledAPIError",
    "JetStreamNotEnabledError",
    "JetStreamServerError",
    "JsonParseError",
    "LameDuckModeError",
    "LinkIsABucketError",
    "MaxPayloadError",
    "MessageScheduleError",
    "MessageSchedulesDisabledError",
    "MessageTTLDisabledError",
    "MessageTooLargeError",
    "MessagesLostError",
    "MsgAlreadyAckdError",
    "NATSError",
    "NoConsumerResponseError",
    "NoHeartbeatError",
    "NoMessageFoundError",
    "NoRespondersError",
    "NoServersError",
    "NoStreamResponseError",
    "NotFoundError",
    "NotJSMessageError",
    "ObjectAlreadyExists",
    "ObjectAlreadyExistsError",
    "ObjectDeletedError",
    "ObjectNotFoundError",
    "ObjectOutcomeUnknownError",
    "ObjectStoreError",
    "OutboundBufferLimitError",
    "PermissionsError",
    "PinIdMismatchError",
    "PriorityGroupError",
    "ProtocolError",
    "PublishStalledError",
    "PullLimitExceededError",
    "PullStatusError",
    "SecureConnFailedError",
    "SecureConnRequiredError",
    "SecureConnWantedError",
    "SecureConnectionRequiredError",
    "ServerError",
    "ServerNotInPoolError",
    "ServiceUnavailableError",
    "SlowConsumerError",
    "StaleConnectionError",
    "StreamNameAlreadyInUseError",
    "StreamNotFoundError",
    "StreamNotMatchError",
    "StreamSubjectOverlapError",
    "StreamWrongLastMsgIdError",
    "StreamWrongLastSequenceError",
    "TimeoutError",
    "UnexpectedEOF",
    "api_error",
    "map_os_error",
]


class NATSError(Exception):
    """Root of every error raised by jetstream_sync."""


class InvalidArgumentError(NATSError, ValueError):
    """A public call was given an argument it cannot accept. ``description`` is nats-py's
    wording where nats-py raises its js ``Error`` for the same refusal (its text is read
    there), else the message."""

    def __init__(self, *args: object, description: Optional[str] = None) -> None:
        super().__init__(*args)
        self.description = (
            description if description is not None else (str(args[0]) if args else "")
        )


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


class ConnectionRefusedError(ConnectionLostError, builtins.ConnectionRefusedError):
    """The server's address refused the TCP connection (nothing listens there). Also the
    builtin ``ConnectionRefusedError``, which nats-py reports (in error_cb and
    ``last_error``) for the same failure."""


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
    """A hook raised (``on_unpinned``, ``reconnect_to_server_handler``, a dead-letter
    handler); the original exception is ``__cause__``. A message callback's exception
    reaches error_cb as itself, as in nats-py."""


class ClientForkedError(NATSError):
    """A client was used in a process other than the one that created it (after fork)."""


# --- nats-py's core error names (issue 20) ---------------------------------------------
# Each is raised where nats-py raises it, as a subclass of the error this package raised
# there before, so ``except nats.X`` and ``except jetstream_sync.<our name>`` both work.

Error = NATSError  # nats-py's root: the same class


class UnexpectedEOF(ConnectionLostError):
    """The server closed the connection (the socket read end-of-file)."""


class FlushTimeoutError(TimeoutError):
    """``flush()`` got no PONG in time."""


class DrainTimeoutError(TimeoutError):
    """``drain()`` did not finish in time (the client is closed anyway)."""


class SecureConnRequiredError(SecureConnectionRequiredError):
    """The server requires TLS and refused a plain connection."""


class SecureConnWantedError(SecureConnectionRequiredError):
    """TLS was asked for (``tls=`` or ``tls://``) but the server does not offer it."""


class SecureConnFailedError(SecureConnectionRequiredError, ssl.SSLError):
    """The TLS handshake failed (certificate verification, protocol mismatch, ...).

    Also an ``ssl.SSLError``, which is what nats-py raises there: ``except ssl.SSLError``
    ported from nats-py code catches it."""

    __str__ = Exception.__str__  # the message, not ssl.SSLError's tuple


class BadHeaderError(InvalidArgumentError):
    """A header key or value cannot be sent (``key`` names the header, when known)."""

    def __init__(self, message: str, *, key: str = ""):
        super().__init__(message)
        self.key = key


class JsonParseError(ProtocolError):
    """The server's INFO is not a JSON object."""


class ConnectionDrainingError(ConnectionClosedError):
    """A publish after ``drain()`` began to flush publishes: the client is closing."""


class ConnectionReconnectingError(ConnectionLostError):
    """nats-py raises it from ``drain()`` while reconnecting. Never raised here: our
    ``drain()`` while reconnecting ends the subscriptions locally and closes."""


class InvalidUserCredentialsError(InvalidArgumentError):
    """A credentials file or nkey seed that cannot be read or is not valid."""


class InvalidCallbackTypeError(InvalidArgumentError):
    """A callback (``cb=``, ``error_cb=`` ...) is not callable. nats-py demands coroutine
    functions; here any callable is right, and ``async def`` functions are refused."""


class ServerNotInPoolError(InvalidArgumentError):
    """``reconnect_to_server_handler`` chose a server that is not in the pool (reported
    through error_cb; the first eligible server is dialled instead)."""


class MsgAlreadyAckdError(NATSError):
    """A terminal ack (ack, ack_sync, nak, term) of a message that had one already, as in
    nats-py and nats.go (``Msg.is_acked`` tells whether one was sent)."""


# --- JetStream ---------------------------------------------------------------------------


class JetStreamError(NATSError):
    """Root of every JetStream error."""


class JetStreamNotEnabledError(JetStreamError):
    """The server (or the account, or the domain) has no JetStream."""


class NoStreamResponseError(JetStreamError, NoRespondersError):
    """A JetStream publish got no answer: no stream captures the subject (status 503)."""


class NotJSMessageError(JetStreamError):
    """The message did not come from JetStream (no ``$JS.ACK`` reply subject)."""


class PublishStalledError(JetStreamError):
    """publish_async: the window of outstanding acks stayed full for the stall wait."""


class NoConsumerResponseError(JetStreamError, NoRespondersError):
    """A pull request got no answer (status 503): the consumer or its stream is gone."""


class NoHeartbeatError(JetStreamError):
    """A pull asked for idle heartbeats and neither they nor messages came in time."""


class ConsumerSequenceMismatchError(JetStreamError):
    """A push subscription saw a consumer sequence skip: messages were missed."""


class PullStatusError(JetStreamError):
    """A pull request ended by a status message that is an error, not "no messages"."""

    def __init__(self, status: int, description: str, *, where: str = "") -> None:
        self.status = status
        self.description = description
        super().__init__(f"{where}: {status} {description}" if where else f"{status} {description}")


class ConsumerDeletedError(PullStatusError):
    """409 Consumer Deleted: the consumer was deleted while a pull was waiting."""


class ConsumerIsPushBasedError(PullStatusError):
    """409 Consumer is push based: pulls need a pull consumer (no deliver_subject)."""


class PullLimitExceededError(PullStatusError):
    """409 Exceeded MaxWaiting / MaxRequestBatch / MaxRequestExpires / MaxRequestMaxBytes."""


class ConsumerLeadershipChangedError(PullStatusError):
    """409 Leadership Change or Server Shutdown: the pull was cut; pulling again works."""


class PinIdMismatchError(PullStatusError):
    """423: a pull carried a pin of a priority group that another client holds now. The
    pull paths handle it themselves (the client becomes a standby); it is raised only for a
    consumer whose pin policy this client did not know about."""


class APIError(JetStreamError):
    """An error answer of the JetStream API: HTTP-like ``code``, server ``err_code``."""

    def __init__(
        self,
        code: int = 0,
        err_code: int = 0,
        description: str = "",
        *,
        subject: str = "",
        explanation: str = "",
    ) -> None:
        self.code = code
        self.err_code = err_code
        self.description = description  # the server's own words
        self.subject = subject  # the API subject, for programs; the message says it in words
        where = f" ({api_call_words(subject)})" if subject else ""
        # What went wrong and what to do, when the caller knows more than the server says.
        said = f"{explanation} (the server: {description})" if explanation else description
        super().__init__(f"{said} [code={code} err_code={err_code}]{where}")


class BadPullRequestError(PullStatusError, APIError):
    """400 Bad Request: the server refused the pull request's options. Also an
    :class:`APIError` (``code`` 400, ``description`` the server's words), as nats-py's
    fetch raises it."""

    def __init__(self, status: int, description: str, *, where: str = "") -> None:
        self.status = self.code = status
        self.err_code = 0
        self.description = description
        self.subject = ""
        JetStreamError.__init__(
            self, f"{where}: {status} {description}" if where else f"{status} {description}"
        )


# The API operations by their subject tokens, and the names their next tokens carry.
_API_CALLS = {
    "STREAM.CREATE": ("create stream", ("stream",)),
    "STREAM.UPDATE": ("update stream", ("stream",)),
    "STREAM.INFO": ("stream info", ("stream",)),
    "STREAM.DELETE": ("delete stream", ("stream",)),
    "STREAM.PURGE": ("purge stream", ("stream",)),
    "STREAM.NAMES": ("list stream names", ()),
    "STREAM.LIST": ("list streams", ()),
    "STREAM.MSG.GET": ("get message", ("stream",)),
    "STREAM.MSG.DELETE": ("delete message", ("stream",)),
    "DIRECT.GET": ("direct get", ("stream",)),
    "CONSUMER.CREATE": ("create consumer", ("stream", "consumer", "filter")),
    "CONSUMER.DURABLE.CREATE": ("create consumer", ("stream", "consumer")),
    "CONSUMER.INFO": ("consumer info", ("stream", "consumer")),
    "CONSUMER.DELETE": ("delete consumer", ("stream", "consumer")),
    "CONSUMER.NAMES": ("list consumer names", ("stream",)),
    "CONSUMER.LIST": ("list consumers", ("stream",)),
    "CONSUMER.PAUSE": ("pause consumer", ("stream", "consumer")),
    "CONSUMER.UNPIN": ("unpin consumer", ("stream", "consumer")),
    "CONSUMER.MSG.NEXT": ("pull", ("stream", "consumer")),
    "INFO": ("account info", ()),
}


def api_call_words(subject: str) -> str:
    """What a JetStream API subject asks, in words: ``$JS.API.CONSUMER.INFO.S.c`` is
    "consumer info, stream 'S', consumer 'c'". Errors name what the user asked for, not the
    internal subject it went on."""
    tokens = subject.split(".")
    try:
        start = tokens.index("API") + 1
    except ValueError:
        return subject
    for n in (3, 2, 1):
        op = ".".join(tokens[start : start + n])
        if op in _API_CALLS:
            words, names = _API_CALLS[op]
            rest = tokens[start + n :]
            parts = [words]
            for i, kind in enumerate(names):
                if i >= len(rest):
                    break
                value = ".".join(rest[i:]) if kind == "filter" else rest[i]
                parts.append(f"{kind} {value!r}")
            return ", ".join(parts)
    return "JetStream API call " + ".".join(tokens[start:])


class NotFoundError(APIError):
    """A 404 of the JetStream API (nats-py's name): the parent of the "not found" errors
    below, and what any other 404 answer is raised as."""


class BadRequestError(APIError):
    """10003: the server could not make sense of the request."""


class StreamNotFoundError(NotFoundError):
    """10059: stream not found."""


class StreamNameAlreadyInUseError(BadRequestError):
    """10058: a stream of that name exists with a different configuration."""


class StreamSubjectOverlapError(BadRequestError):
    """10065: the subjects overlap with an existing stream."""


class StreamWrongLastSequenceError(BadRequestError):
    """10071: expected_last_seq / expected_last_subject_seq did not hold."""


class StreamWrongLastMsgIdError(BadRequestError):
    """10070: expected_last_msg_id did not hold."""


class StreamNotMatchError(BadRequestError):
    """10060: expected_stream named another stream."""


class ConsumerNotFoundError(NotFoundError):
    """10014: consumer not found."""


class ConsumerAlreadyExistsError(BadRequestError):
    """10148 / 10013: a consumer of that name exists with a different configuration."""


class ConsumerDoesNotExistError(BadRequestError):
    """10149: an update named a consumer that does not exist."""


class NoMessageFoundError(NotFoundError):
    """10037: no message at that sequence or subject."""


class MessageTooLargeError(BadRequestError):
    """10054: the message exceeds the stream's max_msg_size."""


class PriorityGroupError(BadRequestError):
    """10159-10162, 10178, 10196, 10197: the server refused a priority-group setting or name
    (ADR-42) — e.g. unpinning a group the consumer does not have."""


class MessageTTLDisabledError(BadRequestError):
    """10166: a message with a TTL (``msg_ttl``, or a schedule's ``schedule_ttl``) for a
    stream that does not allow them."""

    def __str__(self) -> str:
        return f"{super().__str__()}: create or update the stream with allow_msg_ttl=True"


# What to do about each refusal of a message schedule (ADR-51), after the server's words.
_SCHEDULE_HINTS = {
    10186: "a mirror cannot allow_msg_schedules",
    10187: "a stream with sources cannot allow_msg_schedules",
    10188: "create or update the stream with allow_msg_schedules=True",
    10189: "the schedule must be '@at <RFC 3339 time>', '@every <1 s or more>', @hourly and "
    "the like, or a cron of six fields, seconds first, that fires within five years; a time "
    "zone goes with a cron only",
    10190: "schedule_target must be a literal subject of the same stream, other than the "
    "schedule's own",
    10191: 'schedule_ttl must be 1 s or more, or "never"',
    10192: "the only rollup a schedule takes is 'sub' (schedule_rollup=True)",
    10203: "schedule_source must be a literal subject of the same stream, other than the "
    "schedule's own and its target",
    10212: "cancel_schedule must name another subject, one that holds a schedule",
    10223: "schedule_time_zone must be a zone name the server's tzdata knows "
    "('Europe/Amsterdam', 'UTC'), not an offset",
}


class MessageScheduleError(BadRequestError):
    """10186, 10187, 10189-10192, 10203, 10212, 10223: the server refused a message schedule
    (ADR-51) or a stream config for one; ``err_code`` says which part, the message what to
    do."""

    def __str__(self) -> str:
        hint = _SCHEDULE_HINTS.get(self.err_code)
        return f"{super().__str__()}: {hint}" if hint else super().__str__()


class MessageSchedulesDisabledError(MessageScheduleError):
    """10188: a schedule published to a stream that does not allow them: create or update
    the stream with ``allow_msg_schedules=True``."""


# What to do about each refusal of durable sourcing (ADR-60), after the server's words.
_DURABLE_SOURCE_HINTS = {
    10213: "a mirror's consumer needs a valid name and a literal deliver_subject, and the "
    "mirror then takes no opt_start_seq, opt_start_time or filter_subject: configure those on "
    "the consumer",
    10215: "a source's consumer needs a valid name and a literal deliver_subject, and the "
    "source then takes no opt_start_seq, opt_start_time or filter_subject: configure those on "
    "the consumer",
    10216: "two sources cannot read through one consumer: give each its own",
    10218: "ack_policy=flow_control is for a push consumer: give it a deliver_subject",
    10219: "ack_policy=flow_control needs flow_control=True",
    10220: "ack_policy=flow_control needs max_ack_pending above 0",
    10221: "ack_policy=flow_control takes no ack_wait or backoff: flow control acks",
    10222: "ack_policy=flow_control takes no max_deliver (unlimited redeliveries)",
}


class DurableSourceError(BadRequestError):
    """10213, 10215, 10216, 10218-10222: the server refused a source or mirror that reads
    through a consumer of its own (ADR-60 durable sourcing: ``StreamSource.consumer``), or
    that consumer's config (``ack_policy=flow_control``); the message says what to do."""

    def __str__(self) -> str:
        hint = _DURABLE_SOURCE_HINTS.get(self.err_code)
        return f"{super().__str__()}: {hint}" if hint else super().__str__()


class ApiLevelError(APIError):
    """10185 (412): the feature needs a newer JetStream API level (ADR-44) than the server
    has. Raised by the server for a request carrying ``Nats-Required-Api-Level``, and by the
    client before sending anything when the level it read from the server is too low."""


class ServiceUnavailableError(APIError):
    """A 503 from the API: the cluster has no leader or is busy; worth retrying."""


_API_ERRORS = {
    10059: StreamNotFoundError,
    10058: StreamNameAlreadyInUseError,
    10065: StreamSubjectOverlapError,
    10071: StreamWrongLastSequenceError,
    10070: StreamWrongLastMsgIdError,
    10060: StreamNotMatchError,
    10014: ConsumerNotFoundError,
    10148: ConsumerAlreadyExistsError,
    10013: ConsumerAlreadyExistsError,
    10149: ConsumerDoesNotExistError,
    10037: NoMessageFoundError,
    10054: MessageTooLargeError,
    10003: BadRequestError,
    10185: ApiLevelError,
    **dict.fromkeys((10159, 10160, 10161, 10162, 10178, 10196, 10197), PriorityGroupError),
    10166: MessageTTLDisabledError,
    **dict.fromkeys((10213, 10215, 10216, *range(10218, 10223)), DurableSourceError),
    10188: MessageSchedulesDisabledError,
    **dict.fromkeys(
        (10186, 10187, 10189, 10190, 10191, 10192, 10203, 10212, 10223), MessageScheduleError
    ),
}


class JetStreamServerError(APIError, ServerError):
    """A 500 of the JetStream API (nats-py raises its js ``ServerError``; here it is also
    our ServerError, so either except catches it)."""


# By HTTP-like code, as nats-py maps them, when the err_code has no class of its own.
_BY_CODE: dict[int, type[APIError]] = {
    503: ServiceUnavailableError,
    404: NotFoundError,
    400: BadRequestError,
    500: JetStreamServerError,
}


def api_error(
    code: int, err_code: int, description: str, subject: str = "", explanation: str = ""
) -> APIError:
    """The APIError subclass for an error answer; the one place err_codes are mapped.
    ``explanation``: what the refusal means and what to do, said before the server's words."""
    if err_code in (10039, 10076):
        cls: type[APIError] = JetStreamNotEnabledAPIError
    else:
        cls = _API_ERRORS.get(err_code) or _BY_CODE.get(code, APIError)
    return cls(code, err_code, description, subject=subject, explanation=explanation)


class JetStreamNotEnabledAPIError(APIError, JetStreamNotEnabledError):
    """10039 / 10076: the API answered that JetStream is not enabled."""


# --- Key-Value ---------------------------------------------------------------------------

__all__ += [
    "BadBucketError",
    "InvalidKeyError",
    "KeyDeletedError",
    "KeyHistoryTooLargeError",
    "KeyNotFoundError",
    "KeyValueError",
    "KeyWrongLastSequenceError",
    "NoKeysError",
]


class KeyValueError(JetStreamError):
    """Root of the Key-Value store's errors (``jetstream/kv.py``)."""


class ObjectStoreError(JetStreamError):
    """Root of every Object Store error (``jetstream/object_store.py``)."""


# Shared by Key-Value and the Object Store, as nats-py shares them: a bucket is a stream.


class BucketNotFoundError(KeyValueError, ObjectStoreError, StreamNotFoundError):
    """No bucket of that name: its stream (``KV_<bucket>`` or ``OBJ_<bucket>``) does not
    exist (10059)."""


class InvalidBucketNameError(KeyValueError, ObjectStoreError, InvalidArgumentError):
    """A bucket name outside ``[a-zA-Z0-9_-]+``."""


class BadBucketError(KeyValueError):
    """The stream ``KV_<bucket>`` exists but is not a Key-Value bucket."""


class _ClientSideNotFound(NotFoundError):
    """A "not found" the client decides (no API answer to quote), under NotFoundError as
    nats-py has it, so ``except NotFoundError`` catches it there and here: code 404."""

    def __init__(self, message: str) -> None:
        Exception.__init__(self, message)
        self.code, self.err_code, self.description, self.subject = 404, 0, message, ""


class KeyNotFoundError(KeyValueError, _ClientSideNotFound):
    """The key has no value: never written, expired, purged, or (``get(key, revision=)``)
    that revision belongs to another key. ``entry`` and ``op`` are set by KeyDeletedError."""

    def __init__(self, message: str, *, entry: Any = None, op: Optional[str] = None) -> None:
        _ClientSideNotFound.__init__(self, message)
        self.entry = entry  # a kv.Entry (this module cannot name jetstream/ types)
        self.op = op


class KeyDeletedError(KeyNotFoundError):
    """The key's latest entry is a marker: ``op`` is ``"DEL"`` (delete) or ``"PURGE"``, and
    ``entry`` the marker itself (its ``revision`` is what ``update(last=)`` expects)."""


class KeyWrongLastSequenceError(KeyValueError, StreamWrongLastSequenceError):
    """create / update / delete(last=) found another revision than the one it expected:
    another writer was first (err_code 10071, or 10164)."""


class NoKeysError(KeyValueError):
    """keys() or history() found no key."""


class KeyHistoryTooLargeError(KeyValueError, InvalidArgumentError):
    """A bucket's history above 64 values per key."""


class InvalidKeyError(KeyValueError, InvalidArgumentError):
    """A key KV cannot store: empty, a leading or trailing dot, an empty token, or a
    character outside ``-/_=.a-zA-Z0-9`` (and, except in watch and keys patterns, ``*``/``>``)."""


# --- Object Store ------------------------------------------------------------------------


class InvalidObjectNameError(ObjectStoreError, InvalidArgumentError):
    """An object name is empty or not a str."""


class ObjectNotFoundError(ObjectStoreError, _ClientSideNotFound):
    """The bucket has no object of that name, or the object is deleted."""


class ObjectDeletedError(ObjectNotFoundError):
    """update_meta of an object that is deleted or does not exist."""


class ObjectAlreadyExistsError(ObjectStoreError):
    """A rename or a link would replace an object that exists and is not deleted."""


ObjectAlreadyExists = ObjectAlreadyExistsError  # nats-py's name


class ObjectOutcomeUnknownError(ObjectStoreError, ConnectionLostError, TimeoutError):
    """A put whose info was sent but not acknowledged (the connection dropped, or the ack
    did not come), and the info the server holds could not be read afterwards: the put
    may have stored the new object or left the old one. Nothing was purged; the message
    says how to check (``get_info(name).nuid``). Also a ConnectionLostError and a
    TimeoutError, so that handlers of the error that cut the put still catch it."""


class BadObjectMetaError(ObjectStoreError):
    """An object's stored info is not valid JSON, or lacks what an object needs."""


class LinkIsABucketError(ObjectStoreError):
    """get() of a link to a whole bucket: there is no one object to read."""


class DigestMismatchError(ObjectStoreError):
    """The data read does not match the object's size or SHA-256 digest."""


def map_os_error(exc: BaseException, *, where: str) -> NATSError:
    """Translate a lower-layer failure into the public tree. The one place this happens."""
    if isinstance(exc, NATSError):
        return exc
    if isinstance(exc, ssl.SSLCertVerificationError):
        err: NATSError = SecureConnFailedError(
            f"{where}: TLS certificate verification failed: "
            f"{getattr(exc, 'verify_message', None) or exc}"
        )
    elif isinstance(exc, ssl.SSLError):
        err = SecureConnFailedError(f"{where}: TLS error: {getattr(exc, 'reason', None) or exc}")
    elif isinstance(exc, (builtins.TimeoutError, socket.timeout)):  # distinct before 3.10
        err = TimeoutError(f"{where}: timed out")
    elif isinstance(exc, builtins.ConnectionRefusedError):
        err = ConnectionRefusedError(f"{where}: connection refused")
        err.errno = exc.errno  # as the builtin's (str() stays ours)
    elif isinstance(exc, OSError):
        detail: Optional[str] = exc.strerror or str(exc) or type(exc).__name__
        err = ConnectionLostError(f"{where}: {detail}")
    else:
        err = NATSError(f"{where}: {type(exc).__name__}: {exc}")
    err.__cause__ = exc
    return err


# --- nats-py's JetStream error names (issue 20) --------------------------------------------
#
# NotFoundError, nats-py's parent of every 404, is defined above StreamNotFoundError (it is
# their base class); the rest of nats.js.errors' names that this tree did not have are here.

__all__ += [
    "ConsumerInvalidResetError",
    "FetchTimeoutError",
    "KeyValueLimitMarkerTTLNotSupportedError",
    "TooManyStalledMsgsError",
]


class FetchTimeoutError(TimeoutError):
    """A pull subscription's ``fetch`` got no message within its timeout. A
    :class:`TimeoutError` (and so a builtin ``TimeoutError``): ``except nats.TimeoutError``
    catches it as before."""


TooManyStalledMsgsError = PublishStalledError  # nats-py's name: publish_async's full window


class ConsumerInvalidResetError(BadRequestError):
    """10204: ``reset_consumer`` asked for a sequence its consumer's deliver policy does not
    allow (below ``opt_start_seq``, say)."""


_API_ERRORS[10204] = ConsumerInvalidResetError


class KeyValueLimitMarkerTTLNotSupportedError(KeyValueError):
    """A bucket's ``limit_marker_ttl`` needs nats-server 2.11 or later."""


_API_CALLS["CONSUMER.RESET"] = ("reset consumer", ("stream", "consumer"))


# --- Atomic batch publish (ADR-50, jetstream/batch.py) ------------------------------------

__all__ += [
    "BatchClosedError",
    "BatchCommitInvalidError",
    "BatchDuplicateMsgIdError",
    "BatchError",
    "BatchIdInvalidError",
    "BatchIncompleteError",
    "BatchNotCommittedError",
    "BatchNotEnabledError",
    "BatchOutcomeUnknownError",
    "BatchPublishError",
    "BatchSequenceMissingError",
    "BatchTooLargeError",
    "BatchTooManyInflightError",
    "BatchUnsupportedHeaderError",
]


class BatchError(JetStreamError):
    """Root of the atomic batch's errors (``js.batch_publish()``, ADR-50). Each but
    BatchClosedError means the batch was abandoned: nothing of it is stored."""


class BatchClosedError(BatchError):
    """``add`` or ``commit`` on a batch that was committed, discarded, or failed."""


class BatchOutcomeUnknownError(BatchError, ConnectionLostError, TimeoutError):
    """The commit of an atomic batch was sent but its answer never came (the connection
    dropped, or the wait timed out): the batch is stored whole or not at all, and which
    is unknown. The message says how to find out (the stream's last message carries
    ``Nats-Batch-Id``). Also a ConnectionLostError and a TimeoutError, so that handlers
    of the error that cut the commit still catch it."""


class BatchNotCommittedError(BatchError):
    """The ``with js.batch_publish()`` block ended without ``commit()``: the batch was
    abandoned, none of its messages is stored."""


class BatchPublishError(BatchError, APIError):
    """The server refused an atomic batch: none of its messages is stored."""


class BatchNotEnabledError(BatchPublishError, BadRequestError):
    """10174: the stream does not allow atomic batches (its config lacks allow_atomic)."""


class BatchIncompleteError(BatchPublishError, BadRequestError):
    """10176: the server abandoned the batch: one of its messages is missing (refused, or
    lost on the way), or the batch was idle for longer than the server waits (10 s)."""


class BatchSequenceMissingError(BatchPublishError, BadRequestError):
    """10175: a batch message without ``Nats-Batch-Sequence``."""


class BatchUnsupportedHeaderError(BatchPublishError, BadRequestError):
    """10177: a header batches cannot have (``Nats-Expected-Last-Msg-Id``)."""


class BatchIdInvalidError(BatchPublishError, BadRequestError):
    """10179: a batch id longer than 64 characters."""


class BatchTooLargeError(BatchPublishError, BadRequestError):
    """10199: more messages than the server allows in one batch (1000 by default)."""


class BatchCommitInvalidError(BatchPublishError, BadRequestError):
    """10200: a ``Nats-Batch-Commit`` that is neither ``1`` nor ``eob``."""


class BatchDuplicateMsgIdError(BatchPublishError, BadRequestError):
    """10201: a ``Nats-Msg-Id`` that another message of the batch has, or one the stream
    stored within its duplicate window."""


class BatchTooManyInflightError(BatchPublishError):
    """10210 (429): the stream has as many open batches as the server allows (50 per
    stream, 1000 per server by default); one is freed by a commit or an abandon."""


# --- batch direct get (ADR-31) ------------------------------------------------------------

__all__ += ["DirectGetNotAllowedError", "TooManyResultsError"]


class DirectGetNotAllowedError(JetStreamError, NoRespondersError):
    """A direct get nobody answered because the stream does not allow direct gets
    (``allow_direct``). Also a NoRespondersError: that is what the request itself met."""


class TooManyResultsError(APIError):
    """413: a multi-last direct get whose subjects match more than the 1024 subjects the
    server serves in one request (``code`` 413, ``err_code`` 0: a status, not an API error)."""


# --- counters (ADR-49) --------------------------------------------------------------------

__all__ += [
    "CounterBrokenError",
    "CounterError",
    "CounterIncrementError",
    "CounterNotEnabledError",
    "CounterNotFoundError",
]


class CounterError(JetStreamError):
    """Root of the counters' errors (``js.counter()``, ``jetstream/counter.py``)."""


class _CounterRefusal(CounterError, BadRequestError):
    """A counter refusal: the server's answer (an err_code of its own), or the same finding
    made here before anything is sent (:meth:`found`: code 400, the server's err_code)."""

    ERR_CODE = 0

    @classmethod
    def found(cls, message: str) -> _CounterRefusal:
        err = cls.__new__(cls)
        Exception.__init__(err, message)
        err.code, err.err_code, err.description, err.subject = 400, cls.ERR_CODE, message, ""
        return err


class CounterNotEnabledError(_CounterRefusal):
    """10168: an increment (``Nats-Incr``) sent to a stream without ``allow_msg_counter``;
    also ``js.counter()`` of such a stream. The setting is fixed when the stream is made."""

    ERR_CODE = 10168


class CounterIncrementError(_CounterRefusal):
    """10169-10171: a message a counter stream cannot count: one without ``Nats-Incr`` (a
    plain publish to a counter subject), one with a payload, or an increment that is not an
    integer (or comes with a header counters refuse, such as an expected last sequence)."""

    ERR_CODE = 10171


class CounterBrokenError(_CounterRefusal):
    """10172: the counter's stored value cannot be read (not ``{"val": "<integer>"}``)."""

    ERR_CODE = 10172


class CounterNotFoundError(CounterError, _ClientSideNotFound):
    """No counter on the subject: nothing was ever added to it (or it was purged). As
    orbit.go's ``ErrNoCounterForSubject``: a missing counter is an error, not 0."""


_API_ERRORS.update(
    {
        10174: BatchNotEnabledError,
        10176: BatchIncompleteError,
        10175: BatchSequenceMissingError,
        10177: BatchUnsupportedHeaderError,
        10179: BatchIdInvalidError,
        10199: BatchTooLargeError,
        10200: BatchCommitInvalidError,
        10201: BatchDuplicateMsgIdError,
        10210: BatchTooManyInflightError,
    }
)


# --- Fast-ingest batches (ADR-50, jetstream/fast_ingest.py) -------------------------------

__all__ += [
    "FastIngestClosedError",
    "FastIngestError",
    "FastIngestGapError",
    "FastIngestInvalidBatchIdError",
    "FastIngestInvalidPatternError",
    "FastIngestMessageError",
    "FastIngestNotEnabledError",
    "FastIngestOutcomeUnknownError",
    "FastIngestPublishError",
    "FastIngestTooManyInflightError",
    "FastIngestUnknownBatchError",
]


class FastIngestError(JetStreamError):
    """Root of the fast-ingest batch's errors (``js.fast_publisher()``, ADR-50). Fast
    ingest is not atomic: what the server stored before the error stays stored.
    ``batch_id`` and ``batch_seq`` (the batch sequence the error is about) are set where
    known; ``pub_ack`` is the server's final PubAck of a batch that stopped, when it came
    (``pub_ack.batch_size``: how many of the batch's sequences it took)."""

    batch_id = ""
    batch_seq = 0
    pub_ack: Optional[Any] = None  # a jetstream.api.PubAck (not imported: no cycle)


class FastIngestGapError(FastIngestError):
    """Messages ``last_seq`` up to ``batch_seq - 1`` never reached the server: it saw
    ``batch_seq`` next (ADR-50's BatchFlowGap)."""

    def __init__(self, message: str, batch_id: str, last_seq: int, batch_seq: int) -> None:
        super().__init__(message)
        self.batch_id, self.last_seq, self.batch_seq = batch_id, last_seq, batch_seq


class FastIngestMessageError(FastIngestError):
    """The server refused the batch's message ``batch_seq`` (ADR-50's BatchFlowErr): an
    expectation such as ``expected_last_seq`` failed. ``error`` is the APIError the same
    refusal of ``js.publish`` raises (a StreamWrongLastSequenceError, say)."""

    def __init__(self, message: str, batch_id: str, batch_seq: int, error: APIError) -> None:
        super().__init__(message)
        self.batch_id, self.batch_seq, self.error = batch_id, batch_seq, error


class FastIngestClosedError(FastIngestError):
    """``add`` or ``commit`` on a batch that was committed or closed."""


class FastIngestPublishError(FastIngestError, APIError):
    """The server refused a fast-ingest batch (or its first message): nothing more of it is
    stored."""


class FastIngestNotEnabledError(FastIngestPublishError, BadRequestError):
    """10205: the stream does not take fast-ingest batches: set ``allow_batched=True`` on it
    (nats-server 2.14 or later)."""


class FastIngestInvalidPatternError(FastIngestPublishError, BadRequestError):
    """10206: the server could not read a fast-ingest reply subject (its flow, gap mode,
    sequence or operation)."""


class FastIngestInvalidBatchIdError(FastIngestPublishError, BadRequestError):
    """10207: a batch id (the last token of the batch's inbox) longer than 64 characters."""


class FastIngestOutcomeUnknownError(FastIngestError, ConnectionLostError, TimeoutError):
    """A fast-ingest commit was sent and its PubAck never came: asked again, the server no
    longer knows the batch (it ended: committed, or dropped after 10 s idle), or nothing
    answered within ack_timeout. What it kept is unknown to the client; the message says
    how to check (the stream's last sequence). Do not send the batch again blind: the
    commit may still be on its way, so resend only messages with a msg_id. Also a
    ConnectionLostError and a TimeoutError."""


class FastIngestUnknownBatchError(FastIngestPublishError, BadRequestError):
    """10208: a message for a batch the server does not know: it ended, or it was dropped
    after 10 s without a message."""


class FastIngestTooManyInflightError(FastIngestPublishError):
    """10211 (429): the stream (1,000) or the server (50,000) has as many fast-ingest
    batches open as it allows; worth retrying once some end."""


_API_ERRORS.update(
    {
        10205: FastIngestNotEnabledError,
        10206: FastIngestInvalidPatternError,
        10207: FastIngestInvalidBatchIdError,
        10208: FastIngestUnknownBatchError,
        10211: FastIngestTooManyInflightError,
        10168: CounterNotEnabledError,
        10169: CounterIncrementError,
        10170: CounterIncrementError,
        10171: CounterIncrementError,
        10172: CounterBrokenError,
    }
)


# --- nats-py's deprecated nats.aio.errors names --------------------------------------------
# nats-py 2.x still ships them (deprecated since 2.0) as subclasses of its errors, which its
# client never raises: ``except ErrTimeout`` catches nothing there, and nothing here. Ported
# code imports them from here (``from jetstream_sync.errors import ErrTimeout``).

__all__ += [
    "ErrAuthorization",
    "ErrBadSubject",
    "ErrBadSubscription",
    "ErrBadTimeout",
    "ErrConnectionClosed",
    "ErrConnectionDraining",
    "ErrConnectionReconnecting",
    "ErrDrainTimeout",
    "ErrInvalidCallbackType",
    "ErrInvalidUserCredentials",
    "ErrJsonParse",
    "ErrMaxPayload",
    "ErrNoServers",
    "ErrSecureConnFailed",
    "ErrSecureConnRequired",
    "ErrSecureConnWanted",
    "ErrSlowConsumer",
    "ErrStaleConnection",
    "ErrTimeout",
    "NatsError",
]


class NatsError(Error):
    """Deprecated: nats-py\'s ``nats.aio.errors`` name; use :class:`Error`."""


class ErrConnectionClosed(ConnectionClosedError):
    """Deprecated: nats-py\'s ``nats.aio.errors`` name; use :class:`ConnectionClosedError`."""


class ErrDrainTimeout(DrainTimeoutError):
    """Deprecated: nats-py\'s ``nats.aio.errors`` name; use :class:`DrainTimeoutError`."""


class ErrInvalidUserCredentials(InvalidUserCredentialsError):
    """Deprecated: nats-py\'s ``nats.aio.errors`` name; use :class:`InvalidUserCredentialsError`."""


class ErrInvalidCallbackType(InvalidCallbackTypeError):
    """Deprecated: nats-py\'s ``nats.aio.errors`` name; use :class:`InvalidCallbackTypeError`."""


class ErrConnectionReconnecting(ConnectionReconnectingError):
    """Deprecated: nats-py\'s ``nats.aio.errors`` name; use :class:`ConnectionReconnectingError`."""


class ErrConnectionDraining(ConnectionDrainingError):
    """Deprecated: nats-py\'s ``nats.aio.errors`` name; use :class:`ConnectionDrainingError`."""


class ErrMaxPayload(MaxPayloadError):
    """Deprecated: nats-py\'s ``nats.aio.errors`` name; use :class:`MaxPayloadError`."""


class ErrStaleConnection(StaleConnectionError):
    """Deprecated: nats-py\'s ``nats.aio.errors`` name; use :class:`StaleConnectionError`."""


class ErrJsonParse(JsonParseError):
    """Deprecated: nats-py\'s ``nats.aio.errors`` name; use :class:`JsonParseError`."""


class ErrSecureConnRequired(SecureConnRequiredError):
    """Deprecated: nats-py\'s ``nats.aio.errors`` name; use :class:`SecureConnRequiredError`."""


class ErrSecureConnWanted(SecureConnWantedError):
    """Deprecated: nats-py\'s ``nats.aio.errors`` name; use :class:`SecureConnWantedError`."""


class ErrSecureConnFailed(SecureConnFailedError):
    """Deprecated: nats-py\'s ``nats.aio.errors`` name; use :class:`SecureConnFailedError`."""


class ErrBadSubscription(BadSubscriptionError):
    """Deprecated: nats-py\'s ``nats.aio.errors`` name; use :class:`BadSubscriptionError`."""


class ErrBadSubject(BadSubjectError):
    """Deprecated: nats-py\'s ``nats.aio.errors`` name; use :class:`BadSubjectError`."""


class ErrSlowConsumer(SlowConsumerError):
    """Deprecated: nats-py\'s ``nats.aio.errors`` name; use :class:`SlowConsumerError`."""


class ErrTimeout(TimeoutError):
    """Deprecated: nats-py\'s ``nats.aio.errors`` name; use :class:`TimeoutError`."""


class ErrBadTimeout(BadTimeoutError):
    """Deprecated: nats-py\'s ``nats.aio.errors`` name; use :class:`BadTimeoutError`."""


class ErrAuthorization(AuthorizationError):
    """Deprecated: nats-py\'s ``nats.aio.errors`` name; use :class:`AuthorizationError`."""


class ErrNoServers(NoServersError):
    """Deprecated: nats-py\'s ``nats.aio.errors`` name; use :class:`NoServersError`."""
