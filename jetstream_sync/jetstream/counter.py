"""Counters (ADR-49): every subject of a stream with ``allow_msg_counter`` is a counter.

The server does the arithmetic. A publish with an empty payload and the header
``Nats-Incr: +5`` (any integer, of any size, signed) makes the stream load the subject's last
value, add, and store ``{"val":"<total>"}`` with the increment kept in its header; the ack
carries the new total (``val``). Values are decimal strings on the wire because they are
arbitrary-precision integers on the server (Go's ``big.Int``): here they are Python ints.

A counter stream that sources other counter streams adds their totals into its own and keeps
the breakdown, the last value seen of each source, in ``Nats-Counter-Sources``
(``{"<stream>": {"<subject there>": "<value>"}}``): :attr:`CounterEntry.sources`.

This follows orbit.go's ``counters`` package: ``add``, ``load``, ``get`` and the many-subject
reads, in snake case. As there, the stream must have ``allow_direct`` as well (the
many-subject reads are batch direct gets, ``get_last_msgs_for``), reads go to any replica
(a replica may be a moment behind a write on a replicated stream: ``add`` returns the total
its own write made), and a subject nothing was ever added to is an error,
:class:`~jetstream_sync.errors.CounterNotFoundError`, not 0.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Dict, Iterator, List, Optional, Sequence

from .. import errors
from .._protocol import check_publish_subject
from . import api, api_level

if TYPE_CHECKING:  # pragma: no cover
    from .context import JetStream

__all__ = ["Counter", "CounterEntry", "CounterFactory", "CounterValue"]

INCR = "Nats-Incr"
SOURCES = "Nats-Counter-Sources"

# What the server itself accepts as an integer (Go's big.Int.SetString in base 10): an
# optional sign and digits; Python's int() would also take spaces and underscores.
_INTEGER = re.compile(r"[+-]?[0-9]+\Z", re.ASCII)


@dataclass(frozen=True)
class CounterEntry:
    """A counter as last stored: its ``value``; ``sources``, for a stream that sources
    other counter streams, the last value it saw of each (source stream name to {subject in
    that stream: value}; empty otherwise); ``incr``, the increment that made this value
    (None if the stored message has none)."""

    subject: str
    value: int
    sources: Dict[str, Dict[str, int]] = field(default_factory=dict)
    incr: Optional[int] = None


class CounterValue(int):
    """What :meth:`Counter.add` returns: the counter's value (an int), and ``duplicate``,
    True when the server had already counted an add with the same ``msg_id`` and counted
    nothing this time (the value is then the one that first add made, or the counter's
    current value if that message is no longer stored)."""

    duplicate: bool

    def __new__(cls, value: int, duplicate: bool = False) -> CounterValue:
        made = super().__new__(cls, value)
        made.duplicate = duplicate
        return made

    def __repr__(self) -> str:
        return f"CounterValue({int(self)}, duplicate={self.duplicate})"

    def __str__(self) -> str:
        # str() and f-strings print the number, as they did when add returned a plain int
        # (int's str falls back to repr, which says more above).
        return int.__repr__(self)


class Counter:
    """The counters of one stream; made by ``js.counter(stream)``. Thread-safe (it holds
    nothing but the stream's name and subjects)."""

    def __init__(self, js: JetStream, stream: str, subjects: List[str]) -> None:
        self._js = js
        self._stream = stream
        self._subjects = subjects  # for the words of an error only

    @property
    def stream(self) -> str:
        """The counter stream's name."""
        return self._stream

    def add(self, subject: str, delta: int, msg_id: Optional[str] = None) -> CounterValue:
        """Add ``delta`` (an int of any size; negative subtracts, 0 is allowed) to the
        counter on ``subject`` and return its new value (a :class:`CounterValue`, an int).
        The subject's stream must be this counter stream.

        ``msg_id`` makes the add safe to retry: the server counts an add with a given id
        once within the stream's ``duplicate_window``, and answers a second one as a
        duplicate, which comes back with ``duplicate=True`` instead of counting again.
        After an error whose outcome is unknown (a lost connection, a timeout), send the
        same add with the same ``msg_id`` again."""
        check_publish_subject(subject)
        if isinstance(delta, bool) or not isinstance(delta, int):
            raise errors.InvalidArgumentError(
                f"counter delta must be an int, got {type(delta).__name__} {delta!r}"
            )
        if msg_id is not None and (
            not isinstance(msg_id, str) or not msg_id or any(c.isspace() for c in msg_id)
        ):
            raise errors.InvalidArgumentError(
                f"counter msg_id must be a non-empty str without whitespace, got {msg_id!r}"
            )
        try:
            incr = f"{delta:+d}"
        except ValueError:  # Python 3.11+ limits str() of an int to 4300 digits by default
            raise errors.InvalidArgumentError(
                "counter delta has more digits than this Python converts to text: raise "
                "sys.set_int_max_str_digits"
            ) from None
        try:
            ack = self._js.publish(subject, b"", headers={INCR: incr}, msg_id=msg_id)
        except errors.NoStreamResponseError:
            raise errors.NoStreamResponseError(
                f"no stream captures {subject!r}: counter stream {self._stream!r} takes "
                f"{self._subjects}"
            ) from None
        except errors.CounterNotEnabledError as exc:
            raise errors.CounterNotEnabledError.found(
                f"{subject!r} is captured by a stream without allow_msg_counter, not by "
                f"counter stream {self._stream!r} ({exc.description})"
            ) from None
        if ack.stream != self._stream:
            raise errors.CounterError(
                f"{subject!r} was counted by stream {ack.stream!r}, not by {self._stream!r}: "
                "add only subjects of this counter's stream"
            )
        if ack.duplicate:
            # The server's answer to a duplicate names the first add's sequence, no value.
            return CounterValue(self._duplicate_value(subject, ack.seq, msg_id), True)
        if ack.val is None:
            raise errors.CounterBrokenError.found(
                f"the ack of an increment of {subject!r} in {self._stream!r} has no value"
            )
        return CounterValue(_integer(ack.val, f"the new value of {subject!r}"))

    def _duplicate_value(self, subject: str, seq: int, msg_id: Optional[str]) -> int:
        """The value the first add with ``msg_id`` made (stored at ``seq``), or the
        counter's current value if that message is gone."""
        try:
            raw = self._js.get_msg(self._stream, seq=seq, direct=True)
        except errors.NoMessageFoundError:
            return self.load(subject)
        if raw.subject != subject:
            raise errors.CounterError(
                f"msg_id {msg_id!r} was already used by an add to {raw.subject!r} in stream "
                f"{self._stream!r} (sequence {seq}): nothing was added to {subject!r}; give "
                "every add its own msg_id"
            )
        return _entry(raw).value

    def load(self, subject: str) -> int:
        """The value of the counter on ``subject``; CounterNotFoundError if nothing was
        ever added to it."""
        return self.get(subject).value

    def get(self, subject: str) -> CounterEntry:
        """The counter on ``subject`` with its sources and last increment;
        CounterNotFoundError if nothing was ever added to it."""
        check_publish_subject(subject)
        try:
            raw = self._js.get_msg(self._stream, last_by_subject=subject, direct=True)
        except errors.NoMessageFoundError:
            raise errors.CounterNotFoundError(
                f"no counter on {subject!r} in stream {self._stream!r}: nothing was added to it yet"
            ) from None
        return _entry(raw)

    def load_many(self, subjects: Sequence[str]) -> Dict[str, int]:
        """The values of every counter the ``subjects`` filters match (wildcards allowed),
        by subject; subjects without a counter are absent."""
        return {raw.subject: _entry(raw).value for raw in self._last(subjects)}

    def get_many(self, subjects: Sequence[str]) -> Iterator[CounterEntry]:
        """The counters the ``subjects`` filters match (wildcards allowed), as they come,
        in the order they were last changed."""
        return map(_entry, self._last(subjects))

    def _last(self, subjects: Sequence[str]) -> Iterator[api.RawStreamMsg]:
        # One snapshot of the stream: every value as of the same moment.
        return self._js.get_last_msgs_for(self._stream, subjects)

    def __repr__(self) -> str:
        return f"Counter(stream={self._stream!r})"


class CounterFactory:
    """The JetStream mixin with ``counter``."""

    def counter(self, stream: str) -> Counter:
        """The counters of ``stream``, which must have ``allow_msg_counter`` (fixed when
        the stream is made) and ``allow_direct``. Needs nats-server 2.12+."""
        js: JetStream = self  # type: ignore[assignment]
        stream = api.check_stream_name(stream)
        js._levels.require(api_level.COUNTERS)
        cfg = js.stream_info(stream).config
        if not cfg.allow_msg_counter:
            raise errors.CounterNotEnabledError.found(
                f"stream {stream!r} does not hold counters: create it with "
                "allow_msg_counter=True (the server does not let an existing stream change it)"
            )
        if not cfg.allow_direct:
            raise errors.CounterError(
                f"stream {stream!r} holds counters but does not allow direct gets, which "
                "reading them needs: update it with allow_direct=True (js.update_stream)"
            )
        return Counter(js, stream, list(cfg.subjects or []))


def _entry(raw: api.RawStreamMsg) -> CounterEntry:
    """A stored counter message as a CounterEntry."""
    where = f"the counter on {raw.subject!r}"
    try:
        body = json.loads(raw.data)
        text = body["val"]
    except (ValueError, TypeError, KeyError):
        raise errors.CounterBrokenError.found(
            f"{where} is not a counter value: {raw.data[:60]!r}"
        ) from None
    headers = raw.headers
    incr = headers.get(INCR) if headers else None
    sources = headers.get(SOURCES) if headers else None
    return CounterEntry(
        subject=raw.subject,
        value=_integer(text, where),
        sources=_sources(sources, where) if sources else {},
        incr=None if incr is None else _integer(incr, f"the increment of {where}"),
    )


def _sources(text: str, where: str) -> Dict[str, Dict[str, int]]:
    try:
        parsed: Any = json.loads(text)
        return {
            str(stream): {str(subject): _integer(v, where) for subject, v in by_subject.items()}
            for stream, by_subject in parsed.items()
        }
    except (ValueError, AttributeError):
        raise errors.CounterBrokenError.found(
            f"{where} has a malformed {SOURCES} header: {text[:80]!r}"
        ) from None


def _integer(text: Any, where: str) -> int:
    if not isinstance(text, str) or not _INTEGER.match(text):
        raise errors.CounterBrokenError.found(f"{where} is not an integer: {text!r:.60}")
    try:
        return int(text)
    except ValueError:  # Python 3.11+ limits int() to 4300 digits by default
        raise errors.CounterBrokenError.found(
            f"{where} has {len(text)} digits, more than this Python converts: raise "
            "sys.set_int_max_str_digits"
        ) from None
