"""JetStream message metadata and acknowledgements (ADR-15's "JS Ack" rules).

A JetStream message is one whose reply subject is a ``$JS.ACK`` subject. Two forms exist:

* v1, 9 tokens: ``$JS.ACK.<stream>.<consumer>.<delivered>.<sseq>.<cseq>.<ts>.<pending>``
* v2, 11 or more: ``$JS.ACK.<domain>.<account hash>.<stream>.<consumer>.<delivered>.<sseq>.
  <cseq>.<ts>.<pending>[.<more>...]`` where a domain of ``_`` means none and tokens after the
  eleventh are ignored (the server may add more).

An ack is a publish to that subject: ``+ACK``, ``-NAK`` (optionally with a delay), ``+TERM``
(optionally with a reason) are terminal; ``+WPI`` (work in progress) is not. After a terminal
ack has been published, another terminal one on the same message raises MsgAlreadyAckdError
(as nats-py and nats.go do) and ``+WPI`` does nothing; on a consumer with ack policy ``none``
every ack call does nothing.

A core module: ``Msg``'s ack methods and ``metadata`` are built on it, and the core imports
nothing from ``jetstream/``. ``jetstream/ack.py`` re-exports its names.
"""

from __future__ import annotations

import datetime as _dt
import json
from dataclasses import dataclass
from typing import TYPE_CHECKING, Optional, Tuple

from . import errors
from ._nanotime import NanoDatetime
from ._timeouts import check_timeout

if TYPE_CHECKING:  # pragma: no cover
    from .msg import Msg

__all__ = [
    "ACK",
    "ACK_DONE",
    "ACK_NONE",
    "ACK_OPEN",
    "NAK",
    "TERM",
    "WPI",
    "MsgMetadata",
    "SequencePair",
    "ack_sync",
    "nak_payload",
    "parse_metadata",
    "send_ack",
    "sequences",
    "term_payload",
]

ACK, NAK, TERM, WPI = b"+ACK", b"-NAK", b"+TERM", b"+WPI"

# Msg._ack states (Msg.ack inlines the first two as literals: keep them 0 and 1)
ACK_OPEN = 0  # no terminal ack sent yet
ACK_DONE = 1  # a terminal ack was published: ignore further acks
ACK_NONE = 2  # the consumer's ack policy is none: ignore every ack


@dataclass(frozen=True)
class SequencePair:
    """Where a message stands: in the consumer and in the stream."""

    consumer: int
    stream: int


@dataclass(frozen=True)
class MsgMetadata:
    """What the ``$JS.ACK`` reply subject says about a JetStream message."""

    sequence: SequencePair
    num_delivered: int
    num_pending: int
    timestamp: _dt.datetime
    stream: str
    consumer: str
    domain: Optional[str] = None


def sequences(reply: str) -> Optional[Tuple[int, int]]:
    """(consumer sequence, stream sequence) of a ``$JS.ACK`` subject, or None when it is
    not one: what push subscriptions check on every message, without parse_metadata's
    timestamp and objects."""
    tokens = reply.split(".")
    n = len(tokens)
    if n == 9:
        c, s = tokens[6], tokens[5]
    elif n > 10:
        c, s = tokens[8], tokens[7]
    else:
        return None
    if tokens[1] != "ACK" or not c.isdigit() or not s.isdigit():
        return None
    return int(c), int(s)


