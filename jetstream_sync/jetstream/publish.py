"""Publishing to streams: ``publish`` waits for the ack, ``publish_async`` pipelines.

``publish`` is a core request whose answer is a PubAck. A 503 (no responders) means no
stream captures the subject — or none does *yet*: during a leader election the stream is
briefly without a leader. As nats.go does, the request is sent again ``retry_attempts``
times (default 2), ``retry_wait`` apart (default 0.25 s), within the timeout, then
:class:`NoStreamResponseError` is raised: a publish no stream captures fails in about half
a second, not after the whole timeout. ``retry_attempts=-1`` retries until the timeout.

``publish_async`` sends the message with a reply subject under one wildcard inbox and
returns a ``concurrent.futures.Future``, resolved on the network thread when the ack comes
(its done-callbacks are moved to the client's callback thread: see AckFuture). The timer
thread expires futures whose ack did not come within their timeout, and the client's close
fails every pending one: no future ever hangs.
At most ``max_pending`` acks are outstanding; past that ``publish_async`` waits up to
``stall_wait`` for room, then raises :class:`PublishStalledError`. A 503 answering an async
publish is retried the same way as ``publish``'s, on the timer thread, within the future's
timeout.
"""

from __future__ import annotations

import collections
import heapq
import itertools
import re
import threading
import time
from concurrent.futures import Future, InvalidStateError
from concurrent.futures import _base as _futures_base
from typing import TYPE_CHECKING, Any, Callable, Dict, List, Optional, Tuple, Union

from .. import errors
from .._protocol import check_subscribe_subject
from .._seam import raw_headers
from .._timeouts import Deadline, check_timeout
from ..msg import Headers, HeadersLike, Msg
from . import api
from ._response import parse_api_response
from .schedule import ScheduleLike, cancel_headers, schedule_headers

if TYPE_CHECKING:  # pragma: no cover
    from datetime import timedelta, tzinfo

    from .._seam import Core
    from ..client import Client
    from .api_level import ApiLevels

__all__ = [
    "DEFAULT_RETRY_ATTEMPTS",
    "DEFAULT_RETRY_WAIT",
    "AsyncPublisher",
    "Publisher",
    "check_retry_attempts",
    "publish_headers",
]

# After a 503 (no stream answered), send the publish again this many times, this far apart
# (nats.go's DefaultPubRetryAttempts and DefaultPubRetryWait).
DEFAULT_RETRY_ATTEMPTS = 2
DEFAULT_RETRY_WAIT = 0.25

MSG_ID = "Nats-Msg-Id"
EXPECTED_STREAM = "Nats-Expected-Stream"
EXPECTED_LAST_SEQ = "Nats-Expected-Last-Sequence"
EXPECTED_LAST_MSG_ID = "Nats-Expected-Last-Msg-Id"
EXPECTED_LAST_SUBJECT_SEQ = "Nats-Expected-Last-Subject-Sequence"
# The subject (or wildcard) whose last message Nats-Expected-Last-Subject-Sequence is checked
# against, instead of the published subject (nats-server: only with that header, else 10193).
EXPECTED_LAST_SUBJECT_SEQ_SUBJECT = "Nats-Expected-Last-Subject-Sequence-Subject"
MSG_TTL = "Nats-TTL"

_SWEEP = 0.05  # how often the timer looks for expired futures, seconds
_COND_LOCK = threading.Lock()  # makes AckFuture conditions, and settles futures without one
_PENDING, _FINISHED = _futures_base.PENDING, _futures_base.FINISHED
_DONE_STATES = (_futures_base.CANCELLED, _futures_base.CANCELLED_AND_NOTIFIED, _FINISHED)


def publish_headers(
    headers: Optional[HeadersLike],
    msg_id: Optional[str] = None,
    expected_stream: Optional[str] = None,
    expected_last_seq: Optional[int] = None,
    expected_last_msg_id: Optional[str] = None,
    expected_last_subject_seq: Optional[int] = None,
    expected_last_subject_seq_subject: Optional[str] = None,
) -> Optional[HeadersLike]:
    """The user's headers plus the JetStream ones for the options that are set.
    ``expected_last_subject_seq_subject``: check ``expected_last_subject_seq`` against the
    last message on this subject (a wildcard too) instead of the published one."""
    if (
        msg_id is None
        and expected_stream is None
        and expected_last_seq is None
        and expected_last_msg_id is None
        and expected_last_subject_seq is None
        and expected_last_subject_seq_subject is None
    ):
        return headers
    extra: List[Tuple[str, str]] = []
    for name, value in (
        (MSG_ID, msg_id),
        (EXPECTED_STREAM, expected_stream),
        (EXPECTED_LAST_MSG_ID, expected_last_msg_id),
    ):
        if value is not None:
            if not isinstance(value, str) or not value:
                raise errors.InvalidArgumentError(f"{name} must be a non-empty str, got {value!r}")
            extra.append((name, value))
    for name, number in (
        (EXPECTED_LAST_SEQ, expected_last_seq),
        (EXPECTED_LAST_SUBJECT_SEQ, expected_last_subject_seq),
    ):
        if number is not None:
            if isinstance(number, bool) or not isinstance(number, int) or number < 0:
                raise errors.InvalidArgumentError(f"{name} must be an int >= 0, got {number!r}")
            extra.append((name, str(number)))
    if expected_last_subject_seq_subject is not None:
        extra.append(
            (
                EXPECTED_LAST_SUBJECT_SEQ_SUBJECT,
                _checked_seq_subject(expected_last_subject_seq_subject, expected_last_subject_seq),
            )
        )
    if not extra:
        return headers
    merged = Headers(headers) if headers else Headers()
    for name, value in extra:
        merged.add(name, value)
    return merged


