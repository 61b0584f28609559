"""Batch direct get (ADR-31): many stored messages per request, read as they arrive.

A stream with ``allow_direct`` answers ``$JS.API.DIRECT.GET.<stream>`` on every replica. Asked
for a ``batch``, the server sends the messages one after another to the reply subject, with
no flow control, then an end-of-batch status (``204 EOB``) whose ``Nats-Num-Pending`` says how
many matching messages it did not send and ``Nats-Last-Sequence`` the last one it did.
``multi_last`` asks for the last message of each subject a list of filters matches, as the
stream was at ``up_to_seq`` (or just before ``up_to_time``); its end-of-batch adds
``Nats-UpTo-Sequence``, the point in time the answer is a snapshot of.

What nats-server (2.11 to 2.15, ``server/stream.go`` ``getDirectRequest``) does, and what
this module does about it:

- A batch ends once the bytes sent (subject, headers and payload as stored) reach the
  request's ``max_bytes``, or without one the server's ``max_pending`` (64 MiB unless
  configured). But ``max_pending`` is also the most a connection may have queued before the
  server closes it as a slow consumer, and the server queues a batch faster than the socket
  drains it: a batch cut at ``max_pending`` is more than ``max_pending`` on the wire, and a
  test with ``max_pending: 256KB`` lost its connection on the first such batch. So every
  request here asks for at most ``max_payload`` bytes (1 MiB by default; the server requires
  ``max_pending`` to be at least that), and while the end of batch says messages are pending
  and the caller wants more, the next request asks for the rest from the next sequence. For
  ``multi_last`` the next request keeps the snapshot: ``up_to_seq`` is the first answer's
  ``Nats-UpTo-Sequence`` and ``seq`` the sequence after the last message (ADR-31's cursor).
  A caller's own ``max_bytes`` is a budget over all the requests.
- The next request goes out only once the previous one has ended, so at most one request's
  answer is queued here; the subscription has no pending limits, so a caller that iterates
  slowly never makes it drop a message (which would be a silent hole in the batch).
- ``multi_last`` refuses (413) filters that match more than 1024 subjects, whatever
  ``batch`` or ``up_to_seq`` say: :class:`~jetstream_sync.errors.TooManyResultsError`.
- 404 means nothing matched: the iterator is empty. 408 is a request the server could not
  read (the checks here keep it from being sent). A stream without ``allow_direct`` has no
  responder at all (503): :class:`~jetstream_sync.errors.DirectGetNotAllowedError`, or
  StreamNotFoundError, after one look at the stream to say which.
"""

from __future__ import annotations

import datetime as _dt
import json
from typing import TYPE_CHECKING, Any, Callable, Dict, Iterator, List, Optional, Sequence

from .. import errors
from .._protocol import check_subscribe_subject
from .._timeouts import Deadline, check_timeout
from ..msg import Headers, Msg
from . import api, api_level

if TYPE_CHECKING:  # pragma: no cover
    from ..client import Client
    from .api_level import ApiLevels

__all__ = ["DirectGetter", "raw_from_direct"]

# Direct-get answers carry the stored message's coordinates in these headers, and a batch's
# messages and its end carry its progress; none of them is part of the stored message.
_H_STREAM, _H_SEQ, _H_TIME, _H_SUBJECT = (
    "Nats-Stream",
    "Nats-Sequence",
    "Nats-Time-Stamp",
    "Nats-Subject",
)
_H_PENDING, _H_LAST, _H_UP_TO = "Nats-Num-Pending", "Nats-Last-Sequence", "Nats-UpTo-Sequence"
_DIRECT_HEADERS = frozenset((_H_STREAM, _H_SEQ, _H_TIME, _H_SUBJECT, _H_PENDING, _H_LAST, _H_UP_TO))

_EOB, _NOTHING, _NO_RESPONDERS, _TOO_MANY = 204, 404, 503, 413
_MAX_GO_INT = 2**63 - 1  # batch and max_bytes are Go ints on the server, sequences uint64
_MAX_SEQ = 2**64 - 1
MULTI_LAST_LIMIT = 1024  # the server's cap on the subjects one multi-last get may match


