"""Ordered consumers at the edges of their life: a push one closed while it rebuilds its
chain, a pull one whose current link is deleted while pulls are on their way."""

from __future__ import annotations

import os
import threading
import time
from typing import Any, Callable, List, Optional

import pytest
from support import Errors

import jetstream_sync as nats
from jetstream_sync._seam import core_of
from jetstream_sync.jetstream.context import JetStream
from jetstream_sync.server import NATSServer
from jetstream_sync.testing import wait_until

STREAM_PREFIX = "OLIFE"  # the shared stream fixture names its streams OLIFE<n>


def open_fds() -> int:
    return len(os.listdir("/proc/self/fd"))


def rebuilding(sub: Any) -> None:
    """Wait until an ordered push subscription has begun making a new link."""
    wait_until(lambda: sub.resets >= 1, timeout=15, what="a rebuild to start")


# --- f. an ordered push consumer closed while it rebuilds ----------------------------------


def test_closing_while_an_ordered_push_consumer_rebuilds_leaves_nothing_behind(
    server_factory: Callable[..., NATSServer],
) -> None:
    """The server pauses, so the ordered push consumer misses its heartbeats and starts
    rebuilding (its consumer create waits on the frozen server); the client is closed then.
    Five times over: threads and descriptors come back to where they were, and nothing is
    reported once the client is closed."""
    srv = server_factory(jetstream=True)
    with nats.connect(srv.url) as admin:
        ajs = admin.jetstream()
        ajs.add_stream(name="OPUSH", subjects=["orders.>"])
        ajs.publish("orders.new", b"0")
    threads, fds = threading.active_count(), open_fds()
    after_close: List[Exception] = []  # what the closed clients still tried to report
    quiet_errs: List[int] = []
    errs_of: List[Errors] = []
    for _ in range(5):
        errs = Errors()
        errs_of.append(errs)
        nc = nats.connect(srv.url, error_cb=errs, ping_interval=60)
        core: Any = core_of(nc)  # what JetStream reports through (the seam)
        report = core.report

        def counting(err: nats.NATSError, nc: Any = nc, report: Any = report) -> None:
            if nc.is_closed:
                after_close.append(err)
            report(err)

        core.report = counting
        js = nc.jetstream(timeout=3.0)
        sub = js.subscribe("orders.*", ordered_consumer=True, idle_heartbeat=0.2)
        assert sub.next_msg(timeout=10).data == b"0"
        srv.pause()
        try:
            # 3 heartbeats missed (0.6 s): the rebuild starts, its create is not answered.
            rebuilding(sub)
            nc.close()
        finally:
            srv.resume()
        quiet_errs.append(len(errs.seen))
        wait_until(
            lambda: threading.active_count() <= threads and open_fds() <= fds,
            timeout=20,
            what=f"the threads ({threads}) and fds ({fds}) of before to be all that is left",
        )
    # A rebuild loop that outlived its client would report again within its back-off (at
    # most 2 s): give it the time to show itself.
    seen = len(after_close)
    time.sleep(2.5)
    assert len(after_close) == seen
    assert [len(e.seen) for e in errs_of] == quiet_errs  # error_cb heard nothing after close
    assert threading.active_count() <= threads and open_fds() <= fds


