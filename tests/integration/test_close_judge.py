"""Hostile tests of the documented close()/drain() contract (docs/guides/core.md).

"nc.close() ... Messages queued in a subscription stay readable with next_msg, but no callback
runs after close() (as in nats.go and nats-py): drain() is how every queued message gets
handled."  And: nc.drain() handles every queued message, then flushes and closes.

Written from the documentation alone.  Every wait has a deadline; the only timed pauses are
bounded observation windows used to show that something does *not* happen.
"""

from __future__ import annotations

import threading
import time
from collections import Counter
from typing import Any, Callable, Iterator, List

import pytest

import jetstream_sync as nats
from jetstream_sync.server import NATSServer
from jetstream_sync.testing import wait_until

pytestmark = pytest.mark.timeout(90)

N = 20
DEADLINE = 10.0
QUIET = 0.6  # observation window to show no callback runs


@pytest.fixture(scope="module")
def server() -> Iterator[Any]:
    with NATSServer(jetstream=True) as srv:
        yield srv


def quiet_window(seconds: float = QUIET) -> None:
    """Bounded observation: give a misbehaving dispatcher the chance to run."""
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        time.sleep(0.02)


def run_with_deadline(fn: Callable[[], Any], timeout: float = DEADLINE) -> List[Any]:
    """Run fn in a thread; fail if it does not return within timeout. Returns [result|exc]."""
    out: List[Any] = []

    def target() -> None:
        try:
            out.append(("ok", fn()))
        except BaseException as e:
            out.append(("exc", e))

    t = threading.Thread(target=target, daemon=True)
    t.start()
    t.join(timeout)
    assert not t.is_alive(), f"{fn} did not return within {timeout}s"
    return out


class Recorder:
    """A callback that blocks on its first message until released; counts every call."""

    def __init__(self, name: str, block: bool = True) -> None:
        self.name = name
        self.block = block
        self.gate = threading.Event()
        self.entered = threading.Event()
        self.lock = threading.Lock()
        self.calls: List[bytes] = []
        self.finished: List[bytes] = []
        self.after_close: List[bytes] = []
        self.closed_flag: threading.Event | None = None

    def __call__(self, msg: nats.Msg) -> None:
        with self.lock:
            self.calls.append(msg.data)
            if self.closed_flag is not None and self.closed_flag.is_set():
                self.after_close.append(msg.data)
        self.entered.set()
        if self.block:
            self.gate.wait(30)
        with self.lock:
            self.finished.append(msg.data)


def sentinel_barrier(nc: Any, subject: str = "sentinel.x") -> None:
    """After this, everything published before it on nc has been routed to local queues."""
    s = nc.subscribe(subject)
    nc.flush(timeout=5)
    nc.publish(subject, b"S")
    s.next_msg(timeout=5)


# 1 -----------------------------------------------------------------------------------------
def test_close_with_blocked_wildcard_and_queue_callbacks(server: Any) -> None:
    errors: List[BaseException] = []
    nc = nats.connect(server.url, error_cb=errors.append)
    closed = threading.Event()
    star, gt, q1, q2 = Recorder("star"), Recorder("gt"), Recorder("q1"), Recorder("q2")
    for r in (star, gt, q1, q2):
        r.closed_flag = closed
    nc.subscribe("cj1.*", cb=star)
    nc.subscribe("cj1.>", cb=gt)
    nc.subscribe("cj1.q", queue="workers", cb=q1)
    nc.subscribe("cj1.q", queue="workers", cb=q2)
    plain = nc.subscribe("cj1.>")  # no callback
    nc.flush(timeout=5)
    for i in range(N):
        nc.publish("cj1.q", b"%d" % i)
    sentinel_barrier(nc)
    for r in (star, gt, q1, q2):
        assert r.entered.wait(DEADLINE), f"{r.name} never started"

    out = run_with_deadline(nc.close, timeout=5.0)
    assert out[0][0] == "ok", out
    closed.set()
    assert nc.is_closed
    for r in (star, gt, q1, q2):
        r.gate.set()
    # the running callbacks finish
    wait_until(lambda: all(len(r.finished) >= 1 for r in (star, gt, q1, q2)), what="finish")
    quiet_window()
    for r in (star, gt, q1, q2):
        assert r.after_close == [], f"{r.name}: callbacks ran after close: {r.after_close}"
        assert len(r.calls) == 1, f"{r.name} ran {len(r.calls)} times"
    # the callback-less subscription still hands out all its queued messages, in order
    got = [plain.next_msg(timeout=1.0).data for _ in range(N)]
    assert got == [b"%d" % i for i in range(N)]
    assert errors == [], errors