def _checked_seq_subject(subject: Any, seq: Optional[int]) -> str:
    """``expected_last_subject_seq_subject``, checked: a subject (wildcards allowed), given
    with ``expected_last_subject_seq`` (the server refuses it alone: 10193)."""
    if seq is None:
        raise errors.InvalidArgumentError(
            "expected_last_subject_seq_subject names the subject expected_last_subject_seq is "
            "checked against: give expected_last_subject_seq too"
        )
    return check_subscribe_subject(subject, "expected_last_subject_seq_subject")


def check_retry_attempts(value: Any, what: str = "retry_attempts") -> int:
    """How many times a publish answered by a 503 is sent again: an int >= 0, or -1 for
    "until the timeout" (nats.go's negative RetryAttempts)."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise errors.InvalidArgumentError(
            f"{what} must be an int >= 0 (or -1: retry until the timeout), got "
            f"{type(value).__name__} {value!r}"
        )
    if value < -1:
        raise errors.InvalidArgumentError(
            f"{what} must be >= 0 (or -1: retry until the timeout), got {value!r}"
        )
    return value


def retry_options(
    attempts: Optional[int], wait: Optional[float]
) -> Tuple[Optional[int], Optional[float]]:
    """publish's ``retry_attempts`` and ``retry_wait``, checked; None stays None (the
    context's default)."""
    if attempts is not None:
        attempts = check_retry_attempts(attempts)
    if wait is not None:
        wait = check_timeout(wait, "retry_wait")
    return attempts, wait


def no_stream_error(
    subject: str, attempts: int, wait: float, t: Optional[float] = None
) -> errors.NoStreamResponseError:
    """The NoStreamResponseError of a publish to ``subject`` sent ``attempts`` times."""
    within = "" if t is None else f" within its {t} s timeout"
    tries = "once" if attempts == 1 else f"{attempts} times, {wait} s apart"
    return errors.NoStreamResponseError(
        f"no stream answered a publish to {subject!r} (sent {tries}{within}): no stream "
        "captures this subject (or its leader is still being elected: retry_attempts=-1 "
        "retries until the timeout)"
    )


def nats_py_names(
    data: bytes,
    payload: Optional[bytes],
    expected_stream: Optional[str],
    stream: Optional[str],
    headers: Optional[HeadersLike],
    msg_ttl: Optional[Union[float, str]],
) -> Tuple[bytes, Optional[str], Optional[HeadersLike]]:
    """nats-py's spellings of publish's arguments: ``payload`` for ``data``, ``stream`` for
    ``expected_stream``, and ``msg_ttl`` (the ``Nats-TTL`` header). Returns the data, the
    expected stream and the headers with the TTL."""
    if payload is not None:
        if data:
            raise errors.InvalidArgumentError(
                "give data or payload (nats-py's name for it), not both"
            )
        data = payload
    if stream is not None:
        if expected_stream is not None and expected_stream != stream:
            raise errors.InvalidArgumentError(
                f"stream {stream!r} and expected_stream {expected_stream!r} differ (stream is "
                "nats-py's name for expected_stream)"
            )
        expected_stream = stream
    if msg_ttl is not None:
        merged = Headers(headers) if headers else Headers()
        merged.add(MSG_TTL, _ttl_text(msg_ttl))
        headers = merged
    return data, expected_stream, headers


def _ttl_text(ttl: Union[float, str]) -> str:
    """A message TTL as the server reads it: whole seconds (at least 1), or "never"."""
    if isinstance(ttl, str):
        if ttl.lower() == "never":
            return "never"
    elif (
        not isinstance(ttl, bool)
        and isinstance(ttl, (int, float))
        and 1 <= ttl < float("inf")  # NaN fails both comparisons
    ):
        return str(int(ttl))
    raise errors.InvalidArgumentError(
        f"msg_ttl must be a number of seconds >= 1 (fractions are dropped: the server keeps "
        f'whole seconds) or "never", got {ttl!r}'
    )


# The shape nearly every ack has; parsed without json or the generic model converter.
_SIMPLE_ACK = re.compile(
    rb'\{"stream":"([^"\\]+)",(?:"domain":"([^"\\]+)",)?"seq":(\d+)(,"duplicate":true)?\}\Z'
)
_SEQ_KEY = b'"seq":'
# An ack is '<head>"seq":<n>}' where the head ('{"stream":"S",' and maybe a domain) is the
# same for every ack of a stream: once the regex has read a head, later acks of that
# stream cost a partition, a dict lookup and an int().
_ACK_HEADS: Dict[bytes, Tuple[str, Optional[str]]] = {}
_ACK_HEADS_MAX = 256
_new = object.__new__


