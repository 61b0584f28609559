"""The simplified pull API (ADR-37): ``js.consumer()`` gives a :class:`PullConsumer`.

* ``fetch()`` — one pull request, answered until it is complete or expires.
* ``next()`` — one message.
* ``messages()`` / ``consume(cb)`` — a continuous pull (:class:`_Pump`): up to
  ``max_messages`` are asked for, and once half of them have arrived the rest is asked for
  again, so messages keep flowing without a round trip per batch. ``consume(cb)`` sends its
  first pull at once; ``messages()`` on the first ``next()`` / iteration (as nats.go and
  nats.js do): an iterator made early and read later holds no messages meanwhile that
  another reader (a higher priority of a prioritized group, ADR-42) should get.

The pump keeps count of what its pulls may still deliver (pending messages and bytes),
subtracting what arrives and what a 408 / 409 says was not delivered
(``Nats-Pending-Messages`` / ``Nats-Pending-Bytes``). It asks for idle heartbeats; two
missed ones are reported through ``error_cb`` (a :class:`NoHeartbeatError`) and answered
with a fresh pull, as is a reconnect (the server forgets the pulls of a connection that
went away): a consume() survives a server restart without the user doing anything.
Terminal statuses (consumer deleted, push based, bad request) end it and surface the
error. All of this runs on the consuming thread — the iterator's caller or the consume
thread — never on the network thread, which only queues what arrives.
"""

from __future__ import annotations

import itertools
import queue
import threading
import time
from collections import deque
from typing import (
    TYPE_CHECKING,
    Any,
    Callable,
    Deque,
    Iterator,
    List,
    Optional,
    Protocol,
    Tuple,
)

from .. import errors
from .._seam import raw_headers, set_ack_state
from .._timeouts import SIGNAL_SLICE, Deadline, check_timeout
from ..msg import Msg
from . import api
from .ack import ACK_NONE
from .priority import (
    PinLost,
    PinnedCallback,
    PinState,
    PullPriority,
    UnpinnedCallback,
    pull_priority,
)
from .pull import pull_expires, pull_request_body
from .status import (
    END,
    ERROR,
    HEARTBEAT,
    LIMIT,
    NO_MESSAGES,
    PIN_MISMATCH,
    PULL_HEARTBEAT_ALARM,
    REQUEST_TIMEOUT,
    RETRY,
    TERMINAL,
    HeartbeatWatch,
    check_alarm,
    classify,
    pending_counts,
    status_error,
)

if TYPE_CHECKING:  # pragma: no cover
    from ..client import Client
    from .context import JetStream

__all__ = ["ConsumeContext", "ConsumerFactory", "MessagesContext", "PullConsumer"]

_BIG = 1 << 40
_MAX_BYTES_BATCH = 1_000_000  # with max_bytes, the message count is not the limit (ADR-37)
_RETRY_WAIT = 0.5  # before pulling again after a refused pull or a failed consumer check
_LINK_CHECK = 0.5  # an ordered consumer's link is looked up after a pull and this much quiet
_CHECK_MIN = 0.05  # that lookup is not started with less time than this to wait for it
_WAKE = Msg("", "", b"")  # queued by the reconnect hook: look at the flags
_STOP = Msg("", "", b"")  # queued by stop(): no more messages
_CLOSED = Msg("", "", b"")  # queued when the client closes
_LATE = Msg("", "", b"")  # queued for fetch() / next() calls: a late message is kept


class ChainBroken(Exception):
    """Internal: an ordered consumer's current consumer can no longer be trusted."""


def _check_count(value: Any, what: str, allow_none: bool = True) -> Optional[int]:
    if value is None and allow_none:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise errors.InvalidArgumentError(f"{what} must be an int >= 1, got {value!r}")
    return value


def _heartbeat_for(expires: float, heartbeat: Optional[float]) -> float:
    """The idle heartbeat of a continuous pull: given, or half the expiry up to 30 s."""
    if heartbeat is None:
        return min(expires / 2, 30.0)
    hb = check_timeout(heartbeat, "heartbeat")
    if hb <= 0 or hb * 2 > expires:
        raise errors.InvalidArgumentError(
            f"heartbeat must be > 0 and at most half of expires ({expires} s), got {heartbeat!r}"
        )
    return hb


