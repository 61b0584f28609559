"""Ordered consumers (ADR-17), pull based: every message of a stream once, in order.

An ordered consumer is a chain of short-lived server consumers: ephemeral, ack policy
none, memory storage, one replica. The client remembers the stream sequence of the last
message it handed out; whenever the chain breaks — a consumer sequence that skips (a
gap), a deleted or vanished consumer, a 503 after a server restart — it makes the next
consumer of the chain, starting at that stream sequence + 1, and deletes the old one.
The user sees neither the breaks nor a message twice.
"""

from __future__ import annotations

import dataclasses
import threading
import time
from typing import TYPE_CHECKING, Any, Callable, List, Optional, Sequence

from .. import errors
from .._timeouts import Deadline, check_timeout
from ..msg import Msg
from . import api
from .consumer import (
    ChainBroken,
    ConsumeContext,
    MessagesContext,
    PullConsumer,
    _check_count,
    _heartbeat_for,
    _Pump,
)
from .status import PULL_HEARTBEAT_ALARM, check_alarm

if TYPE_CHECKING:  # pragma: no cover
    from .context import JetStream

__all__ = ["OrderedConsumer", "OrderedConsumerFactory"]

_INACTIVE = 300.0  # an abandoned link of the chain is removed by the server after this
# A rebuild's request, when the caller's wait has less left than this, still gets this long:
# a live server answers in milliseconds, and a call with little time left must still be
# able to rebuild (a loop of fetch(max_wait=0.1) calls would otherwise never get through).
_LEAST_TRY = 1.0
_TRIES = 100  # of a rebuild nobody waits on (consume(), a bare messages() iteration)
# Errors after which the chain is rebuilt instead of the error being raised.
_BREAKS = (
    ChainBroken,
    errors.ConsumerDeletedError,
    errors.NoConsumerResponseError,
    errors.ConsumerNotFoundError,
    errors.ConsumerLeadershipChangedError,
)


