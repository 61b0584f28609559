"""Push subscriptions: the ADR-15 subscribe workflow (seeds 001 / 003).

``js.subscribe()`` checks its arguments before any server call, finds the stream, looks the
consumer up (and checks it) when one is named, makes the NATS subscription on an inbox and
only then creates the consumer delivering to it. Status messages never reach the user
(automatic status management):

* idle heartbeats prove the consumer alive; a heartbeat carrying ``Nats-Consumer-Stalled``
  is answered at once (each flow-control subject once); 3 x the interval without anything
  is reported as :class:`NoHeartbeatError` through error_cb (a timer checks);
* a flow-control request is answered when the message before it is handed to the user —
  in next_msg and callback modes alike — through the subscription's take hook;
* the consumer sequence of every message (and the ``Nats-Last-Consumer`` of heartbeats) is
  checked for gaps, reported as :class:`ConsumerSequenceMismatchError` (not for queues);
* 409, 503 and unknown statuses are errors: raised by next_msg, reported in callback mode.
"""

from __future__ import annotations

import dataclasses
import threading
import time
from typing import TYPE_CHECKING, Any, Callable, Iterator, List, Optional, Union

from .. import errors
from .._protocol import check_publish_subject
from .._seam import ACK_STATE, dispatcher, end_error, has_callback, raw_headers
from .._timeouts import check_timeout
from ..msg import Msg
from ..subscription import Subscription
from . import api
from ._binding import check_filter_matches, config_differences, subject_fits_filters
from .ack import ACK_NONE, sequences
from .status import check_alarm, status_error

if TYPE_CHECKING:  # pragma: no cover
    from .context import JetStream

__all__ = ["JetStreamSubscription", "OrderedPushSubscription", "PushSubscriber"]

HEARTBEAT_ALARM = 3.0  # missed intervals before NoHeartbeatError (ADR-15)
_LIMIT_MSGS = 65536
_LIMIT_BYTES = 64 * 1024 * 1024
# How long a leaving queue member that made the durable waits for push_bound to drop before
# it concludes that other members are still bound (and leaves the durable to them). The
# server takes tens of ms; a loaded 2-core machine can stall it for a second, and guessing
# wrong keeps a durable nobody owns, so the wait (paid only when others are bound) is long.
_UNBIND_SETTLE = 2.0