def raw_from_direct(msg: Msg, stream: str) -> api.RawStreamMsg:
    """A RawStreamMsg from a direct-get answer: the stored message, its coordinates in
    ``Nats-*`` headers that are not part of the stored message's own headers."""
    status = msg.status
    if status == _NOTHING:
        raise errors.NoMessageFoundError(404, 10037, msg.description or "no message found")
    if status is not None:
        raise errors.JetStreamError(f"direct get answered status {status} {msg.description}")
    headers = msg.all_headers
    try:
        seq = int(headers[_H_SEQ])
    except (KeyError, ValueError):
        raise errors.JetStreamError(f"direct get answer without a valid {_H_SEQ} header") from None
    own = Headers()
    for key, value in headers.multi_items():
        if key not in _DIRECT_HEADERS:
            own.add(key, value)
    return api.RawStreamMsg(
        subject=headers.get(_H_SUBJECT, ""),
        seq=seq,
        data=msg.data,
        headers=own,
        time=api.parse_time(headers[_H_TIME]) if _H_TIME in headers else None,
        stream=headers.get(_H_STREAM, stream),
    )


class _EndOfBatch:
    """What a 204 EOB says: matching messages not sent, the last sequence sent, and (for
    multi_last) the snapshot's sequence."""

    __slots__ = ("last", "pending", "up_to")

    def __init__(self, msg: Msg, what: str) -> None:
        h = msg.all_headers
        try:
            self.pending = int(h[_H_PENDING])
            self.last = int(h.get(_H_LAST, "0"))
            self.up_to = int(h[_H_UP_TO]) if _H_UP_TO in h else 0
        except (KeyError, ValueError):
            raise errors.JetStreamError(
                f"{what}: malformed end of batch from the server: {dict(h.items())!r:.120}"
            ) from None