def _simple_pub_ack(stream: str, seq: int, domain: Optional[str]) -> api.PubAck:
    """``PubAck(stream=stream, seq=seq, domain=domain)`` at a third of the cost: the
    dataclass keeps every other field's default on the class, so only these are set."""
    ack: api.PubAck = _new(api.PubAck)
    ack.stream = stream
    ack.seq = seq
    if domain is not None:
        ack.domain = domain
    ack.extra = {}
    return ack


def pub_ack(data: bytes, subject: str) -> api.PubAck:
    """Parse the answer to a publish on ``subject`` into a PubAck. Raises the mapped APIError
    when the server answered an error, and JetStreamError when the answer is not a PubAck."""
    head, _, tail = data.rpartition(_SEQ_KEY)
    known = _ACK_HEADS.get(head)
    if known is not None and tail[-1:] == b"}" and tail[:-1].isdigit():
        return _simple_pub_ack(known[0], int(tail[:-1]), known[1])
    m = _SIMPLE_ACK.match(data)
    if m is not None:
        stream_b, domain_b, seq, dup = m.groups()
        stream = stream_b.decode()
        domain = domain_b.decode() if domain_b is not None else None
        if dup:
            return api.PubAck(stream=stream, seq=int(seq), domain=domain, duplicate=True)
        if len(_ACK_HEADS) >= _ACK_HEADS_MAX:
            _ACK_HEADS.clear()
        _ACK_HEADS[head] = (stream, domain)
        return _simple_pub_ack(stream, int(seq), domain)
    obj = parse_api_response(data, subject)
    if "stream" not in obj:
        raise errors.JetStreamError(f"the answer to a publish on {subject!r} is not a PubAck")
    return api.PubAck.from_dict(obj)