class OrderedConsumer:
    """Made by ``js.ordered_consumer()``. One reader at a time (it is one ordered
    sequence); ``fetch``/``next``/``messages``/``consume`` as on a PullConsumer."""

    def __init__(
        self,
        js: JetStream,
        stream: str,
        filter_subjects: Optional[Sequence[str]],
        deliver_policy: Optional[api.DeliverPolicy],
        opt_start_seq: Optional[int],
        opt_start_time: Any,
        headers_only: Optional[bool],
        replay_policy: Optional[api.ReplayPolicy],
        inactive_threshold: Optional[float] = None,
    ) -> None:
        self._js = js
        self._core = js._core
        self.stream = api.check_stream_name(stream)
        self._base = js._nc.new_inbox().rsplit(".", 1)[1]
        self._serial = 0
        if deliver_policy is None and opt_start_seq is not None:
            deliver_policy = api.DeliverPolicy.BY_START_SEQUENCE
        elif deliver_policy is None and opt_start_time is not None:
            deliver_policy = api.DeliverPolicy.BY_START_TIME
        self._template = api.ConsumerConfig(
            ack_policy=api.AckPolicy.NONE,
            mem_storage=True,
            num_replicas=1,
            inactive_threshold=_INACTIVE if inactive_threshold is None else inactive_threshold,
            deliver_policy=deliver_policy,
            opt_start_seq=opt_start_seq,
            opt_start_time=opt_start_time,
            headers_only=headers_only,
            replay_policy=replay_policy,
            filter_subjects=list(filter_subjects) if filter_subjects else None,
        )
        self._stream_seq = 0  # of the last message handed out
        self._consumer_seq = 0  # of that message, in the current link of the chain
        self._consumer: Optional[PullConsumer] = None
        self._left = False  # messages()/consume() stopped: the current link is deleted
        self._broken = False  # a rebuild gave up at its caller's deadline: the next read retries
        self._lock = threading.RLock()
        self.resets = 0  # how many times the chain was rebuilt (for the curious and tests)
        self._link()

    def __repr__(self) -> str:
        return f"<OrderedConsumer of stream {self.stream!r} at sequence {self._stream_seq}>"

    @property
    def name(self) -> str:
        """The current link of the chain."""
        assert self._consumer is not None
        return self._consumer.name

    @property
    def info(self) -> api.ConsumerInfo:
        """The current link's info as last seen: right after ``ordered_consumer()``, the
        server's answer to its creation (``num_pending``: what it had to deliver then)."""
        assert self._consumer is not None
        return self._consumer.info

    def _link(self, timeout: Optional[float] = None) -> PullConsumer:
        """Make the next consumer of the chain, starting after the last message seen;
        ``timeout``: of the request (default: the JetStream context's)."""
        self._serial += 1
        cfg = dataclasses.replace(self._template, name=f"{self._base}_{self._serial}")
        if self._stream_seq:
            cfg = dataclasses.replace(
                cfg,
                deliver_policy=api.DeliverPolicy.BY_START_SEQUENCE,
                opt_start_seq=self._stream_seq + 1,
                opt_start_time=None,
            )
        old = self._consumer
        info = self._js._upsert_consumer(self.stream, cfg, {}, "", timeout)
        self._consumer = PullConsumer(self._js, info.stream_name or self.stream, info)
        self._consumer_seq = 0
        self._broken = False
        self._left = False
        if old is not None:
            self._js._delete_consumer_nowait(self.stream, old.name)
        return self._consumer

    def _current(self) -> PullConsumer:
        """The link to read from: after a stopped messages()/consume() deleted the last one,
        a new link starting after the last message handed out."""
        if self._left:
            self._left = False
            self._consumer = None  # (deleted already: _link must not delete it again)
            self._link()
        assert self._consumer is not None
        return self._consumer

    def _leave(self) -> None:
        """A continuous read ended: delete the current link now rather than leave it to the
        server's inactive threshold (nobody waits for the answer)."""
        if self._consumer is not None and not self._left:
            self._left = True
            self._js._delete_consumer_nowait(self.stream, self._consumer.name)

    def _relink(
        self, deadline: Optional[Deadline] = None, stopped: Callable[[], bool] = lambda: False
    ) -> bool:
        """Rebuild the chain; while the server is unreachable (a restart), try again.
        With the caller's ``deadline`` (fetch, next, ``messages().next``), stop trying once it
        has passed and return False: the chain stays broken and the next read rebuilds it.
        Without one (consume, a bare iteration), give up after ``_TRIES`` tries (minutes,
        each try waiting up to the context's timeout) and raise what the last one met.
        Once ``stopped()`` (the reader's stop()), return False after the current try."""
        if not self._broken:
            self.resets += 1
        self._broken = True
        delay = 0.05
        for _ in range(_TRIES):
            timeout = None if deadline is None else max(deadline.remaining(), _LEAST_TRY)
            try:
                self._link(timeout)
                return True
            except (
                errors.TimeoutError,
                errors.JetStreamNotEnabledError,
                errors.ServiceUnavailableError,
                errors.ConnectionLostError,
            ) as exc:
                self._core.report(exc)
                if stopped() or (deadline is not None and deadline.expired):
                    return False
                # the server is coming back: nothing to wait on but time
                time.sleep(delay if deadline is None else min(delay, deadline.remaining()))
                delay = min(delay * 2, 1.0)
                if stopped() or (deadline is not None and deadline.expired):
                    return False
        self._link()  # the last try raises what it meets
        return True

    def _accept(self, msg: Msg) -> bool:
        """True to hand ``msg`` out; False on a gap (the chain must be rebuilt)."""
        md = msg.metadata
        if md.sequence.consumer != self._consumer_seq + 1:
            return False
        self._consumer_seq = md.sequence.consumer
        self._stream_seq = md.sequence.stream
        return True

    # --- one pull -----------------------------------------------------------------------

    def fetch(self, max_messages: int = 100, max_wait: float = 5.0) -> List[Msg]:
        """Up to ``max_messages`` in order within ``max_wait`` (possibly none)."""
        n = _check_count(max_messages, "max_messages", allow_none=False)
        assert n is not None
        t = check_timeout(max_wait, "max_wait")
        deadline = Deadline(t)
        # One reader at a time; another's call (a rebuild waiting on an unreachable server, a
        # consume() waiting for messages) must not keep this one past its wait.
        if not self._lock.acquire(timeout=deadline.remaining()):
            return []
        try:
            return self._fetch(n, deadline)
        finally:
            self._lock.release()

    def _fetch(self, n: int, deadline: Deadline) -> List[Msg]:
        while True:
            if self._broken and not self._relink(deadline):
                return []
            consumer = self._current()
            try:
                got = consumer.fetch(n, max_wait=max(deadline.remaining(), 0.001))
            except _BREAKS:
                if not self._relink(deadline) or deadline.expired:
                    return []
                continue
            out: List[Msg] = []
            for msg in got:
                if not self._accept(msg):
                    self._relink(deadline)
                    break
                out.append(msg)
            if out or deadline.expired:
                return out

    def next(self, timeout: float = 5.0) -> Msg:
        """The next message in order within ``timeout``; TimeoutError when none came."""
        msgs = self.fetch(1, timeout)
        if not msgs:
            raise errors.TimeoutError(
                f"ordered consumer of {self.stream!r}: no message within {timeout} s"
            )
        return msgs[0]

    # --- continuous pulls ---------------------------------------------------------------

    def messages(
        self,
        max_messages: int = 500,
        expires: float = 30.0,
        heartbeat: Optional[float] = None,
        *,
        heartbeat_alarm: float = PULL_HEARTBEAT_ALARM,
    ) -> MessagesContext:
        """An iterator over the messages in order as they come, pulling ahead (as
        PullConsumer.messages). ``expires`` must be >= 1 s."""
        return MessagesContext(self._pump(max_messages, expires, heartbeat, heartbeat_alarm))

    def consume(
        self,
        cb: Callable[[Msg], None],
        max_messages: int = 500,
        expires: float = 30.0,
        heartbeat: Optional[float] = None,
        *,
        heartbeat_alarm: float = PULL_HEARTBEAT_ALARM,
    ) -> ConsumeContext:
        """Run ``cb(msg)`` on a thread of its own for every message, in order, until ``stop()`` /
        ``drain()`` (as PullConsumer.consume). InvalidArgumentError if ``cb`` is not callable."""
        if not callable(cb):
            raise errors.InvalidArgumentError(f"cb must be callable, got {type(cb).__name__}")
        return ConsumeContext(self._pump(max_messages, expires, heartbeat, heartbeat_alarm), cb)

    def _pump(
        self,
        max_messages: int,
        expires: float,
        heartbeat: Optional[float],
        heartbeat_alarm: float,
    ) -> _OrderedPump:
        n = _check_count(max_messages, "max_messages", allow_none=False)
        assert n is not None
        exp = check_timeout(expires, "expires")
        if exp < 1.0:
            raise errors.InvalidArgumentError(f"expires must be >= 1 s, got {expires!r}")
        hb = _heartbeat_for(exp, heartbeat)
        return _OrderedPump(self, n, exp, hb, check_alarm(heartbeat_alarm))

    def delete(self) -> None:
        """Delete the current link of the chain now (stopping messages()/consume() does it,
        leaving a ``with`` block does it, and the server removes an idle link after
        5 minutes). A later read starts a new link where this one stopped."""
        with self._lock:
            if self._consumer is not None and not self._left:
                self._left = True
                try:
                    self._js.delete_consumer(self.stream, self._consumer.name)
                except errors.ConsumerNotFoundError:
                    pass

    def __enter__(self) -> OrderedConsumer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.delete()


