"""Pull subscriptions the ADR-13 way (seed 000): ``js.pull_subscribe`` and ``fetch``.

A pull request is a publish to ``<prefix>.CONSUMER.MSG.NEXT.<stream>.<consumer>`` whose
reply subject is where the server sends the messages; its body is built in one place,
:func:`pull_request_body`. On the wire, ``fetch(batch=N)`` is::

    SUB <inbox> <sid>                              a fresh inbox for this fetch
    UNSUB <sid> N                                  served in full, the server drops it
    PUB ...MSG.NEXT.S.C <inbox> {"batch":N,"no_wait":true,"expires":<timeout - margin in ns>}
      <- the messages already there, then 404 No Messages if they were fewer than N;
         when none is there, the first ones to come, then the 404; or at expiry a 408
    UNSUB <sid>                                    once the pull can deliver no more

one request, as nats.go's Fetch: ``no_wait`` makes the server answer with what it has at
once, and the expiry makes a pull it cannot serve yet (nothing there, or max_ack_pending
reached) wait and then end by itself. A pull without an expiry would wait at the server
with no end, and the fetch would have to take its inbox away while it is live; a message
the server picks for it in that moment goes to nobody, counted as delivered, until its ack
wait passes. So an inbox is never removed under a live pull (see ``_linger.py``): a fetch
that times out before the server's 408 came (the server counts the expiry from when it
read the pull, later) keeps the inbox routed until the pull ends, and the next fetch takes
what it delivers and sends no pull of its own while it is live. ``408 Requests Pending``
(other pulls wait first) is answered with a long pull on the same inbox (``UNSUB <sid>
N+1``: the 408 counts). ``fetch()`` of one message sends
its no_wait request to a wildcard inbox the subscription owns (``SUB <prefix>.*`` once,
replies to ``<prefix>.<n>``): one publish per message when messages are waiting; only a
long pull needs a fresh inbox.

Messages are rewritten to their stream subject on delivery, so they cannot say which
pull they answer; status messages can (they come on the reply subject). Every inbox of
a subscription therefore feeds one queue: a status for an earlier pull is ignored, and a
message that arrives after its fetch returned is kept for the next fetch rather than
dropped (the client keeps routing an abandoned inbox until the server has seen its
UNSUB, see ``Core.retire``). Statuses are never returned as messages: 404 and 408
end a pull quietly, the others raise (see status.py), after the messages already
received have been returned.

One fetch runs at a time per subscription (others wait their turn, within their
timeout); for parallel pulls make one subscription per thread on the same durable.
"""

from __future__ import annotations

import dataclasses
import itertools
import json
import queue
import threading
import time
from typing import TYPE_CHECKING, Any, Dict, List, Optional, Union

from .. import errors
from .._protocol import check_publish_subject
from .._seam import raw_headers
from .._timeouts import Deadline, check_timeout
from ..msg import Msg
from . import api
from ._binding import check_filter_matches, config_differences, subject_fits_filters
from ._linger import GRACE, LongPulls
from .priority import PinLost, PinState, PullPriority, pull_priority
from .status import (
    END,
    HEARTBEAT,
    NO_MESSAGES,
    PIN_MISMATCH,
    PULL_HEARTBEAT_ALARM,
    REQUEST_TIMEOUT,
    HeartbeatWatch,
    check_alarm,
    classify,
    status_error,
)

if TYPE_CHECKING:  # pragma: no cover
    from ..client import Client
    from ..subscription import Subscription
    from .context import JetStream

__all__ = ["PullSubscriber", "PullSubscription", "pull_expires", "pull_request_body"]

EXPIRES_MARGIN = 0.1  # a long pull expires this long before the fetch's own timeout (seed 000)
# fetch(timeout=None) waits in pulls of this many seconds (each renewed when it expires).
FOREVER_SLICE = 30.0
_BIG = 1 << 40  # inbox subscriptions feed the fetch queue through a hook: no limits apply
_CLOSED = Msg("", "", b"")  # put in the queue when the client closes: wakes a waiting fetch


def pull_expires(remaining: float) -> int:
    """The ``expires`` of a long pull, in nanoseconds, for a fetch with ``remaining``
    seconds left: the margin before the client gives up, so the server's 408 ends the pull
    first. Short timeouts keep half their time, never less than a millisecond."""
    margin = EXPIRES_MARGIN if remaining > 2 * EXPIRES_MARGIN else remaining / 2
    return max(1_000_000, int((remaining - margin) * 1e9))