class Publisher:
    """The publish mixin of JetStream."""

    _nc: Client
    _core: Core
    _timeout: float
    _async_lock: threading.Lock
    _async: Optional[AsyncPublisher]
    _async_max_pending: int
    _async_stall_wait: float
    _levels: ApiLevels
    # The context's defaults (JetStream's publish_retry_attempts / publish_retry_wait).
    _retry_attempts: int = DEFAULT_RETRY_ATTEMPTS
    _retry_wait: float = DEFAULT_RETRY_WAIT

    def publish(
        self,
        subject: str,
        data: bytes = b"",
        headers: Optional[HeadersLike] = None,
        msg_id: Optional[str] = None,
        expected_stream: Optional[str] = None,
        expected_last_seq: Optional[int] = None,
        expected_last_msg_id: Optional[str] = None,
        expected_last_subject_seq: Optional[int] = None,
        timeout: Optional[float] = None,
        *,
        payload: Optional[bytes] = None,
        stream: Optional[str] = None,
        msg_ttl: Optional[Union[float, str]] = None,
        retry_attempts: Optional[int] = None,
        retry_wait: Optional[float] = None,
        expected_last_subject_seq_subject: Optional[str] = None,
        schedule: Optional[ScheduleLike] = None,
        schedule_target: Optional[str] = None,
        schedule_ttl: Optional[Union[float, timedelta, str]] = None,
        schedule_source: Optional[str] = None,
        schedule_time_zone: Optional[Union[str, tzinfo]] = None,
        schedule_rollup: bool = False,
        cancel_schedule: Optional[str] = None,
    ) -> api.PubAck:
        """Publish to a stream and wait for its ack (a :class:`PubAck`).

        When no stream answers (the server's 503, no responders: no stream captures the
        subject, or its leader is being elected), the publish is sent again
        ``retry_attempts`` times (default 2; -1: until the timeout), ``retry_wait`` seconds
        apart (default 0.25), all within ``timeout``; then :class:`NoStreamResponseError`.
        Their defaults are the context's (``publish_retry_attempts``,
        ``publish_retry_wait``).

        nats-py's keywords work too: ``payload`` (for ``data``), ``stream`` (for
        ``expected_stream``), and ``msg_ttl``: this message's time to live in seconds
        (``Nats-TTL``; whole seconds, at least 1, or ``"never"``), on a stream with
        ``allow_msg_ttl``. nats-py's positional order (``subject, payload, timeout``) is not
        ours: pass ``timeout`` by keyword.

        ``expected_last_subject_seq_subject`` (with ``expected_last_subject_seq``): the
        subject, or wildcard, whose last message must have that sequence, instead of
        ``subject``'s (``Nats-Expected-Last-Subject-Sequence-Subject``).

        ``schedule`` makes this message a schedule (ADR-51; the stream needs
        ``allow_msg_schedules``): the stream keeps it on ``subject`` and publishes its body
        and headers to ``schedule_target`` at an aware ``datetime``, every ``timedelta``, or
        on a cron (``"0 30 * * * *"``, six fields, seconds first; ``schedule_time_zone``
        for a zone other than UTC). ``schedule_ttl`` is the produced messages' TTL,
        ``schedule_source`` a subject whose last message is published instead,
        ``schedule_rollup=True`` makes each produced message replace the target's earlier
        ones. ``cancel_schedule`` names a schedule's subject that this publish removes,
        atomically. See ``jetstream/schedule.py``.
        """
        t = self._timeout if timeout is None else check_timeout(timeout, "timeout")
        attempts = (
            self._retry_attempts if retry_attempts is None else check_retry_attempts(retry_attempts)
        )
        wait = self._retry_wait if retry_wait is None else check_timeout(retry_wait, "retry_wait")
        if payload is not None or stream is not None or msg_ttl is not None:
            data, expected_stream, headers = nats_py_names(
                data, payload, expected_stream, stream, headers, msg_ttl
            )
        if (
            schedule is not None
            or schedule_target is not None
            or schedule_ttl is not None
            or schedule_source is not None
            or schedule_time_zone is not None
            or schedule_rollup
            or cancel_schedule is not None
        ):
            headers = self._scheduled(
                subject,
                headers,
                schedule,
                schedule_target,
                schedule_ttl,
                schedule_source,
                schedule_time_zone,
                schedule_rollup,
                cancel_schedule,
            )
        hdrs = publish_headers(
            headers,
            msg_id,
            expected_stream,
            expected_last_seq,
            expected_last_msg_id,
            expected_last_subject_seq,
            expected_last_subject_seq_subject,
        )
        deadline = Deadline(t, f"JetStream publish to {subject!r}")
        sent = 0  # how many times the publish went out
        while True:
            sent += 1
            try:
                reply = self._nc.request(
                    subject, data, timeout=max(deadline.remaining(), 0.001), headers=hdrs
                )
            except errors.NoRespondersError:
                # Another attempt only if one is left and fits in the timeout after the wait.
                if 0 <= attempts < sent or deadline.remaining() <= wait:
                    raise no_stream_error(subject, sent, wait) from None
                time.sleep(wait)
                continue
            except errors.TimeoutError:
                # A retry's budget is what the waits left of the timeout: its timeout says
                # nothing new, and the answer the caller needs is the 503's.
                if sent > 1:
                    raise no_stream_error(subject, sent, wait, t) from None
                raise
            return pub_ack(reply.data, subject)

    def _scheduled(
        self,
        subject: str,
        headers: Optional[HeadersLike],
        schedule: Optional[ScheduleLike],
        target: Optional[str],
        ttl: Optional[Union[float, timedelta, str]],
        source: Optional[str],
        time_zone: Optional[Union[str, tzinfo]],
        rollup: bool,
        cancel: Optional[str],
    ) -> Headers:
        """The headers of a schedule, or of a publish that cancels one (jetstream/schedule.py),
        once the server is known to have the API level they need."""
        if cancel is not None:
            if schedule is not None:
                raise errors.InvalidArgumentError(
                    "give schedule or cancel_schedule, not both (a schedule published to a "
                    "subject replaces the one held there already)"
                )
            if target is not None or ttl is not None or source is not None:
                raise errors.InvalidArgumentError(
                    "cancel_schedule takes no schedule_* keyword: it publishes a plain message"
                )
            merged, feature = cancel_headers(subject, headers, cancel)
        elif schedule is None:
            raise errors.InvalidArgumentError(
                "schedule_target, schedule_ttl, schedule_source, schedule_time_zone and "
                "schedule_rollup go with schedule=, which is missing"
            )
        else:
            merged, feature = schedule_headers(
                subject, headers, schedule, target, ttl, source, time_zone, rollup
            )
        self._levels.require(feature)
        return merged

    # --- pipelined ----------------------------------------------------------------------

    def _async_publisher(self) -> AsyncPublisher:
        pub = self._async
        if pub is None or pub.closed:
            with self._async_lock:
                pub = self._async
                if pub is None or pub.closed:
                    pub = self._async = AsyncPublisher(
                        self._nc,
                        self._core,
                        self._async_max_pending,
                        self._async_stall_wait,
                        self._timeout,
                        self._retry_attempts,
                        self._retry_wait,
                    )
        return pub

    def publish_async(
        self,
        subject: str,
        data: bytes = b"",
        headers: Optional[HeadersLike] = None,
        msg_id: Optional[str] = None,
        expected_stream: Optional[str] = None,
        expected_last_seq: Optional[int] = None,
        expected_last_msg_id: Optional[str] = None,
        expected_last_subject_seq: Optional[int] = None,
        timeout: Optional[float] = None,
        *,
        payload: Optional[bytes] = None,
        stream: Optional[str] = None,
        msg_ttl: Optional[Union[float, str]] = None,
        wait_stall: Optional[float] = None,
        retry_attempts: Optional[int] = None,
        retry_wait: Optional[float] = None,
        expected_last_subject_seq_subject: Optional[str] = None,
        schedule: Optional[ScheduleLike] = None,
        schedule_target: Optional[str] = None,
        schedule_ttl: Optional[Union[float, timedelta, str]] = None,
        schedule_source: Optional[str] = None,
        schedule_time_zone: Optional[Union[str, tzinfo]] = None,
        schedule_rollup: bool = False,
        cancel_schedule: Optional[str] = None,
    ) -> Future[api.PubAck]:
        """Publish without waiting; the Future resolves to the PubAck or the error.

        ``timeout`` is this message's ack timeout (default: the context's). When
        ``publish_async_max_pending`` acks are outstanding, the call waits for room up to
        ``wait_stall`` seconds (default: the context's ``publish_async_stall_wait``), then
        raises :class:`PublishStalledError` (nats-py's ``TooManyStalledMsgsError``).
        ``payload``, ``stream``, ``msg_ttl``, ``retry_attempts``, ``retry_wait`` and
        ``expected_last_subject_seq_subject`` as in :meth:`publish`: a 503 (no stream
        answered) is sent again from the timer thread, within the future's timeout, before
        the future fails with :class:`NoStreamResponseError`.
        The ``schedule*`` keywords and ``cancel_schedule`` as in :meth:`publish`.
        """
        if timeout is not None:
            timeout = check_timeout(timeout, "timeout")
        if wait_stall is not None:
            wait_stall = check_timeout(wait_stall, "wait_stall")
        retry: Optional[Tuple[int, float]] = None
        if retry_attempts is not None or retry_wait is not None:
            attempts, wait = retry_options(retry_attempts, retry_wait)
            retry = (
                self._retry_attempts if attempts is None else attempts,
                self._retry_wait if wait is None else wait,
            )
        if payload is not None or stream is not None or msg_ttl is not None:
            data, expected_stream, headers = nats_py_names(
                data, payload, expected_stream, stream, headers, msg_ttl
            )
        if (
            schedule is not None
            or schedule_target is not None
            or schedule_ttl is not None
            or schedule_source is not None
            or schedule_time_zone is not None
            or schedule_rollup
            or cancel_schedule is not None
        ):
            headers = self._scheduled(
                subject,
                headers,
                schedule,
                schedule_target,
                schedule_ttl,
                schedule_source,
                schedule_time_zone,
                schedule_rollup,
                cancel_schedule,
            )
        if (
            msg_id is None
            and expected_stream is None
            and expected_last_seq is None
            and expected_last_msg_id is None
            and expected_last_subject_seq is None
            and expected_last_subject_seq_subject is None
        ):
            hdrs = headers  # the usual case, without a call: this path is hot
        else:
            hdrs = publish_headers(
                headers,
                msg_id,
                expected_stream,
                expected_last_seq,
                expected_last_msg_id,
                expected_last_subject_seq,
                expected_last_subject_seq_subject,
            )
        pub = self._async
        if pub is None or pub.closed:
            pub = self._async_publisher()
        if retry is None:
            return pub.publish(subject, data, hdrs, timeout, wait_stall)
        return pub.publish(subject, data, hdrs, timeout, wait_stall, retry)

    def publish_async_completed(self, timeout: float = 30.0) -> None:
        """Wait until every publish_async future has resolved."""
        t = check_timeout(timeout, "timeout")
        pub = self._async
        if pub is not None:
            pub.wait_all(t)

    @property
    def publish_async_pending(self) -> PendingCount:
        """How many publish_async acks are outstanding: ``js.publish_async_pending``, or
        nats-py's method call ``js.publish_async_pending()`` (the same number)."""
        pub = self._async
        return PendingCount(0 if pub is None else pub.pending)