class _OrderedPump:
    """A continuous pull over the chain: the current link's pump, replaced on a break."""

    def __init__(
        self, oc: OrderedConsumer, max_messages: int, expires: float, hb: float, alarm: float
    ) -> None:
        self._oc = oc
        self._args = (max_messages, None, expires, hb)
        self._alarm = alarm
        self.stopped = False
        self._stale = False  # the chain broke and this pump's link is gone: rebuild first
        self._error: Optional[errors.NATSError] = None
        self._pump = self._new_pump()

    def _new_pump(self) -> _Pump:
        pump = _Pump(self._oc._current(), *self._args, alarm=self._alarm)
        pump.report_terminal = False  # a broken link is rebuilt, not an error to report
        pump.chain_link = True
        pump.start()
        return pump

    @property
    def error(self) -> Optional[errors.NATSError]:
        """What ended the reading: a broken link's error is not it (the chain is rebuilt)."""
        err = self._pump.error
        return self._error or (None if isinstance(err, _BREAKS) else err)

    def report(self, err: BaseException) -> None:
        self._pump.report(err)

    @property
    def where(self) -> str:
        return self._pump.where

    def _rebuild(self, deadline: Optional[Deadline]) -> bool:
        """Replace the current link's pump; False when the caller's deadline passed first
        (``_stale`` stays set: the next get() tries again)."""
        self._pump.stop()
        self._stale = True
        try:
            linked = self._oc._relink(deadline, lambda: self.stopped)
        except errors.NATSError as exc:
            self._error = exc  # the end of a consume(): kept for its ``error``
            raise
        if not linked:
            return False
        if self.stopped:  # stop() came while the link was made: it must not outlive us
            self._oc._leave()
            return False
        self._pump = self._new_pump()
        self._stale = False
        return True

    def get(self, timeout: Optional[float]) -> Optional[Msg]:
        deadline = None if timeout is None else Deadline(timeout)
        lock = self._oc._lock  # one reader at a time, but not past this one's wait (as fetch)
        if not lock.acquire(timeout=-1 if deadline is None else deadline.remaining()):
            return None
        try:
            return self._get(deadline)
        finally:
            lock.release()

    def _get(self, deadline: Optional[Deadline]) -> Optional[Msg]:
        while True:
            if self._stale and (self.stopped or not self._rebuild(deadline)):
                return None
            left = None if deadline is None else deadline.remaining()
            try:
                msg = self._pump.get(left)
            except _BREAKS:
                if self.stopped:
                    return None
                self._stale = True
                continue
            if msg is None:
                return None
            if self._oc._accept(msg):
                return msg
            self._stale = True  # a gap: start again after the last message handed out

    def stop(self) -> None:
        self.stopped = True
        self._pump.stop()
        self._oc._leave()

    def drain(self, timeout: float) -> None:
        self.stopped = True
        try:
            self._pump.drain(timeout)
        finally:
            self._oc._leave()