def pull_request_body(
    batch: int,
    *,
    no_wait: bool = False,
    expires: Optional[int] = None,
    heartbeat: Optional[float] = None,
    max_bytes: Optional[int] = None,
    priority: Optional[PullPriority] = None,
    pin_id: Optional[str] = None,
) -> bytes:
    """The JSON body of a pull request (seed 000); ``expires`` is in nanoseconds;
    ``priority`` adds the priority-group fields and ``pin_id`` the pin (seed 004)."""
    body: Dict[str, Any] = {"batch": batch}
    if max_bytes is not None:
        body["max_bytes"] = max_bytes
    if no_wait:
        body["no_wait"] = True
    if expires is not None:
        body["expires"] = expires
    if heartbeat is not None:
        body["idle_heartbeat"] = int(heartbeat * 1e9)
    if priority is not None:
        body.update(priority.body_fields(pin_id))
    return json.dumps(body, separators=(",", ":")).encode()


_NO_WAIT_ONE = pull_request_body(1, no_wait=True)


def _requests_pending(msg: Msg) -> bool:
    """A 408 that refuses a no_wait pull because other pulls wait first, not its expiry."""
    return msg.description.lower().startswith("requests pending")


def _check_flag(value: Any) -> bool:
    if not isinstance(value, bool):
        raise errors.InvalidArgumentError(f"delete_consumer must be a bool, got {value!r}")
    return value


def _check_limit(value: Any, what: str) -> Optional[int]:
    """A pending limit: None, or an int where one <= 0 is no limit (as nats-py's -1, and as
    for core subscriptions)."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int):
        raise errors.InvalidArgumentError(f"{what} must be an int or None, got {value!r}")
    return value if value > 0 else None


def check_inbox_prefix(prefix: Any) -> Optional[str]:
    """nats-py's ``inbox_prefix`` (bytes, ending in a dot) or a str; the dot is optional."""
    if prefix is None:
        return None
    if isinstance(prefix, (bytes, bytearray)):
        try:
            prefix = bytes(prefix).decode()
        except UnicodeDecodeError:
            raise errors.BadSubjectError(f"inbox_prefix is not UTF-8: {prefix!r}") from None
    if not isinstance(prefix, str):
        raise errors.InvalidArgumentError(
            f"inbox_prefix must be a str or bytes, got {type(prefix).__name__}"
        )
    trimmed = prefix[:-1] if prefix.endswith(".") else prefix
    check_publish_subject(trimmed, "inbox_prefix")
    return trimmed


def _check_batch(batch: Any) -> int:
    if isinstance(batch, bool) or not isinstance(batch, int) or batch < 1:
        raise errors.InvalidArgumentError(f"batch must be an int >= 1, got {batch!r}")
    return batch