class DirectGetter:
    """The batch direct get mixin of JetStream. Needs ``_nc``, ``_prefix``, ``_timeout``,
    ``_levels`` and ``stream_info`` from its host."""

    _nc: Client
    _prefix: str
    _timeout: float
    _levels: ApiLevels

    def stream_info(self, name: str, subjects_filter: Optional[str] = None) -> api.StreamInfo:
        """The stream's info; provided by the host (JetStreamManager)."""
        raise NotImplementedError  # pragma: no cover - provided by JetStreamManager

    def get_batch(
        self,
        stream: str,
        *,
        seq: Optional[int] = None,
        start_time: Optional[_dt.datetime] = None,
        batch: int = 100,
        max_bytes: Optional[int] = None,
        subject: Optional[str] = None,
        timeout: Optional[float] = None,
    ) -> Iterator[api.RawStreamMsg]:
        """Up to ``batch`` stored messages in sequence order, from ``seq`` or from the first
        stored at or after ``start_time`` (a timezone-aware datetime; neither: from the
        start), only those on ``subject`` if given (wildcards allowed). An iterator that
        reads as the messages arrive; empty when nothing matches.

        ``max_bytes`` stops the batch after the message that brings the messages' bytes
        (subject, headers and payload) to it: at least one message comes.
        ``timeout``: how long each request may take to be answered in full (default: the
        context's). Needs ``allow_direct`` on the stream and nats-server 2.11+.
        """
        what = "get_batch"
        stream = api.check_stream_name(stream)
        body: Dict[str, Any] = {}
        if seq is not None and start_time is not None:
            raise errors.InvalidArgumentError(f"{what}: give seq or start_time, not both")
        if start_time is not None:
            body["start_time"] = api.format_time(_aware(start_time, "start_time", what))
        else:
            # The server refuses a request with nothing to start from (408 Empty Request).
            body["seq"] = 1 if seq is None else _count(seq, "seq", what, _MAX_SEQ)
        wanted = _count(batch, "batch", what, _MAX_GO_INT)
        body["batch"] = wanted
        budget = None if max_bytes is None else _count(max_bytes, "max_bytes", what, _MAX_GO_INT)
        if subject is not None:
            body["next_by_subj"] = check_subscribe_subject(subject, f"{what} subject")
        t = self._timeout if timeout is None else check_timeout(timeout, "timeout")
        self._levels.require(api_level.BATCH_DIRECT_GET)

        def rest(eob: _EndOfBatch, got: int) -> Optional[Dict[str, Any]]:
            if eob.pending == 0 or got >= wanted:
                return None
            nxt: Dict[str, Any] = {"seq": eob.last + 1, "batch": wanted - got}
            if subject is not None:
                nxt["next_by_subj"] = subject
            return nxt

        return self._direct_batches(stream, body, rest, budget, t, what)

    def get_last_msgs_for(
        self,
        stream: str,
        subjects: Sequence[str],
        *,
        up_to_seq: Optional[int] = None,
        up_to_time: Optional[_dt.datetime] = None,
        batch: Optional[int] = None,
        timeout: Optional[float] = None,
    ) -> Iterator[api.RawStreamMsg]:
        """The last message of every subject the ``subjects`` filters match (wildcards
        allowed), in sequence order: the stream as it was at ``up_to_seq`` (included), or
        just before ``up_to_time`` (a timezone-aware datetime; a message stored at that very
        time is not included), or now. At most ``batch`` messages if given. An iterator
        that reads as the messages arrive; empty when nothing matches.

        The server answers one snapshot: the rest of a batch it cut short is asked for at
        the same point in time. Filters matching more than 1024 subjects are refused:
        :class:`~jetstream_sync.errors.TooManyResultsError`. ``timeout``: how long each
        request may take to be answered in full. Needs ``allow_direct`` on the stream and
        nats-server 2.11+.
        """
        what = "get_last_msgs_for"
        stream = api.check_stream_name(stream)
        filters = _filters(subjects, what)
        body: Dict[str, Any] = {"multi_last": filters}
        if up_to_seq is not None and up_to_time is not None:
            raise errors.InvalidArgumentError(f"{what}: give up_to_seq or up_to_time, not both")
        if up_to_seq is not None:
            body["up_to_seq"] = _count(up_to_seq, "up_to_seq", what, _MAX_SEQ)
        if up_to_time is not None:
            body["up_to_time"] = api.format_time(_aware(up_to_time, "up_to_time", what))
        wanted = None if batch is None else _count(batch, "batch", what, _MAX_GO_INT)
        if wanted is not None:
            body["batch"] = wanted
        t = self._timeout if timeout is None else check_timeout(timeout, "timeout")
        self._levels.require(api_level.BATCH_DIRECT_GET)

        def rest(eob: _EndOfBatch, got: int) -> Optional[Dict[str, Any]]:
            if eob.pending == 0 or (wanted is not None and got >= wanted):
                return None
            # ADR-31's cursor: the same snapshot (up_to_seq), past what came (seq).
            nxt: Dict[str, Any] = {"multi_last": filters, "seq": eob.last + 1}
            if eob.up_to:  # 0 would mean "now" to the server, not the snapshot
                nxt["up_to_seq"] = eob.up_to
            if wanted is not None:
                nxt["batch"] = wanted - got
            return nxt

        return self._direct_batches(stream, body, rest, None, t, what, filters)

    def get_msgs(
        self,
        stream: str,
        seq: int = 1,
        batch: int = 100,
        next_by_subject: Optional[str] = None,
        max_bytes: Optional[int] = None,
        timeout: Optional[float] = None,
    ) -> Iterator[api.RawStreamMsg]:
        """Batched direct get: up to ``batch`` messages from ``seq`` (optionally only on
        ``next_by_subject``). :meth:`get_batch` under its first name."""
        return self.get_batch(
            stream,
            seq=seq,
            batch=batch,
            max_bytes=max_bytes,
            subject=next_by_subject,
            timeout=timeout,
        )

    # --- the requests -------------------------------------------------------------------

    def _direct_batches(
        self,
        stream: str,
        body: Dict[str, Any],
        rest: Callable[[_EndOfBatch, int], Optional[Dict[str, Any]]],
        budget: Optional[int],
        t: float,
        what: str,
        filters: Optional[List[str]] = None,
    ) -> Iterator[api.RawStreamMsg]:
        """Send ``body``, yield the messages up to its end of batch; then ``rest(eob, got)``
        says what to ask next, or None. Each request asks for at most ``max_payload`` bytes
        and what is left of ``budget``, the caller's ``max_bytes`` (see the module's doc).
        The arguments are checked before this generator starts, so a bad one fails at the
        call, not at the first ``next()``."""
        inbox = self._nc.new_inbox()
        # No pending limits: one request's answer is bounded by its byte cut, and the next
        # request goes only after the previous one ended.
        sub = self._nc.subscribe(inbox, pending_msgs_limit=0, pending_bytes_limit=0)
        subject = f"{self._prefix}.DIRECT.GET.{stream}"
        chunk = max(1, self._nc.max_payload)
        got, last, used = 0, 0, 0
        try:
            request: Optional[Dict[str, Any]] = body
            while request is not None:
                left = None if budget is None else budget - used
                if left is not None and left <= 0:
                    return  # our count of the bytes says the budget is spent
                request["max_bytes"] = chunk if left is None else min(chunk, left)
                self._nc.publish(subject, json.dumps(request).encode(), reply=inbox)
                deadline = Deadline(t, what)
                while True:
                    msg = _next(sub, deadline, what, stream, got, t)
                    status = msg.status
                    if status is None:
                        if _H_PENDING not in msg.all_headers:
                            raise errors.JetStreamError(
                                f"{what}: the server answered with one message and no batch: "
                                "batch direct get needs nats-server 2.11 or later"
                            )
                        raw = raw_from_direct(msg, stream)
                        if raw.seq <= last:  # a next request must move on, or it loops
                            raise errors.JetStreamError(
                                f"{what}: stream {stream!r} sent sequence {raw.seq} again "
                                f"after {last}: the server ignored the batch's cursor"
                            )
                        got, last, used = got + 1, raw.seq, used + _stored_size(raw)
                        yield raw
                    elif status == _EOB:
                        # The caller's budget was this request's cut: the server has ended it.
                        last_cut = left is not None and left <= chunk
                        request = None if last_cut else rest(_EndOfBatch(msg, what), got)
                        break
                    elif status == _NOTHING:
                        return  # nothing (more) matches
                    else:
                        raise self._refusal(msg, stream, what, filters)
        finally:
            if sub.is_valid:
                sub.unsubscribe()

    def _refusal(
        self, msg: Msg, stream: str, what: str, filters: Optional[List[str]]
    ) -> errors.NATSError:
        status, words = msg.status or 0, msg.description
        if status == _NO_RESPONDERS:
            return self._nobody_answered(stream, what)
        if status == _TOO_MANY:
            return errors.TooManyResultsError(
                413,
                0,
                f"{what}: {filters} match more than {MULTI_LAST_LIMIT} subjects of stream "
                f"{stream!r}, the most one request may ask for: ask for fewer subjects at a "
                "time, or read the stream with a consumer",
            )
        if status == 412:
            return errors.ApiLevelError(412, 10185, f"{what}: {words or 'Required Api Level'}")
        return errors.api_error(
            status, 0, f"{what}: stream {stream!r} refused the request: {status} {words}"
        )

    def _nobody_answered(self, stream: str, what: str) -> errors.NATSError:
        """A direct get has no responder when the stream is missing or does not allow
        direct gets; one look at the stream says which, and so what to do."""
        try:
            allowed = self.stream_info(stream).config.allow_direct
        except errors.StreamNotFoundError:
            return errors.StreamNotFoundError(
                404, 10059, f"{what}: stream {stream!r} does not exist"
            )
        if not allowed:
            return errors.DirectGetNotAllowedError(
                f"{what}: stream {stream!r} does not allow direct gets: update it with "
                "allow_direct=True (js.update_stream)"
            )
        return errors.NoRespondersError(
            f"{what}: no server answered for stream {stream!r}, which allows direct gets "
            "(its replicas may be starting or catching up): try again"
        )