class PullConsumer:
    """A pull consumer on the server, bound by ``js.consumer()`` or made by
    ``js.create_or_update_consumer()``. Thread-safe: every call has its own inbox."""

    def __init__(self, js: JetStream, stream: str, info: api.ConsumerInfo) -> None:
        self._js = js
        self._nc: Client = js._nc
        self._core = js._core
        self.stream = stream
        self.name = info.name
        self.info = info  # as of the last consumer_info() (or creation)
        self._next_subject = f"{js._prefix}.CONSUMER.MSG.NEXT.{stream}.{info.name}"
        self._ack_none = info.config.ack_policy == api.AckPolicy.NONE
        self._where = f"consumer {info.name!r} of stream {stream!r}"
        self._pins = PinState()  # kept across fetch / next / messages / consume calls
        # fetch() / next(): a pull the call gave up on may still deliver (until the server
        # has seen the UNSUB). What it delivers then is kept here for the next call — or
        # handed to a call under way — instead of being lost in the old call's queue.
        self._late_lock = threading.Lock()
        self._late: Deque[Msg] = deque()
        self._calls: List[queue.SimpleQueue[Msg]] = []  # the queues of the calls under way

    def __repr__(self) -> str:
        return f"<PullConsumer {self._where}>"

    def consumer_info(self) -> api.ConsumerInfo:
        """Fresh info from the server (also kept in ``info``)."""
        self.info = self._js.consumer_info(self.stream, self.name)
        return self.info

    def _prepare(self, msg: Msg) -> Msg:
        if self._ack_none:
            set_ack_state(msg, ACK_NONE)  # ack calls on it do nothing (ADR-15)
        return msg

    def pin_id(self, group: Optional[str] = None) -> Optional[str]:
        """The pin this object holds in ``group`` (default: the consumer's only group)
        under the pinned_client policy; None for a standby or another policy."""
        return self._pins.current(self.info.config, group)

    def _priority(
        self,
        group: Optional[str],
        min_pending: Optional[int],
        min_ack_pending: Optional[int],
        priority: Optional[int],
    ) -> Optional[PullPriority]:
        return pull_priority(
            self.info.config, self._where, group, min_pending, min_ack_pending, priority
        )

    # --- one pull -----------------------------------------------------------------------

    def fetch(
        self,
        max_messages: Optional[int] = None,
        max_wait: float = 5.0,
        max_bytes: Optional[int] = None,
        heartbeat: Optional[float] = None,
        no_wait: bool = False,
        *,
        heartbeat_alarm: float = PULL_HEARTBEAT_ALARM,
        group: Optional[str] = None,
        min_pending: Optional[int] = None,
        min_ack_pending: Optional[int] = None,
        priority: Optional[int] = None,
    ) -> List[Msg]:
        """One pull request for ``max_messages`` (default 100) or ``max_bytes``: the messages
        that came before it was complete or ``max_wait`` ran out (possibly none). With
        ``no_wait``, only what is there already. With ``heartbeat``, NoHeartbeatError when
        ``heartbeat_alarm`` (default 2) intervals pass without anything and a PING round trip
        (up to 1 s, or the alarm's time if longer) brings nothing either. ``group`` and the
        rest: priority groups (ADR-42), see :mod:`jetstream_sync.jetstream.priority`."""
        prio = self._priority(group, min_pending, min_ack_pending, priority)
        alarm = check_alarm(heartbeat_alarm)
        if max_messages is not None and max_bytes is not None:
            raise errors.InvalidArgumentError("give max_messages or max_bytes, not both")
        n = _check_count(max_messages, "max_messages")
        nbytes = _check_count(max_bytes, "max_bytes")
        batch = n or (_MAX_BYTES_BATCH if nbytes else 100)
        t = check_timeout(max_wait, "max_wait")
        if t <= 0:
            raise errors.BadTimeoutError("max_wait must be > 0 seconds")
        hb: Optional[float] = None
        if heartbeat is not None:
            hb = check_timeout(heartbeat, "heartbeat")
            if hb <= 0 or hb * 2 > t:
                raise errors.InvalidArgumentError(
                    f"heartbeat must be > 0 and at most half of max_wait ({t} s), got {heartbeat!r}"
                )
        if self._nc.is_closed:
            raise errors.ConnectionClosedError(f"fetch from {self._where}: the client is closed")
        return self._pull_keeping_pin(batch, nbytes, Deadline(t), hb, alarm, no_wait, prio)

    def next(
        self,
        timeout: float = 5.0,
        *,
        group: Optional[str] = None,
        min_pending: Optional[int] = None,
        min_ack_pending: Optional[int] = None,
        priority: Optional[int] = None,
    ) -> Msg:
        """The next message; :class:`~jetstream_sync.TimeoutError` when none came in time."""
        prio = self._priority(group, min_pending, min_ack_pending, priority)
        t = check_timeout(timeout, "timeout")
        if t <= 0:
            raise errors.BadTimeoutError("timeout must be > 0 seconds")
        msgs = self._pull_keeping_pin(1, None, Deadline(t), None, PULL_HEARTBEAT_ALARM, False, prio)
        if not msgs:
            raise errors.TimeoutError(f"next from {self._where}: no message within {t} s")
        return msgs[0]

    def _pull_keeping_pin(
        self,
        batch: int,
        max_bytes: Optional[int],
        deadline: Deadline,
        hb: Optional[float],
        alarm: float,
        no_wait: bool,
        prio: Optional[PullPriority],
    ) -> List[Msg]:
        """One pull; after a 423 (the pin it carried is gone) once more, as a standby."""
        try:
            return self._one_pull(batch, max_bytes, deadline, hb, alarm, no_wait, prio)
        except PinLost:
            if deadline.expired:
                return []
            return self._one_pull(batch, max_bytes, deadline, hb, alarm, no_wait, prio)

    def _keep_late(self, msg: Msg) -> None:
        """Under _late_lock: ``msg`` came for a call that has returned. A message is kept
        for the next call, and the calls under way are told; a status (the end of that
        abandoned pull) means nothing any more."""
        if raw_headers(msg) is not None and classify(msg) is not None:
            return
        self._late.append(msg)
        for q in self._calls:
            q.put(_LATE)

    def _take_late(
        self, batch: int, max_bytes: Optional[int], prio: Optional[PullPriority]
    ) -> List[Msg]:
        """Under _late_lock: kept messages, oldest first, up to ``batch`` (and ``max_bytes``,
        though at least one)."""
        late = self._late
        msgs: List[Msg] = []
        size = 0
        while late and len(msgs) < batch:
            if max_bytes is not None:
                size += len(late[0].data) + len(raw_headers(late[0]) or b"")
                if msgs and size > max_bytes:
                    break
            msg = late.popleft()
            if prio is not None and prio.pinned:
                self._pins.observe(prio.group, msg)
            msgs.append(self._prepare(msg))
        return msgs

    def _one_pull(
        self,
        batch: int,
        max_bytes: Optional[int],
        deadline: Deadline,
        hb: Optional[float],
        alarm: float,
        no_wait: bool,
        prio: Optional[PullPriority],
    ) -> List[Msg]:
        core = self._core
        late_lock = self._late_lock
        with late_lock:
            if self._late:  # what came after earlier calls gave up: no need to pull
                return self._take_late(batch, max_bytes, prio)
        q: queue.SimpleQueue[Msg] = queue.SimpleQueue()
        returned = False  # set (under late_lock) once this call is over

        def on_msg(msg: Msg) -> bool:
            with late_lock:
                if returned:
                    self._keep_late(msg)
                else:
                    q.put(msg)
            return True

        def on_close() -> None:  # wakes the wait below if the client closes meanwhile
            q.put(_CLOSED)

        pin = self._pins.for_pull(prio)
        if no_wait:
            body = pull_request_body(
                batch, no_wait=True, max_bytes=max_bytes, priority=prio, pin_id=pin
            )
        else:
            body = pull_request_body(
                batch,
                expires=pull_expires(deadline.remaining()),
                heartbeat=hb,
                max_bytes=max_bytes,
                priority=prio,
                pin_id=pin,
            )
        inbox = self._nc.new_inbox()
        sub = core.subscribe(inbox, None, None, None, _BIG, _BIG, hook=on_msg)
        with late_lock:
            self._calls.append(q)
        core.add_close_hook(on_close)
        msgs: List[Msg] = []
        own = 0  # messages of this call's pull (late ones of earlier calls not counted)
        finished = False
        watch = HeartbeatWatch(hb, alarm) if hb is not None else None
        try:
            core.send_request(self._next_subject, body, inbox, None)
            while len(msgs) < batch:
                wait = deadline.remaining()
                if watch is not None:
                    wait = min(wait, watch.due_in())
                try:
                    msg = q.get(timeout=min(wait, SIGNAL_SLICE)) if wait > 0 else q.get_nowait()
                except queue.Empty:
                    if wait > SIGNAL_SLICE:
                        continue  # a slice of the wait (Ctrl-C stays seen), not all of it
                    if watch is not None and watch.missed() and not deadline.expired:
                        if msgs:
                            break  # what came is returned; the next fetch meets the silence
                        if not watch.confirmed(
                            self._nc.flush, deadline.remaining(), lambda: not q.empty()
                        ):
                            continue  # it came after all (this process was slow), or time is up
                        raise errors.NoHeartbeatError(
                            f"fetch from {self._where}: no message and no heartbeat for "
                            f"{watch.limit} s"
                        ) from None
                    break
                if msg is _LATE:  # an earlier call's late message: older, so first
                    with late_lock:
                        msgs.extend(self._take_late(batch - len(msgs), max_bytes, prio))
                    continue
                if msg is _CLOSED:
                    if msgs:
                        break
                    raise errors.ConnectionClosedError(f"fetch from {self._where}: client closed")
                if watch is not None:
                    watch.alive()
                kind = classify(msg)
                if kind is None:
                    if prio is not None and prio.pinned:
                        self._pins.observe(prio.group, msg)
                    msgs.append(self._prepare(msg))
                    own += 1
                elif kind is HEARTBEAT:
                    continue
                elif kind in (NO_MESSAGES, REQUEST_TIMEOUT, END):
                    finished = True
                    break
                else:
                    finished = True
                    if msgs:
                        break  # the messages first; the next pull meets the error again
                    if kind is PIN_MISMATCH and prio is not None:
                        self._pins.lost(prio.group, pin)
                        raise PinLost()
                    raise status_error(msg, self._where)
        finally:
            core.remove_close_hook(on_close)
            with late_lock:
                returned = True
                self._calls.remove(q)
                while True:  # what came after the last look is not this call's any more
                    try:
                        left = q.get_nowait()
                    except queue.Empty:
                        break
                    if left is not _CLOSED and left is not _LATE:
                        self._keep_late(left)
            if finished or own >= batch:
                core.unsubscribe(sub)  # the pull is over: nothing more can come
            else:
                core.retire(sub)  # it may still deliver: what comes is kept (on_msg)
        return msgs

    # --- continuous pulls ---------------------------------------------------------------

    def messages(
        self,
        max_messages: Optional[int] = None,
        expires: float = 30.0,
        max_bytes: Optional[int] = None,
        heartbeat: Optional[float] = None,
        *,
        heartbeat_alarm: float = PULL_HEARTBEAT_ALARM,
        group: Optional[str] = None,
        min_pending: Optional[int] = None,
        min_ack_pending: Optional[int] = None,
        priority: Optional[int] = None,
        on_pinned: Optional[PinnedCallback] = None,
        on_unpinned: Optional[UnpinnedCallback] = None,
    ) -> MessagesContext:
        """An iterator over messages as they come, pulling ahead (see the module doc).
        Nothing is pulled before the first ``next()`` / iteration.
        Use it as a context manager, or call ``stop()``: it ends the iteration.
        ``on_pinned(pin_id)`` / ``on_unpinned()`` run when this client gains / loses the
        pin of a pinned_client group."""
        prio = self._priority(group, min_pending, min_ack_pending, priority)
        pins = _pin_callbacks(on_pinned, on_unpinned)
        return MessagesContext(
            self._pump(max_messages, expires, max_bytes, heartbeat, heartbeat_alarm, prio, *pins)
        )

    def consume(
        self,
        cb: Callable[[Msg], None],
        max_messages: Optional[int] = None,
        expires: float = 30.0,
        max_bytes: Optional[int] = None,
        heartbeat: Optional[float] = None,
        *,
        heartbeat_alarm: float = PULL_HEARTBEAT_ALARM,
        group: Optional[str] = None,
        min_pending: Optional[int] = None,
        min_ack_pending: Optional[int] = None,
        priority: Optional[int] = None,
        on_pinned: Optional[PinnedCallback] = None,
        on_unpinned: Optional[UnpinnedCallback] = None,
    ) -> ConsumeContext:
        """Run ``cb(msg)`` on a thread of its own for every message, in order, until
        ``stop()`` / ``drain()`` or a terminal error (``error``, also sent to error_cb).
        The first pull is sent before this returns: consumption starts now.
        ``on_pinned`` / ``on_unpinned`` run on that thread too (see messages())."""
        if not callable(cb):
            raise errors.InvalidArgumentError(f"cb must be callable, got {type(cb).__name__}")
        prio = self._priority(group, min_pending, min_ack_pending, priority)
        pins = _pin_callbacks(on_pinned, on_unpinned)
        pump = self._pump(max_messages, expires, max_bytes, heartbeat, heartbeat_alarm, prio, *pins)
        pump.start()
        return ConsumeContext(pump, cb)

    def _pump(
        self,
        max_messages: Optional[int],
        expires: float,
        max_bytes: Optional[int],
        heartbeat: Optional[float],
        heartbeat_alarm: float,
        prio: Optional[PullPriority] = None,
        on_pinned: Optional[PinnedCallback] = None,
        on_unpinned: Optional[UnpinnedCallback] = None,
    ) -> _Pump:
        if max_messages is not None and max_bytes is not None:
            raise errors.InvalidArgumentError("give max_messages or max_bytes, not both")
        n = _check_count(max_messages, "max_messages")
        nbytes = _check_count(max_bytes, "max_bytes")
        exp = check_timeout(expires, "expires")
        if exp < 1.0:
            raise errors.InvalidArgumentError(f"expires must be >= 1 s, got {expires!r}")
        hb = _heartbeat_for(exp, heartbeat)
        alarm = check_alarm(heartbeat_alarm)
        ttl = self.info.config.priority_timeout
        if prio is not None and prio.pinned and ttl:
            # The server keeps a pin only while its client pulls at least every
            # priority_timeout (a waiting pull does not count): pull twice as often.
            exp = min(exp, max(ttl / 2, 0.05))
            hb = min(hb, exp / 2)
        n = n or (_MAX_BYTES_BATCH if nbytes else 500)
        pump = _Pump(self, n, nbytes, exp, hb, prio, alarm=alarm)
        pump.on_pinned, pump.on_unpinned = on_pinned, on_unpinned
        return pump  # not pulling yet: start(), or the first get()