class PullSubscription:
    """A bound pull consumer: ``fetch()`` asks for messages. Made by ``js.pull_subscribe``."""

    def __init__(
        self,
        js: JetStream,
        stream: str,
        info: api.ConsumerInfo,
        subject: Optional[str],
        created: bool,
        inbox_prefix: Optional[str] = None,
        pending_msgs_limit: Optional[int] = None,
        pending_bytes_limit: Optional[int] = None,
    ) -> None:
        consumer = info.name
        self._js = js
        self._nc: Client = js._nc
        self._core = js._core
        self.stream = stream
        self.consumer = consumer
        self.subject = subject
        # Only an ephemeral the library made is deleted on unsubscribe/drain. A durable is
        # state its user owns: worker pools share it, and a restart must find its acks.
        self._owned = created and not info.config.durable_name
        self._where = f"pull consumer {consumer!r} of stream {stream!r}"
        self._next_subject = f"{js._prefix}.CONSUMER.MSG.NEXT.{stream}.{consumer}"
        self._q: queue.SimpleQueue[Msg] = queue.SimpleQueue()
        self._lock = threading.Lock()  # one fetch at a time
        self._inbox_prefix = inbox_prefix
        # What is queued: bytes counted in by the reading thread and out by the fetching one
        # (each counter has one writer); the limits drop what comes past them.
        self._msgs_limit = pending_msgs_limit
        self._bytes_limit = pending_bytes_limit
        self._limited = pending_msgs_limit is not None or pending_bytes_limit is not None
        self._bytes_in = 0
        self._bytes_out = 0
        self._dropped = 0
        self._delivered = 0
        self._one_prefix = self._new_inbox() + "."
        self._one_sub: Optional[Subscription] = None
        self._one_ids = itertools.count(1)
        self._closed = False
        self._config = info.config  # its priority groups decide what a pull must say
        self._fetch_what = f"fetch from {self._where}"
        # fetch(1)'s no_wait pull, framed once: only its reply (an inbox) changes.
        self._one_pull = self._core.fixed_request(self._next_subject, _NO_WAIT_ONE)
        self._pins = PinState()
        self._pulls = LongPulls(self._core, self._q)  # the long pull a fetch left early
        self._core.add_close_hook(self._on_client_closed)

    def __repr__(self) -> str:
        return f"<PullSubscription {self._where}>"

    # --- reader side --------------------------------------------------------------------

    def _new_inbox(self) -> str:
        inbox = self._nc.new_inbox()
        if self._inbox_prefix is None:
            return inbox
        return f"{self._inbox_prefix}.{inbox.rsplit('.', 1)[1]}"

    def _on_msg(self, msg: Msg) -> bool:
        """Network thread: every inbox of this subscription feeds the one queue."""
        pull = self._pulls.current
        if pull is not None and msg.sid == pull.sid and self._pulls.seen(pull, msg):
            return True
        size = len(msg.data)
        if self._limited and self._over_limit(size) and classify(msg) is None:
            self._drop()
            return True
        self._bytes_in += size
        self._q.put(msg)
        return True

    def _wait_linger(self, batch: int, deadline: Deadline) -> List[Msg]:
        """Wait for what the left-early pull delivers, instead of sending a pull while it
        is live (a pull per fetch would pile up on the server). [] once it has ended; a
        FetchTimeoutError when the fetch's time runs out first."""
        pulls = self._pulls
        pulls.waited = True
        try:
            while True:
                pull = pulls.lingering()
                if pull is None:
                    return []
                msg = self._get(min(deadline.remaining(), pull.ends + GRACE - time.monotonic()))
                if msg is None:
                    if deadline.expired:
                        raise errors.FetchTimeoutError(
                            f"fetch from {self._where}: no message came in time"
                        )
                    pulls.end(pull, unsub=True)  # its time is over
                    return []
                if raw_headers(msg) is not None and classify(msg) is not None:
                    continue  # a status for an earlier pull
                return [msg, *self._take_waiting(batch - 1, None)]
        finally:
            pulls.waited = False

    def _over_limit(self, size: int) -> bool:
        if self._msgs_limit is not None and self._q.qsize() >= self._msgs_limit:
            return True
        limit = self._bytes_limit
        return limit is not None and self._bytes_in - self._bytes_out + size > limit

    def _drop(self) -> None:
        """A message past the pending limits is dropped (not acked: the server redelivers
        it after its ack wait), reported as a slow consumer the first time and every 1000."""
        self._dropped += 1
        if self._dropped % 1000 == 1:
            self._core.report(
                errors.SlowConsumerError(
                    f"{self._where}: pending limits reached ({self._msgs_limit} messages, "
                    f"{self._bytes_limit} bytes); {self._dropped} dropped so far",
                    subject=self.subject or "",
                    dropped=self._dropped,
                )
            )

    def _took(self, msg: Msg) -> Msg:
        self._bytes_out += len(msg.data)
        return msg

    def _on_client_closed(self) -> None:
        self._q.put(_CLOSED)

    # --- fetch --------------------------------------------------------------------------

    def fetch(
        self,
        batch: int = 1,
        timeout: Optional[float] = 5.0,
        heartbeat: Optional[float] = None,
        *,
        heartbeat_alarm: float = PULL_HEARTBEAT_ALARM,
        group: Optional[str] = None,
        min_pending: Optional[int] = None,
        min_ack_pending: Optional[int] = None,
        priority: Optional[int] = None,
    ) -> List[Msg]:
        """Up to ``batch`` messages: those already waiting at once, else the first ones to
        come within ``timeout``. Raises :class:`~jetstream_sync.TimeoutError` when none
        came. ``timeout=None`` waits as long as it takes (nats-py's ``fetch(1, None)``).
        ``timeout=0`` waits for nothing new: one no_wait pull takes what the consumer has
        now (its answer is waited for, up to the JetStream timeout); the server acks a
        publish a moment before its consumers count it, so right after a publish that may
        be nothing. ``heartbeat`` asks the server for idle heartbeats during a long pull, and
        :class:`NoHeartbeatError` when ``heartbeat_alarm`` (default 2) intervals pass
        without anything and a PING round trip (up to 1 s, or the alarm's time if longer)
        brings nothing either.

        On a consumer with priority groups (ADR-42) ``group`` is required, with
        ``min_pending`` / ``min_ack_pending`` (overflow) or ``priority`` (prioritized);
        under pinned_client the pin is kept from one fetch to the next (see ``pin_id``).

        The timeout is :class:`~jetstream_sync.errors.FetchTimeoutError` (nats-py's name),
        a :class:`~jetstream_sync.TimeoutError`.
        """
        # timeout=None: pulls of FOREVER_SLICE seconds one after the other until one brings
        # something (nats-py sends one pull without expiry; a bounded one is not lost to a
        # reconnect or a leader change, and a later pull meets a new consumer leader).
        while True:
            try:
                msgs = self._fetch(
                    batch,
                    FOREVER_SLICE if timeout is None else timeout,
                    heartbeat,
                    heartbeat_alarm,
                    group,
                    min_pending,
                    min_ack_pending,
                    priority,
                )
                break
            except errors.FetchTimeoutError:
                if timeout is not None:
                    raise
        self._delivered += len(msgs)
        return msgs

    def _fetch(
        self,
        batch: int,
        timeout: float,
        heartbeat: Optional[float],
        heartbeat_alarm: float,
        group: Optional[str],
        min_pending: Optional[int],
        min_ack_pending: Optional[int],
        priority: Optional[int],
    ) -> List[Msg]:
        batch = _check_batch(batch)
        if self._msgs_limit is not None and batch > self._msgs_limit:
            raise errors.InvalidArgumentError(
                f"fetch batch {batch} is above the subscription's pending_msgs_limit "
                f"({self._msgs_limit}): the batch's own messages would be dropped"
            )
        # The default needs no check: fetch(1) is a hot path.
        alarm = heartbeat_alarm
        if alarm is not PULL_HEARTBEAT_ALARM:
            alarm = check_alarm(alarm)
        prio = pull_priority(
            self._config, self._where, group, min_pending, min_ack_pending, priority
        )
        t = check_timeout(timeout, "fetch timeout")
        no_wait = t == 0
        hb: Optional[float] = None
        if heartbeat is not None:
            hb = check_timeout(heartbeat, "heartbeat")
            if hb <= 0 or hb * 2 > t:
                raise errors.InvalidArgumentError(
                    f"heartbeat must be > 0 and at most half the fetch timeout ({t} s), "
                    f"got {heartbeat!r}"
                )
        # With timeout=0 the deadline bounds only the wait for the no_wait pull's answer.
        deadline = Deadline(self._js._timeout if no_wait else t, self._fetch_what)
        if not self._lock.acquire(timeout=t):
            raise errors.FetchTimeoutError(
                f"fetch from {self._where}: another thread's fetch held it for {t} s"
            )
        # This thread reads the answers: the network thread sleeps on.
        quiet = self._core.quiet_begin()
        try:
            self._check_open()
            if not self._q.empty():
                msgs = self._take_waiting(batch, prio)
                if msgs:
                    return msgs
            if not no_wait and self._pulls.lingering() is not None:
                msgs = self._wait_linger(batch, deadline)
                if msgs:
                    return msgs
            for _ in range(2):  # a 423 (pin lost) clears the pin: once more, as a standby
                try:
                    if batch == 1:
                        msgs = self._no_wait_one(deadline, prio)
                        if msgs:
                            return msgs
                        if no_wait:
                            break
                    return self._pull(
                        batch,
                        deadline,
                        hb,
                        alarm,
                        prio,
                        no_wait_first=batch > 1,
                        long_pull=not no_wait,
                    )
                except PinLost:
                    continue
            raise errors.FetchTimeoutError(f"fetch from {self._where}: no message came in time")
        finally:
            self._core.quiet_end(quiet)
            self._lock.release()

    def _check_open(self) -> None:
        if self._closed:
            raise errors.BadSubscriptionError(f"{self._where}: the subscription is closed")
        if self._nc.is_closed:
            raise errors.ConnectionClosedError(f"fetch from {self._where}: the client is closed")

    def pin_id(self, group: Optional[str] = None) -> Optional[str]:
        """The pin this subscription holds in ``group`` (default: the consumer's only
        group) under the pinned_client policy, or None (a standby, or no pin policy)."""
        return self._pins.current(self._config, group)

    def _seen(self, msg: Msg, prio: Optional[PullPriority]) -> Msg:
        if prio is not None and prio.pinned:
            self._pins.observe(prio.group, msg)
        return msg

    def _take_waiting(self, batch: int, prio: Optional[PullPriority]) -> List[Msg]:
        """Messages that arrived after an earlier fetch returned; stale statuses dropped."""
        msgs: List[Msg] = []
        q = self._q
        while len(msgs) < batch:
            try:
                msg = self._took(q.get_nowait())
            except queue.Empty:
                break
            if msg is _CLOSED:
                q.put(msg)
                break
            if raw_headers(msg) is None or classify(msg) is None:
                msgs.append(msg if prio is None else self._seen(msg, prio))
        return msgs

    def _get(self, wait: float) -> Optional[Msg]:
        """The next arrival within ``wait`` seconds, read in this thread when no other
        thread is reading (no wake-up on the way), else handed over by the reader."""
        q = self._q
        try:
            if not q.empty() or wait <= 0:
                msg = q.get_nowait()
            else:
                end = time.monotonic() + wait
                while True:
                    read = self._core.read_here(wait, q.qsize)
                    if read:
                        msg = q.get_nowait()
                        break
                    if read is None:
                        try:
                            msg = q.get(timeout=min(wait, 0.005))
                            break
                        except queue.Empty:
                            pass
                    wait = end - time.monotonic()
                    if wait <= 0:
                        return None
        except queue.Empty:
            return None
        if msg is _CLOSED:
            q.put(msg)
            raise errors.ConnectionClosedError(f"fetch from {self._where}: the client closed")
        self._bytes_out += len(msg.data)
        return msg

    def _send(self, body: bytes, reply: str) -> None:
        self._core.send_request(self._next_subject, body, reply, None)

    def _pin_lost(self, prio: Optional[PullPriority], sent: Optional[str]) -> PinLost:
        assert prio is not None
        self._pins.lost(prio.group, sent)
        return PinLost()

    def _no_wait_one(self, deadline: Deadline, prio: Optional[PullPriority]) -> List[Msg]:
        """fetch(1)'s first step: a no_wait pull on the subscription's wildcard inbox."""
        if self._one_sub is None:
            self._one_sub = self._core.subscribe(
                self._one_prefix + "*", None, None, None, _BIG, _BIG, hook=self._on_msg
            )
        reply = self._one_prefix + str(next(self._one_ids))
        pin = None
        if prio is None:
            head, tail, n = self._one_pull
            self._core.send_frame(head + reply.encode() + tail, n)
        else:
            pin = self._pins.for_pull(prio)
            self._send(pull_request_body(1, no_wait=True, priority=prio, pin_id=pin), reply)
        while True:
            msg = self._get(deadline.remaining())
            if msg is None:
                raise errors.FetchTimeoutError(
                    f"fetch from {self._where}: no answer to the pull within its timeout"
                )
            kind = classify(msg)
            if kind is None:
                return [msg if prio is None else self._seen(msg, prio)]
            if msg.subject != reply or kind is HEARTBEAT:
                continue  # a status for an earlier pull
            if kind is NO_MESSAGES or kind is REQUEST_TIMEOUT or kind is END:
                return []
            if kind is PIN_MISMATCH and prio is not None:
                raise self._pin_lost(prio, pin)
            raise status_error(msg, self._where)

    def _pull(
        self,
        batch: int,
        deadline: Deadline,
        hb: Optional[float],
        alarm: float,
        prio: Optional[PullPriority],
        no_wait_first: bool,
        long_pull: bool = True,
    ) -> List[Msg]:
        """One pull of up to ``batch``: a no_wait pull first when ``no_wait_first``, and a
        long pull on the same inbox when that finds nothing and ``long_pull`` allows."""
        core = self._core
        inbox = self._new_inbox()
        sub = core.subscribe(inbox, None, None, None, _BIG, _BIG, hook=self._on_msg)
        msgs: List[Msg] = []
        finished = False  # the server will send nothing more to this inbox
        auto_unsub = False
        watch: Optional[HeartbeatWatch] = None
        waiting = not no_wait_first  # a long pull is out
        pin = self._pins.for_pull(prio)
        try:
            if no_wait_first and hb is None and prio is None:
                # One request, no_wait with an expiry (nats.go's Fetch): what is there now,
                # up to its 404, else the first to come. Without an expiry a no_wait pull
                # the server cannot serve yet (max_ack_pending reached) waits on it with no
                # end, and taking its inbox away races a delivery: the message is lost
                # until its ack wait. With one, it ends by itself and lingers till then.
                self._send_long(
                    sub, inbox, batch, deadline, None, alarm, None, unsub_after=batch, no_wait=True
                )
                auto_unsub = True
            elif no_wait_first:
                body = pull_request_body(batch, no_wait=True, priority=prio, pin_id=pin)
                self._send(body, inbox)
            else:
                watch = self._send_long(
                    sub, inbox, batch, deadline, hb, alarm, prio, unsub_after=batch
                )
                auto_unsub = hb is None
            q = self._q  # taken from only under self._lock: what is queued stays there
            while len(msgs) < batch:
                if not q.empty():
                    # The usual case while a batch streams in, taken here rather than in
                    # _get: no call and no clock per message. (Nobody else takes from q.)
                    msg = q.get_nowait()
                    if msg is _CLOSED:
                        q.put(msg)
                        raise errors.ConnectionClosedError(
                            f"fetch from {self._where}: the client closed"
                        )
                    self._bytes_out += len(msg.data)
                elif waiting and msgs:
                    msg = None  # return as soon as there is something: take what is here
                else:
                    wait = deadline.remaining()
                    if watch is not None:
                        wait = min(wait, watch.due_in())
                    msg = self._get(wait)
                if msg is None:
                    if (waiting and msgs) or deadline.expired:
                        break
                    if watch is not None and watch.missed():
                        if msgs:
                            break
                        if not watch.confirmed(
                            self._nc.flush, deadline.remaining(), lambda: not q.empty()
                        ):
                            continue  # it came after all (this process was slow), or time is up
                        raise errors.NoHeartbeatError(
                            f"fetch from {self._where}: no message and no heartbeat for "
                            f"{watch.limit} s (heartbeat {hb} s)"
                        )
                    continue
                if watch is not None:
                    watch.alive()
                # classify() only for a message with a header block (statuses have one)
                kind = None if raw_headers(msg) is None else classify(msg)
                if kind is None:
                    msgs.append(msg if prio is None else self._seen(msg, prio))
                    continue
                if msg.subject != inbox or kind is HEARTBEAT:
                    continue  # a status for an earlier pull, or a sign of life
                finished = True
                if (kind is NO_MESSAGES or kind is REQUEST_TIMEOUT) and not waiting and not msgs:
                    if not long_pull or (kind is REQUEST_TIMEOUT and not _requests_pending(msg)):
                        break  # (the second: the no_wait pull's own expiry ended it)
                    # Nothing there yet (404), or other clients' pulls wait before ours (408
                    # Requests Pending): wait for it with a long pull on the same inbox.
                    finished = False
                    waiting = True
                    watch = self._send_long(
                        sub, inbox, batch, deadline, hb, alarm, prio, unsub_after=batch + 1
                    )
                    auto_unsub = hb is None
                    continue
                if kind is NO_MESSAGES or kind is REQUEST_TIMEOUT or kind is END:
                    break
                if msgs:
                    break  # the messages first; the next pull meets the error again
                if kind is PIN_MISMATCH and prio is not None:
                    raise self._pin_lost(prio, pin)
                raise status_error(msg, self._where)
        finally:
            # Left early, a long pull lingers: its inbox stays until it ends (_linger.py).
            served, lingers = self._pulls.leave(sub, len(msgs), batch, finished, self._closed)
            if served:
                finished = True
            if finished and auto_unsub and served:
                core.forget(sub)  # the server dropped the inbox at its UNSUB count
            elif finished:
                core.unsubscribe(sub)
            elif not lingers:
                core.retire(sub)  # the pull may still deliver: keep what comes
        if not msgs:
            raise errors.FetchTimeoutError(f"fetch from {self._where}: no message came in time")
        return msgs

    def _send_long(
        self,
        sub: Subscription,
        inbox: str,
        batch: int,
        deadline: Deadline,
        hb: Optional[float],
        alarm: float,
        prio: Optional[PullPriority],
        unsub_after: int,
        no_wait: bool = False,
    ) -> Optional[HeartbeatWatch]:
        """A waiting pull (tracked in ``_pulls`` when it may be left to linger). UNSUB
        after ``unsub_after`` messages leaves no interest behind once it is served, but
        heartbeats would count too: with them, fetch unsubscribes."""
        if hb is None:
            self._core.auto_unsubscribe(sub, unsub_after)
        expires = pull_expires(deadline.remaining())
        if hb is None and prio is None:  # the only pulls a fetch may leave to linger
            self._pulls.track(sub, batch, time.monotonic() + expires / 1e9)
        body = pull_request_body(
            batch,
            no_wait=no_wait,
            expires=expires,
            heartbeat=hb,
            priority=prio,
            pin_id=self._pins.for_pull(prio),
        )
        try:
            self._send(body, inbox)
        except BaseException:
            self._pulls.current = None  # never sent: nothing to wait for
            raise
        return HeartbeatWatch(hb, alarm) if hb is not None else None

    # --- the rest -----------------------------------------------------------------------

    def consumer_info(self) -> api.ConsumerInfo:
        """The consumer's info, asked of the server."""
        return self._js.consumer_info(self.stream, self.consumer)

    @property
    def pending(self) -> int:
        """Messages received after their fetch returned; the next fetch returns them."""
        return self._q.qsize()

    @property
    def pending_msgs(self) -> int:
        """nats-py's name for :attr:`pending` (what is queued for the next fetch)."""
        return self._q.qsize()

    @property
    def pending_bytes(self) -> int:
        """The payload bytes of the messages queued for the next fetch."""
        return max(0, self._bytes_in - self._bytes_out)

    @property
    def delivered(self) -> int:
        """How many messages fetch has returned."""
        return self._delivered

    def unsubscribe(self, delete_consumer: bool = False) -> None:
        """Stop: remove the inboxes. An ephemeral consumer pull_subscribe made is deleted; a
        durable one stays (other workers may share it, and it keeps what was acked) unless
        ``delete_consumer`` asks. An error deleting it is raised.

        Messages still queued (see ``pending``) are not acked: the server redelivers
        them after their ack wait.
        """
        self._close(None, _check_flag(delete_consumer))

    def drain(self, timeout: float = 30.0, delete_consumer: bool = False) -> None:
        """Let a running fetch finish and the messages already sent arrive, then stop as
        ``unsubscribe`` does; an error deleting the consumer goes to error_cb (seed 001)."""
        self._close(check_timeout(timeout, "drain timeout"), _check_flag(delete_consumer))

    def _close(self, drain_timeout: Optional[float], delete_consumer: bool) -> None:
        if self._closed:
            return
        got = self._lock.acquire(timeout=drain_timeout if drain_timeout is not None else 0.0)
        try:
            self._closed = True
            if self._one_sub is not None and not self._nc.is_closed:
                self._core.unsubscribe(self._one_sub)
            self._pulls.close()
            if drain_timeout is not None and self._nc.is_connected:
                self._nc.flush(drain_timeout)
            if (self._owned or delete_consumer) and not self._nc.is_closed:
                try:
                    self._js.delete_consumer(self.stream, self.consumer)
                except errors.ConsumerNotFoundError:
                    pass
                except errors.NATSError as exc:
                    if drain_timeout is None:
                        raise
                    self._core.report(exc)
        finally:
            if got:
                self._lock.release()


