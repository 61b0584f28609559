"""``consume_backlog``: a short-lived member of an elastic group (a Spark task, a cron job, a
batch script) that handles what its partitions hold now and leaves nothing behind.

One call does what the README's recipe did in eight steps: join as an instance of a member
already in the membership, consume, wait until the member's consumer has nothing pending and
nothing awaiting an ack, stop, delete the consumer, close. The membership is left as it was
found (the member is neither added nor removed). If ``cb`` raises or the timeout runs out,
the consumer is still deleted (its unacked messages go back to the group's work-queue stream
for the next call), and the error says what happened.

Static groups have no equivalent: a static member's durable (``<group>-<member>``) *is* its
position on the stream, and deleting it would make the next run start again from the first
message. A static short-lived member runs ``static_consume`` and ``stop()``; its durable
keeps where it was.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass
from typing import List, Optional

from .. import errors
from .._timeouts import check_timeout
from ..jetstream.api import ConsumerConfig
from ..jetstream.context import JetStream
from ..msg import Msg
from .elastic import _read_from, elastic_consume
from .errors import ConsumerGroupNotFoundError, NotAMemberError
from .member import MessageHandler
from .partitions import ELASTIC_BUCKET, elastic_partition_filters, elastic_stream_name
from .store import check_handler, check_name, check_stream, group_bucket

__all__ = ["BacklogResult", "consume_backlog"]

_POLL = 0.1  # how often the member's consumer is asked whether it is drained


@dataclass
class BacklogResult:
    """What ``consume_backlog`` handled: ``handled`` messages for which ``cb`` returned (it
    acks them itself), ``redelivered`` of those delivered more than once, in ``seconds``.
    ``len(result)`` is ``handled``."""

    handled: int = 0
    redelivered: int = 0
    seconds: float = 0.0

    def __len__(self) -> int:
        return self.handled


class _Counting:
    """Wraps ``cb``: counts what it handled, keeps its first exception and calls it no more
    after one (the rest stay unacked and go to the next call)."""

    def __init__(self, cb: MessageHandler) -> None:
        self._cb = cb
        self._lock = threading.Lock()
        self.handled = 0
        self.redelivered = 0
        self.failure: Optional[BaseException] = None
        self.closed = False
        self.failed = threading.Event()

    def __call__(self, msg: Msg) -> None:
        if self.closed or self.failed.is_set():
            return
        try:
            self._cb(msg)
        except BaseException as exc:  # the caller's: reported by consume_backlog
            with self._lock:
                if self.failure is None:
                    self.failure = exc
            self.failed.set()
            return
        with self._lock:
            self.handled += 1
            try:
                if msg.metadata.num_delivered > 1:
                    self.redelivered += 1
            except (errors.NATSError, AttributeError, ValueError):
                pass  # not a JetStream message: nothing to count


def consume_backlog(
    js: JetStream,
    stream: str,
    group: str,
    member: str,
    cb: MessageHandler,
    config: Optional[ConsumerConfig] = None,
    timeout: float = 60.0,
) -> BacklogResult:
    """Handle the backlog of ``member``'s partitions of the elastic group, then leave.

    ``member`` must be in the membership (NotAMemberError otherwise; it is not added or
    removed); ``cb`` and ``config`` are those of :func:`elastic_consume` (``cb`` acks each
    message). It returns once the member's consumer has no pending and no ack-pending
    messages and the group's work-queue stream has nothing of ``stream`` left to source,
    having stopped and deleted that consumer.

    If ``cb`` raises, that exception is raised (after the cleanup); if ``timeout`` seconds
    pass first, TimeoutError says how far it got. Either way the consumer is deleted, and
    unacked messages go to the next consumer. A ``cb`` that never returns cannot be
    interrupted: its thread is left to finish, but it is called no more.
    ConsumerGroupNotFoundError (naming the stream and the group) if the group is missing.
    Static groups: see the module's docstring (``static_consume`` and ``stop()``)."""
    stream, group = check_stream(stream), check_name(group, "group")
    member = check_name(member, "member")
    check_handler(cb)
    timeout = check_timeout(timeout, allow_none=False)
    kv = group_bucket(js, ELASTIC_BUCKET, "elastic", stream, group)
    group_config = _read_from(kv, stream, group)
    if not group_config.is_in_membership(member):
        raise NotAMemberError(
            f"elastic consumer group {stream}.{group}: {member!r} is not in its membership "
            f"{_names(group_config.members, group_config.member_mappings)}: add_members first "
            f"(consume_backlog does not change the membership)"
        )
    if not elastic_partition_filters(group_config, member):
        # In the membership but beyond max_members (a record another tool wrote): it owns
        # no partition, so it has no backlog.
        return BacklogResult()
    cg_stream = elastic_stream_name(stream, group)
    counting = _Counting(cb)
    started = time.monotonic()
    deadline = started + timeout
    ctx = elastic_consume(js, stream, group, member, counting, config)
    drained = False
    last = "its consumer was not made yet"
    try:
        while not counting.failed.is_set():
            if ctx.done:
                if ctx.error is not None:
                    raise ctx.error
                raise ConsumerGroupNotFoundError(
                    f"elastic consumer group {stream}.{group} (stream {stream!r}, group "
                    f"{group!r}) was deleted while consume_backlog ran"
                )
            try:
                # Only once this instance has joined: a consumer left by an earlier instance
                # may still be there, with other filters.
                info = js.consumer_info(cg_stream, member) if ctx.consuming else None
                lag = _source_lag(js, cg_stream, stream)
            except errors.NotFoundError:
                info = None
            if info is not None:
                last = (
                    f"{info.num_pending} pending, {info.num_ack_pending} awaiting an ack, "
                    f"{lag} still to be sourced from {stream!r}"
                )
                if info.num_pending == 0 and info.num_ack_pending == 0 and lag == 0:
                    drained = True
                    break
            if time.monotonic() >= deadline:
                break
            counting.failed.wait(_POLL)
    finally:
        counting.closed = True
        ctx.stop()
        ctx.wait(max(1.0, min(5.0, deadline - time.monotonic())))
        _delete_consumer(js, cg_stream, member)
    elapsed = time.monotonic() - started
    if counting.failure is not None:
        raise counting.failure
    if not drained:
        raise errors.TimeoutError(
            f"consume_backlog of {stream}.{group} member {member!r}: the backlog was not "
            f"handled within {timeout}s ({counting.handled} handled; {last}); its consumer "
            f"was deleted, and the messages not acked go to the next consumer"
        )
    return BacklogResult(counting.handled, counting.redelivered, elapsed)


def _source_lag(js: JetStream, cg_stream: str, stream: str) -> int:
    """How many of ``stream``'s messages the group's work-queue stream has still to source
    (they are part of the backlog: a task started right after a publish must see it)."""
    info = js.stream_info(cg_stream)
    return sum(src.lag for src in info.sources or [] if src.name == stream)


def _delete_consumer(js: JetStream, cg_stream: str, member: str) -> None:
    try:
        js.delete_consumer(cg_stream, member)
    except errors.NotFoundError:
        pass


def _names(members: List[str], mappings: object) -> str:
    return repr(members) if members else f"(member mappings {mappings!r})"
