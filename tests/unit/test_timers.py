"""The timer thread: deadline order, cancel, errors reported, stop.

Synchronisation is by threading.Event with generous timeouts; nothing sleeps.
"""

from __future__ import annotations

import threading
import time
from typing import Callable, Iterator, List

import pytest

from jetstream_sync._timers import Timer, Timers

WAIT = 10.0  # generous: only a broken timer thread ever waits this long


@pytest.fixture
def errors_seen() -> List[BaseException]:
    return []


@pytest.fixture
def timers(errors_seen: List[BaseException]) -> Iterator[Timers]:
    t = Timers("test-timers", errors_seen.append)
    try:
        yield t
    finally:
        t.stop()


def test_fires_in_deadline_order(timers: Timers) -> None:
    fired: List[str] = []
    done = threading.Event()

    def record(name: str) -> Callable[[], None]:
        def fn() -> None:
            fired.append(name)
            if len(fired) == 4:
                done.set()

        return fn

    # Scheduled out of order; they must run by deadline.
    timers.call_later(0.05, record("c"))
    timers.call_later(0.01, record("a"))
    timers.call_later(0.03, record("b"))
    timers.call_later(0.07, record("d"))
    assert done.wait(WAIT)
    assert fired == ["a", "b", "c", "d"]


def test_does_not_fire_early(timers: Timers) -> None:
    fired_at: List[float] = []
    done = threading.Event()
    start = time.monotonic()
    timers.call_later(0.05, lambda: (fired_at.append(time.monotonic()), done.set()))
    assert done.wait(WAIT)
    assert fired_at[0] - start >= 0.05 - 1e-6  # float rounding only


def test_equal_deadlines_fire_in_scheduling_order(timers: Timers) -> None:
    fired: List[int] = []
    done = threading.Event()
    gate = threading.Event()
    # Hold the timer thread inside a callback while scheduling, so that every timer below
    # is due before the thread looks at the heap again.
    timers.call_later(0, lambda: gate.wait(WAIT))
    for i in range(5):
        timers.call_later(0, lambda i=i: fired.append(i))
    timers.call_later(0, done.set)
    gate.set()
    assert done.wait(WAIT)
    assert fired == [0, 1, 2, 3, 4]


def test_negative_delay_fires_immediately(timers: Timers) -> None:
    done = threading.Event()
    handle = timers.call_later(-5, done.set)
    assert isinstance(handle, Timer)
    assert handle.deadline <= time.monotonic()
    assert done.wait(WAIT)


def test_cancel_prevents_firing(timers: Timers) -> None:
    cancelled_ran = threading.Event()
    later_ran = threading.Event()
    handle = timers.call_later(0.01, cancelled_ran.set)
    handle.cancel()
    handle.cancel()  # idempotent
    assert handle.cancelled
    # Fires after the cancelled one's deadline: by the time it has run, the cancelled timer
    # would have run too, had it not been cancelled.
    timers.call_later(0.03, later_ran.set)
    assert later_ran.wait(WAIT)
    assert not cancelled_ran.is_set()


def test_cancel_head_of_heap_while_waiting(timers: Timers) -> None:
    ran: List[str] = []
    done = threading.Event()
    first = timers.call_later(0.02, lambda: ran.append("first"))
    timers.call_later(0.04, lambda: (ran.append("second"), done.set()))
    first.cancel()
    assert done.wait(WAIT)
    assert ran == ["second"]


def test_earlier_timer_wakes_the_thread(timers: Timers) -> None:
    early = threading.Event()
    timers.call_later(30, lambda: None)  # the thread now waits ~30 s for this one
    start = time.monotonic()
    timers.call_later(0.01, early.set)
    assert early.wait(WAIT)
    assert time.monotonic() - start < WAIT / 2


def test_error_is_reported_and_thread_keeps_running(
    timers: Timers, errors_seen: List[BaseException]
) -> None:
    boom = ValueError("boom")
    after = threading.Event()

    def bad() -> None:
        raise boom

    timers.call_later(0.01, bad)
    timers.call_later(0.02, after.set)
    assert after.wait(WAIT)
    assert errors_seen == [boom]
    assert timers._thread.is_alive()
    # And it keeps serving later timers too.
    again = threading.Event()
    timers.call_later(0.01, again.set)
    assert again.wait(WAIT)


def test_base_exception_in_callback_is_reported(
    timers: Timers, errors_seen: List[BaseException]
) -> None:
    after = threading.Event()

    def bad() -> None:
        raise KeyboardInterrupt

    timers.call_later(0, bad)
    timers.call_later(0.01, after.set)
    assert after.wait(WAIT)
    assert len(errors_seen) == 1 and isinstance(errors_seen[0], KeyboardInterrupt)


def test_thread_is_a_named_daemon(timers: Timers) -> None:
    assert timers._thread.name == "test-timers"
    assert timers._thread.daemon
    assert timers._thread.is_alive()


def test_stop_ends_the_thread_promptly_and_drops_pending_timers() -> None:
    t = Timers("stop-test", lambda exc: None)
    fired = threading.Event()
    t.call_later(30, fired.set)
    start = time.monotonic()
    t.stop()
    assert time.monotonic() - start < 20.0  # not the 30 s timer (the join gives up at 5)
    assert not t._thread.is_alive()
    assert not fired.is_set()
    assert t._heap == []
    t.call_later(0, fired.set)  # nothing runs timers any more
    assert not t._thread.is_alive()
    t.stop()  # idempotent


def test_stop_from_a_timer_callback_does_not_deadlock() -> None:
    stopped = threading.Event()
    holder: List[Timers] = []

    def stop_self() -> None:
        holder[0].stop()  # join=True is skipped on the timer thread itself
        stopped.set()

    t = Timers("self-stop", lambda exc: None)
    holder.append(t)
    t.call_later(0.01, stop_self)
    assert stopped.wait(WAIT)
    t._thread.join(WAIT)
    assert not t._thread.is_alive()


def test_stop_without_join_then_join() -> None:
    t = Timers("nojoin", lambda exc: None)
    t.stop(join=False)
    t._thread.join(WAIT)
    assert not t._thread.is_alive()