class PullSubscriber:
    """The pull_subscribe mixin of JetStream (the ADR-15 lookups, seed 001)."""

    def pull_subscribe(
        self,
        subject: Optional[str],
        durable: Optional[str] = None,
        stream: Optional[str] = None,
        config: Optional[api.ConsumerConfig] = None,
        pending_msgs_limit: Optional[int] = None,
        pending_bytes_limit: Optional[int] = None,
        inbox_prefix: Union[str, bytes, None] = None,
    ) -> PullSubscription:
        """Bind to a durable pull consumer, creating it when missing (or an ephemeral one
        when ``durable`` is None). ``stream`` is found from ``subject`` when not given.
        A ``subject`` of None or ``""`` reads the whole stream; ``""`` without ``stream=``
        (nats-py's ``pull_subscribe("", durable)``) is the account's one stream. With
        ``config.filter_subjects``, ``subject`` may be a pattern covering them all
        (``"events.>"``): the filters decide what is delivered.

        ``pending_msgs_limit`` / ``pending_bytes_limit`` bound what is queued for the
        subscription (None, or <= 0 as nats-py's -1: no bound); a message past them is
        dropped, unacked, and the server redelivers it after its ack wait;
        :class:`SlowConsumerError` goes to error_cb. A fetch may not ask for more than
        ``pending_msgs_limit``.
        ``inbox_prefix`` is the prefix of the subscription's pull inboxes (default: the
        client's), for accounts allowed to subscribe only below some prefix.
        """
        js: JetStream = self  # type: ignore[assignment]
        msgs_limit = _check_limit(pending_msgs_limit, "pending_msgs_limit")
        bytes_limit = _check_limit(pending_bytes_limit, "pending_bytes_limit")
        prefix = check_inbox_prefix(inbox_prefix)
        if config is not None and not isinstance(config, api.ConsumerConfig):
            raise errors.InvalidArgumentError(
                f"config must be a ConsumerConfig, got {type(config).__name__}"
            )
        if subject is not None and not isinstance(subject, str):
            raise errors.BadSubjectError(f"subject must be a str or None, got {subject!r}")
        every = subject == ""  # as in nats-py: the whole stream, no filter from the subject
        if every:
            subject = None
        named = config.durable_name if config is not None else None
        if named and durable and named != durable:
            raise errors.InvalidArgumentError(
                f"durable {durable!r} and config.durable_name {named!r} differ"
            )
        durable = durable or named
        if durable is not None:
            api.check_consumer_name(durable)
        if config is not None:
            if config.ack_policy in (api.AckPolicy.NONE, api.AckPolicy.ALL):
                raise errors.InvalidArgumentError(
                    "a pull subscription needs ack_policy explicit, not "
                    f"{getattr(config.ack_policy, 'value', config.ack_policy)}"
                )
            if config.deliver_subject:
                raise errors.InvalidArgumentError(
                    "a pull consumer has no deliver_subject (that makes a push consumer)"
                )
            if subject is not None:
                check_filter_matches(subject, config)
        if stream is None:
            if every:
                stream = _the_only_stream(js)
            elif subject is None:
                raise errors.InvalidArgumentError("pull_subscribe needs a subject or a stream")
            else:
                stream = js.find_stream_name_by_subject(subject)
        stream = api.check_stream_name(stream)

        info: Optional[api.ConsumerInfo] = None
        if durable is not None:
            try:
                info = js.consumer_info(stream, durable)
            except (errors.APIError, errors.TimeoutError):
                # Not found, or the lookup failed (a slow or changing leader): a pull
                # subscriber goes on to create it (seed 001, "Consumer name"), and the
                # create tells whether it exists after all.
                info = None
        created = False
        if info is None:
            cfg = dataclasses.replace(
                config or api.ConsumerConfig(),
                durable_name=durable,
                ack_policy=(config.ack_policy if config else None) or api.AckPolicy.EXPLICIT,
            )
            if subject is not None and not cfg.filter_subject and not cfg.filter_subjects:
                cfg = dataclasses.replace(cfg, filter_subject=subject)
            try:
                info = js.add_consumer(stream, cfg)
                created = True
            except errors.ConsumerAlreadyExistsError:
                if durable is None:
                    raise
                info = js.consumer_info(stream, durable)  # made meanwhile by another process
        if not created:
            _check_bound(info, subject, config)
        return PullSubscription(js, stream, info, subject, created, prefix, msgs_limit, bytes_limit)

    def pull_subscribe_bind(
        self,
        consumer: Optional[str] = None,
        stream: Optional[str] = None,
        inbox_prefix: Union[str, bytes, None] = None,
        pending_msgs_limit: Optional[int] = None,
        pending_bytes_limit: Optional[int] = None,
        name: Optional[str] = None,
        durable: Optional[str] = None,
    ) -> PullSubscription:
        """Bind to an existing pull consumer of ``stream`` without creating anything
        (nats-py's call): the consumer is named by ``consumer``, or ``durable`` / ``name``
        (nats-py's older spellings; several must agree). A missing consumer is
        :class:`ConsumerNotFoundError`; a push consumer :class:`ConsumerIsPushBasedError`.
        The consumer stays when the subscription ends. Limits and prefix as in
        :meth:`pull_subscribe`."""
        js: JetStream = self  # type: ignore[assignment]
        msgs_limit = _check_limit(pending_msgs_limit, "pending_msgs_limit")
        bytes_limit = _check_limit(pending_bytes_limit, "pending_bytes_limit")
        prefix = check_inbox_prefix(inbox_prefix)
        given = {n for n in (consumer, durable, name) if n is not None}
        if not given:
            raise errors.InvalidArgumentError("pull_subscribe_bind needs the consumer's name")
        if len(given) > 1:
            raise errors.InvalidArgumentError(
                f"pull_subscribe_bind: consumer {consumer!r}, durable {durable!r} and name "
                f"{name!r} name different consumers"
            )
        if stream is None:
            raise errors.InvalidArgumentError("pull_subscribe_bind needs the stream's name")
        stream = api.check_stream_name(stream)
        consumer = api.check_consumer_name(given.pop())
        info = js.consumer_info(stream, consumer)
        _check_bound(info, None, None)
        return PullSubscription(js, stream, info, None, False, prefix, msgs_limit, bytes_limit)


