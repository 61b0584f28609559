"""Dead letters (seed 002, "Dead Letter Queues" type functionality): the messages a consumer
gave up on, kept.

A message is dead when it reached the consumer's ``max_deliver`` without an ack (the server
sends a MAX_DELIVERIES advisory) or a client terminated it (+TERM: MSG_TERMINATED). The
server only announces it; the message itself stays in the stream until the stream's limits
remove it. ``js.dead_letters(stream, consumer, ...)`` handles each announcement once:

* the two advisories of that consumer are captured by a stream of their own
  (``DLQ_ADV_<stream>_<consumer>`` unless named; work-queue retention), made on the first
  start and kept, so what is announced while no helper runs is not lost;
* a durable pull consumer on it gives each advisory to the helper, which fetches the dead
  message by its stream sequence and hands it to ``cb`` as a :class:`DeadLetter`, or
  republishes it to ``subject`` with headers naming where it came from and why it died; the
  advisory is acked only after that succeeded (a failure is reported and retried later);
* the republished copy has ``Nats-Msg-Id: dlq.<stream>.<consumer>.<seq>``: an advisory
  handled twice (the helper stopped between republish and ack) is dropped as a duplicate
  by the dead-letter stream (within its duplicate window, two minutes by default).
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Callable, Optional, Union

from .. import errors
from .._protocol import check_publish_subject
from ..msg import Headers, Msg
from . import api
from .advisories import (
    MAX_DELIVERIES,
    MSG_TERMINATED,
    MaxDeliveriesAdvisory,
    MsgTerminatedAdvisory,
    advisory_subject,
    parse_advisory,
)
from .consumer import ConsumeContext

if TYPE_CHECKING:  # pragma: no cover
    from .context import JetStream

__all__ = ["DeadLetter", "DeadLetters", "dead_letter_headers"]

RETRY_DELAY = 1.0  # before an advisory whose handling failed is tried again
_DROPPED_HEADERS = frozenset(  # publish options of the original; they would refuse the copy
    {"nats-msg-id", "nats-expected-stream", "nats-expected-last-sequence",
     "nats-expected-last-msg-id", "nats-expected-last-subject-sequence"}
)  # fmt: skip


@dataclass(frozen=True)
class DeadLetter:
    """A message its consumer gave up on. ``reason`` is ``max_deliveries`` or
    ``terminated`` (then ``description`` is what the client said, if anything); ``missing``
    when the stream no longer had it (``subject``/``data``/``headers`` are then empty)."""

    stream: str
    consumer: str
    stream_seq: int
    reason: str
    deliveries: int
    description: str
    subject: str
    data: bytes
    headers: Optional[Headers]
    time: Optional[datetime]
    missing: bool = False

    @property
    def msg_id(self) -> str:
        """The Nats-Msg-Id its republished copy carries: the same for every retry."""
        return f"dlq.{self.stream}.{self.consumer}.{self.stream_seq}"


def dead_letter_headers(dead: DeadLetter) -> Headers:
    """The original headers (minus publish options) plus where it came from and why."""
    out = Headers()
    if dead.headers is not None:
        for key, value in dead.headers.multi_items():
            if key.lower() not in _DROPPED_HEADERS:
                out.add(key, value)
    out.add("Nats-DLQ-Stream", dead.stream)
    out.add("Nats-DLQ-Sequence", str(dead.stream_seq))
    out.add("Nats-DLQ-Consumer", dead.consumer)
    out.add("Nats-DLQ-Reason", dead.reason)
    out.add("Nats-DLQ-Deliveries", str(dead.deliveries))
    if dead.subject:
        out.add("Nats-DLQ-Subject", dead.subject)
    if dead.description:
        out.add("Nats-DLQ-Description", dead.description)
    if dead.missing:
        out.add("Nats-DLQ-Missing", "true")
    return out


class DeadLetters:
    """A running dead-letter helper. Made by ``js.dead_letters()``; ``stop()`` ends it and
    keeps its advisory stream and consumer, so the next start goes on where it stopped."""

    def __init__(
        self,
        js: JetStream,
        stream: str,
        consumer: str,
        cb: Optional[Callable[[DeadLetter], None]],
        subject: Optional[str],
        advisory_stream: str,
        durable: str,
    ) -> None:
        self._js = js
        self._core = js._core
        self.stream = stream
        self.consumer = consumer
        self._cb = cb
        self._subject = subject
        self.advisory_stream = advisory_stream
        self.handled = 0  # dead letters handed to cb or republished by this instance
        self._lock = threading.Lock()
        if not _stream_exists(js, advisory_stream):  # else: made by an earlier start
            js.add_stream(
                name=advisory_stream,
                subjects=[
                    advisory_subject(MAX_DELIVERIES, stream, consumer),
                    advisory_subject(MSG_TERMINATED, stream, consumer),
                ],
                retention=api.RetentionPolicy.WORK_QUEUE,
                storage=api.StorageType.FILE,
                description=f"dead-letter advisories of consumer {consumer} of stream {stream}",
            )
        feed = js.create_or_update_consumer(
            advisory_stream, durable_name=durable, ack_policy=api.AckPolicy.EXPLICIT
        )
        self._ctx: ConsumeContext = feed.consume(self._on_advisory, max_messages=16)

    def _on_advisory(self, msg: Msg) -> None:
        """The consume thread: one advisory, handled, then acked (else retried later)."""
        try:
            advisory = parse_advisory(msg.subject, msg.data)
        except errors.NATSError as exc:
            self._core.report(exc)
            msg.term("not a dead-letter advisory")
            return
        if not isinstance(advisory, (MaxDeliveriesAdvisory, MsgTerminatedAdvisory)):
            msg.term("not a dead-letter advisory")
            return
        try:
            dead = self._letter(advisory)
            if self._cb is not None:
                self._cb(dead)
            else:
                assert self._subject is not None
                self._js.publish(
                    self._subject, dead.data, headers=dead_letter_headers(dead), msg_id=dead.msg_id
                )
            msg.ack_sync()
        except Exception as exc:
            err = (
                exc
                if isinstance(exc, errors.NATSError)
                else errors.CallbackError(
                    f"dead-letter callback for {self.stream} seq {advisory.stream_seq} raised "
                    f"{type(exc).__name__}: {exc}"
                )
            )
            if err is not exc:
                err.__cause__ = exc
            self._core.report(err)
            msg.nak(delay=RETRY_DELAY)
            return
        with self._lock:
            self.handled += 1

    def _letter(self, advisory: Union[MaxDeliveriesAdvisory, MsgTerminatedAdvisory]) -> DeadLetter:
        if isinstance(advisory, MsgTerminatedAdvisory):
            reason, description = "terminated", advisory.reason or ""
        else:
            reason, description = "max_deliveries", ""
        try:
            raw = self._js.get_msg(self.stream, advisory.stream_seq)
        except errors.NoMessageFoundError:
            raw = None  # removed by the stream's limits meanwhile: say so, keep the record
            self._core.report(
                errors.NoMessageFoundError(
                    404,
                    10037,
                    f"dead letter {self.stream} seq {advisory.stream_seq} is no longer in the "
                    "stream; recorded without its data",
                )
            )
        return DeadLetter(
            stream=self.stream,
            consumer=self.consumer,
            stream_seq=advisory.stream_seq,
            reason=reason,
            deliveries=advisory.deliveries,
            description=description,
            subject=raw.subject if raw else "",
            data=raw.data if raw else b"",
            headers=raw.headers if raw else None,
            time=raw.time if raw else None,
            missing=raw is None,
        )

    @property
    def error(self) -> Optional[errors.NATSError]:
        """The terminal error that stopped it (its advisory consumer deleted, ...), if any."""
        return self._ctx.error

    def stop(self) -> None:
        """Stop handling; what is not handled yet waits in the advisory stream."""
        self._ctx.stop()
        self._ctx.wait(5.0)

    def remove(self) -> None:
        """Stop, and delete the advisory stream (advisories not handled yet are lost)."""
        self.stop()
        try:
            self._js.delete_stream(self.advisory_stream)
        except errors.StreamNotFoundError:
            pass

    def __enter__(self) -> DeadLetters:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


def _stream_exists(js: JetStream, name: str) -> bool:
    try:
        js.stream_info(name)
    except errors.StreamNotFoundError:
        return False
    return True


class DeadLetterHelper:
    """The JetStream mixin with ``dead_letters``."""

    def dead_letters(
        self,
        stream: str,
        consumer: str,
        cb: Optional[Callable[[DeadLetter], None]] = None,
        subject: Optional[str] = None,
        advisory_stream: Optional[str] = None,
        durable: str = "dead-letters",
    ) -> DeadLetters:
        """Keep the dead letters of ``consumer``: ``cb(DeadLetter)`` for each, or republish
        each to ``subject`` (a stream must capture it). See the module doc."""
        js: JetStream = self  # type: ignore[assignment]
        stream = api.check_stream_name(stream)
        consumer = api.check_consumer_name(consumer)
        if (cb is None) == (subject is None):
            raise errors.InvalidArgumentError("dead_letters needs cb or subject, exactly one")
        if cb is not None and not callable(cb):
            raise errors.InvalidArgumentError(f"cb must be callable, got {type(cb).__name__}")
        if subject is not None:
            check_publish_subject(subject, "dead-letter subject")
        name = api.check_stream_name(advisory_stream or f"DLQ_ADV_{stream}_{consumer}")
        durable = api.check_consumer_name(durable)
        return DeadLetters(js, stream, consumer, cb, subject, name, durable)