class OrderedConsumerFactory:
    """The JetStream mixin for ``ordered_consumer``."""

    def ordered_consumer(
        self,
        stream: str,
        filter_subjects: Optional[Sequence[str]] = None,
        deliver_policy: Optional[api.DeliverPolicy] = None,
        opt_start_seq: Optional[int] = None,
        opt_start_time: Any = None,
        headers_only: Optional[bool] = None,
        replay_policy: Optional[api.ReplayPolicy] = None,
        inactive_threshold: Optional[float] = None,
    ) -> OrderedConsumer:
        """Read ``stream`` (or the ``filter_subjects`` of it) in order, each message once.
        ``inactive_threshold``: seconds after which the server removes a link of the chain
        nobody reads from (None: 5 minutes)."""
        js: JetStream = self  # type: ignore[assignment]
        if filter_subjects is not None:
            if isinstance(filter_subjects, str):
                filter_subjects = [filter_subjects]
            if not all(isinstance(s, str) and s for s in filter_subjects):
                raise errors.InvalidArgumentError(
                    f"filter_subjects must be non-empty strs, got {filter_subjects!r}"
                )
        if opt_start_seq is not None:
            _check_count(opt_start_seq, "opt_start_seq", allow_none=False)
        if inactive_threshold is not None:
            inactive_threshold = check_timeout(inactive_threshold, "inactive_threshold") or None
        return OrderedConsumer(
            js,
            stream,
            filter_subjects,
            deliver_policy,
            opt_start_seq,
            opt_start_time,
            headers_only,
            replay_policy,
            inactive_threshold,
        )