class JetStreamSubscription:
    """A push subscription. ``next_msg``, iteration or the callback give messages only."""

    resets = 0  # how often an ordered consumer's chain was rebuilt (0 for the others)
    _sub: Subscription  # set by _listen

    def __init__(
        self,
        js: JetStream,
        stream: str,
        consumer: str,
        created: bool,
        queue: Optional[str],
        ack_none: bool,
        heartbeat: Optional[float],
        alarm: float = HEARTBEAT_ALARM,
    ) -> None:
        self._js = js
        self._nc = js._nc
        self._core = js._core
        self.stream = stream
        self.consumer = consumer
        self._created = created
        self._queue = queue
        self._ack_none = ack_none
        self._where = f"consumer {consumer!r} of stream {stream!r}"
        self._answered_fc = ""  # the last flow-control subject answered
        self._consumer_seq = 0  # of the last message checked (gap detection)
        self._check_gaps = not queue  # members of a queue group each see part of the sequence
        self._arrived: List[Msg] = []  # this read's messages, their sequences not yet checked
        self._heartbeat = heartbeat
        self._alarm = alarm  # idle heartbeat intervals without anything before the alarm
        self._last_seen = time.monotonic()  # when the watchdog last saw something come
        self._seen = False  # set by every arrival, cleared by the watchdog
        self._alarmed = False
        self._closed = False
        self._limited = False  # unsubscribe(limit=) was called

    def _listen(
        self,
        subject: str,
        queue: Optional[str],
        cb: Optional[Callable[[Msg], None]],
        pending_msgs_limit: int,
        pending_bytes_limit: int,
    ) -> None:
        """Subscribe on ``subject``; this object's hooks see the first message already."""
        self._sub = self._core.subscribe(
            subject,
            queue,
            cb,
            None,
            pending_msgs_limit,
            pending_bytes_limit,
            hook=self._on_arrival,
            on_take=self._on_take,
        )
        # The subscription's own next_msg, bound here: the method below only passes the
        # call on, and a call per message is worth saving.
        self.next_msg = self._sub.next_msg  # type: ignore[method-assign]
        if self._heartbeat:
            self._core.call_later(self._heartbeat, self._watchdog)

    def __repr__(self) -> str:
        return f"<JetStreamSubscription {self._where}>"

    def _named(self, consumer: str) -> None:
        """The consumer's name, once the server has made it (an ephemeral's is its own)."""
        self.consumer = consumer
        self._where = f"consumer {consumer!r} of stream {self.stream!r}"

    # --- network thread: heartbeats, gaps ------------------------------------------------

    def _on_arrival(self, msg: Msg) -> bool:
        """Network thread: True for what the user must not see (handled here)."""
        self._seen = True  # for the watchdog: a flag is cheaper than a clock per message
        if raw_headers(msg) is None or msg.status is None:
            if self._ack_none:
                setattr(msg, ACK_STATE, ACK_NONE)  # set_ack_state, as a C call: per message
            if self._check_gaps and msg.reply:
                # Sequences are checked once per read, not per message: see _check_arrivals.
                arrived = self._arrived
                if not arrived:
                    self._core.after_read(self._check_arrivals)
                arrived.append(msg)
            return False
        if msg.status == 100 and "flowcontrol" not in msg.description.lower().replace(" ", ""):
            stalled = msg.all_headers.get("Nats-Consumer-Stalled")
            if stalled:
                self._answer_flow_control(stalled)
            last = msg.all_headers.get("Nats-Last-Consumer")
            if last and self._check_gaps and last.isdigit():
                self._check_arrivals()  # what came before the heartbeat first
                if int(last) != self._consumer_seq:
                    # Nothing seen yet (a durable bound after it delivered elsewhere): the
                    # heartbeat says where counting starts, as a first message would.
                    if self._consumer_seq:
                        self._gap(int(last))
                    self._consumer_seq = int(last)  # reported once; count on from here
            return True
        return False  # flow control and errors go through the queue, in order

    def _check_arrivals(self) -> None:
        """Network thread, after a read: the consumer sequences of its messages must run on
        from the last one checked without a hole. Consumer sequences count every delivery
        by one, so when the last message's is the one before the read plus the read's count,
        there is no gap in between, and only two replies are parsed per read instead of
        every one (parsing each took a third of push consumption's time)."""
        arrived = self._arrived
        if not arrived:
            return
        self._arrived = []
        base = self._consumer_seq
        if not base:  # the very first messages: counting starts at the first one's sequence
            first = sequences(arrived[0].reply)
            base = first[0] - 1 if first is not None else 0
        last = sequences(arrived[-1].reply)
        if base and last is not None and last[0] == base + len(arrived):
            self._consumer_seq = last[0]
            return
        for msg in arrived:  # something is off: find it message by message
            seqs = sequences(msg.reply)
            if seqs is None:
                continue
            seq = seqs[0]
            if seq != self._consumer_seq + 1 and self._consumer_seq:
                self._gap(seq)
            self._consumer_seq = seq

    def _gap(self, seen: int) -> None:
        """Report a consumer sequence that is not the next one (ADR-15 gap awareness)."""
        self._core.report(
            errors.ConsumerSequenceMismatchError(
                f"{self._where}: consumer sequence gap: expected "
                f"{self._consumer_seq + 1}, got {seen}"
            )
        )

    def _answer_flow_control(self, subject: str) -> None:
        if subject != self._answered_fc:
            self._answered_fc = subject
            try:
                self._core.publish_trusted(subject, b"")
            except (errors.ConnectionClosedError, errors.ConnectionDrainingError):
                # Closed (or draining) under a queued request: nobody is left to flow to,
                # and this runs on the reader or callback thread, which must live on.
                pass

    def _watchdog(self) -> None:
        """Timer thread: heartbeat_alarm intervals without anything is an alarm (once per
        silence)."""
        if self._closed or self._heartbeat is None:
            return
        silent = self._silence()
        if silent >= self._heartbeat * self._alarm:
            if not self._alarmed:
                self._alarmed = True
                self._core.report(
                    errors.NoHeartbeatError(
                        f"{self._where}: nothing for {silent:.1f} s (idle heartbeat "
                        f"{self._heartbeat} s)"
                    )
                )
        else:
            self._alarmed = False
        self._core.call_later(self._heartbeat / 2, self._watchdog)

    def _silence(self) -> float:
        """Seconds since the watchdog last saw something arrive (to half an interval)."""
        now = time.monotonic()
        if self._seen:
            self._seen = False
            self._last_seen = now
        return now - self._last_seen

    # --- where the user takes messages ---------------------------------------------------

    def _on_take(self, msg: Msg) -> bool:
        """Where a message with a header block is handed to the user."""
        code = msg.status
        if code is None:
            return False
        if code == 100:  # flow control: the message before it has just been handed out
            if msg.reply:
                self._answer_flow_control(msg.reply)
            return True
        err = status_error(msg, self._where)
        if has_callback(self._sub):
            self._core.report(err)
            return True
        raise err

    def next_msg(self, timeout: Optional[float] = 1.0) -> Msg:
        """The next message; waits up to ``timeout`` seconds (None: until one arrives), as
        Subscription.next_msg."""
        return self._sub.next_msg(timeout)

    def __iter__(self) -> Any:
        return iter(self._sub)

    @property
    def messages(self) -> Iterator[Msg]:
        """nats-py's ``sub.messages``: the messages as they come, blocking; the iteration
        ends when the subscription does (the same as iterating the subscription)."""
        return iter(self._sub)

    @property
    def pending_msgs(self) -> int:
        """Messages queued and not yet taken."""
        return self._sub.pending_msgs

    @property
    def pending_bytes(self) -> int:
        """Payload bytes queued and not yet taken."""
        return self._sub.pending_bytes

    @property
    def delivered(self) -> int:
        """Messages that came for this subscription (those its status handling kept
        from the user, heartbeats say, are not counted)."""
        return self._sub.delivered

    @property
    def subject(self) -> str:
        """The deliver subject the subscription listens on."""
        return self._sub.subject

    @property
    def queue(self) -> str:
        """The queue group ("" for none)."""
        return self._sub.queue

    def consumer_info(self) -> api.ConsumerInfo:
        """The consumer's info, asked of the server."""
        return self._js.consumer_info(self.stream, self.consumer)

    # --- ending ---------------------------------------------------------------------------

    def unsubscribe(self, limit: Optional[int] = None) -> None:
        """Stop; a consumer this subscription created is deleted (its error raised).
        :class:`BadSubscriptionError` when it was unsubscribed or drained before.

        With ``limit`` (nats-py's auto-unsubscribe), the subscription ends after that many
        messages in all; a consumer it made stays until ``unsubscribe()`` or ``drain()``
        is called once more.
        """
        if self._closed:  # as a core subscription and nats-py: it ended before
            raise errors.BadSubscriptionError(f"{self._where}: the subscription has ended")
        if limit is not None:
            self._sub.unsubscribe(limit)
            self._limited = True
            return
        self._closed = True
        if not (self._limited and not self._sub.is_valid):  # the limit may have ended it
            self._sub.unsubscribe()
        self._delete_if_ours(report=False)

    def drain(self, timeout: float = 30.0) -> None:
        """Let what was sent arrive and be handled, then stop as unsubscribe does; an error
        deleting the consumer goes to error_cb."""
        t = check_timeout(timeout, "drain timeout")
        if self._closed:
            raise errors.BadSubscriptionError(f"{self._where}: the subscription has ended")
        self._closed = True
        try:
            self._sub.drain(t)
        except errors.TimeoutError:
            self._delete_after_timeout()
            raise
        self._delete_if_ours(report=True)

    def _delete_after_timeout(self) -> None:
        """A drain ran out of time: a consumer this subscription made must not be left
        behind. A callback still busy with what came deletes it when it is done (on a thread
        of its own); messages nobody took (next_msg) are given up, as unsubscribe does."""
        if not self._created:
            return
        worker = dispatcher(self._sub)
        if worker is None or worker is threading.current_thread():
            self._delete_if_ours(report=True)
            return

        def when_done() -> None:
            worker.join()
            self._delete_if_ours(report=True)

        threading.Thread(target=when_done, name="nats-push-cleanup", daemon=True).start()

    def _delete_if_ours(self, report: bool) -> None:
        """Delete the consumer if this subscription made it — unless other members of its
        queue group are still bound to it (the server says so in push_bound)."""
        if not self._created or self._nc.is_closed:
            return
        try:
            if self._queue and self._others_bound():
                return
            self._js.delete_consumer(self.stream, self.consumer)
        except errors.ConsumerNotFoundError:
            pass
        except errors.NATSError as exc:
            if not report:
                raise
            self._core.report(exc)

    def _others_bound(self) -> bool:
        """Whether other queue members still listen. The server updates push_bound a little
        after it has our UNSUB (tens of ms, measured): true at first may only be us, so it
        is asked again for a short while; still true then, the others are real."""
        self._nc.flush()  # our UNSUB first
        deadline = time.monotonic() + _UNBIND_SETTLE
        pause = 0.01
        while self._js.consumer_info(self.stream, self.consumer).push_bound:
            if time.monotonic() >= deadline:
                return True
            time.sleep(pause)  # server state, not an event of ours: nothing to wait on
            pause = min(pause * 2, 0.1)
        return False