def parse_metadata(reply: str) -> MsgMetadata:
    """Parse a ``$JS.ACK`` subject (v1 or v2); NotJSMessageError for anything else."""
    tokens = reply.split(".")
    n = len(tokens)
    if n < 9 or tokens[0] != "$JS" or tokens[1] != "ACK" or n == 10:
        raise errors.NotJSMessageError(_not_js(reply))
    if n == 9:
        domain: Optional[str] = None
        stream, consumer = tokens[2], tokens[3]
        numbers = tokens[4:9]
    else:
        domain = None if tokens[2] == "_" else tokens[2]
        stream, consumer = tokens[4], tokens[5]
        numbers = tokens[6:11]
    try:
        delivered, sseq, cseq, ts, pending = (int(t) for t in numbers)
    except ValueError:
        raise errors.NotJSMessageError(
            _not_js(reply) + " (a number field is not a number)"
        ) from None
    if min(delivered, sseq, cseq, ts, pending) < 0 or not stream or not consumer:
        raise errors.NotJSMessageError(_not_js(reply))
    seconds, nanos = divmod(ts, 1_000_000_000)
    try:
        stamp = _dt.datetime.fromtimestamp(seconds, _dt.timezone.utc)
    except (OverflowError, ValueError, OSError):  # past what datetime or time_t can hold
        raise errors.NotJSMessageError(_not_js(reply) + " (timestamp out of range)") from None
    timestamp = NanoDatetime(
        stamp.year,
        stamp.month,
        stamp.day,
        stamp.hour,
        stamp.minute,
        stamp.second,
        nanos // 1000,
        tzinfo=_dt.timezone.utc,
    )
    timestamp.nanosecond = nanos % 1000
    return MsgMetadata(
        SequencePair(cseq, sseq), delivered, pending, timestamp, stream, consumer, domain
    )


def _not_js(reply: str) -> str:
    shown = reply if len(reply) <= 120 else reply[:117] + "..."
    return f"not a JetStream message: reply subject {shown!r} is not a $JS.ACK subject"


def nak_payload(delay: Optional[float]) -> bytes:
    """The body of a -NAK: with ``delay`` (seconds), the redelivery delay in nanoseconds as JSON.
    BadTimeoutError on a bad delay."""
    if delay is None:
        return NAK
    seconds = check_timeout(delay, "nak delay")
    return NAK + b" " + json.dumps({"delay": round(seconds * 1e9)}).encode()


def term_payload(reason: Optional[str]) -> bytes:
    """The body of a +TERM, with ``reason`` after it; InvalidArgumentError when the reason is not
    a str on one line."""
    if reason is None:
        return TERM
    if not isinstance(reason, str) or "\r" in reason or "\n" in reason:
        raise errors.InvalidArgumentError("term reason must be a str without CR or LF")
    return TERM + b" " + reason.encode()


def already_acked(msg: Msg) -> errors.MsgAlreadyAckdError:
    """The error for a second acknowledgement of ``msg``."""
    return errors.MsgAlreadyAckdError(
        f"message {msg.reply!r} was already acknowledged (ack, ack_sync, nak or term)"
    )


def send_ack(msg: Msg, payload: bytes, terminal: bool) -> None:
    """Publish an ack for ``msg``. A terminal one after a terminal one is
    MsgAlreadyAckdError (as nats-py and nats.go); +WPI then, and every ack on a consumer
    with ack policy none, does nothing."""
    if msg._ack != ACK_OPEN:
        if terminal and msg._ack == ACK_DONE:
            raise already_acked(msg)
        return
    reply = msg.reply
    if not reply.startswith("$JS.ACK."):
        raise errors.NotJSMessageError(_not_js(reply))
    client = msg._client
    if client is None:
        raise errors.InvalidArgumentError("message is not bound to a client")
    client._publish_trusted(reply, payload)  # coalesced in the write buffer with the rest
    if terminal:
        msg._ack = ACK_DONE  # after a successful publish (ADR-15)


def ack_sync(msg: Msg, timeout: float) -> Optional[Msg]:
    """+ACK as a request: the server's confirmation (its empty reply), once it came; None on
    a consumer with ack policy none (nothing is sent)."""
    if msg._ack != ACK_OPEN:
        if msg._ack == ACK_DONE:
            raise already_acked(msg)
        return None
    reply = msg.reply
    if not reply.startswith("$JS.ACK."):
        raise errors.NotJSMessageError(_not_js(reply))
    client = msg._client
    if client is None:
        raise errors.InvalidArgumentError("message is not bound to a client")
    answer = client.request(reply, ACK, timeout=check_timeout(timeout, "ack_sync timeout"))
    msg._ack = ACK_DONE
    return answer
