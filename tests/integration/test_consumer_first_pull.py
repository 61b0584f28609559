"""When the continuous pulls of a PullConsumer send their first pull (issue 28, part 3):
``messages()`` on the first ``next()`` / iteration, ``consume(cb)`` at once. An iterator
made early and read later must not hold messages meanwhile: with a prioritized group
(ADR-42) a low-priority reader made first would otherwise take what a higher-priority one
should get. The pulls are seen by a plain core subscription on the pull subject (another
connection), made certain of by round trips on both connections, not by sleeping."""

from __future__ import annotations

import threading
from typing import Iterator, List

import pytest

import jetstream_sync as nats
from jetstream_sync.jetstream.consumer import PullConsumer
from jetstream_sync.jetstream.context import JetStream
from jetstream_sync.server import NATSServer
from jetstream_sync.testing import wait_until

STREAM_PREFIX = "FIRSTPULL"  # the shared stream fixture names its streams FIRSTPULL<n>


class PullWatch:
    """The pull requests sent to one consumer, seen on a connection of its own."""

    def __init__(self, url: str, js: JetStream, stream: str, consumer: str) -> None:
        self._js = js
        self._nc = nats.connect(url)
        self.pulls: List[bytes] = []
        self._sub = self._nc.subscribe(f"$JS.API.CONSUMER.MSG.NEXT.{stream}.{consumer}")
        self._nc.flush()

    def settled(self) -> List[bytes]:
        """The pulls sent so far: everything our client sent has reached the server (its
        PONG), and everything the server routed from it has reached the watch (its PONG)."""
        self._js.nc.flush()
        self._nc.flush()
        while self._sub.pending_msgs:
            self.pulls.append(self._sub.next_msg(timeout=0).data)
        return list(self.pulls)

    def close(self) -> None:
        self._nc.close()


@pytest.fixture
def watch_of(nats_server: NATSServer, js: JetStream) -> Iterator[object]:
    watches: List[PullWatch] = []

    def make(stream: str, consumer: str) -> PullWatch:
        w = PullWatch(nats_server.url, js, stream, consumer)
        watches.append(w)
        return w

    yield make
    for w in watches:
        w.close()


def fill(js: JetStream, stream: str, n: int) -> List[int]:
    return [js.publish(f"{stream.lower()}.x", b"job").seq for _ in range(n)]


def waiting(js: JetStream, stream: str, name: str) -> int:
    return js.consumer_info(stream, name).num_waiting


def test_messages_pulls_on_the_first_next_not_before(
    js: JetStream, stream: str, watch_of: object
) -> None:
    c = js.create_or_update_consumer(stream, durable_name="lazy")
    watch: PullWatch = watch_of(stream, "lazy")  # type: ignore[operator]
    seqs = fill(js, stream, 3)
    with c.messages(max_messages=10, expires=5) as it:
        assert watch.settled() == []
        assert waiting(js, stream, "lazy") == 0
        assert js.consumer_info(stream, "lazy").num_ack_pending == 0  # nothing taken
        msg = next(it)  # the first pull goes out now
        assert msg.metadata.sequence.stream == seqs[0]
        assert len(watch.settled()) == 1
        msg.ack()
    c2 = js.create_or_update_consumer(stream, durable_name="lazy2", deliver_policy="new")
    watch2: PullWatch = watch_of(stream, "lazy2")  # type: ignore[operator]
    with c2.messages(max_messages=10, expires=5) as it:
        assert watch2.settled() == []
        with pytest.raises(nats.TimeoutError):
            it.next(timeout=0.05)  # next(timeout) starts it too
        assert len(watch2.settled()) == 1
        wait_until(lambda: waiting(js, stream, "lazy2") == 1, what="the waiting pull")


def test_messages_stopped_before_iterating_never_pulls(
    js: JetStream, stream: str, watch_of: object
) -> None:
    c = js.create_or_update_consumer(stream, durable_name="never")
    watch: PullWatch = watch_of(stream, "never")  # type: ignore[operator]
    fill(js, stream, 2)
    it = c.messages()
    it.stop()
    with pytest.raises(StopIteration):
        next(it)
    drained = c.messages()
    drained.drain(timeout=5)
    assert list(drained) == []
    assert watch.settled() == []
    assert js.consumer_info(stream, "never").num_pending == 2  # nothing was delivered


def test_consume_pulls_at_once(js: JetStream, stream: str, watch_of: object) -> None:
    c = js.create_or_update_consumer(stream, durable_name="eager")
    watch: PullWatch = watch_of(stream, "eager")  # type: ignore[operator]
    got = threading.Event()
    ctx = c.consume(lambda m: (m.ack(), got.set()), max_messages=10, expires=5)
    try:
        assert len(watch.settled()) == 1  # sent before consume() returned
        wait_until(lambda: waiting(js, stream, "eager") == 1, what="the waiting pull")
        fill(js, stream, 1)
        assert got.wait(10)
    finally:
        ctx.stop()


def prioritized(js: JetStream, stream: str) -> PullConsumer:
    return js.create_or_update_consumer(
        stream, durable_name="P", priority_groups=["jobs"], priority_policy="prioritized"
    )


def test_a_low_priority_iterator_made_first_takes_nothing_before_it_is_read(
    nats_server: NATSServer, js: JetStream, stream: str
) -> None:
    """The issue's scenario: the backlog is there, a priority-5 reader's messages() is made
    first, then a priority-0 reader pulls: the priority-0 reader gets the whole backlog."""
    prioritized(js, stream)
    seqs = fill(js, stream, 10)
    with nats.connect(nats_server.url) as low_nc, nats.connect(nats_server.url) as high_nc:
        low = low_nc.jetstream().consumer(stream, "P")
        high = high_nc.jetstream().consumer(stream, "P")
        with low.messages(max_messages=100, expires=5, group="jobs", priority=5) as low_it:
            low_nc.flush()  # anything it sent has reached the server
            got = high.fetch(10, max_wait=5, group="jobs", priority=0)
            assert [m.metadata.sequence.stream for m in got] == seqs
            for m in got:
                m.ack()
            high_nc.flush()
            # Read now, the low-priority reader finds nothing left, and its pull waits.
            with pytest.raises(nats.TimeoutError):
                low_it.next(timeout=0.2)
            # New work with both waiting: the lower number wins.
            with high.messages(max_messages=5, expires=5, group="jobs", priority=0) as high_it:
                with pytest.raises(nats.TimeoutError):
                    high_it.next(timeout=0.05)  # its pull is out
                wait_until(lambda: waiting(js, stream, "P") == 2, what="both pulls waiting")
                more = fill(js, stream, 3)
                assert [high_it.next(timeout=5).metadata.sequence.stream for _ in more] == more
            with pytest.raises(nats.TimeoutError):
                low_it.next(timeout=0.2)