# 2 -----------------------------------------------------------------------------------------
def test_next_msg_after_close_drains_queue_then_raises_closed(server: Any) -> None:
    nc = nats.connect(server.url)
    sub = nc.subscribe("cj2.>")
    for i in range(N):
        nc.publish("cj2.a.b", b"%d" % i)
    sentinel_barrier(nc)
    nc.close()
    got = [sub.next_msg(timeout=1.0).data for _ in range(N)]
    assert got == [b"%d" % i for i in range(N)]
    # the queue is empty: the doc says calls blocked on a closed connection wake with
    # ConnectionClosedError; a next_msg on an empty queue after close must not sit out its timeout
    t0 = time.monotonic()
    with pytest.raises(nats.ConnectionClosedError):
        sub.next_msg(timeout=5.0)
    assert time.monotonic() - t0 < 2.0


# 3 -----------------------------------------------------------------------------------------
def test_drain_runs_every_queued_callback_exactly_once(server: Any) -> None:
    errors: List[BaseException] = []
    closed_cb_calls: List[int] = []
    nc = nats.connect(
        server.url, error_cb=errors.append, closed_cb=lambda: closed_cb_calls.append(1)
    )
    star, gt, q1, q2 = Recorder("star"), Recorder("gt"), Recorder("q1"), Recorder("q2")
    nc.subscribe("cj3.*", cb=star)
    nc.subscribe("cj3.>", cb=gt)
    nc.subscribe("cj3.q", queue="w", cb=q1)
    nc.subscribe("cj3.q", queue="w", cb=q2)
    nc.flush(timeout=5)
    expected = [b"%d" % i for i in range(N)]
    for p in expected:
        nc.publish("cj3.q", p)
    sentinel_barrier(nc)
    for r in (star, gt):
        assert r.entered.wait(DEADLINE)

    done: List[Any] = []
    t = threading.Thread(target=lambda: done.append(nc.drain(timeout=20)), daemon=True)
    t.start()
    wait_until(lambda: t.is_alive() is False or len(star.calls) >= 1, what="drain started")
    # drain must wait for the blocked callbacks
    quiet_window(0.3)
    assert t.is_alive(), "drain() returned while callbacks still had queued messages"
    for r in (star, gt, q1, q2):
        r.gate.set()
    t.join(DEADLINE + 20)
    assert not t.is_alive(), "drain() did not return"
    assert nc.is_closed
    assert star.calls == expected
    assert gt.calls == expected
    assert sorted(Counter(q1.calls + q2.calls).items()) == sorted(Counter(expected).items())
    assert len(star.finished) == len(gt.finished) == N
    assert len(closed_cb_calls) == 1
    assert errors == [], errors


# 4 -----------------------------------------------------------------------------------------
def test_close_from_inside_callback(server: Any) -> None:
    errors: List[BaseException] = []
    closed_cb_calls: List[int] = []
    nc = nats.connect(
        server.url, error_cb=errors.append, closed_cb=lambda: closed_cb_calls.append(1)
    )
    calls: List[bytes] = []
    close_returned = threading.Event()
    close_exc: List[BaseException] = []
    go = threading.Event()

    def cb(msg: nats.Msg) -> None:
        calls.append(msg.data)
        go.wait(10)  # let the whole batch queue up behind this one
        try:
            nc.close()
        except BaseException as e:
            close_exc.append(e)
        close_returned.set()

    nc.subscribe("cj4", cb=cb)
    for i in range(N):
        nc.publish("cj4", b"%d" % i)
    sentinel_barrier(nc)
    go.set()
    assert close_returned.wait(DEADLINE), "close() from inside a callback deadlocked"
    assert close_exc == [], close_exc
    assert nc.is_closed
    quiet_window()
    assert calls == [b"0"], f"callbacks after close(): {calls}"
    wait_until(lambda: len(closed_cb_calls) >= 1, what="closed_cb")
    quiet_window(0.2)
    assert len(closed_cb_calls) == 1
    assert errors == [], errors


