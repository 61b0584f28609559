"""Consumer advisories, typed: the server's JSON events on ``$JS.EVENT.ADVISORY.CONSUMER.*``.

The models mirror the server's structs (jetstream_events.go) and keep unknown fields in
``extra``. An :class:`AdvisoryWatcher` — made by ``js.watch_pin_advisories(stream, consumer)`` —
subscribes to a consumer's PINNED and UNPINNED advisories (ADR-42) and hands out typed
events by ``next()``, iteration or a callback. Advisories are core NATS messages: only those
sent while the watcher listens are seen (the dead-letter helper keeps its own in a stream).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from datetime import datetime
from typing import (
    TYPE_CHECKING,
    Any,
    Callable,
    Dict,
    FrozenSet,
    Iterator,
    Optional,
    Type,
    Union,
    cast,
)

from .. import errors
from .._timeouts import Deadline, check_timeout
from ..msg import Msg
from . import api

if TYPE_CHECKING:  # pragma: no cover
    from .context import JetStream

__all__ = [
    "ADVISORY_PREFIX",
    "Advisory",
    "AdvisoryWatcher",
    "ConsumerPinnedAdvisory",
    "ConsumerUnpinnedAdvisory",
    "MaxDeliveriesAdvisory",
    "MsgTerminatedAdvisory",
    "parse_advisory",
]

ADVISORY_PREFIX = "$JS.EVENT.ADVISORY.CONSUMER"
PINNED = "PINNED"
UNPINNED = "UNPINNED"
MAX_DELIVERIES = "MAX_DELIVERIES"
MSG_TERMINATED = "MSG_TERMINATED"


@dataclass(repr=False)
class _Event(api.Base):
    """What every advisory has (the server's TypedEvent) and names."""

    type: str = ""
    id: str = ""
    timestamp: Optional[datetime] = None
    stream: str = ""
    consumer: str = ""
    domain: Optional[str] = None
    extra: Dict[str, Any] = field(default_factory=dict, compare=False, repr=False)


@dataclass(repr=False)
class ConsumerPinnedAdvisory(_Event):
    """A priority group got a new pinned client (``$JS.EVENT.ADVISORY.CONSUMER.PINNED``)."""

    account: Optional[str] = None
    group: str = ""
    pinned_id: str = ""
    extra: Dict[str, Any] = field(default_factory=dict, compare=False, repr=False)


@dataclass(repr=False)
class ConsumerUnpinnedAdvisory(_Event):
    """A priority group lost its pin: ``reason`` is ``admin`` (unpin) or ``timeout``."""

    account: Optional[str] = None
    group: str = ""
    reason: str = ""
    extra: Dict[str, Any] = field(default_factory=dict, compare=False, repr=False)


@dataclass(repr=False)
class MaxDeliveriesAdvisory(_Event):
    """A message reached the consumer's max_deliver without an ack."""

    stream_seq: int = 0
    deliveries: int = 0
    extra: Dict[str, Any] = field(default_factory=dict, compare=False, repr=False)


@dataclass(repr=False)
class MsgTerminatedAdvisory(_Event):
    """A message was terminated (+TERM) by a client; ``reason`` is what it said."""

    consumer_seq: int = 0
    stream_seq: int = 0
    deliveries: int = 0
    reason: Optional[str] = None
    extra: Dict[str, Any] = field(default_factory=dict, compare=False, repr=False)


Advisory = Union[
    ConsumerPinnedAdvisory, ConsumerUnpinnedAdvisory, MaxDeliveriesAdvisory, MsgTerminatedAdvisory
]
_KINDS: Dict[str, Type[_Event]] = {
    PINNED: ConsumerPinnedAdvisory,
    UNPINNED: ConsumerUnpinnedAdvisory,
    MAX_DELIVERIES: MaxDeliveriesAdvisory,
    MSG_TERMINATED: MsgTerminatedAdvisory,
}


def advisory_subject(kind: str, stream: str, consumer: str) -> str:
    """The subject of a consumer advisory:
    ``$JS.EVENT.ADVISORY.CONSUMER.<kind>.<stream>.<consumer>``."""
    return f"{ADVISORY_PREFIX}.{kind}.{stream}.{consumer}"


def parse_advisory(subject: str, data: bytes) -> Advisory:
    """The typed advisory a message on ``subject`` carries; InvalidArgumentError for a
    subject that is not one of the four kinds, ProtocolError for JSON that is not one."""
    rest = subject[len(ADVISORY_PREFIX) + 1 :] if subject.startswith(ADVISORY_PREFIX + ".") else ""
    cls = _KINDS.get(rest.split(".", 1)[0])
    if cls is None:
        raise errors.InvalidArgumentError(f"{subject!r} is not a consumer advisory known here")
    try:
        doc = json.loads(data)
    except ValueError as exc:
        raise errors.ProtocolError(f"advisory on {subject!r} is not JSON: {exc}") from None
    if not isinstance(doc, dict):
        raise errors.ProtocolError(f"advisory on {subject!r} is not a JSON object")
    return cast(Advisory, cls.from_dict(doc))


class AdvisoryWatcher:
    """Typed advisories of one consumer, of the kinds asked for, in arrival order. Made by
    ``js.watch_pin_advisories``; ``unsubscribe()`` (or leaving the ``with``) ends it."""

    def __init__(
        self,
        js: JetStream,
        stream: str,
        consumer: str,
        kinds: FrozenSet[str],
        cb: Optional[Callable[[Advisory], None]],
    ) -> None:
        self._kinds = kinds
        self._cb = cb
        # One wildcard subscription on the kind token keeps the kinds in arrival order.
        self._sub = js._nc.subscribe(
            f"{ADVISORY_PREFIX}.*.{stream}.{consumer}", cb=None if cb is None else self._on_msg
        )

    def _event(self, msg: Msg) -> Optional[Advisory]:
        kind = msg.subject[len(ADVISORY_PREFIX) + 1 :].split(".", 1)[0]
        return parse_advisory(msg.subject, msg.data) if kind in self._kinds else None

    def _on_msg(self, msg: Msg) -> None:
        event = self._event(msg)
        if event is not None:
            assert self._cb is not None
            self._cb(event)

    def next(self, timeout: float = 5.0) -> Advisory:
        """The next advisory within ``timeout`` seconds (TimeoutError otherwise)."""
        if self._cb is not None:
            raise errors.BadSubscriptionError("this watcher has a callback; next is not available")
        deadline = Deadline(check_timeout(timeout, "timeout"), "advisory wait")
        while True:
            event = self._event(self._sub.next_msg(deadline.remaining()))
            if event is not None:
                return event

    def __iter__(self) -> Iterator[Advisory]:
        if self._cb is not None:
            raise errors.BadSubscriptionError("this watcher has a callback; it is not iterable")
        for msg in self._sub:
            event = self._event(msg)
            if event is not None:
                yield event

    def unsubscribe(self) -> None:
        """Stop watching: unsubscribe from the advisory subjects (nothing if already ended)."""
        if self._sub.is_valid:
            self._sub.unsubscribe()

    def __enter__(self) -> AdvisoryWatcher:
        return self

    def __exit__(self, *exc: object) -> None:
        self.unsubscribe()


class AdvisoryWatching:
    """The JetStream mixin with ``watch_pin_advisories``."""

    def watch_pin_advisories(
        self,
        stream: str,
        consumer: str,
        cb: Optional[Callable[[Advisory], None]] = None,
    ) -> AdvisoryWatcher:
        """Watch a consumer's PINNED / UNPINNED advisories (ADR-42): typed events
        (:class:`ConsumerPinnedAdvisory`, :class:`ConsumerUnpinnedAdvisory`) by ``next()``,
        iteration, or ``cb`` on a thread of its own."""
        js: JetStream = self  # type: ignore[assignment]
        stream = api.check_stream_name(stream)
        consumer = api.check_consumer_name(consumer)
        if cb is not None and not callable(cb):
            raise errors.InvalidArgumentError(f"cb must be callable, got {type(cb).__name__}")
        return AdvisoryWatcher(js, stream, consumer, frozenset((PINNED, UNPINNED)), cb)
