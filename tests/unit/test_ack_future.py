"""AckFuture behaves as a concurrent.futures.Future in every way a user can observe."""

from __future__ import annotations

import concurrent.futures as cf
import threading
from typing import Any, Callable, List

import pytest

from jetstream_sync.jetstream.publish import AckFuture


def run_now(fn: Callable[..., None], *args: Any) -> None:
    fn(*args)


def test_result_set_before_anyone_waits() -> None:
    fut = AckFuture(run_now)
    fut.set_result(42)
    assert fut.done() and fut.result(timeout=0) == 42 and fut.exception(timeout=0) is None


def test_exception_set_before_anyone_waits() -> None:
    fut = AckFuture(run_now)
    fut.set_exception(ValueError("no"))
    with pytest.raises(ValueError, match="no"):
        fut.result(timeout=0)


def test_waiter_in_another_thread_is_woken() -> None:
    fut = AckFuture(run_now)
    got: List[Any] = []
    started = threading.Event()

    def wait() -> None:
        started.set()
        got.append(fut.result(timeout=10))

    t = threading.Thread(target=wait)
    t.start()
    assert started.wait(5)
    # Either the waiter already made the Condition (usual path) or not yet (fast path):
    # both must end with the waiter holding the result.
    fut.set_result("ack")
    t.join(10)
    assert got == ["ack"]


def test_many_racing_waiters_and_settlers() -> None:
    for _ in range(200):
        fut = AckFuture(run_now)
        out: List[Any] = []
        waiter = threading.Thread(target=lambda f=fut, o=out: o.append(f.result(timeout=10)))
        waiter.start()
        fut.set_result(1)
        waiter.join(10)
        assert out == [1]


def test_callbacks_go_through_dispatch() -> None:
    dispatched: List[Any] = []
    fut = AckFuture(lambda fn, *args: dispatched.append((fn, args)))
    seen: List[Any] = []
    fut.add_done_callback(seen.append)
    fut.set_result(1)
    assert seen == [] and len(dispatched) == 1  # not run in the settling thread
    fn, args = dispatched[0]
    fn(*args)
    assert seen == [fut]


def test_callback_added_after_done_runs_at_once() -> None:
    fut = AckFuture(run_now)
    fut.set_result(1)
    seen: List[Any] = []
    fut.add_done_callback(seen.append)
    assert seen == [fut]


def test_cancelled_future_refuses_a_result() -> None:
    fut = AckFuture(run_now)
    assert fut.cancel() and fut.cancelled()
    with pytest.raises(cf.InvalidStateError):
        fut.set_result(1)
    done = AckFuture(run_now)
    done.set_result(1)
    with pytest.raises(cf.InvalidStateError):
        done.set_exception(ValueError())


def test_wait_and_as_completed() -> None:
    futs = [AckFuture(run_now) for _ in range(5)]
    futs[0].set_result(0)
    threading.Timer(0.05, lambda: [f.set_result(i) for i, f in enumerate(futs[1:], 1)]).start()
    done, not_done = cf.wait(futs, timeout=10)
    assert len(done) == 5 and not not_done
    assert sorted(f.result() for f in cf.as_completed(futs, timeout=10)) == [0, 1, 2, 3, 4]


def test_reading_a_settled_future_builds_no_condition() -> None:
    fut = AckFuture(run_now)
    assert not fut.done()
    fut.set_result(5)
    assert fut.done() and fut.result() == 5 and fut.exception() is None
    failed = AckFuture(run_now)
    failed.set_exception(KeyError("k"))
    assert failed.done() and isinstance(failed.exception(), KeyError)
    with pytest.raises(KeyError):
        failed.result()
    assert fut._cond is None and failed._cond is None
    assert fut._waiter_list is None and fut._callback_list is None