class PendingCount(int):
    """An int that can also be called for itself: ``publish_async_pending`` is a property
    here and a method in nats-py, and both spellings give the count."""

    def __call__(self) -> int:
        return int(self)


class AckFuture(Future):  # type: ignore[type-arg]
    """A Future resolved on the network thread, cheap enough to make one per message.

    Three departures from ``concurrent.futures.Future``, all through its long-stable
    internals (``_condition``, ``_state``, ``_waiters``, ``_done_callbacks``,
    ``_invoke_callbacks``):

    * ``Future.__init__`` builds a Condition (an RLock, a deque, bound methods) and two
      lists: most of a future's garbage-collected objects, although most acks are never
      waited on. Here the state starts as class attributes, and the Condition and lists
      are made on first use; ``set_result`` / ``set_exception`` skip the Condition while
      none exists (nobody can be waiting then).
    * ``done()``, and ``result()`` / ``exception()`` of a finished future, read the state
      without the Condition (one attribute read is atomic), so checking a settled future
      makes nothing.
    * ``set_result`` runs done-callbacks in the resolving thread, and those are user code,
      which the network thread never runs: they go to the client's callback thread.
    """

    _state = _PENDING
    _res: Any = None  # the result, behind the _result property
    _raw: Optional[bytes] = None  # an ack known to be a plain PubAck, not parsed yet
    _exception: Optional[BaseException] = None
    _cond: Optional[threading.Condition] = None
    _subject = ""  # what was published: named in this future's errors
    # What was published, kept for a retry after a 503 (no stream answered).
    _data = b""
    _hdrs: Optional[HeadersLike] = None
    _retry: Optional[Tuple[int, float]] = None  # (attempts, wait) when not the context's
    _sent = 1  # how many times it went out
    _deadline: Optional[float] = None  # set when the timeout is not the context's
    # Made on first use (see the properties below); class defaults keep an instance to the
    # few attributes it sets, with no __dict__ materialised.
    _waiter_list: Optional[List[Any]] = None
    _callback_list: Optional[List[Any]] = None

    def __init__(self, dispatch: Callable[..., None]) -> None:  # no super().__init__: see above
        self._dispatch = dispatch

    @property
    def _result(self) -> Any:
        """The PubAck, made from the ack's bytes when first asked for: most pipelined
        publishes are never looked at one by one, and a PubAck kept alive per message
        is what makes the garbage collector's full passes long."""
        res = self._res
        if res is None and self._raw is not None:
            res = self._res = pub_ack(self._raw, self._subject)
        return res

    @_result.setter
    def _result(self, value: Any) -> None:
        self._res = value

    @property
    def _condition(self) -> threading.Condition:  # type: ignore[override]
        cond = self._cond
        if cond is None:
            with _COND_LOCK:
                cond = self._cond
                if cond is None:
                    cond = self._cond = threading.Condition()
        return cond

    @property
    def _waiters(self) -> List[Any]:  # type: ignore[override]
        with _COND_LOCK:  # (concurrent.futures touches it under the Condition too)
            waiters = self._waiter_list
            if waiters is None:
                waiters = self._waiter_list = []
        return waiters

    @property
    def _done_callbacks(self) -> List[Any]:
        with _COND_LOCK:
            callbacks = self._callback_list
            if callbacks is None:
                callbacks = self._callback_list = []
        return callbacks

    def done(self) -> bool:
        """True once the future has a result or an exception (or was cancelled)."""
        return self._state in _DONE_STATES

    def result(self, timeout: Optional[float] = None) -> Any:
        """The PubAck, waiting up to ``timeout`` seconds (None: for ever); raises the publish's
        error, or as ``concurrent.futures.Future.result`` when ``timeout`` passes first."""
        if self._state is _FINISHED:
            if self._exception is not None:
                raise self._exception
            return self._result
        return super().result(timeout)

    def exception(self, timeout: Optional[float] = None) -> Optional[BaseException]:
        """The publish's error or None, waiting up to ``timeout`` seconds as ``result``."""
        if self._state is _FINISHED:
            return self._exception
        return super().exception(timeout)

    def set_result(self, result: Any) -> None:
        """Resolve the future with ``result``; done-callbacks run on the callback thread."""
        if not self._settle_unwatched(result, None):
            super().set_result(result)

    def set_exception(self, exception: Optional[BaseException]) -> None:
        """Fail the future with ``exception``; done-callbacks run on the callback thread."""
        if not self._settle_unwatched(None, exception):
            super().set_exception(exception)

    def _settle_unwatched(self, result: Any, exception: Optional[BaseException]) -> bool:
        """Settle without a Condition if none was ever made; False to take the usual path."""
        with _COND_LOCK:  # the same lock _condition takes to make one: no waiter can slip in
            if self._cond is not None:
                return False
            if self._state is not _PENDING:
                raise InvalidStateError(f"future already {self._state}")
            self._result = result
            self._exception = exception
            self._state = _FINISHED
        if self._callback_list is not None:
            self._dispatch(Future._invoke_callbacks, self)  # type: ignore[attr-defined]
        return True

    def _invoke_callbacks(self) -> None:
        if self._callback_list is not None:
            self._dispatch(Future._invoke_callbacks, self)  # type: ignore[attr-defined]


