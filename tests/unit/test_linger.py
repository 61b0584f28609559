"""The long pull a fetch leaves early (jetstream/_linger.py), with messages made by hand and
a core that records what would go on the wire: when its inbox stays, when it goes, and
that the end of the pull wakes a fetch waiting on it."""

from __future__ import annotations

import queue
import time
from typing import Callable, List, Optional, Tuple

from jetstream_sync.jetstream._linger import GRACE, WAKE, LongPulls
from jetstream_sync.msg import Msg


class FakeSub:
    def __init__(self, sid: int) -> None:
        self.sid = sid


class FakeCore:
    """What LongPulls calls of the seam; timers run only when the test says so."""

    def __init__(self) -> None:
        self.timers: List[Tuple[float, Callable[[], None]]] = []
        self.wire: List[Tuple[str, int]] = []  # ("retire" | "forget", sid)
        self.reconnect_hooks: List[Callable[[], None]] = []

    def call_later(self, delay: float, fn: Callable[[], None]) -> None:
        self.timers.append((delay, fn))

    def run_timers(self, longest: float = 1e9) -> None:
        due = [fn for delay, fn in self.timers if delay <= longest]
        self.timers = [(d, fn) for d, fn in self.timers if d > longest]
        for fn in due:
            fn()

    def retire(self, sub: FakeSub) -> None:
        self.wire.append(("retire", sub.sid))

    def forget(self, sub: FakeSub) -> None:
        self.wire.append(("forget", sub.sid))

    def add_reconnect_hook(self, fn: Callable[[], None]) -> None:
        self.reconnect_hooks.append(fn)

    def remove_reconnect_hook(self, fn: Callable[[], None]) -> None:
        if fn in self.reconnect_hooks:
            self.reconnect_hooks.remove(fn)


def message(sid: int, n: int = 0) -> Msg:
    return Msg("orders.x", f"$JS.ACK.S.C.1.{n}.{n}.0.0", b"m", sid)


def status(sid: int, code: bytes) -> Msg:
    return Msg("_INBOX.x", "", b"", sid, hdr=b"NATS/1.0 " + code + b"\r\n\r\n")


def setup(
    batch: int = 5, ends_in: float = 30.0
) -> Tuple[LongPulls, FakeCore, FakeSub, queue.SimpleQueue[Msg]]:
    core = FakeCore()
    q: queue.SimpleQueue[Msg] = queue.SimpleQueue()
    pulls = LongPulls(core, q)  # type: ignore[arg-type]
    sub = FakeSub(7)
    pulls.track(sub, batch, time.monotonic() + ends_in)  # type: ignore[arg-type]
    return pulls, core, sub, q


def seen(pulls: LongPulls, msg: Msg) -> bool:
    pull = pulls.current
    assert pull is not None
    return pulls.seen(pull, msg)


def test_while_its_fetch_reads_everything_is_the_fetchs_and_messages_are_counted() -> None:
    pulls, core, _, _ = setup(batch=5)
    assert seen(pulls, message(7)) is False
    assert seen(pulls, status(7, b"100 Idle Heartbeat")) is False  # the fetch's to see
    assert seen(pulls, status(7, b"404 No Messages")) is False
    assert pulls.current is not None and pulls.current.left == 4  # statuses do not count
    assert core.wire == []


def test_left_early_the_inbox_stays_and_its_408_ends_it() -> None:
    pulls, core, sub, q = setup(batch=5)
    seen(pulls, message(7))
    served, lingers = pulls.leave(sub, 1, 5, finished=False, closed=False)  # type: ignore[arg-type]
    assert (served, lingers) == (False, True)
    assert core.wire == [] and pulls.lingering() is not None
    assert seen(pulls, message(7, 2)) is False  # still delivered: queued by the caller
    assert seen(pulls, status(7, b"100 Idle Heartbeat")) is True  # consumed, not an end
    assert pulls.lingering() is not None
    pulls.waited = True  # a fetch waits on it
    assert seen(pulls, status(7, b"408 Request Timeout")) is True
    assert pulls.current is None
    assert q.get_nowait() is WAKE
    core.run_timers(longest=0.0)  # the removal goes through the timer thread
    assert core.wire == [("retire", 7)]
    core.run_timers()  # the expiry timer finds it over: nothing more
    assert core.wire == [("retire", 7)]
    assert core.reconnect_hooks == []