class PushSubscriber:
    """The subscribe / subscribe_bind mixin of JetStream."""

    def subscribe(
        self,
        subject: Optional[str],
        queue: Optional[str] = None,
        cb: Optional[Callable[[Msg], None]] = None,
        durable: Optional[str] = None,
        stream: Optional[str] = None,
        config: Optional[api.ConsumerConfig] = None,
        manual_ack: bool = False,
        ordered_consumer: bool = False,
        idle_heartbeat: Optional[float] = None,
        flow_control: bool = False,
        pending_msgs_limit: int = _LIMIT_MSGS,
        pending_bytes_limit: int = _LIMIT_BYTES,
        deliver_policy: Union[api.DeliverPolicy, str, None] = None,
        headers_only: Optional[bool] = None,
        inactive_threshold: Optional[float] = None,
        heartbeat_alarm: float = HEARTBEAT_ALARM,
    ) -> JetStreamSubscription:
        """Subscribe through a push consumer (ADR-15): found by name or created for you;
        ``ordered_consumer=True`` makes an ordered one (ADR-17). ``heartbeat_alarm``: after
        this many idle heartbeat intervals without anything, NoHeartbeatError goes to
        error_cb (an ordered consumer rebuilds its chain instead).

        ``deliver_policy``, ``headers_only`` and ``inactive_threshold`` (seconds) are
        fields of the consumer's config, given here as nats-py allows; a ``config`` that
        sets one of them to another value is an InvalidArgumentError."""
        js: JetStream = self  # type: ignore[assignment]
        alarm = check_alarm(heartbeat_alarm)
        config = fold_config_fields(
            config,
            deliver_policy=deliver_policy,
            headers_only=headers_only,
            inactive_threshold=inactive_threshold,
        )
        if ordered_consumer:
            if durable or queue or manual_ack or (config is not None and config.durable_name):
                raise errors.InvalidArgumentError(
                    "an ordered consumer is ephemeral, acks nothing and serves one subscriber: "
                    "no durable, queue or manual_ack"
                )
            if config is not None and (config.deliver_subject or config.deliver_group):
                raise errors.InvalidArgumentError(
                    "an ordered consumer picks a new inbox for every link of its chain: "
                    "no config.deliver_subject or config.deliver_group"
                )
            if subject is None and stream is None:
                raise errors.InvalidArgumentError("subscribe needs a subject or a stream")
            if idle_heartbeat is not None:
                idle_heartbeat = check_timeout(idle_heartbeat, "idle_heartbeat")
            return _ordered(
                js,
                subject,
                cb,
                stream,
                config,
                idle_heartbeat,
                pending_msgs_limit,
                pending_bytes_limit,
                alarm,
            )
        return _subscribe(
            js,
            subject,
            queue,
            cb,
            durable,
            stream,
            config,
            manual_ack,
            idle_heartbeat,
            flow_control,
            pending_msgs_limit,
            pending_bytes_limit,
            bind=False,
            alarm=alarm,
        )

    def subscribe_bind(
        self,
        stream: str,
        config: Union[api.ConsumerConfig, str, None] = None,
        consumer: Union[str, Callable[[Msg], None], None] = None,
        cb: Optional[Callable[[Msg], None]] = None,
        manual_ack: bool = False,
        ordered_consumer: bool = False,
        pending_msgs_limit: int = _LIMIT_MSGS,
        pending_bytes_limit: int = _LIMIT_BYTES,
        *,
        queue: Optional[str] = None,
        heartbeat_alarm: float = HEARTBEAT_ALARM,
    ) -> JetStreamSubscription:
        """Subscribe to an existing push consumer of ``stream``; nothing is created, and
        the consumer stays when the subscription ends. Two forms, told apart by the type
        of the second argument:

        * ours: ``subscribe_bind(stream, "name", cb=None, manual_ack=False)`` — the
          consumer by name (a callable third positional argument is the ``cb``);
        * nats-py's: ``subscribe_bind(stream, config, consumer, cb, manual_ack, ...)`` —
          a ConsumerConfig (its name from ``consumer``, else ``config.durable_name`` or
          ``config.name``), checked against the consumer's as ``subscribe`` checks one.

        ``consumer="name"`` alone works too. The consumer is looked up either way (its
        deliver subject and queue group are the server's). ``ordered_consumer=True`` is
        not supported here: ``js.subscribe(..., ordered_consumer=True)`` makes one.
        """
        js: JetStream = self  # type: ignore[assignment]
        alarm = check_alarm(heartbeat_alarm)
        cfg: Optional[api.ConsumerConfig] = None
        name: Optional[str] = None
        if isinstance(config, str):  # ours: (stream, name, cb, ...)
            name = config
            if callable(consumer):
                if cb is not None:
                    raise errors.InvalidArgumentError(
                        "subscribe_bind: two callbacks (the third argument and cb)"
                    )
                cb, consumer = consumer, None
            if consumer is not None and consumer != name:
                raise errors.InvalidArgumentError(
                    f"subscribe_bind: consumer {consumer!r} and the name {name!r} differ"
                )
        else:
            if config is not None and not isinstance(config, api.ConsumerConfig):
                raise errors.InvalidArgumentError(
                    "subscribe_bind: the second argument is a consumer name (str) or a "
                    f"ConsumerConfig, got {type(config).__name__}"
                )
            if consumer is not None and not isinstance(consumer, str):
                raise errors.InvalidArgumentError(
                    f"subscribe_bind: consumer must be a str, got {type(consumer).__name__}"
                )
            cfg = config
            names = {n for n in (consumer, cfg and cfg.durable_name, cfg and cfg.name) if n}
            if len(names) > 1:
                raise errors.InvalidArgumentError(
                    f"subscribe_bind: consumer, config.durable_name and config.name differ: "
                    f"{sorted(names)}"
                )
            name = names.pop() if names else None
            if cfg is not None:
                # The name is the consumer's, checked above; the rest is compared.
                cfg = dataclasses.replace(cfg, durable_name=None, name=None)
        if name is None:
            raise errors.InvalidArgumentError("subscribe_bind needs the consumer's name")
        if not isinstance(ordered_consumer, bool):
            raise errors.InvalidArgumentError(
                f"ordered_consumer must be a bool, got {ordered_consumer!r}"
            )
        if ordered_consumer:
            raise errors.InvalidArgumentError(
                "subscribe_bind(ordered_consumer=True) is not supported: an ordered consumer "
                "is a chain the client makes; use js.subscribe(..., ordered_consumer=True)"
            )
        return _subscribe(
            js,
            None,
            queue,
            cb,
            name,
            stream,
            cfg,
            manual_ack,
            None,
            False,
            pending_msgs_limit,
            pending_bytes_limit,
            bind=True,
            alarm=alarm,
        )