class AsyncPublisher:
    """Outstanding async publishes of one JetStream context.

    Acks are resolved on the network thread as they arrive (a dict pop, a parse, a
    set_result: no user code, see AckFuture). The client's timer thread expires futures
    whose ack is late; the client's close hook fails the rest.

    Expiry costs a publish nothing when its timeout is the context's (nearly always).
    Every sweep notes a *checkpoint*: the newest token pending now, due one ack timeout
    from now. Every publish up to that token was made before the sweep, so it is due no
    later than the checkpoint; when a checkpoint falls due, the pending publishes up to its
    token (the oldest ones: ``_pending`` keeps insertion order) fail. A future thus fails at
    most one sweep period after its timeout, never before. Other timeouts go to a heap.
    """

    def __init__(
        self,
        nc: Client,
        core: Core,
        max_pending: int,
        stall_wait: float,
        ack_timeout: float,
        retry_attempts: int = DEFAULT_RETRY_ATTEMPTS,
        retry_wait: float = DEFAULT_RETRY_WAIT,
    ) -> None:
        self._core = core
        self._retry = (retry_attempts, retry_wait)
        self._max_pending = max_pending
        # A stalled publisher is woken once the window has drained to here, not by every
        # ack: one wake-up per thousand messages instead of a thread switch per message.
        self._low_water = max_pending * 15 // 16
        self._stall_wait = stall_wait
        self._ack_timeout = ack_timeout
        self._prefix = nc.new_inbox() + "."
        self._plen = len(self._prefix)
        self._pending: Dict[str, AckFuture] = {}
        self._checkpoints: collections.deque[Tuple[float, int]] = collections.deque()
        self._expiry: List[Tuple[float, str]] = []  # the other timeouts' (deadline, token)
        self._expiry_lock = threading.Lock()
        self._ids = itertools.count(1)
        self._room = threading.Condition(threading.Lock())
        # Threads waiting for room / for everything: acks notify only when one waits and
        # the wait can end (low water for room, zero for all).
        self._waiting_room = 0
        self._room_woken = False  # a wake-up for the waiting publisher is on its way
        self._waiting_all = 0
        self.closed = False
        self._dispatch = core.callback
        core.add_close_hook(self._on_client_closed)
        self._sub = core.subscribe(
            self._prefix + "*", None, None, None, 1 << 30, 1 << 40, hook=self._on_ack
        )
        core.call_later(_SWEEP, self._sweep)

    @property
    def pending(self) -> int:
        """How many async publishes wait for their ack."""
        return len(self._pending)

    def publish(
        self,
        subject: str,
        data: bytes,
        headers: Optional[HeadersLike],
        timeout: Optional[float],
        stall_wait: Optional[float] = None,
        retry: Optional[Tuple[int, float]] = None,
    ) -> Future[api.PubAck]:
        """Send one message; ``timeout`` None is the context's ack timeout, ``stall_wait``
        None the context's wait for room in the window, ``retry`` None the context's
        (retry_attempts, retry_wait) after a 503. Hot."""
        pending = self._pending
        if len(pending) >= self._max_pending:
            self._wait_for_room(self._stall_wait if stall_wait is None else stall_wait)
        token = str(next(self._ids))
        fut = _new(AckFuture)  # AckFuture(dispatch) without the call: this path is hot
        fut._dispatch = self._dispatch
        fut._subject = subject
        fut._data = data
        if headers is not None:
            fut._hdrs = headers
        if retry is not None:
            fut._retry = retry
        pending[token] = fut
        if timeout is not None and timeout != self._ack_timeout:
            deadline = fut._deadline = time.monotonic() + timeout
            with self._expiry_lock:
                heapq.heappush(self._expiry, (deadline, token))
        try:
            self._core.publish_own_reply(subject, data, self._prefix + token, headers)
        except BaseException:
            pending.pop(token, None)
            raise
        return fut

    def _wait_for_room(self, stall_wait: float) -> None:
        deadline = time.monotonic() + stall_wait
        ok = True
        with self._room:
            self._waiting_room += 1
            try:
                while len(self._pending) >= self._max_pending and not self.closed:
                    remaining = deadline - time.monotonic()
                    if remaining <= 0:
                        ok = False
                        break
                    self._room_woken = False  # before every wait: each wants its wake-up
                    self._room.wait(remaining)
            finally:
                self._waiting_room -= 1
        if not ok:
            raise errors.PublishStalledError(
                f"publish_async: {len(self._pending)} acks outstanding (the window is "
                f"{self._max_pending}) and none came back within {stall_wait} s"
            )
        if self.closed:
            raise errors.ConnectionClosedError("publish_async: the client is closed")

    def wait_all(self, timeout: float) -> None:
        """Wait until every async publish has its ack (or the publisher is closed); TimeoutError
        after ``timeout`` seconds."""
        with self._room:
            self._waiting_all += 1
            try:
                ok = self._room.wait_for(lambda: not self._pending or self.closed, timeout)
            finally:
                self._waiting_all -= 1
        if not ok:
            raise errors.TimeoutError(
                f"publish_async_completed: {len(self._pending)} acks still outstanding "
                f"after {timeout} s"
            )

    def _wake(self) -> None:
        if self._waiting_room or self._waiting_all:
            with self._room:
                self._room.notify_all()

    def _on_ack(self, msg: Msg) -> bool:
        """Network thread: resolve the ack's future. Hot."""
        fut = self._pending.pop(msg.subject[self._plen :], None)
        if fut is None:
            return True  # an ack after its future timed out: that future has its answer
        hdr = raw_headers(msg)
        if hdr is not None and msg.status == 503 and self._retry_later(fut):
            return True  # pending again, under a new token: nothing to wake
        fut._data = b""  # _forget_message(fut), inlined: this runs once per message
        if fut._hdrs is not None:
            fut._hdrs = None
        try:
            if hdr is not None and msg.status == 503:
                raise no_stream_error(fut._subject, fut._sent, (fut._retry or self._retry)[1])
            data = msg.data
            head, _, tail = data.rpartition(_SEQ_KEY)
            if head in _ACK_HEADS and tail[-1:] == b"}" and tail[:-1].isdigit():
                ack = None  # a plain PubAck of a known stream: parsed when asked for
            else:
                ack = pub_ack(data, fut._subject)
        except errors.NATSError as exc:
            _settle(fut, error=exc)
        else:
            # AckFuture._settle_unwatched, inlined: this runs once per message.
            with _COND_LOCK:
                unwatched = fut._cond is None and fut._state is _PENDING
                if unwatched:
                    if ack is None:
                        fut._raw = data
                    else:
                        fut._res = ack
                    fut._state = _FINISHED
            if not unwatched:
                try:
                    fut.set_result(ack or pub_ack(data, fut._subject))  # someone waits
                except InvalidStateError:
                    pass  # cancelled by its owner: nobody waits for this answer
            elif fut._callback_list is not None:
                fut._dispatch(Future._invoke_callbacks, fut)  # type: ignore[attr-defined]
        if self._waiting_room or self._waiting_all:
            n = len(self._pending)
            if not n or (self._waiting_room and n <= self._low_water and not self._room_woken):
                # One notify per wait: until the publisher runs again, the acks that follow
                # would each take the Condition for nothing.
                self._room_woken = True
                self._wake()
        return True

    def _retry_later(self, fut: AckFuture) -> bool:
        """Network thread, a 503 for ``fut`` (popped from ``_pending``): if it has a retry
        left that fits in its timeout, put it back under a new token, due at its deadline
        (the heap's), and send it again ``retry_wait`` from now. False: fail it."""
        attempts, wait = fut._retry or self._retry
        if self.closed or 0 <= attempts < fut._sent or fut._state is not _PENDING:
            return False
        now = time.monotonic()
        # A future on the context's timeout has no deadline of its own: it was published a
        # round trip ago, so its deadline is about one ack timeout from now.
        deadline = fut._deadline if fut._deadline is not None else now + self._ack_timeout
        if deadline - now <= wait:
            return False
        fut._sent += 1
        fut._deadline = deadline
        token = str(next(self._ids))
        self._pending[token] = fut
        with self._expiry_lock:
            heapq.heappush(self._expiry, (deadline, token))
        self._core.call_later(wait, lambda: self._resend(token))
        return True

    def _resend(self, token: str) -> None:
        """Timer thread: send a retried publish again, unless it expired or was cancelled
        meanwhile or the client closed (those settled it, or nobody waits)."""
        fut = self._pending.get(token)
        if fut is None or self.closed:
            return
        if fut._state is not _PENDING:  # cancelled by its owner
            self._pending.pop(token, None)
            return
        try:
            self._core.publish_own_reply(fut._subject, fut._data, self._prefix + token, fut._hdrs)
        except errors.NATSError as exc:  # disconnected with a full buffer, closing
            if self._pending.pop(token, None) is fut:
                _settle(fut, error=exc)

    def _sweep(self) -> None:
        """Timer thread: expire late futures, then come again unless closed."""
        if self.closed:
            return
        self._expire(time.monotonic())
        self._wake()
        self._core.call_later(_SWEEP, self._sweep)

    def _newest_token(self) -> Optional[int]:
        """The token most recently added to ``_pending`` (None when empty)."""
        for _ in range(8):
            try:
                return int(next(reversed(self._pending)))
            except StopIteration:
                return None
            except RuntimeError:  # changed size under us (another thread): look again
                continue
        return None  # never settled in 8 looks: the next sweep notes the checkpoint

    def _expire(self, now: float) -> None:
        pending = self._pending
        expired: List[str] = []
        # Checkpoints: the publishes with the context's timeout.
        checkpoints = self._checkpoints
        newest = self._newest_token()
        if newest is not None and (not checkpoints or checkpoints[-1][1] < newest):
            checkpoints.append((now + self._ack_timeout, newest))
        boundary = 0
        while checkpoints and checkpoints[0][0] <= now:
            boundary = checkpoints.popleft()[1]
        if boundary:
            for token in list(pending):  # a C-level copy: the network thread pops meanwhile
                fut = pending.get(token)
                if fut is None or fut._deadline is not None:
                    continue  # answered meanwhile / has a timeout of its own (the heap's)
                if int(token) > boundary:
                    break  # insertion order: the rest are newer
                expired.append(token)
        # The heap: publishes with a timeout of their own.
        with self._expiry_lock:
            heap = self._expiry
            while heap and (heap[0][0] <= now or heap[0][1] not in pending):
                deadline, token = heapq.heappop(heap)
                if deadline <= now:
                    expired.append(token)
        for token in expired:
            fut = pending.pop(token, None)
            if fut is not None:
                _forget_message(fut)
                _settle(
                    fut,
                    error=errors.TimeoutError(
                        f"no JetStream ack for the publish to {fut._subject!r} within its timeout"
                    ),
                )

    def _on_client_closed(self) -> None:
        self.closed = True
        error = errors.ConnectionClosedError("the client closed before the JetStream ack arrived")
        while self._pending:
            try:
                _, fut = self._pending.popitem()
            except KeyError:
                break
            _forget_message(fut)
            _settle(fut, error=error)
        with self._room:
            self._room.notify_all()


def _forget_message(fut: AckFuture) -> None:
    """``fut`` is answered: what was published (kept for a retry) is not kept alive by it
    any more, however long the caller keeps the future."""
    fut._data = b""
    if fut._hdrs is not None:
        fut._hdrs = None


def _settle(
    fut: Future[api.PubAck],
    result: Optional[api.PubAck] = None,
    error: Optional[BaseException] = None,
) -> None:
    """Resolve ``fut`` unless the user cancelled it meanwhile."""
    try:
        if error is not None:
            fut.set_exception(error)
        else:
            fut.set_result(result)  # type: ignore[arg-type]
    except InvalidStateError:
        pass  # cancelled by its owner: nobody waits for this answer