def test_unsubscribing_while_an_ordered_push_consumer_rebuilds_ends_the_rebuild(
    server_factory: Callable[..., NATSServer],
) -> None:
    """The same pause, ended by unsubscribe() (from another thread, while the rebuild's
    create waits on the frozen server): the rebuild ends, no consumer is left behind."""
    srv = server_factory(jetstream=True)
    with nats.connect(srv.url, ping_interval=60) as nc:
        js = nc.jetstream(timeout=3.0)
        js.add_stream(name="OPUNS", subjects=["orders.>"])
        js.publish("orders.new", b"0")
        sub = js.subscribe("orders.>", ordered_consumer=True, idle_heartbeat=0.2)
        assert sub.next_msg(timeout=10).data == b"0"
        srv.pause()
        try:
            rebuilding(sub)
            ender = threading.Thread(target=sub.unsubscribe)
            ender.start()
            wait_until(lambda: sub._closed, timeout=10, what="unsubscribe to begin")
        finally:
            srv.resume()
        ender.join(20)
        assert not ender.is_alive()

        def rebuilders() -> int:
            return sum(1 for t in threading.enumerate() if t.name == "nats-ordered-reset")

        wait_until(lambda: rebuilders() == 0, timeout=20, what="the rebuild thread to end")
        resets = sub.resets
        js.publish("orders.new", b"1")
        # The rebuild asked for its old link's deletion without waiting for the answer, and
        # the server works its API requests off a pool of goroutines: that delete can still
        # be under way when the answer to our own comes back. The bound stays below the
        # server's 5 s inactive threshold for an ephemeral without interest, which would
        # otherwise remove a link the library left behind and hide it.
        wait_until(
            lambda: js.stream_info("OPUNS").state.consumer_count == 0,
            timeout=3.0,
            what="no consumer left (before the server's 5 s inactive cleanup)",
        )
        assert sub.resets == resets  # nothing rebuilds a chain once unsubscribed


# --- g. an ordered pull consumer whose link goes away with pulls in flight -----------------


def publish(js: JetStream, prefix: str, n: int, start: int = 1) -> None:
    for i in range(start, start + n):
        js.publish_async(f"{prefix}.{'credit' if i % 2 else 'debit'}", str(i).encode())
    js.publish_async_completed(timeout=30)


def test_ordered_replay_does_not_wait_out_pulls_lost_with_a_deleted_link(
    js: JetStream, stream: str
) -> None:
    """examples/ordered_replay.py's race: the link is deleted right after the pump pulled
    (two pulls of 50 on their way); the server drops pulls it had not taken up yet without a
    409, so nothing says they are gone. The replay must go on at once, not after 30 s
    (the heartbeat alarm of expires=30). The race is met in most rounds."""
    prefix = stream.lower()
    publish(js, prefix, 500)
    for _ in range(4):
        oc = js.ordered_consumer(stream, filter_subjects=[f"{prefix}.*"])
        last = 0
        with oc.messages(max_messages=100, expires=30) as it:
            while last < 400:
                started = time.monotonic()
                msg = it.next(timeout=10)
                assert int(msg.data) == last + 1, "out of order"
                last += 1
                if last == 201:
                    assert time.monotonic() - started < 10
                if last == 200:
                    js.delete_consumer(stream, oc.name)
        assert oc.resets >= 1
        oc.delete()


def test_a_pull_the_server_dropped_with_its_link_is_not_waited_out(
    js: JetStream, stream: str, nc: nats.Client, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Deterministically: the pulls of the first link are lost on their way (as the
    server drops those it had not taken up when the consumer was deleted) and the link is
    deleted. Once what came is handed out, the consumer must notice within a few seconds
    that its link is gone, not wait for the heartbeat alarm (30 s with expires=30)."""
    prefix = stream.lower()
    publish(js, prefix, 40)
    oc = js.ordered_consumer(stream, filter_subjects=[f"{prefix}.>"])
    first = oc.name
    lost: List[str] = []
    core = js._core  # what JetStream sends through (_seam.py)
    send = core.publish_own_reply
    send_now = core.send_request

    def lose(real: Any) -> Any:
        def sender(subject: str, data: Any, reply: str, headers: Optional[Any]) -> None:
            if subject.endswith(f".{stream}.{first}") and losing.is_set():
                lost.append(subject)
                return
            real(subject, data, reply, headers)

        return sender

    losing = threading.Event()
    monkeypatch.setattr(core, "publish_own_reply", lose(send))
    monkeypatch.setattr(core, "send_request", lose(send_now))
    with oc.messages(max_messages=10, expires=30) as it:
        got = [int(it.next(timeout=10).data) for _ in range(5)]
        losing.set()  # the first pull (10) was served whole: the next ones are lost
        js.delete_consumer(stream, first)
        while len(got) < 20:
            started = time.monotonic()
            got.append(int(it.next(timeout=10).data))
            assert time.monotonic() - started < 10
    assert got == list(range(1, 21))
    assert lost and oc.resets >= 1 and oc.name != first
