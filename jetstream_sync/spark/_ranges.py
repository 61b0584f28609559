"""Sequence ranges of a stream: what to read, how to split it, and reading one range by
batched direct get.

Shared by the batch and the streaming reader: the driver fixes an inclusive range of stream
sequences ``[start, end]`` and splits it into contiguous pieces; each executor reads its
piece with an ack-none pull consumer (``_pullrange.py``, the default) or, with the option
``direct`` true, by batched direct get (:func:`read_range`), and stops at ``end``.
"""

from __future__ import annotations

import heapq
import json
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any, Iterator, List, Optional, Sequence

from .. import errors
from ..jetstream import api
from ..jetstream.context import JetStream
from ..msg import Headers, Msg

__all__ = [
    "SeqRange",
    "StoredMsg",
    "parse_time_option",
    "read_range",
    "resolve_range",
    "seq_at_or_after",
    "split_range",
]

DIRECT_BATCH = 1000  # messages per batched direct get request


@dataclass(frozen=True)
class SeqRange:
    """Stream sequences ``start..end``, both included; empty when ``end < start``."""

    start: int
    end: int

    @property
    def count(self) -> int:
        """How many sequences the range holds (0 when empty)."""
        return max(0, self.end - self.start + 1)

    @property
    def empty(self) -> bool:
        """True when the range holds no sequence."""
        return self.end < self.start


def split_range(rng: SeqRange, parts: int) -> List[SeqRange]:
    """Split ``rng`` into at most ``parts`` contiguous, non-empty ranges whose sizes differ by
    at most one, in order. An empty range gives ``[]``."""
    if parts < 1:
        raise errors.InvalidArgumentError(f"partitions must be >= 1, got {parts}")
    n = rng.count
    if n == 0:
        return []
    parts = min(parts, n)
    size, extra = divmod(n, parts)
    out: List[SeqRange] = []
    start = rng.start
    for i in range(parts):
        length = size + (1 if i < extra else 0)
        out.append(SeqRange(start, start + length - 1))
        start += length
    return out


def parse_time_option(value: Any, what: str) -> datetime:
    """A datetime from an option: a datetime, epoch seconds, or an ISO 8601 / RFC 3339
    string. Naive times are taken as UTC."""
    if isinstance(value, datetime):
        dt = value
    elif isinstance(value, (int, float)) and not isinstance(value, bool):
        return datetime.fromtimestamp(value, timezone.utc)
    elif isinstance(value, str):
        text = value.strip()
        try:
            return api.parse_time(text)
        except ValueError:
            pass
        try:
            dt = datetime.fromisoformat(text)
        except ValueError:
            try:
                return datetime.fromtimestamp(float(text), timezone.utc)
            except ValueError:
                raise errors.InvalidArgumentError(
                    f"{what} must be an ISO 8601 time or epoch seconds, got {value!r}"
                ) from None
    else:
        raise errors.InvalidArgumentError(f"{what} must be a time, got {type(value).__name__}")
    return dt if dt.tzinfo is not None else dt.replace(tzinfo=timezone.utc)


def seq_at_or_after(js: JetStream, stream: str, when: datetime) -> Optional[int]:
    """The sequence of the first message stored at or after ``when``; None if there is none.

    Asks ``STREAM.MSG.GET`` with ``start_time`` (nats-server 2.11+). A server that does not
    know ``start_time`` is asked with an ordered consumer delivering by start time instead.
    """
    subject = f"{js.prefix}.STREAM.MSG.GET.{stream}"
    body = json.dumps({"start_time": api.format_time(when)}).encode()
    reply = js.nc.request(subject, body, timeout=js.timeout)
    answer = json.loads(reply.data or b"{}")
    err = answer.get("error")
    if err is None:
        message = answer["message"]
        stored = message.get("time")
        if stored and api.parse_time(stored) < when:
            # nats-server 2.15 answers a time after the last message with the first one
            return None
        return int(message["seq"])
    if err.get("err_code") == 10037:  # no message found
        return None
    if err.get("code") == 400:  # an older server: start_time unknown, so "no seq given"
        return _seq_at_or_after_by_consumer(js, stream, when)
    raise errors.api_error(
        int(err.get("code", 0)), int(err.get("err_code", 0)), str(err.get("description", ""))
    )


