"""publish_async expiry: checkpoints for the context's timeout, a heap for the others.

A fake client stands in for the connection (nothing here is server behaviour): the
publisher only needs somewhere to send frames, a subscription hook and a timer seam.
Time is passed to ``_expire`` explicitly, so nothing sleeps.
"""

from __future__ import annotations

from typing import Any, Callable, List, Optional, Tuple

import pytest

from jetstream_sync import errors
from jetstream_sync.jetstream.publish import AsyncPublisher
from jetstream_sync.msg import Msg

TIMEOUT = 5.0


class FakeClient:
    """The client (new_inbox) and the parts of its Core (_seam.py) the publisher uses."""

    def __init__(self) -> None:
        self.sent: List[Tuple[str, bytes, str]] = []
        self.hook: Optional[Callable[[Msg], bool]] = None

    def new_inbox(self) -> str:
        return "_INBOX.test"

    def callback(self, fn: Any, *args: Any) -> None:
        fn(*args)

    def add_close_hook(self, fn: Callable[[], None]) -> None:
        pass

    def subscribe(self, *args: Any, hook: Callable[[Msg], bool]) -> object:
        self.hook = hook
        return object()

    def call_later(self, delay: float, fn: Callable[[], None]) -> None:
        pass  # the tests call _expire themselves

    def publish_own_reply(self, subject: str, data: bytes, reply: str, headers: Any) -> None:
        self.sent.append((subject, data, reply))


def make() -> Tuple[AsyncPublisher, FakeClient]:
    nc = FakeClient()
    return AsyncPublisher(nc, nc, 100, 1.0, TIMEOUT), nc  # type: ignore[arg-type]


def ack(nc: FakeClient, reply: str, seq: int) -> None:
    assert nc.hook is not None
    nc.hook(Msg(reply, "", b'{"stream":"S","seq":%d}' % seq))


def test_default_timeout_fails_after_its_checkpoint_never_before() -> None:
    pub, _nc = make()
    futs = [pub.publish("a", b"x", None, None) for _ in range(3)]
    pub._expire(100.0)  # the sweep at t=100 notes a checkpoint due at t=105
    late = pub.publish("a", b"x", None, None)  # made after it: belongs to the next one
    pub._expire(104.9)
    assert not any(f.done() for f in [*futs, late])
    pub._expire(105.0)
    for f in futs:
        with pytest.raises(errors.TimeoutError, match="'a'"):
            f.result(timeout=0)
    assert not late.done() and pub.pending == 1
    pub._expire(109.9)  # late's checkpoint was noted at 104.9: due at 109.9
    with pytest.raises(errors.TimeoutError):
        late.result(timeout=0)
    assert pub.pending == 0


def test_answered_publishes_are_not_expired() -> None:
    pub, nc = make()
    first = pub.publish("a", b"x", None, None)
    second = pub.publish("a", b"x", None, None)
    pub._expire(0.0)
    ack(nc, nc.sent[0][2], 1)
    pub._expire(TIMEOUT)
    assert first.result(timeout=0).seq == 1
    with pytest.raises(errors.TimeoutError):
        second.result(timeout=0)


def test_own_timeouts_use_the_heap_and_are_skipped_by_checkpoints() -> None:
    pub, _nc = make()
    long = pub.publish("a", b"x", None, 60.0)  # its own deadline: time.monotonic() + 60
    short = pub.publish("a", b"x", None, None)
    pub._expire(0.0)
    pub._expire(TIMEOUT)  # short's checkpoint falls due; long is not the checkpoints' to fail
    with pytest.raises(errors.TimeoutError):
        short.result(timeout=0)
    assert not long.done()
    assert long._deadline is not None
    pub._expire(long._deadline)
    with pytest.raises(errors.TimeoutError):
        long.result(timeout=0)


def test_no_checkpoint_while_nothing_is_pending() -> None:
    pub, nc = make()
    pub._expire(0.0)
    assert not pub._checkpoints
    fut = pub.publish("a", b"x", None, None)
    pub._expire(1.0)
    pub._expire(2.0)  # nothing newer: one checkpoint, not one per sweep
    assert len(pub._checkpoints) == 1
    ack(nc, nc.sent[0][2], 7)
    assert fut.result(timeout=0).seq == 7