# 5 -----------------------------------------------------------------------------------------
def test_close_twice_and_concurrently(server: Any) -> None:
    errors: List[BaseException] = []
    closed_cb_calls: List[int] = []
    disc_cb_calls: List[int] = []
    nc = nats.connect(
        server.url,
        error_cb=errors.append,
        closed_cb=lambda: closed_cb_calls.append(1),
        disconnected_cb=lambda: disc_cb_calls.append(1),
    )
    r = Recorder("r")
    nc.subscribe("cj5", cb=r)
    for i in range(N):
        nc.publish("cj5", b"%d" % i)
    sentinel_barrier(nc)
    assert r.entered.wait(DEADLINE)
    barrier = threading.Barrier(4)
    results: List[Any] = []

    def closer() -> None:
        barrier.wait(5)
        try:
            nc.close()
            results.append("ok")
        except BaseException as e:
            results.append(e)

    threads = [threading.Thread(target=closer, daemon=True) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(DEADLINE)
        assert not t.is_alive(), "concurrent close() hung"
    nc.close()  # and once more, sequentially
    results.append("ok")
    assert results == ["ok"] * 5, results
    r.gate.set()
    wait_until(lambda: len(r.finished) == 1, what="running callback to finish")
    wait_until(lambda: len(closed_cb_calls) >= 1, what="closed_cb")
    quiet_window()
    assert len(r.calls) == 1
    assert len(closed_cb_calls) == 1, closed_cb_calls
    assert len(disc_cb_calls) == 1, disc_cb_calls
    assert errors == [], errors


# 6 -----------------------------------------------------------------------------------------
def test_close_while_callback_mid_run_running_one_finishes_rest_do_not(server: Any) -> None:
    nc = nats.connect(server.url)
    closed = threading.Event()
    r = Recorder("r")
    r.closed_flag = closed
    nc.subscribe("cj6", cb=r)
    for i in range(N):
        nc.publish("cj6", b"%d" % i)
    sentinel_barrier(nc)
    assert r.entered.wait(DEADLINE)
    t0 = time.monotonic()
    nc.close()
    # close() must not wait for the user's callback (it is blocked for up to 30 s)
    assert time.monotonic() - t0 < 3.0
    closed.set()
    assert r.finished == [], "callback was interrupted?"
    r.gate.set()
    wait_until(lambda: r.finished == [b"0"], what="running callback finishes")
    quiet_window()
    assert r.calls == [b"0"], r.calls
    assert r.after_close == []


# 7 -----------------------------------------------------------------------------------------
def test_error_cb_gets_nothing_spurious_from_close_with_pending_work(server: Any) -> None:
    errors: List[BaseException] = []
    nc = nats.connect(server.url, error_cb=errors.append)
    recs = [Recorder(f"r{i}") for i in range(3)]
    nc.subscribe("cj7.*", cb=recs[0])
    nc.subscribe("cj7.>", cb=recs[1])
    nc.subscribe("cj7.a", queue="g", cb=recs[2])
    pending = nc.subscribe("cj7.>")  # queued, never read
    # a blocked next_msg waiter on another subscription
    waiter_out: List[Any] = []
    idle = nc.subscribe("cj7.idle.never")
    wt = threading.Thread(
        target=lambda: waiter_out.append(_catch(lambda: idle.next_msg(timeout=20))), daemon=True
    )
    wt.start()
    for i in range(N):
        nc.publish("cj7.a", b"%d" % i)
    sentinel_barrier(nc)
    for r in recs:
        assert r.entered.wait(DEADLINE)
    nc.close()
    for r in recs:
        r.gate.set()
    wt.join(DEADLINE)
    assert not wt.is_alive(), "next_msg blocked on an idle sub did not wake on close()"
    assert isinstance(waiter_out[0], nats.ConnectionClosedError), waiter_out
    quiet_window()
    assert errors == [], f"spurious error_cb reports: {errors!r}"
    assert pending.next_msg(timeout=1).data == b"0"


def _catch(fn: Callable[[], Any]) -> Any:
    try:
        return fn()
    except BaseException as e:
        return e


# 8 -----------------------------------------------------------------------------------------
@pytest.mark.parametrize("manual_ack", [True, False])
def test_jetstream_push_subscribe_cb_then_close(server: Any, manual_ack: bool) -> None:
    errors: List[BaseException] = []
    nc = nats.connect(server.url, error_cb=errors.append)
    js = nc.jetstream()
    stream = f"CJ8{int(manual_ack)}"
    subj = f"cj8{int(manual_ack)}.>"
    js.add_stream(name=stream, subjects=[subj])
    for i in range(N):
        js.publish(f"cj8{int(manual_ack)}.x", b"%d" % i)
    closed = threading.Event()
    r = Recorder("js")
    r.closed_flag = closed
    js.subscribe(f"cj8{int(manual_ack)}.x", cb=r, manual_ack=manual_ack)
    assert r.entered.wait(DEADLINE)
    # let the push consumer deliver the rest into the local queue (bounded wait)
    quiet_window(0.5)
    out = run_with_deadline(nc.close, timeout=5.0)
    assert out[0][0] == "ok", out
    closed.set()
    r.gate.set()
    wait_until(lambda: len(r.finished) == 1, what="running JS callback finishes")
    quiet_window()
    assert r.after_close == [], r.after_close
    assert r.calls == [b"0"], r.calls
    if manual_ack:
        assert errors == [], errors
    else:
        # auto-ack of the message whose callback finished after close: reported how?
        assert all(isinstance(e, nats.ConnectionClosedError) for e in errors), errors
    # clean up the stream on a fresh connection
    with nats.connect(server.url) as nc2:
        nc2.jetstream().delete_stream(stream)


# 9 -----------------------------------------------------------------------------------------
def test_close_from_another_thread_while_callback_thread_busy(server: Any) -> None:
    errors: List[BaseException] = []
    nc = nats.connect(server.url, error_cb=errors.append)
    closed = threading.Event()
    busy = Recorder("busy")
    busy.closed_flag = closed
    nc.subscribe("cj9.*", cb=busy)
    plain = nc.subscribe("cj9.*")
    for i in range(N):
        nc.publish("cj9.z", b"%d" % i)
    sentinel_barrier(nc)
    assert busy.entered.wait(DEADLINE)

    # a request in flight on a third thread
    req_out: List[Any] = []
    nc.subscribe("cj9.svc.slow")  # a responder that never answers
    rt = threading.Thread(
        target=lambda: req_out.append(_catch(lambda: nc.request("cj9.svc.slow", b"", timeout=20))),
        daemon=True,
    )
    rt.start()
    quiet_window(0.2)

    closer_done = threading.Event()

    def closer() -> None:
        nc.close()
        closed.set()
        closer_done.set()

    threading.Thread(target=closer, daemon=True).start()
    assert closer_done.wait(5.0), "close() from another thread blocked on a busy callback"
    rt.join(DEADLINE)
    assert not rt.is_alive()
    assert isinstance(req_out[0], nats.ConnectionClosedError), req_out
    busy.gate.set()
    wait_until(lambda: len(busy.finished) == 1, what="busy callback finishes")
    quiet_window()
    assert busy.calls == [b"0"], busy.calls
    assert [plain.next_msg(timeout=1).data for _ in range(N)] == [b"%d" % i for i in range(N)]
    assert errors == [], errors


# 10 ----------------------------------------------------------------------------------------
def test_drain_from_inside_callback_handles_every_message(server: Any) -> None:
    # Found: nc.drain() called from a subscription's own callback returns at once (None),
    # closes the connection, and that subscription's remaining queued messages are never
    # handled, with nothing reported to error_cb. Other subscriptions are drained fully, and
    # sub.drain() from its own callback does handle every queued message (nats.go semantics).
    errors: List[BaseException] = []
    nc = nats.connect(server.url, error_cb=errors.append)
    calls: List[bytes] = []
    go = threading.Event()
    drain_out: List[Any] = []
    drain_done = threading.Event()

    def cb(msg: nats.Msg) -> None:
        calls.append(msg.data)
        if msg.data == b"0":
            go.wait(10)
            drain_out.append(_catch(lambda: nc.drain(timeout=5)))
            drain_done.set()

    nc.subscribe("cj10", cb=cb)
    for i in range(N):
        nc.publish("cj10", b"%d" % i)
    sentinel_barrier(nc)
    go.set()
    assert drain_done.wait(20), "drain() from inside a callback never returned"
    wait_until(lambda: nc.is_closed, what="closed after drain")
    quiet_window()
    assert Counter(calls) == Counter(b"%d" % i for i in range(N)), calls
    assert drain_out == [None], drain_out
    assert errors == [], errors
