"""A running member instance: its consumer, its pulls, and the watch on the group's record.

``static_consume`` / ``elastic_consume`` return a :class:`ConsumerGroupConsumeContext`. Behind
it, one control thread (``pcg-<stream>.<group>-<member>``) reads the KV watch of the group's
record and reacts to changes; the messages come through an ordinary ``PullConsumer.consume``
on the member's consumer, in the ``PCG`` pinned_client priority group, so of several
instances of one member only the pinned one gets messages and the others stand by, taking over
when the pinned one stops pulling for the consumer's ``priority_timeout``.

The timers all follow ``ack_wait`` (5 s when not given), as in orbit.go: the pin's TTL is
``max(ack_wait, 1 s)``, pulls expire after ``max(ack_wait / 2, 1 s)``, and an idle control
thread looks every ``ack_wait + 0.5 s`` whether it should (re)join.
"""

from __future__ import annotations

import dataclasses
import logging
import threading
from typing import Callable, Optional

from .. import errors
from ..jetstream.api import ConsumerConfig, PriorityPolicy
from ..jetstream.consumer import ConsumeContext, PullConsumer
from ..jetstream.context import JetStream
from ..jetstream.kv import Entry, KeyWatcher
from ..msg import Msg
from .errors import ConsumerGroupError
from .partitions import PRIORITY_GROUP, strip_partition

__all__ = ["ConsumerGroupConsumeContext", "MessageHandler"]

log = logging.getLogger("jetstream_sync.pcgroups")

MessageHandler = Callable[[Msg], None]

DEFAULT_ACK_WAIT = 5.0
MIN_PIN_TTL = 1.0  # also the shortest pull expiry (the library's minimum)
_IDLE_EXTRA = 0.5  # orbit.go's margin on the idle timer


def member_timers(config: Optional[ConsumerConfig]) -> ConsumerConfig:
    """The user's consumer config, checked, with ack_wait defaulted."""
    if config is None:
        config = ConsumerConfig()
    if not isinstance(config, ConsumerConfig):
        raise errors.InvalidArgumentError(
            f"config must be a ConsumerConfig (the template of the member's consumer), got "
            f"{type(config).__name__}"
        )
    if config.deliver_subject:
        raise errors.InvalidArgumentError(
            "consumer group members pull: the config cannot have a deliver_subject"
        )
    if not config.ack_wait or config.ack_wait <= 0:
        config = dataclasses.replace(config, ack_wait=DEFAULT_ACK_WAIT)
    return config


def pinned_template(config: ConsumerConfig) -> ConsumerConfig:
    """The template with the pinned_client group every member's consumer has."""
    assert config.ack_wait is not None
    return dataclasses.replace(
        config,
        priority_groups=[PRIORITY_GROUP],
        priority_policy=PriorityPolicy.PINNED_CLIENT,
        priority_timeout=max(config.ack_wait, MIN_PIN_TTL),
    )


class ConsumerGroupConsumeContext:
    """A member instance that consumes while the group's config makes it one.

    ``stop()`` ends it (nothing is waited for; ``wait()`` does); it also ends by itself when
    the group is deleted (``error`` None) or its config changes in a way it cannot follow, or
    is unreadable (``error`` says why)."""

    def __init__(self, runner: MemberRunner) -> None:
        self._runner = runner

    def stop(self) -> None:
        """Stop consuming and watching (messages pulled ahead go back to the server)."""
        self._runner.request_stop()

    def wait(self, timeout: Optional[float] = None) -> bool:
        """Wait for the end; False if it did not come within ``timeout`` seconds."""
        return self._runner.ended.wait(timeout)

    @property
    def done(self) -> bool:
        """Whether it has ended."""
        return self._runner.ended.is_set()

    @property
    def error(self) -> Optional[errors.NATSError]:
        """Why it ended: None for stop() or the group deleted, else the error."""
        return self._runner.reason

    @property
    def consuming(self) -> bool:
        """Whether this instance has its member's consumer now (pinned or standing by)."""
        return self._runner.consuming

    def __enter__(self) -> ConsumerGroupConsumeContext:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()
        self.wait(30.0)

    def __repr__(self) -> str:
        return f"<ConsumerGroupConsumeContext {self._runner.label}>"