def fold_config_fields(
    config: Optional[api.ConsumerConfig], **fields: Any
) -> Optional[api.ConsumerConfig]:
    """A consumer config with the fields a subscribe call was given as keywords (those not
    None); one the config sets to another value is an error."""
    given = {k: v for k, v in fields.items() if v is not None}
    if not given:
        return config
    if config is not None and not isinstance(config, api.ConsumerConfig):
        raise errors.InvalidArgumentError(
            f"config must be a ConsumerConfig, got {type(config).__name__}"
        )
    policy = given.get("deliver_policy")
    if policy is not None:
        known = {p.value: p for p in api.DeliverPolicy.__members__.values()}
        value = policy.value if isinstance(policy, api.DeliverPolicy) else policy
        if not isinstance(value, str) or value not in known:
            raise errors.InvalidArgumentError(
                f"deliver_policy must be a DeliverPolicy, got {policy!r}"
            )
        given["deliver_policy"] = known[value]
    if "headers_only" in given and not isinstance(given["headers_only"], bool):
        raise errors.InvalidArgumentError(
            f"headers_only must be a bool, got {given['headers_only']!r}"
        )
    if "inactive_threshold" in given:
        threshold = check_timeout(given["inactive_threshold"], "inactive_threshold")
        if threshold <= 0:
            raise errors.InvalidArgumentError(
                f"inactive_threshold must be > 0 seconds, got {threshold!r}"
            )
        given["inactive_threshold"] = threshold
    if config is None:
        return api.ConsumerConfig(**given)
    clash = [
        f"{k} (argument {v!r}, config {getattr(config, k)!r})"
        for k, v in given.items()
        if getattr(config, k) is not None and getattr(config, k) != v
    ]
    if clash:
        raise errors.InvalidArgumentError(
            "subscribe: an argument and config differ: " + ", ".join(clash)
        )
    return dataclasses.replace(config, **given)