def _seq_at_or_after_by_consumer(js: JetStream, stream: str, when: datetime) -> Optional[int]:
    oc = js.ordered_consumer(stream, opt_start_time=when)
    try:
        if js.consumer_info(stream, oc.name).num_pending == 0:
            return None
        return oc.next(timeout=js.timeout).metadata.sequence.stream
    finally:
        oc.delete()


def resolve_range(
    js: JetStream,
    stream: str,
    state: api.StreamState,
    start_seq: Optional[int] = None,
    end_seq: Optional[int] = None,
    start_time: Optional[datetime] = None,
    end_time: Optional[datetime] = None,
) -> SeqRange:
    """The range to read: the stream's ``first_seq..last_seq`` narrowed by the options.

    ``start_seq`` and ``end_seq`` are included; ``start_time`` is included and ``end_time``
    excluded (messages stored at ``start_time <= t < end_time``), turned into sequences
    here, once, on the driver.
    """
    if state.messages == 0 or state.last_seq < state.first_seq:
        return SeqRange(state.last_seq + 1, state.last_seq)
    lo, hi = state.first_seq, state.last_seq
    if start_seq is not None:
        lo = max(lo, start_seq)
    if end_seq is not None:
        hi = min(hi, end_seq)
    if start_time is not None and lo <= hi:
        seq = seq_at_or_after(js, stream, start_time)
        if seq is None:
            return SeqRange(hi + 1, hi)
        lo = max(lo, seq)
    if end_time is not None and lo <= hi:
        seq = seq_at_or_after(js, stream, end_time)
        if seq is not None:
            hi = min(hi, seq - 1)
    return SeqRange(lo, hi)


@dataclass
class StoredMsg:
    """One message as read back, whichever way it was read."""

    subject: str
    data: bytes
    headers: Optional[Headers]
    stream: str
    seq: int
    time: Optional[datetime]


def _from_raw(raw: api.RawStreamMsg, stream: str) -> StoredMsg:
    return StoredMsg(raw.subject, raw.data, raw.headers, raw.stream or stream, raw.seq, raw.time)


def _from_consumed(msg: Msg, stream: str) -> StoredMsg:
    md = msg.metadata
    headers = msg.headers if msg.header_bytes else None
    return StoredMsg(
        msg.subject, msg.data, headers, md.stream or stream, md.sequence.stream, md.timestamp
    )


def read_range(
    js: JetStream,
    stream: str,
    rng: SeqRange,
    filters: Optional[Sequence[str]] = None,
    timeout: float = 30.0,
) -> Iterator[StoredMsg]:
    """Every message of ``rng`` (on one of ``filters``, if given), in sequence order, by
    batched direct get (the stream needs ``allow_direct``)."""
    if rng.empty:
        return iter(())
    if not filters or len(filters) == 1:
        return _read_direct(js, stream, rng, filters[0] if filters else None, timeout)
    # A direct get follows one subject: one read per filter, merged in sequence order; a
    # message two filters match (a.> and a.b) comes from both and is kept once.
    reads = [_read_direct(js, stream, rng, f, timeout) for f in filters]
    return _once_each(heapq.merge(*reads, key=lambda m: m.seq))


def _once_each(msgs: Iterator[StoredMsg]) -> Iterator[StoredMsg]:
    last = 0
    for m in msgs:
        if m.seq != last:
            last = m.seq
            yield m


def _read_direct(
    js: JetStream, stream: str, rng: SeqRange, filter_subject: Optional[str], timeout: float
) -> Iterator[StoredMsg]:
    seq = rng.start
    while seq <= rng.end:
        batch = min(DIRECT_BATCH, rng.end - seq + 1)
        got = 0
        for raw in js.get_batch(
            stream, seq=seq, batch=batch, subject=filter_subject, timeout=timeout
        ):
            got += 1
            if raw.seq > rng.end:
                return  # a filtered get runs past the range's end: the rest is not ours
            seq = raw.seq + 1
            yield _from_raw(raw, stream)
        if got == 0:
            return  # nothing (more) from seq on