class MemberRunner:
    """The control thread of one member instance; static.py and elastic.py say what a record
    means (``on_entry``) and what to do when nothing happens (``on_idle``)."""

    def __init__(
        self,
        js: JetStream,
        label: str,
        consumer_stream: str,
        cb: MessageHandler,
        config: ConsumerConfig,
        watcher: KeyWatcher,
    ) -> None:
        self.js = js
        self.label = label
        self.consumer_stream = consumer_stream
        self.config = config
        self._cb = cb
        self._watcher = watcher
        assert config.ack_wait is not None
        self.ack_wait = config.ack_wait
        self._expires = max(self.ack_wait / 2, MIN_PIN_TTL)
        self.idle = self.ack_wait + _IDLE_EXTRA
        self._pc: Optional[PullConsumer] = None
        self._cc: Optional[ConsumeContext] = None
        self._stopping = threading.Event()
        self.ended = threading.Event()
        self.reason: Optional[errors.NATSError] = None
        self._thread = threading.Thread(target=self._run, name=f"pcg-{label}", daemon=True)

    # --- what static.py / elastic.py fill in -------------------------------------------------

    def on_entry(self, entry: Entry) -> Optional[bool]:
        """React to a new record; True: the member is over (``self.reason`` says why)."""
        raise NotImplementedError

    def on_idle(self) -> None:
        """Nothing came for ``idle`` seconds."""

    # --- the control thread -----------------------------------------------------------------

    def start(self) -> None:
        """Start the control thread."""
        self._thread.start()

    def request_stop(self) -> None:
        """Ask the control thread to stop, and wake it: returns at once."""
        self._stopping.set()
        self._watcher.stop()  # wakes the control thread out of updates()

    def pause(self, seconds: float) -> bool:
        """Wait unless stopped meanwhile; True if stopped."""
        return self._stopping.wait(seconds)

    @property
    def stopping(self) -> bool:
        """True once a stop was asked for."""
        return self._stopping.is_set()

    def _run(self) -> None:
        try:
            while not self._stopping.is_set():
                try:
                    entry = self._watcher.updates(self.idle)
                except errors.TimeoutError:
                    self._heal()
                    self.on_idle()
                    continue
                except errors.BadSubscriptionError:
                    break  # the watch was stopped: request_stop()
                if entry is None:
                    continue  # the marker after the current record
                if self.on_entry(entry):
                    return
        except errors.NATSError as exc:  # the connection closed, or worse: end, saying why
            if not self._stopping.is_set():
                self.reason = ConsumerGroupError(f"{self.label}: member ended: {exc}")
                self.reason.__cause__ = exc
        finally:
            self._watcher.stop()
            self.stop_consuming()
            self.ended.set()

    def _heal(self) -> None:
        """A consume that ended by itself (its consumer deleted under it, say) is dropped, so
        that on_idle joins again."""
        cc = self._cc
        if cc is not None and cc.closed:
            if cc.error is not None:
                log.info("%s: consuming ended (%s); joining again", self.label, cc.error)
            self._cc = None
            self._pc = None

    # --- the member's consumer --------------------------------------------------------------

    @property
    def consuming(self) -> bool:
        """True while this instance consumes (it holds a consume context)."""
        return self._cc is not None

    def start_consuming(self, name: str) -> None:
        """Bind to the member's consumer (just created) and pull from it."""
        pc = self.js.consumer(self.consumer_stream, name)
        self._pc = pc
        self._cc = pc.consume(self._deliver, expires=self._expires, group=PRIORITY_GROUP)

    def stop_consuming(self) -> None:
        """Stop pulling and wait (up to ack_wait) for the handler to finish the message in hand,
        so that no message of the member's partitions is handled by two threads at once."""
        cc, self._cc, self._pc = self._cc, None, None
        if cc is None:
            return
        cc.stop()
        cc.wait(self.ack_wait)

    def holds_pin(self) -> bool:
        """Whether this instance is the one its consumer has pinned (asked of the server)."""
        pc = self._pc
        if pc is None:
            return False
        pin = pc.pin_id(PRIORITY_GROUP)
        if pin is None:
            return False
        try:
            info = pc.consumer_info()
        except errors.NATSError:
            return False  # the consumer may be gone already
        return any(
            g.group == PRIORITY_GROUP and g.pinned_client_id == pin
            for g in info.priority_groups or []
        )

    def delete_consumer(self, name: str) -> None:
        """Delete the consumer ``name`` of the consumer stream; one already gone is fine, and
        other errors are logged, not raised."""
        try:
            self.js.delete_consumer(self.consumer_stream, name)
        except errors.NotFoundError:
            pass
        except errors.NATSError as exc:
            log.warning("%s: could not delete consumer %r: %s", self.label, name, exc)

    def _deliver(self, msg: Msg) -> None:
        # The partition number is ours, not the application's: the handler sees the subject
        # as it was published (the Msg is this delivery's own, so it is changed in place).
        msg.subject = strip_partition(msg.subject)
        self._cb(msg)