def _subscribe(
    js: JetStream,
    subject: Optional[str],
    queue: Optional[str],
    cb: Optional[Callable[[Msg], None]],
    durable: Optional[str],
    stream: Optional[str],
    config: Optional[api.ConsumerConfig],
    manual_ack: bool,
    idle_heartbeat: Optional[float],
    flow_control: bool,
    pending_msgs_limit: int,
    pending_bytes_limit: int,
    bind: bool,
    alarm: float,
) -> JetStreamSubscription:
    nc = js._nc
    # 1. Checks before any server call.
    if subject is not None and (not isinstance(subject, str) or not subject):
        raise errors.BadSubjectError(f"subject must be a non-empty str or None, got {subject!r}")
    if cb is not None and not callable(cb):
        raise errors.InvalidArgumentError(f"cb must be callable, got {type(cb).__name__}")
    if config is not None and not isinstance(config, api.ConsumerConfig):
        raise errors.InvalidArgumentError(
            f"config must be a ConsumerConfig, got {type(config).__name__}"
        )
    if config is not None and subject is not None:
        check_filter_matches(subject, config)
    group = config.deliver_group if config is not None else None
    if group:  # a deliver group asked for in the config is the queue group
        if queue is not None and queue != group:
            raise errors.InvalidArgumentError(
                f"queue {queue!r} and config.deliver_group {group!r} differ"
            )
        queue = group
    wanted_deliver = config.deliver_subject if config is not None else None
    if wanted_deliver:
        check_publish_subject(wanted_deliver, "config.deliver_subject")
    hb = None if idle_heartbeat is None else check_timeout(idle_heartbeat, "idle_heartbeat")
    if hb is None and config is not None and config.idle_heartbeat:
        hb = config.idle_heartbeat
    fc = flow_control or bool(config is not None and config.flow_control)
    if queue is not None and (not isinstance(queue, str) or not queue):
        raise errors.InvalidArgumentError(f"queue must be a non-empty str, got {queue!r}")
    if queue and (hb or fc):
        raise errors.InvalidArgumentError(
            "a queue subscription cannot use idle heartbeats or flow control: the server "
            "would send them to one random member"
        )
    if fc and not hb:
        raise errors.InvalidArgumentError("flow control needs an idle heartbeat (ADR-15)")
    if subject is None and stream is None:
        raise errors.InvalidArgumentError("subscribe needs a subject or a stream")
    named = config.durable_name if config is not None else None
    if named and durable and named != durable:
        raise errors.InvalidArgumentError(
            f"durable {durable!r} and config.durable_name {named!r} differ"
        )
    durable = durable or named
    if durable is None and queue and not bind:
        durable = queue  # 4. the queue name is the durable name (seed 001)
    if durable is not None:
        api.check_consumer_name(durable)
    # 2. The stream.
    if stream is None:
        assert subject is not None
        stream = js.find_stream_name_by_subject(subject)
    stream = api.check_stream_name(stream)
    # 3. The consumer, when named.
    info: Optional[api.ConsumerInfo] = None
    if durable is not None:
        try:
            info = js.consumer_info(stream, durable)
        except errors.ConsumerNotFoundError:
            if bind:
                raise
    if info is not None:
        _check_existing(info, subject, queue, config, hb, fc)
        return _attach(
            js,
            stream,
            info,
            queue,
            cb,
            manual_ack,
            False,
            hb,
            pending_msgs_limit,
            pending_bytes_limit,
            alarm,
        )
    # 5. Subscribe first, then create the consumer delivering there: on the config's deliver
    # subject when it names one, else on a new inbox (seed 001).
    deliver = wanted_deliver or nc.new_inbox()
    cfg = dataclasses.replace(
        config or api.ConsumerConfig(),
        durable_name=durable,
        deliver_subject=deliver,
        deliver_group=queue,
        ack_policy=(config.ack_policy if config else None) or api.AckPolicy.EXPLICIT,
        idle_heartbeat=hb,
        flow_control=True if fc else None,
    )
    if subject is not None and not cfg.filter_subject and not cfg.filter_subjects:
        cfg = dataclasses.replace(cfg, filter_subject=subject)
    # The subscription's hooks are in place before the consumer exists: nothing the server
    # sends can reach the user unfiltered.
    ack_none = cfg.ack_policy in _NO_CLIENT_ACKS
    jsub = JetStreamSubscription(js, stream, durable or "", True, queue, ack_none, hb, alarm)
    user_cb = _wrap_cb(cb, manual_ack or ack_none)
    jsub._listen(deliver, queue, user_cb, pending_msgs_limit, pending_bytes_limit)
    try:
        info = js.add_consumer(stream, cfg)
    except errors.ConsumerAlreadyExistsError:
        # 6. Made meanwhile by someone else: check it, and move to its deliver subject.
        jsub._closed = True
        js._core.unsubscribe(jsub._sub)
        if durable is None:
            raise
        info = js.consumer_info(stream, durable)
        _check_existing(info, subject, queue, config, hb, fc)
        return _attach(
            js,
            stream,
            info,
            queue,
            cb,
            manual_ack,
            False,
            hb,
            pending_msgs_limit,
            pending_bytes_limit,
            alarm,
        )
    except BaseException:
        jsub._closed = True
        js._core.unsubscribe(jsub._sub)
        raise
    jsub._named(info.name)
    return jsub