def _the_only_stream(js: JetStream) -> str:
    """``pull_subscribe("")`` without a stream: the account's one stream (nats-py asks the
    server for the streams capturing "", which is every stream, and takes the first; with
    several, which one it gets is the server's order, so here that is refused)."""
    names = js.stream_names()
    if len(names) != 1:
        raise errors.InvalidArgumentError(
            "pull_subscribe without a subject needs stream= unless the account has exactly "
            f"one stream; it has {len(names)}: {names[:10]}"
        )
    return names[0]


# Fields a binding call may leave to the consumer: its names and what the subject decides.
_NOT_COMPARED = frozenset({"name", "durable_name", "filter_subject", "filter_subjects"})


def _check_bound(
    info: api.ConsumerInfo, subject: Optional[str], config: Optional[api.ConsumerConfig]
) -> None:
    """The checks of binding to an existing consumer (seed 001, "Consumer name")."""
    have = info.config
    where = f"consumer {info.name!r} of stream {info.stream_name!r}"
    if have.deliver_subject:
        raise errors.ConsumerIsPushBasedError(
            409,
            "Consumer is push based",
            where=f"{where} delivers to {have.deliver_subject!r}: pull_subscribe needs a pull "
            "consumer",
        )
    if have.ack_policy in (api.AckPolicy.NONE, api.AckPolicy.ALL):
        raise errors.InvalidArgumentError(
            f"{where} has ack_policy {getattr(have.ack_policy, 'value', have.ack_policy)}: "
            "a pull subscription needs explicit"
        )
    if subject is not None:
        filters = list(have.filter_subjects or [])
        if have.filter_subject:
            filters.append(have.filter_subject)
        if filters and not subject_fits_filters(subject, filters):
            raise errors.InvalidArgumentError(
                f"subject {subject!r} does not match the filter of {where}: {filters}"
            )
    if config is not None:
        differ = config_differences(config, have, _NOT_COMPARED)
        if differ:
            raise errors.InvalidArgumentError(
                f"{where} exists with another configuration, not changed: {', '.join(differ)}"
            )
