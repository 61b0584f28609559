"""Subscription: a bounded queue of messages, read by next_msg, iteration or a callback.

The reader (_reader.py) calls :meth:`Subscription._deliver` for every message of this sid; that
is the only place a message enters the queue, so a message crosses exactly one queue
between the socket and the user. The queue is a ``queue.SimpleQueue`` (its blocking
``get(timeout)`` is C code); the limits are enforced by the reader, which drops and reports
rather than blocks.

End of a subscription is a sentinel in the queue: whoever takes it puts it back, so every
waiter (and every later call) sees the end, after every message that came before it.
"""

from __future__ import annotations

import queue
import threading
import time
from typing import TYPE_CHECKING, Any, Callable, Iterator, Optional

from . import _observe, errors
from ._link import FORKED
from ._timeouts import SIGNAL_SLICE, Deadline, check_timeout
from .msg import Msg

if TYPE_CHECKING:  # pragma: no cover
    from ._subs import SubscriptionTable

__all__ = ["MessageHook", "Subscription"]

MessageHook = Callable[[Msg], bool]
"""An internal per-subscription filter run on the reader thread; True means 'consumed'."""


class _End:
    __slots__ = ()


_END = _End()
_INF = float("inf")


class Subscription:
    """A subscription. Made by :meth:`Client.subscribe`, never directly."""

    def __init__(
        self,
        table: SubscriptionTable,
        sid: int,
        subject: str,
        queue_name: Optional[str],
        cb: Optional[Callable[[Msg], None]],
        max_msgs: Optional[int],
        pending_msgs_limit: int,
        pending_bytes_limit: int,
        hook: Optional[MessageHook] = None,
        on_take: Optional[MessageHook] = None,
    ) -> None:
        self._table = table
        self.sid = sid
        self._subject = subject
        self._queue = queue_name or ""
        self._cb = cb
        self._max_msgs = max_msgs or 0
        self.pending_msgs_limit = pending_msgs_limit
        self.pending_bytes_limit = pending_bytes_limit
        self._hook = hook
        # Run where a message with a header block (statuses live there) is handed to the
        # user (next_msg, iteration, the callback thread), in order; True means 'consumed,
        # not for the user'. JetStream push subscriptions answer flow control here: when the
        # message before it is taken.
        self._on_take = on_take
        # Msg or _END; typed Any so that the hot loops need no cast() call per message.
        self._q: queue.SimpleQueue[Any] = queue.SimpleQueue()
        # Written by the reader only / by consumers only, so neither needs a lock.
        self._in_bytes = 0
        self._out_bytes = 0
        self._delivered = 0
        self.dropped = 0
        self._slow = False
        self._end_error: Optional[errors.NATSError] = None
        # ended by drain, unsubscribe or max_msgs before the client closed: the messages
        # queued then are still the callback's, even if close() comes before it gets to them
        self._ended_open = False
        self._reached_max = False  # ended by max_msgs (unsubscribe() then does nothing)
        self._done = threading.Event()  # set when the last message has been handed out
        self._dispatcher: Optional[threading.Thread] = None
        if cb is not None:
            self._dispatcher = threading.Thread(
                target=self._dispatch, name=f"nats-sub-{sid}", daemon=True
            )
            self._dispatcher.start()

    # --- reader side (never user code, never blocks) ----------------------------------

    def _deliver(self, msg: Msg) -> None:
        """Queue ``msg`` (the client's dispatch has offered it to ``_hook`` first)."""
        if self._end_error is not None:
            return  # late message after the subscription ended locally
        self._delivered += 1
        size = len(msg.data)
        q = self._q
        if (
            0 < self.pending_msgs_limit <= q.qsize()  # a limit <= 0: none, as nats-py
            or 0 < self.pending_bytes_limit < self._in_bytes - self._out_bytes + size
        ):
            self._drop(msg)
        else:
            self._in_bytes += size
            q.put(msg)
            self._slow = False
        if self._max_msgs and self._delivered >= self._max_msgs:
            self._table.forget(self)
            self._reached_max = self._end_error is None
            self._end(
                errors.BadSubscriptionError(
                    f"subscription {self.sid} on {self.subject!r} reached max_msgs={self._max_msgs}"
                )
            )

    def _drop(self, msg: Msg) -> None:
        self.dropped += 1
        if _observe.observer is not None:
            _observe.notify_dropped(self._subject)
        if not self._slow:
            # One report per episode of slowness keeps error_cb from being flooded; the
            # running total is on the error and on ``sub.dropped``.
            self._slow = True
            self._table.report(
                errors.SlowConsumerError(
                    f"slow consumer on subject {self.subject!r} (sid {self.sid}): pending limit "
                    f"{self.pending_msgs_limit} msgs / {self.pending_bytes_limit} bytes reached, "
                    f"message dropped ({self.dropped} dropped so far)",
                    sid=self.sid,
                    subject=self.subject,
                    dropped=self.dropped,
                )
            )

    def _end(self, error: errors.NATSError) -> None:
        """No more messages will be queued; readers see ``error`` after the queued ones."""
        if self._end_error is None:
            self._end_error = error
            self._ended_open = not self._table.link.closing
            self._q.put(_END)
            if self._q.qsize() <= 1:
                self._done.set()

    # --- consumer side ----------------------------------------------------------------

    def _take(self, timeout: Optional[float]) -> Msg:
        on_take = self._on_take
        # When the take hook consumes a message, what is left of the timeout is waited for:
        # the clock is read from the first wait on, not for every message taken at once.
        end: Optional[float] = None
        q = self._q
        while True:
            try:
                item = q.get_nowait()
            except queue.Empty:
                if timeout == 0:
                    raise
                if end is None and timeout is not None and on_take is not None:
                    end = time.monotonic() + timeout
                item = self._wait_item(timeout)
            if item is _END:
                self._q.put(_END)
                self._done.set()
                assert self._end_error is not None
                raise self._end_error
            msg: Msg = item
            self._out_bytes += len(msg.data)
            if self._end_error is not None and self._q.qsize() <= 1:
                self._done.set()
            if on_take is None or msg._hdr is None or not on_take(msg):
                return msg
            if timeout is not None:  # consumed by the take hook: wait for the next, in time left
                if end is None:  # nothing waited for yet: the call has only just begun
                    end = time.monotonic() + timeout
                timeout = max(0.0, end - time.monotonic())

    def _wait_item(self, timeout: Optional[float]) -> Any:
        """The next item within ``timeout`` (None: however long it takes), waited for in
        slices: the main thread must come back to Python now and then, or a Ctrl-C the
        kernel handed to another thread would go unseen until the wait ends (see
        _timeouts.SIGNAL_SLICE). queue.Empty when none came in time."""
        q = self._q
        if timeout is None:
            while True:
                try:
                    return q.get(timeout=SIGNAL_SLICE)
                except queue.Empty:
                    continue
        end = time.monotonic() + timeout
        while True:
            left = end - time.monotonic()
            if left <= 0:
                raise queue.Empty
            try:
                return q.get(timeout=min(left, SIGNAL_SLICE))
            except queue.Empty:
                continue

    def next_msg(self, timeout: Optional[float] = 1.0) -> Msg:
        """The next message; waits up to ``timeout`` seconds (None: until one arrives).

        Raises :class:`~jetstream_sync.TimeoutError` when none came in time, and
        :class:`BadSubscriptionError` (or the connection's error) once the subscription has
        ended and every queued message has been taken.
        """
        # A finite float >= 0 (the usual timeout) is what check_timeout would return: it is
        # called only for the rest (NaN fails the comparison), a call saved per message.
        if timeout.__class__ is float and 0.0 <= timeout < _INF:
            t: Optional[float] = timeout
        else:
            t = check_timeout(timeout, "next_msg timeout", allow_none=True)
        link = self._table.link
        if link.state is FORKED:  # Link.check_usable's test, inlined: once per message
            link.check_usable()
        if self._cb is not None:
            raise errors.BadSubscriptionError(
                f"subscription on {self.subject!r} has a callback; next_msg is not available"
            )
        try:
            return self._take(t)
        except queue.Empty:
            raise errors.TimeoutError(
                f"nats: timeout: next_msg: no message on {self.subject!r} within {timeout} s"
            ) from None

    def __iter__(self) -> Iterator[Msg]:
        """Yields messages as they arrive; ends when the subscription ends."""
        if self._cb is not None:
            raise errors.BadSubscriptionError("subscription has a callback; it is not iterable")
        while True:
            self._table.link.check_usable()
            try:
                yield self._take(None)
            except (errors.BadSubscriptionError, errors.ConnectionClosedError):
                return

    def _dispatch(self) -> None:
        """The callback thread: _take's work inlined, as this loop runs once per message."""
        cb = self._cb
        assert cb is not None
        get = self._q.get
        on_take = self._on_take
        link = self._table.link
        while True:
            item = get()
            if item is _END:
                self._q.put(_END)
                self._done.set()
                return
            msg: Msg = item
            self._out_bytes += len(msg.data)
            if self._end_error is not None and self._q.qsize() <= 1:
                self._done.set()
            if on_take is not None and msg._hdr is not None and on_take(msg):
                continue
            if link.closing and not self._ended_open:
                # The client closed (or gave up) with this message queued: as nats.go and
                # nats-py, no callback runs after close(); drain() is how every queued one is
                # handled first (nc.drain() from this very callback too: it ended this
                # subscription before it closed). A callback run now could not reply or ack,
                # so its work would end in ConnectionClosedError through error_cb, or not.
                continue
            try:
                cb(msg)
            except BaseException as exc:  # the user's exception must not end the loop
                # error_cb gets the exception itself, as in nats-py (ported code checks its
                # type); without an error_cb it is logged with its subscription.
                self._table.report(exc)

    # --- state and control --------------------------------------------------------------

    @property
    def subject(self) -> str:
        """The subject (or wildcard) subscribed to."""
        return self._subject

    @property
    def queue(self) -> str:
        """The queue group, ``""`` for none."""
        return self._queue

    @property
    def delivered(self) -> int:
        """Messages the server delivered to this subscription so far (as nats-py's: those
        dropped by a full queue count too; ``max_msgs`` counts these)."""
        return self._delivered

    @property
    def messages(self) -> Iterator[Msg]:
        """nats-py's ``async for msg in sub.messages``: here a blocking iterator, the same
        as iterating the subscription."""
        return iter(self)

    @property
    def pending_msgs(self) -> int:
        """Messages queued and not yet taken."""
        n = self._q.qsize()
        return n - 1 if self._end_error is not None and n else n

    @property
    def pending_bytes(self) -> int:
        """Payload bytes queued and not yet taken."""
        return max(0, self._in_bytes - self._out_bytes)

    @property
    def is_valid(self) -> bool:
        """True while the subscription can still receive new messages."""
        return self._end_error is None

    @property
    def max_msgs(self) -> int:
        """The number of messages after which the subscription ends (``unsubscribe(limit)``), 0
        for no limit."""
        return self._max_msgs

    def unsubscribe(self, limit: Optional[int] = None) -> None:
        """Stop receiving. With ``limit``, stop after that many messages in total.

        Messages already queued are still handed out (to next_msg, iteration or the
        callback); after them the subscription reports its end. On a subscription that
        reached its ``max_msgs`` (the server dropped it already) it does nothing, as nats-py;
        on one unsubscribed or drained before, BadSubscriptionError.
        """
        if limit is not None:
            if isinstance(limit, bool) or not isinstance(limit, int) or limit <= 0:
                raise errors.InvalidArgumentError(
                    f"unsubscribe limit must be an int > 0, got {limit!r}"
                )
            if self._reached_max:
                return
            if self._end_error is not None:
                raise errors.BadSubscriptionError(f"subscription on {self.subject!r} has ended")
            self._max_msgs = limit
            if self._delivered >= limit:
                self._table.unsubscribe(self)
            else:
                self._table.auto_unsubscribe(self, limit)
            return
        self._table.link.check_usable()
        if self._reached_max:
            return
        if self._end_error is not None:
            raise errors.BadSubscriptionError(f"subscription on {self.subject!r} has ended")
        self._table.unsubscribe(self)

    def drain(self, timeout: float = 30.0) -> None:
        """Unsubscribe, let in-flight messages arrive, then wait until all are processed.

        For a callback subscription this waits for the callback to finish the queued
        messages; otherwise it waits until they have been taken (or ``timeout``).
        """
        deadline = Deadline(check_timeout(timeout, "drain timeout"), "drain timeout")
        if self._end_error is None:
            self._table.drain(self, deadline)
        self._wait_done(deadline.remaining())

    def _wait_done(self, timeout: float) -> None:
        if self._dispatcher is not None and self._dispatcher is not threading.current_thread():
            self._dispatcher.join(timeout)
            if self._dispatcher.is_alive():
                raise errors.DrainTimeoutError(
                    f"drain: callback of {self.subject!r} still busy with "
                    f"{self.pending_msgs} messages"
                )
        elif self._cb is None and not self._done.wait(max(0.0, timeout)):
            raise errors.DrainTimeoutError(
                f"drain: {self.pending_msgs} messages on {self.subject!r} not taken in time"
            )

    def __repr__(self) -> str:
        q = f" queue={self.queue!r}" if self.queue else ""
        return (
            f"<Subscription sid={self.sid} subject={self.subject!r}{q} pending={self.pending_msgs}>"
        )