# Ack policies under which the client acks nothing: none, and flow_control (ADR-60: the
# sourcing stream acks by answering flow control).
_NO_CLIENT_ACKS = (api.AckPolicy.NONE, api.AckPolicy.FLOW_CONTROL)


def _attach(
    js: JetStream,
    stream: str,
    info: api.ConsumerInfo,
    queue: Optional[str],
    cb: Optional[Callable[[Msg], None]],
    manual_ack: bool,
    created: bool,
    hb: Optional[float],
    pending_msgs_limit: int,
    pending_bytes_limit: int,
    alarm: float,
) -> JetStreamSubscription:
    """Subscribe to an existing consumer's deliver subject."""
    deliver = info.config.deliver_subject
    assert deliver
    group = queue or info.config.deliver_group
    ack_none = info.config.ack_policy in _NO_CLIENT_ACKS
    hb = hb or info.config.idle_heartbeat
    jsub = JetStreamSubscription(js, stream, info.name, created, group, ack_none, hb, alarm)
    jsub._listen(
        deliver,
        group,
        _wrap_cb(cb, manual_ack or ack_none),
        pending_msgs_limit,
        pending_bytes_limit,
    )
    # Bound means the server knows it: the member that made a queue durable deletes it
    # when it leaves and push_bound says nobody else listens, and a SUB still on its way
    # does not count (the usage matrix saw a durable deleted under a member that had just
    # joined). One round trip, when connected; a reconnect sends the SUB anyway.
    if js._nc.is_connected:
        try:
            js._nc.flush(js._timeout)
        except (errors.TimeoutError, errors.ConnectionLostError):
            pass  # the SUB is sent (or resent by the reconnect): the server will have it
    return jsub


def _wrap_cb(
    cb: Optional[Callable[[Msg], None]], manual_ack: bool
) -> Optional[Callable[[Msg], None]]:
    """8. Callbacks ack after returning, unless manual_ack (or the consumer acks nothing)."""
    if cb is None or manual_ack:
        return cb

    def acking(msg: Msg) -> None:
        cb(msg)
        if msg._ack == 0:  # _jsack.ACK_OPEN: the callback did not ack (nak, term) it itself
            msg.ack()

    return acking


# Fields a subscribe call may leave to an existing consumer.
_NOT_COMPARED = frozenset(
    {
        "name",
        "durable_name",
        "filter_subject",
        "filter_subjects",
        "deliver_subject",
        "deliver_group",
    }
)