def test_its_last_message_ends_it_and_the_server_has_dropped_the_inbox() -> None:
    pulls, core, sub, q = setup(batch=2)
    seen(pulls, message(7))
    pulls.leave(sub, 1, 2, finished=False, closed=False)  # type: ignore[arg-type]
    assert seen(pulls, message(7, 2)) is False
    assert pulls.current is None
    core.run_timers(longest=0.0)
    assert core.wire == [("forget", 7)]  # the UNSUB count did it: no UNSUB of ours
    assert q.empty()  # nobody waited: no wake-up left in the queue


def test_a_message_that_came_before_the_fetch_left_is_counted_too() -> None:
    """Counted on arrival, not when taken: one still queued when the fetch returns must not
    leave the pull waiting for a message the server will never send."""
    pulls, _, sub, _ = setup(batch=2)
    seen(pulls, message(7))
    seen(pulls, message(7, 2))  # arrived; the fetch returned with only the first
    served, lingers = pulls.leave(sub, 1, 2, finished=False, closed=False)  # type: ignore[arg-type]
    assert (served, lingers) == (True, False)
    assert pulls.current is None


def test_no_linger_for_a_pull_that_ended_or_is_closing() -> None:
    for finished, closed in ((True, False), (False, True)):
        pulls, core, sub, _ = setup(batch=5, ends_in=30.0)
        served, lingers = pulls.leave(sub, 1, 5, finished=finished, closed=closed)  # type: ignore[arg-type]
        assert (served, lingers) == (False, False)
        assert pulls.current is None and core.timers == []


def test_a_pull_past_its_reckoned_expiry_still_lingers_for_the_grace() -> None:
    """The fetch timed out and the client reckons the pull expired a second ago; the server
    read it later, so it may still be live there: the inbox stays for GRACE (or until its
    408 comes), not removed at once under a live pull."""
    pulls, core, sub, _ = setup(batch=5, ends_in=-1.0)
    served, lingers = pulls.leave(sub, 0, 5, finished=False, closed=False)  # type: ignore[arg-type]
    assert (served, lingers) == (False, True)
    ((delay, _),) = core.timers
    assert delay == GRACE
    assert core.wire == []


def test_a_pull_it_does_not_track_is_served_by_count() -> None:
    pulls, _, _, _ = setup(batch=5)
    other = FakeSub(9)
    assert pulls.leave(other, 5, 5, False, False) == (True, False)  # type: ignore[arg-type]
    assert pulls.leave(other, 4, 5, False, False) == (False, False)  # type: ignore[arg-type]


def test_expiry_reconnect_and_close_each_end_it() -> None:
    pulls, core, sub, _ = setup(batch=5, ends_in=3.0)
    pulls.leave(sub, 1, 5, False, False)  # type: ignore[arg-type]
    ((delay, _),) = core.timers
    assert 3.0 < delay <= 4.0  # its expiry plus the grace
    core.run_timers()
    assert pulls.current is None
    core.run_timers()
    assert core.wire == [("retire", 7)]

    pulls, core, sub, _ = setup(batch=5)
    pulls.leave(sub, 1, 5, False, False)  # type: ignore[arg-type]
    (hook,) = core.reconnect_hooks
    hook()
    core.run_timers(longest=0.0)
    assert pulls.current is None and core.wire == [("retire", 7)]
    assert core.reconnect_hooks == []

    pulls, core, sub, _ = setup(batch=5)
    pulls.leave(sub, 1, 5, False, False)  # type: ignore[arg-type]
    pulls.close()
    assert pulls.current is None and core.wire == [("retire", 7)]
    assert core.reconnect_hooks == []


def test_ending_twice_removes_the_inbox_once() -> None:
    pulls, core, sub, _ = setup(batch=5)
    pulls.leave(sub, 1, 5, False, False)  # type: ignore[arg-type]
    pull: Optional[object] = pulls.current
    assert pull is not None
    pulls.end(pulls.current, unsub=True)  # type: ignore[arg-type]
    pulls.end(pull, unsub=True)  # type: ignore[arg-type]
    core.run_timers(longest=0.0)
    assert core.wire == [("retire", 7)]