def _next(sub: Any, deadline: Deadline, what: str, stream: str, got: int, t: float) -> Msg:
    """The next answer; what is queued already is taken even if the deadline has passed (a
    caller that iterates slowly is not the server being late)."""
    try:
        msg: Msg = sub.next_msg(timeout=deadline.remaining())
    except errors.TimeoutError:
        raise errors.TimeoutError(
            f"{what}: stream {stream!r} did not end its batch within {t} s "
            f"({got} message(s) so far)"
        ) from None
    return msg


def _stored_size(raw: api.RawStreamMsg) -> int:
    """A message's bytes as the server counts them against ``max_bytes``: subject, header
    block as stored (ours re-encoded: the server's own count may differ by a few bytes) and
    payload."""
    size = len(raw.subject) + len(raw.data)
    if raw.headers:
        size += 12 + sum(len(k) + len(v) + 4 for k, v in raw.headers.multi_items())
    return size


def _count(value: Any, what: str, call: str, limit: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= limit:
        raise errors.InvalidArgumentError(
            f"{call}: {what} must be an int from 1 to {limit}, got {value!r}"
        )
    return value


def _aware(value: Any, what: str, call: str) -> _dt.datetime:
    if not isinstance(value, _dt.datetime) or value.utcoffset() is None:
        raise errors.InvalidArgumentError(
            f"{call}: {what} must be a timezone-aware datetime (e.g. "
            f"datetime.now(timezone.utc)), got {value!r}"
        )
    return value


def _filters(subjects: Any, call: str) -> List[str]:
    if isinstance(subjects, str) or not isinstance(subjects, (list, tuple)):
        raise errors.InvalidArgumentError(
            f"{call}: subjects must be a list of subjects (wildcards allowed), got {subjects!r}"
        )
    if not subjects:
        raise errors.InvalidArgumentError(f"{call}: subjects must not be empty")
    return [check_subscribe_subject(s, f"{call} subject") for s in subjects]