def _check_existing(
    info: api.ConsumerInfo,
    subject: Optional[str],
    queue: Optional[str],
    config: Optional[api.ConsumerConfig],
    hb: Optional[float],
    fc: bool,
) -> None:
    """3. The checks of subscribing to an existing consumer (seed 001), each its own error."""
    have = info.config
    where = f"consumer {info.name!r} of stream {info.stream_name!r}"
    if not have.deliver_subject:
        raise errors.InvalidArgumentError(
            f"{where} is a pull consumer: use pull_subscribe or js.consumer()"
        )
    group = have.deliver_group
    if queue is None:
        if group:
            raise errors.InvalidArgumentError(
                f"{where} delivers to queue group {group!r}: subscribe with queue={group!r}"
            )
        if info.push_bound:
            raise errors.InvalidArgumentError(
                f"{where} is already bound to a subscription (duplicate subscription)",
                description="consumer is already bound to a subscription",
            )
    else:
        if not group:
            raise errors.InvalidArgumentError(
                f"{where} has no deliver group: it cannot serve queue {queue!r}",
                description=f"cannot create queue subscription '{queue}' to consumer '{info.name}'",
            )
        if group != queue:
            raise errors.InvalidArgumentError(
                f"{where} delivers to queue group {group!r}, not {queue!r}"
            )
        if have.idle_heartbeat or have.flow_control:
            raise errors.InvalidArgumentError(
                f"{where} has idle heartbeats or flow control: not usable by a queue group"
            )
    if subject is not None:
        filters = list(have.filter_subjects or [])
        if have.filter_subject:
            filters.append(have.filter_subject)
        if filters and not subject_fits_filters(subject, filters):
            raise errors.InvalidArgumentError(
                f"subject {subject!r} does not match the filter of {where}: {filters}"
            )
    differ = config_differences(config, have, _NOT_COMPARED) if config is not None else []
    asked_hb = hb is not None and (config is None or config.idle_heartbeat is None)
    if asked_hb and have.idle_heartbeat != hb:
        differ.append(f"idle_heartbeat (asked {hb!r}, has {have.idle_heartbeat!r})")
    if fc and not have.flow_control and (config is None or config.flow_control is None):
        differ.append("flow_control (asked True, has False)")
    if differ:
        raise errors.InvalidArgumentError(
            f"{where} exists with another configuration, not changed: {', '.join(differ)}"
        )