def _pin_callbacks(
    on_pinned: Optional[PinnedCallback], on_unpinned: Optional[UnpinnedCallback]
) -> Tuple[Optional[PinnedCallback], Optional[UnpinnedCallback]]:
    for fn, what in ((on_pinned, "on_pinned"), (on_unpinned, "on_unpinned")):
        if fn is not None and not callable(fn):
            raise errors.InvalidArgumentError(f"{what} must be callable, got {type(fn).__name__}")
    return on_pinned, on_unpinned


class _Pump:
    """One continuous pull, driven by ``get()`` on the consuming thread."""

    def __init__(
        self,
        consumer: PullConsumer,
        max_messages: int,
        max_bytes: Optional[int],
        expires: float,
        heartbeat: float,
        prio: Optional[PullPriority] = None,
        *,
        alarm: float = PULL_HEARTBEAT_ALARM,
    ) -> None:
        self._c = consumer
        self._nc = consumer._nc
        self._core = consumer._core
        self._max_msgs = max_messages
        self._max_bytes = max_bytes
        self._threshold_msgs = max(1, max_messages // 2)
        self._threshold_bytes = max_bytes // 2 if max_bytes else 0
        self._expires_ns = int(expires * 1e9)
        self._hb = heartbeat
        self._q: queue.SimpleQueue[Msg] = queue.SimpleQueue()
        self._pending_msgs = 0
        self._pending_bytes = 0
        self._watch = HeartbeatWatch(heartbeat, alarm)
        self._fresh = False  # something came since the watch last heard of it
        self._repull = False  # set on the network thread by a reconnect
        self._pull_at: Optional[float] = None  # a pull put off until then (after a refusal)
        self._started = False  # the first pull went out (start(), or the first get())
        self._returning = False  # stop() was called: messages go back to the server
        self.stopped = False
        self.error: Optional[errors.NATSError] = None
        self.report_terminal = True  # an ordered consumer rebuilds instead
        # A link of an ordered consumer's chain: a reconnect or missed heartbeats raise
        # ChainBroken (the chain is rebuilt) instead of pulling again on this consumer.
        self.chain_link = False
        # A chain link looks its consumer up once things go quiet after a pull (see
        # _check_link): when, or None when no pull awaits that check.
        self._check_at: Optional[float] = None
        self._check_after = min(_LINK_CHECK, heartbeat)
        self._lock = threading.Lock()  # one get() at a time
        self._prio = prio
        self._pinned_policy = prio is not None and prio.pinned
        self._sent_pin: Optional[str] = None  # the pin the outstanding pulls carry
        self.on_pinned: Optional[PinnedCallback] = None
        self.on_unpinned: Optional[UnpinnedCallback] = None
        self._inbox = self._nc.new_inbox()
        self._sub = self._core.subscribe(
            self._inbox, None, None, None, _BIG, _BIG, hook=self._on_msg
        )
        self._core.add_reconnect_hook(self._on_reconnect)
        self._core.add_close_hook(self._on_close)

    def start(self) -> None:
        """The first pull (once; the first get() calls it when nobody did)."""
        if self._started or self.stopped:
            return
        self._started = True
        self._repull = False  # a reconnect before the first pull: nothing to pull again
        self._watch.alive()  # the heartbeats are due from the first pull on
        self._pull()

    # network / timer threads: queue and flag only
    def _on_msg(self, msg: Msg) -> bool:
        if self._returning:
            self._give_back(msg)
        else:
            self._q.put(msg)
        return True

    def _give_back(self, msg: Msg) -> None:
        """After stop(): a message nobody will take goes back to the server at once (-NAK),
        to be redelivered (to another client, or to this one later) now rather than after
        ack_wait. Only what the pulls delivered before the server saw the UNSUB comes here:
        after that the server skips a pull whose inbox lost its interest."""
        if self._c._ack_none or msg.subject == self._inbox or classify(msg) is not None:
            return  # nothing to give back: ack none, an empty reply, a status
        try:
            msg.nak()
        except errors.NATSError as exc:  # closed or disconnected: ack_wait redelivers it
            self._report(exc)

    def _give_back_queued(self) -> None:
        while True:
            try:
                item = self._q.get_nowait()
            except queue.Empty:
                return
            if item is _STOP or item is _CLOSED:
                self._q.put(item)  # markers stay for any later get()
                return
            if item is not _WAKE:
                self._give_back(item)

    def _on_reconnect(self) -> None:
        self._repull = True
        self._q.put(_WAKE)

    def _on_close(self) -> None:
        self._q.put(_CLOSED)

    # the consuming thread
    def _pull(self) -> None:
        """Ask for what brings the outstanding count back to the maximum."""
        want = self._max_msgs - self._pending_msgs
        want_bytes: Optional[int] = None
        if self._max_bytes:
            want_bytes = self._max_bytes - self._pending_bytes
            if want_bytes <= 0:
                return
        if want <= 0:
            return
        pin = self._c._pins.for_pull(self._prio)
        body = pull_request_body(
            want,
            expires=self._expires_ns,
            heartbeat=self._hb,
            max_bytes=want_bytes,
            priority=self._prio,
            pin_id=pin,
        )
        self._sent_pin = pin
        self._pending_msgs += want
        if want_bytes:
            self._pending_bytes += want_bytes
        self._pull_at = None
        try:
            # Written at once, not left for the flusher: a pull waiting in the buffer while
            # this thread hands out messages could reach the server together with a consumer
            # delete sent meanwhile, and the server drops, without a word, pulls it had not
            # taken up when the consumer went.
            self._core.send_request(self._c._next_subject, body, self._inbox, None)
        except errors.NATSError as exc:  # disconnected with a full buffer, or closing
            self._report(exc)
            self._reset(later=True)
            return
        if self.chain_link:
            self._check_at = time.monotonic() + self._check_after

    def _reset(self, later: bool = False) -> None:
        """Forget what earlier pulls may deliver and pull afresh (now or a bit later)."""
        self._pending_msgs = 0
        self._pending_bytes = 0
        if later:
            self._pull_at = time.monotonic() + _RETRY_WAIT
        else:
            self._pull()

    def _report(self, err: BaseException) -> None:
        self._core.report(err)

    report = _report

    @property
    def where(self) -> str:
        return self._c._where

    def _fail(self, err: errors.NATSError) -> errors.NATSError:
        self.error = err
        if self.report_terminal:
            self._report(err)
        self.stop()
        return err

    def _check_consumer(self) -> None:
        """After a 503 or missed heartbeats: is the consumer still there? Terminal if not."""
        try:
            self._c.consumer_info()
        except errors.ConsumerNotFoundError:
            raise self._fail(
                errors.ConsumerDeletedError(409, "Consumer Deleted", where=self._c._where)
            ) from None
        except errors.NATSError as exc:  # not reachable yet (a restart): try again later
            self._report(exc)
            self._reset(later=True)
            return
        self._reset()

    def _check_link(self, now: float, end: Optional[float]) -> None:
        """A chain link, quiet for a moment after a pull: is its consumer still there?

        The server drops the pulls it has not taken up yet when their consumer is deleted,
        without a 409: a pull sent just before a delete (by anyone) may vanish, and nothing
        else would say so before the heartbeat alarm (2 x 15 s with the default expires).
        One lookup per pull at most, and only once nothing comes: ChainBroken if the
        consumer is gone. The lookup waits no longer than the heartbeat alarm (which then
        decides, as before) or the caller's ``end`` (the next get() looks then); an answer
        that does not come says nothing, so nothing is reported. Not while disconnected:
        the reconnect breaks the chain anyway."""
        js = self._c._js
        alarm_in = self._watch.due_in()
        left = min(js.timeout, alarm_in)
        if end is not None and end - now < left:
            if end - now < _CHECK_MIN:
                self._check_at = end  # the caller's wait ends first: look on the next get()
                return
            left = end - now
        self._check_at = None
        if left < _CHECK_MIN or not self._nc.is_connected:
            return
        try:
            js._api(f"CONSUMER.INFO.{self._c.stream}.{self._c.name}", timeout=left)
        except (errors.ConsumerNotFoundError, errors.StreamNotFoundError):
            raise ChainBroken("the consumer is gone") from None
        except errors.NATSError:
            pass

    def get(self, timeout: Optional[float]) -> Optional[Msg]:
        """The next message; None once stopped or when ``timeout`` ran out."""
        with self._lock:
            return self._get(timeout)

    def _get(self, timeout: Optional[float]) -> Optional[Msg]:
        end = None if timeout is None else time.monotonic() + timeout
        q = self._q
        if not self._started:
            self.start()
        while True:
            if self.error is not None:
                raise self.error
            if self._repull:
                self._repull = False
                self._fresh = False
                self._watch.alive()
                if self.chain_link:
                    raise ChainBroken("reconnected")
                self._reset()
            msg: Optional[Msg] = None
            if self._pull_at is None and self._check_at is None:
                # While messages flow one is waiting: take it without reading the clock.
                try:
                    msg = q.get_nowait()
                except queue.Empty:
                    pass
            if msg is None:
                msg = self._wait(q, end)
                if msg is None:
                    if self.stopped or (end is not None and time.monotonic() >= end):
                        return None
                    continue
            if msg is _STOP:
                q.put(msg)  # stays for any later get()
                return None
            if msg is _CLOSED:
                q.put(msg)
                if self.stopped:
                    return None
                raise self._fail(
                    errors.ConnectionClosedError(f"{self._c._where}: the client closed")
                )
            if msg is _WAKE:
                continue
            # Something came: the heartbeat watch learns it when the queue next runs dry
            # (_wait), not per message, so a flowing consumer reads no clock.
            self._fresh = True
            if self._check_at is not None:  # not quiet yet: the check waits for a pause
                self._check_at = time.monotonic() + self._check_after
            if self._returning:  # stopped: not for the user any more
                self._give_back(msg)
                continue
            # classify() only for a message with a header block (a status may be one)
            kind = None if raw_headers(msg) is None else classify(msg)
            if kind is None:
                if msg.subject == self._inbox:
                    continue  # not a message: an empty reply on our inbox
                self._pending_msgs -= 1
                if self._max_bytes:
                    self._pending_bytes -= len(msg.data) + len(raw_headers(msg) or b"")
                if self._pinned_policy:
                    self._observe_pin(msg)
                if not self.stopped and (
                    self._pending_msgs <= self._threshold_msgs
                    or (self._max_bytes and self._pending_bytes <= self._threshold_bytes)
                ):
                    self._pull()
                if self._c._ack_none:
                    set_ack_state(msg, ACK_NONE)  # ack calls on it do nothing (ADR-15)
                return msg
            self._on_status(kind, msg)

    def _wait(self, q: queue.SimpleQueue[Msg], end: Optional[float]) -> Optional[Msg]:
        """The queue is empty: wait for the next item until the heartbeat watch, a put-off
        pull, a link check or ``end`` is due, and do what is due. None: nothing came."""
        if self._fresh:
            self._fresh = False
            self._watch.alive()
        now = time.monotonic()
        if self._pull_at is not None and now >= self._pull_at and not self.stopped:
            self._pull()
        wait = self._watch.due_in()
        if end is not None:
            wait = min(wait, max(0.0, end - now))
        if self._pull_at is not None:
            wait = min(wait, max(0.0, self._pull_at - now))
        if self._check_at is not None:
            wait = min(wait, max(0.0, self._check_at - now))
        try:
            return q.get(timeout=wait) if wait > 0 else q.get_nowait()
        except queue.Empty:
            pass
        if self.stopped:
            return None
        now = time.monotonic()
        if self._check_at is not None and now >= self._check_at:
            self._check_link(now, end)
        if self._watch.missed():
            self._watch.alive()
            if self.chain_link:
                raise ChainBroken("missed heartbeats") from None
            self._report(
                errors.NoHeartbeatError(
                    f"{self._c._where}: no message and no heartbeat for "
                    f"{self._watch.limit} s; pulling again"
                )
            )
            self._check_consumer()
        return None

    def _observe_pin(self, msg: Msg) -> None:
        assert self._prio is not None
        try:
            self._c._pins.observe(self._prio.group, msg, self.on_pinned)
        except Exception as exc:  # the user's on_pinned
            self._report_callback("on_pinned", exc)

    def _pin_lost(self) -> None:
        """A 423: the pin our pulls carried is someone else's now. Pull on without it (a
        standby); the other pulls that carried it get a 423 too and are ignored."""
        sent, self._sent_pin = self._sent_pin, None
        if sent is None or self._prio is None:
            return
        try:
            self._c._pins.lost(self._prio.group, sent, self.on_unpinned)
        except Exception as exc:  # the user's on_unpinned
            self._report_callback("on_unpinned", exc)
        self._reset()

    def _report_callback(self, what: str, exc: Exception) -> None:
        err = errors.CallbackError(
            f"{what} callback of {self._c._where} raised {type(exc).__name__}: {exc}"
        )
        err.__cause__ = exc
        self._report(err)

    def _on_status(self, kind: str, msg: Msg) -> None:
        if kind is HEARTBEAT:
            return
        if kind is PIN_MISMATCH and self._pinned_policy:
            self._pin_lost()
            return
        if kind in (REQUEST_TIMEOUT, END, NO_MESSAGES):
            n, b = pending_counts(msg)
            self._pending_msgs = max(0, self._pending_msgs - n)
            self._pending_bytes = max(0, self._pending_bytes - b)
            if not self.stopped and self._pending_msgs <= self._threshold_msgs:
                self._pull()
            return
        err = status_error(msg, self._c._where)
        if kind is LIMIT:
            self._report(err)  # a warning: the pull was refused, try again a bit later
            self._reset(later=True)
        elif kind is RETRY:
            self._reset()
        elif kind is TERMINAL:
            raise self._fail(err)
        elif kind is ERROR and msg.status == 503:
            self._check_consumer()
        else:  # unknown statuses (and a 423 without a pin policy): report, go on
            self._report(err)
            self._reset(later=True)

    def stop(self) -> None:
        """Stop now. Messages queued and not handed out, and those the outstanding pulls
        still bring until the server has seen the UNSUB, are given back (-NAK)."""
        if self.stopped:
            return
        self.stopped = True
        self._returning = True
        self._core.remove_reconnect_hook(self._on_reconnect)
        self._core.remove_close_hook(self._on_close)
        if not self._nc.is_closed:
            self._core.retire(self._sub)  # late messages still reach _on_msg: given back
        self._give_back_queued()
        self._q.put(_STOP)

    def drain(self, timeout: float) -> None:
        """Stop pulling; what the server already sent is still handed out, then None."""
        if self.stopped:
            return
        self.stopped = True
        self._core.remove_reconnect_hook(self._on_reconnect)
        self._core.remove_close_hook(self._on_close)
        if self._nc.is_connected:
            self._core.retire(self._sub)
            try:
                self._nc.flush(timeout)  # everything sent before the UNSUB has arrived
            except errors.NATSError as exc:
                self._report(exc)
        self._q.put(_STOP)


class _Source(Protocol):
    """What MessagesContext and ConsumeContext drive: a _Pump, or an ordered consumer's."""

    @property
    def stopped(self) -> bool: ...

    @property
    def error(self) -> Optional[errors.NATSError]: ...

    @property
    def where(self) -> str: ...

    def get(self, timeout: Optional[float]) -> Optional[Msg]: ...

    def stop(self) -> None: ...

    def drain(self, timeout: float) -> None: ...

    def report(self, err: BaseException) -> None: ...


class MessagesContext:
    """``consumer.messages()``: iterate; ``stop()`` (or leaving the ``with``) ends it."""

    def __init__(self, pump: _Source) -> None:
        self._pump = pump

    def __iter__(self) -> Iterator[Msg]:
        return self

    def __next__(self) -> Msg:
        msg = self._pump.get(None)
        if msg is None:
            raise StopIteration
        return msg

    def next(self, timeout: float = 5.0) -> Msg:
        """The next message within ``timeout``; TimeoutError otherwise, StopIteration
        once stopped."""
        t = check_timeout(timeout, "timeout")
        msg = self._pump.get(t)
        if msg is None:
            if self._pump.stopped:
                raise StopIteration
            raise errors.TimeoutError(f"{self._pump.where}: no message within {t} s")
        return msg

    def stop(self) -> None:
        """Stop now: the iteration ends. Messages pulled and not handed out are given back (-NAK)
        where the consumer acks."""
        self._pump.stop()

    def drain(self, timeout: float = 30.0) -> None:
        """Stop pulling; what the server already sent is still handed out, then the iteration
        ends. Raises BadTimeoutError on a bad ``timeout``."""
        self._pump.drain(check_timeout(timeout, "drain timeout"))

    def __enter__(self) -> MessagesContext:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


_consume_ids = itertools.count(1)


class ConsumeContext:
    """``consumer.consume(cb)``: its thread runs the callback for every message."""

    def __init__(self, pump: _Source, cb: Callable[[Msg], None]) -> None:
        self._pump = pump
        self._cb = cb
        self._done = threading.Event()
        self._thread = threading.Thread(
            target=self._run, name=f"nats-consume-{next(_consume_ids)}", daemon=True
        )
        self._thread.start()

    def _run(self) -> None:
        try:
            while True:
                try:
                    msg = self._pump.get(None)
                except errors.NATSError:
                    return  # terminal: kept in ``error``, reported already
                if msg is None:
                    return
                try:
                    self._cb(msg)
                except BaseException as exc:  # the user's exception must not end the loop
                    self._pump.report(exc)  # itself, as subscribe callbacks' (nats-py's way)
        finally:
            self._done.set()

    @property
    def error(self) -> Optional[errors.NATSError]:
        """The terminal error that ended it, if one did."""
        return self._pump.error

    @property
    def closed(self) -> bool:
        """True once the consume thread has ended."""
        return self._done.is_set()

    def stop(self) -> None:
        """Stop now: messages not yet handed to the callback are given back to the server
        (-NAK), so they are redelivered at once instead of after ack_wait."""
        self._pump.stop()

    def drain(self, timeout: float = 30.0) -> None:
        """Stop pulling, run the callback for what was already sent, then end."""
        t = check_timeout(timeout, "drain timeout")
        deadline = Deadline(t)
        self._pump.drain(t)
        self.wait(deadline.remaining())

    def wait(self, timeout: Optional[float] = None) -> bool:
        """Wait for the consume thread to end; False if it did not within ``timeout``."""
        t = check_timeout(timeout, "timeout", allow_none=True)
        if threading.current_thread() is self._thread:
            return False  # called from the callback: it cannot wait for itself
        return self._done.wait(t)


class ConsumerFactory:
    """The JetStream mixin that hands out PullConsumers."""

    def consumer(self, stream: str, name: str) -> PullConsumer:
        """Bind to an existing pull consumer."""
        js: JetStream = self  # type: ignore[assignment]
        info = js.consumer_info(stream, name)
        if info.config.deliver_subject:
            raise errors.ConsumerIsPushBasedError(
                409,
                "Consumer is push based",
                where=f"consumer {name!r} of stream {stream!r} delivers to "
                f"{info.config.deliver_subject!r}: js.consumer() needs a pull consumer",
            )
        return PullConsumer(js, info.stream_name or stream, info)

    def create_or_update_consumer(
        self, stream: str, config: Optional[api.ConsumerConfig] = None, **fields: Any
    ) -> PullConsumer:
        """Make a pull consumer, or change the one of that name; returns it, bound.
        ``ack_policy`` defaults to explicit (as ADR-37 clients do; the server's own default
        is none, which would make every ack a no-op and nothing ever redelivered)."""
        js: JetStream = self  # type: ignore[assignment]
        if fields.get("ack_policy") is None and (config is None or config.ack_policy is None):
            fields = {**fields, "ack_policy": api.AckPolicy.EXPLICIT}
        if (config is not None and getattr(config, "deliver_subject", None)) or fields.get(
            "deliver_subject"
        ):
            raise errors.InvalidArgumentError(
                "create_or_update_consumer makes pull consumers; use add_consumer for a push "
                "consumer (deliver_subject)"
            )
        info = js._upsert_consumer(stream, config, fields, "")
        return PullConsumer(js, info.stream_name or stream, info)