class OrderedPushSubscription(JetStreamSubscription):
    """``js.subscribe(..., ordered_consumer=True)`` (ADR-17, push): every message once, in
    order. A chain of ephemeral consumers (ack none, max_deliver 1, flow control and
    heartbeats on, memory storage, one replica): on a gap, missed heartbeats, a reconnect or
    an error status, the next one is made on a new inbox starting at the last stream
    sequence + 1, and the old one deleted. The user-facing queue stays the same throughout.
    """

    def __init__(
        self,
        js: JetStream,
        stream: str,
        inbox: str,
        template: api.ConsumerConfig,
        heartbeat: float,
        alarm: float,
    ) -> None:
        super().__init__(js, stream, "", True, None, True, heartbeat, alarm)
        self._template = template
        self._first_inbox = inbox  # where the user's subscription listens
        self._inbox = inbox  # the current link's deliver subject; others are stale
        self._link_sub: Optional[Subscription] = None  # the current inbox, if not sub's
        self._stream_seq = 0  # of the last message queued for the user
        self._reset_lock = threading.Lock()
        self._resetting = False
        # Set when the subscription or its client ends: no rebuild may start or go on
        # after that (a rebuild thread retrying against a closed client would loop for ever).
        self._ending = threading.Event()
        self.resets = 0
        self._core.add_reconnect_hook(self._on_reconnect)
        self._core.add_close_hook(self._ending.set)

    def _on_arrival(self, msg: Msg) -> bool:
        return self._arrive(self._first_inbox, msg, forward=False)

    def _arrive(self, inbox: str, msg: Msg, forward: bool) -> bool:
        """Network thread: True when handled here (dropped, or queued by us)."""
        if inbox != self._inbox or self._closed:
            return True  # a stale link's delivery: the new link sends it again
        self._seen = True
        if raw_headers(msg) is None or msg.status is None:
            seqs = sequences(msg.reply)
            if seqs is None:
                return True
            if seqs[0] != self._consumer_seq + 1:
                self._break("a gap in the consumer sequence")
                return True
            self._consumer_seq, self._stream_seq = seqs
            setattr(msg, ACK_STATE, ACK_NONE)  # set_ack_state, as a C call: per message
        elif msg.status == 100 and "flowcontrol" not in msg.description.lower().replace(" ", ""):
            stalled = msg.all_headers.get("Nats-Consumer-Stalled")
            if stalled:
                self._answer_flow_control(stalled)
            last = msg.all_headers.get("Nats-Last-Consumer")
            if last and last.isdigit() and int(last) != self._consumer_seq:
                self._break("a heartbeat says messages were missed")
            return True
        elif msg.status != 100:
            self._break(f"status {msg.status} {msg.description}")
            return True
        if forward:
            self._core.deliver(self._sub, msg)
            return True
        return False

    def _on_reconnect(self) -> None:
        self._break("reconnected")

    def _watchdog(self) -> None:
        if self._closed or self._heartbeat is None:
            return
        if self._silence() >= self._heartbeat * self._alarm:
            self._last_seen = time.monotonic()
            self._break("missed heartbeats")
        self._core.call_later(self._heartbeat / 2, self._watchdog)

    def _break(self, why: str) -> None:
        """Any thread: rebuild the chain on a thread of its own (API calls block)."""
        if self._resetting or self._closed or self._ending.is_set():
            return
        self._resetting = True
        self._inbox = ""  # drop everything until the new link is in place
        threading.Thread(
            target=self._relink, args=(why,), name="nats-ordered-reset", daemon=True
        ).start()

    def _relink(self, why: str) -> None:
        """The rebuild thread: try until a link is made, the subscription is unsubscribed
        or the client closes (then at once, without a report nobody would hear)."""
        ending = self._ending
        with self._reset_lock:
            delay = 0.05
            while not ending.is_set():
                try:
                    self._make_link()
                    return
                except errors.NATSError as exc:
                    if ending.is_set() or self._nc.is_closed:
                        return  # the close (or unsubscribe) is why it failed
                    self._core.report(exc)
                # A restarting server: try again shortly; an end wakes this wait.
                ending.wait(delay)
                delay = min(delay * 2, 2.0)

    def _make_link(self) -> None:
        self.resets += 1
        core = self._core
        old_name, old_link = self.consumer, self._link_sub
        inbox = self._nc.new_inbox()

        def hook(msg: Msg) -> bool:
            return self._arrive(inbox, msg, forward=True)

        link = core.subscribe(inbox, None, None, None, _LIMIT_MSGS, _LIMIT_BYTES, hook=hook)
        cfg = dataclasses.replace(self._template, deliver_subject=inbox)
        if self._stream_seq:
            cfg = dataclasses.replace(
                cfg,
                deliver_policy=api.DeliverPolicy.BY_START_SEQUENCE,
                opt_start_seq=self._stream_seq + 1,
                opt_start_time=None,
            )
        self._consumer_seq = 0
        self._inbox = inbox  # before the consumer exists: its first message is not missed
        self._resetting = False
        try:
            info = self._js.add_consumer(self.stream, cfg)
        except BaseException:
            self._inbox = ""
            self._resetting = True
            core.unsubscribe(link)
            raise
        self._link_sub = link
        self._named(info.name)
        if old_link is not None:
            core.unsubscribe(old_link)
        elif not end_error(self._sub):
            core.drop_interest(self._sub)  # the first inbox: its queue is the user's
        if old_name:
            self._js._delete_consumer_nowait(self.stream, old_name)

    def _let_go(self) -> None:
        """No more rebuilds, and the client keeps no hook of ours."""
        self._ending.set()
        self._core.remove_reconnect_hook(self._on_reconnect)
        self._core.remove_close_hook(self._ending.set)

    def unsubscribe(self, limit: Optional[int] = None) -> None:
        """Stop receiving and delete the current consumer of the chain. ``limit`` is refused
        (InvalidArgumentError); BadSubscriptionError when already ended."""
        if limit is not None:
            raise errors.InvalidArgumentError(
                "unsubscribe(limit=) is not available on an ordered consumer: its chain of "
                "consumers changes inboxes; count the messages and unsubscribe()"
            )
        if self._closed:
            raise errors.BadSubscriptionError(f"{self._where}: the subscription has ended")
        self._closed = True
        self._let_go()
        with self._reset_lock:  # a rebuild under way ends with its current attempt
            if self._link_sub is not None:
                self._core.unsubscribe(self._link_sub)
            self._sub.unsubscribe()
            self._delete_if_ours(report=False)

    def drain(self, timeout: float = 30.0) -> None:
        """The same as ``unsubscribe()``: an ordered consumer has nothing to drain. ``timeout``
        is accepted and not used."""
        self.unsubscribe()


def _ordered(
    js: JetStream,
    subject: Optional[str],
    cb: Optional[Callable[[Msg], None]],
    stream: Optional[str],
    config: Optional[api.ConsumerConfig],
    idle_heartbeat: Optional[float],
    pending_msgs_limit: int,
    pending_bytes_limit: int,
    alarm: float,
) -> OrderedPushSubscription:
    nc = js._nc
    if config is not None and subject is not None:
        check_filter_matches(subject, config)
    if stream is None:
        assert subject is not None
        stream = js.find_stream_name_by_subject(subject)
    stream = api.check_stream_name(stream)
    hb = idle_heartbeat or (config.idle_heartbeat if config else None) or 5.0
    template = dataclasses.replace(
        config or api.ConsumerConfig(),
        ack_policy=api.AckPolicy.NONE,
        max_deliver=1,
        flow_control=True,
        idle_heartbeat=hb,
        mem_storage=True,
        num_replicas=1,
    )
    if subject is not None and not template.filter_subject and not template.filter_subjects:
        template = dataclasses.replace(template, filter_subject=subject)
    inbox = nc.new_inbox()
    osub = OrderedPushSubscription(js, stream, inbox, template, hb, alarm)
    osub._listen(inbox, None, cb, pending_msgs_limit, pending_bytes_limit)
    try:
        info = js.add_consumer(stream, dataclasses.replace(template, deliver_subject=inbox))
    except BaseException:
        osub._closed = True
        osub._let_go()
        js._core.unsubscribe(osub._sub)
        raise
    osub._named(info.name)
    return osub
